"""EP01's predict and decide drills (``LESSON_DRILLS["memory"]``)."""

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
        "memory-decide-cut",
        "Llama 3.1 70B does not fit on one H100. Which single change cuts the bytes each "
        "GPU holds the most?",
        "memory", "total_bytes",
        (("zero1", "Data parallelism over 8 GPUs with ZeRO-1", {"dp": 8, "zero": 1},
          lambda a: "ZeRO-1 shards only the 12 bytes of optimizer state: "
                    f"4 B × {_b(a['params'])} + 12 B × {_b(a['params'])} ÷ 8 = "
                    f"{gb(_state(a))} of state, and all {gb(_rest(a))} of activations stay "
                    "on every GPU: {value} per GPU."),
         # The label says what sequence parallelism does: EP01 has not defined it, and a
         # choice's label takes no inline definition (round-5 reading, EP01 item 5).
         ("tp8", "Tensor parallelism over 8 GPUs, its norms split along the sequence too",
          {"tp": 8, "sp": True},
          lambda a: "TP divides every weight matrix by 8, so the state falls to "
                    f"{gb(_state(a))}, and with the norms split along the sequence it "
                    f"divides the activations too, to {gb(_rest(a))}: {{value}} per GPU."),
         ("full", "Full activation recomputation", {"recompute": "full"},
          lambda a: f"Recomputation shrinks only the activations, to {gb(_rest(a))}; the "
                    f"16 B × {_b(a['params'])} = {gb(_state(a))} of state stays whole: "
                    "{value} per GPU."),
         ("pp8", "Pipeline parallelism over 8 GPUs, 8 micro-batches a step",
          {"pp": 8, "microbatches": 8},
          lambda a: "PP divides the state too: the first stage's "
                    f"{a['stage_layers'][a['heaviest_stage']]} layers and the embedding hold "
                    f"{gb(_state(a))}. But that stage keeps "
                    f"{a['stage_in_flight'][a['heaviest_stage']]:.0f} micro-batches of its "
                    f"layers' activations in flight, {gb(_rest(a))}: {{value}} on the "
                    "heaviest GPU.")),
        best="min", fmt=gb,
        solution="{best}. TP8 {tp8}, PP8 {pp8}, ZeRO-1 {zero1}, full recomputation "
                 "{full}. TP and PP both divide the state by about 8; TP with the sequence "
                 "split divides the activations as well, where PP's first stage holds p "
                 "micro-batches of its layers' activations.",
        reveals=("TP divides every weight matrix",
                 "TP with the sequence split divides the activations as well")),
)
