"""EP01's predict and decide drills (``LESSON_DRILLS["memory"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb
from labs.hardware.gpus import get_gpu
from labs.model.presets import get_model

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
          "ZeRO-1 shards only the 12 bytes of optimizer state; the 4 bytes of weights and "
          "gradients and all activations stay on every GPU: {value} per GPU."),
         # The label says what sequence parallelism does: EP01 has not defined it, and a
         # choice's label takes no inline definition (round-5 reading, EP01 item 5).
         ("tp8", "Tensor parallelism over 8 GPUs, its norms split along the sequence too",
          {"tp": 8, "sp": True},
          "TP cuts every weight matrix, so weights, gradients, optimizer state and most "
          "activations all shrink about 8 times; splitting the norms and dropout along the "
          "sequence (Megatron-LM's sequence parallelism, EP04) cuts the rest: {value} per "
          "GPU."),
         ("full", "Full activation recomputation", {"recompute": "full"},
          "Recomputation shrinks only the activations; the 16 bytes per parameter of "
          "state stay whole: {value} per GPU."),
         ("pp8", "Pipeline parallelism over 8 GPUs, 8 micro-batches a step",
          {"pp": 8, "microbatches": 8},
          "Each stage holds an eighth of the layers, but the first stage keeps up to p "
          "micro-batches of activations in flight, and the embedding table's state "
          "(1.05B parameters × 16 B): {value} on the heaviest GPU.")),
        best="min", fmt=gb,
        hint="Which choice divides all four kinds of state and the activations?",
        solution="{best}. TP8 {tp8}, PP8 {pp8}, ZeRO-1 {zero1}, full recomputation "
                 "{full}: only a cut of the weights shrinks all of the state at once.",
        reveals=("TP cuts every weight matrix",
                 "only a cut of the weights shrinks all of the state")),
)
