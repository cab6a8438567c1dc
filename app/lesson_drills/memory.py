"""EP01's predict and decide drills (``LESSON_DRILLS["memory"]``)."""

import math

from app.charts.units import fmt_bytes
from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb
from labs.hardware.gpus import get_gpu
from labs.memory.inputs import STATE_KEYS
from labs.model.presets import get_model


def _state(answer: dict) -> float:
    """The training state a GPU holds (weights, gradients, master copy, moments)."""
    return sum(answer["breakdown"][k] for k in STATE_KEYS)


def _rest(answer: dict) -> float:
    """Everything else on that GPU: the activations, with the logits and workspace."""
    return answer["total_bytes"] - _state(answer)


def _b(params: float) -> str:
    return f"{params / 1e9:.2f}B"


# EP01's predict drill: 405B's 16-byte state sharded over 64 H200s. It asks the state a GPU
# holds, which no readout prints (the bench prints the fewest GPUs at any model and GPU, so
# asking that was one select away from its answer).
P405, H200 = get_model("llama-3.1-405b").params, get_gpu("h200").memory_bytes
H200_SHARDS = 64
_DRILL_STATE = {"model": "llama-3.1-405b", "gpu": "h200", "dp": H200_SHARDS, "zero": 3}
# EP01's decide drill: the 8B on one H100, four single changes that EP01 teaches, of which
# only serving it fits (round-12 cold reading, finding 7: the TP/PP decide it asked before
# turned on EP04-EP05 and is EP05's check now, app/lesson_drills/pipeline.py).
P8, H100 = get_model("llama-3.1-8b").params, get_gpu("h100-sxm").memory_bytes
_FIT = {"model": "llama-3.1-8b", "recipe": "adam18"}
FIT_STATES = {"adam16": {**_FIT, "recipe": "adam16"}, "full": {**_FIT, "recompute": "full"},
              "half": {**_FIT, "seq_len": 2048},
              "int8": {**_FIT, "mode": "infer", "recipe": "int8"}}


def _state_405b_whole() -> float:
    """405B's whole training state, GB, as the lab counts it (GET /api/memory)."""
    return lab_value("memory", _DRILL_STATE, "state_bytes") / 1e9


def _state_405b() -> float:
    return _state_405b_whole() / H200_SHARDS


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "memory-predict-405b-h200",
        f"Llama 3.1 405B ({P405 / 1e9:.1f} billion parameters), 16 bytes of training "
        f"state per parameter, sharded evenly over {H200_SHARDS} H200s "
        f"({H200 / 1e9:.0f} GB each) with ZeRO-3. Predict the GB of state each GPU holds.",
        "memory", {"model": "llama-3.1-405b", "gpu": "h200", "dp": H200_SHARDS, "zero": 3},
        lambda answer: answer["state_bytes"] / H200_SHARDS, unit="GB", scale=1e-9,
        hint=f"16 B × {P405 / 1e9:.1f} billion parameters is the whole state; ZeRO-3 "
             f"gives each of the {H200_SHARDS} GPUs an equal share.",
        explanation=f"{{answer}} GB: 16 B × {P405 / 1e9:.1f}B parameters = "
                    f"{16 * P405 / 1e9:,.0f} GB, ÷ {H200_SHARDS} GPUs. That "
                    f"leaves {H200 / 1e9 - 16 * P405 / H200_SHARDS / 1e9:.0f} of the "
                    f"{H200 / 1e9:.0f} GB for activations. ZeRO shards the state, not the "
                    "activations (step 5's 70B case): whether the step fits depends on "
                    "them.",
        rel_tol=0.01,
        mistakes=(
            Mistake("weights-only", lambda: _state_405b() * 2 / 16,
                    "that is the bf16 weights alone, 2 of the 16 bytes. The state is also "
                    "the gradients, the fp32 master weights and Adam's two moments, and "
                    "ZeRO-3 shards them all."),
            Mistake("unsharded", _state_405b_whole,
                    f"that is the whole state; ZeRO-3 gives each of the {H200_SHARDS} GPUs an "
                    "equal share of it."),
            Mistake("gib", lambda: _state_405b() * 1e9 / 2 ** 30,
                    "that is GiB (2³⁰ bytes). The lab's GB are 10⁹ bytes, as the H200's 141 "
                    "GB are."),
        )),
    decide(
        "memory-decide-fit",
        f"Llama 3.1 8B ({_b(P8)} parameters) does not train on one H100 "
        f"({H100 / 1e9:.0f} GB) in the 18-byte recipe, on one 4,096-token sequence with "
        "selective recomputation. Which single change makes what it runs fit?",
        "memory", "total_bytes",
        (("adam16", "The 16-byte recipe: bf16 gradients", FIT_STATES["adam16"],
          lambda a: "Two bytes fewer a parameter still leave "
                    f"16 B × {_b(a['params'])} = {gb(_state(a))} of state, over the "
                    f"{H100 / 1e9:.0f} GB before any activation: {{value}}."),
         ("full", "Full activation recomputation", FIT_STATES["full"],
          lambda a: "Recomputation shrinks only the activations, to "
                    f"{gb(a['breakdown']['activations'])}; the 18 B × {_b(a['params'])} = "
                    f"{gb(_state(a))} of state stays whole: {{value}}."),
         ("half", "Sequences of 2,048 tokens, half as long", FIT_STATES["half"],
          lambda a: f"Half the tokens halve the activations and logits, to {gb(_rest(a))}; "
                    f"the {gb(_state(a))} of state does not depend on the tokens: {{value}}."),
         ("int8", "Serve it with int8 weights instead of training it",
          FIT_STATES["int8"],
          lambda a: "Serving keeps no gradients and no optimizer state: 1 B × "
                    f"{_b(a['params'])} = {gb(a['breakdown']['weights'])} of weights, and "
                    "with a KV cache and workspace for one sequence it fits the "
                    f"{H100 / 1e9:.0f} GB: {{value}}.")),
        # Three figures: at one decimal 148.9 GB would hold the right option's 8.9 GB.
        best="min", fmt=fmt_bytes,
        solution=lambda found: (
            "{best}. Training holds its state whatever the activations: even the 16-byte "
            f"recipe's 16 B × {_b(P8)} = {gb(16 * P8)} is over {H100 / 1e9:.0f} GB before a single "
            "activation, so the 16-byte recipe ({adam16}), full recomputation ({full}) "
            "and 2,048 tokens ({half}) all stay over it; training it needs at least "
            f"{math.ceil(16 * P8 / H100)} GPUs (step 5). Serving drops the gradients and "
            "the optimizer: {int8}."),
        reveals=("Serving keeps no gradients",)),
)
