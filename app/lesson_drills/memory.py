"""EP01's predict and decide drills (``LESSON_DRILLS["memory"]``)."""

import math

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
# EP01's decide drill: the 8B on one H100 in the 18-byte recipe at Llama 3.1's pre-training
# length, selective recomputation; which of four training changes EP01 teaches cuts its bill
# the most (issue 36: the serving option it had before abandoned training, so its right
# answer taught nothing of the ledger). Each saving is one of EP01's formulas: 2 B a
# parameter (step 2), 34·s·h a layer against full recomputation's 2·s·h and fused
# attention's same 34·s·h (step 3), and the tokens. At 4,096 tokens the recipe's 16.1 GB
# and full recomputation's 17.2 GB are 1.1 GB apart; at 8,192 they separate clearly.
P8, H100 = get_model("llama-3.1-8b").params, get_gpu("h100-sxm").memory_bytes
CUT_BASE = {"model": "llama-3.1-8b", "recipe": "adam18", "seq_len": 8192}
CUT_STATES = {"adam16": {**CUT_BASE, "recipe": "adam16"},
              "full": {**CUT_BASE, "recompute": "full"},
              "half": {**CUT_BASE, "seq_len": CUT_BASE["seq_len"] // 2},
              "flash": {**CUT_BASE, "recompute": "flash"}}


def _base() -> dict:
    """The decide's starting state, as GET /api/memory answers it."""
    return lab_value("memory", CUT_BASE, lambda a: a)


def cut(answer: dict) -> float:
    """Bytes a change saves against the decide's starting state."""
    return _base()["total_bytes"] - answer["total_bytes"]


def _layers(key: str = "") -> str:
    """s × h × layers of a state (the starting one by default), as EP01 step 3 multiplies
    them by 34 or 2."""
    m = get_model(CUT_BASE["model"])
    return f"{CUT_STATES.get(key, CUT_BASE)['seq_len']:,} × {m.hidden:,} × {m.layers}"


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
        f"Llama 3.1 8B ({_b(P8)} parameters) in the 18-byte recipe, one "
        f"{CUT_BASE['seq_len']:,}-token sequence (its pre-training length), selective "
        f"recomputation: its training step does not fit one H100 ({H100 / 1e9:.0f} GB). "
        "Which single change cuts this bill the most?",
        "memory", cut,
        (("adam16", "The 16-byte recipe: bf16 gradients", CUT_STATES["adam16"],
          lambda a: f"Keeping the gradients in bf16 saves 2 of the 18 bytes a parameter (step "
                    f"2): 2 B × "
                    f"{_b(a['params'])} = {{value}} less. The activations do not depend on "
                    "the recipe."),
         ("full", "Full activation recomputation", CUT_STATES["full"],
          lambda a: "Full recomputation keeps only each layer's input, 2·s·h of its 34·s·h "
                    f"(step 3), and saves the other 32: 32 × {_layers('full')} layers = "
                    "{value} less, for about one more forward pass."),
         ("half", f"Sequences of {CUT_STATES['half']['seq_len']:,} tokens, half as long",
          CUT_STATES["half"],
          lambda a: "Half the tokens halve what grows with them: the layers' 34·s·h, to "
                    f"{gb(a['breakdown']['activations'])}, and the fp32 logits with their "
                    "neighbours (step 2), to "
                    f"{gb(a['breakdown']['embedding_and_logits'])}: {{value}} less. The state "
                    "does not depend on the tokens."),
         ("flash", "Fused attention (FlashAttention) instead of selective recomputation",
          CUT_STATES["flash"],
          lambda a: "Fused attention is selective recomputation done inside the kernel (step "
                    f"3): both keep 34·s·h a layer, 34 × {_layers('flash')} layers = "
                    f"{gb(a['breakdown']['activations'])}, so it saves {{value}}.")),
        best="max", fmt=gb,
        solution=lambda found: (
            "{best}. At "
            f"{CUT_BASE['seq_len']:,} tokens the layers' activations, 34 × {_layers()} = "
            f"{gb(_base()['breakdown']['activations'])}, outweigh the 2 B a parameter a "
            "recipe can save, so full recomputation cuts the most: it keeps 2·s·h of the "
            "34 ({full} less); half the tokens halve them and the logits ({half}); the "
            f"16-byte recipe saves 2 B × {_b(P8)} ({{adam16}}); fused attention is what selective "
            "recomputation already keeps ({flash}). None of them makes it fit: the "
            f"{gb(_state(_base()))} of state is over {H100 / 1e9:.0f} GB before a single "
            f"activation, and even the 16-byte recipe needs at least "
            f"{math.ceil(16 * P8 / H100)} GPUs (step 5)."),
        reveals=("full recomputation cuts the most",)),
)
