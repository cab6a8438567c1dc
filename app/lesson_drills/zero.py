"""EP03's predict and decide drills (``LESSON_DRILLS["zero"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb
from labs.model.presets import get_model

P8 = get_model("llama-3.1-8b").params  # EP03's predict drill: a model its table does not show
# EP03's memory decide: the 70B at 16,384 tokens on 32 GPUs, ZeRO-1, fused attention and nothing
# recomputed (the lesson's default; selective keeps the same 34·s·h).
LONG = {"model": "llama-3.1-70b", "seq_len": 16384, "dp": 32, "zero": 1}
P70 = get_model(LONG["model"]).params
B70 = f"{P70 / 1e9:.1f}B parameters"


def _acts(answer: dict) -> float:
    """A state's saved layer activations per GPU (GET /api/zero's breakdown)."""
    return answer["breakdown"]["activations"]


def _logits(answer: dict) -> float:
    """A state's fp32 logits, the final norm's tensors and the token ids per GPU."""
    return answer["breakdown"]["embedding_and_logits"]


def _stage_state(stage: int) -> float:
    """GB of state a GPU holds for the predict drill's model and GPUs under another ZeRO
    stage, as the lab counts it (GET /api/zero): the drill's wrong answers."""
    return lab_value("zero", {"model": "llama-3.1-8b", "dp": 16, "zero": stage},
                     "state_bytes") / 1e9


def _memory_solution(found: dict[str, float]) -> str:
    """The memory decide's worked solution: each choice's figure, and what both fixes together
    give (the best choice alone is still over an 80 GB GPU: round-24 cold reading A, #4)."""
    both = lab_value("zero", {**LONG, "zero": 3, "recompute": "full"}, "total_bytes")
    return ("{best}. ZeRO-2 with full recomputation {z2full}, ZeRO-1 offloaded with it "
            "{z1offfull}, ZeRO-1 on 128 with it {z1x128full}, ZeRO-3 on 64 {z3x64}. At 16,384 "
            "tokens the activations outweigh the state: no stage shards them (step 3), and only "
            "full recomputation cuts them (step 6); then sharding more of the state helps, "
            "and more GPUs only shard what the stage shards. Even {z2full} is over an 80 GB "
            f"GPU: ZeRO-3 and full recomputation together make {gb(both)}.")


# The memory decide's choices (key, label, state, why), named so a test can compare states.
# Round-23 cold reading P, finding 9: "Full recomputation, still ZeRO-1" could never win beside
# "ZeRO-2, and full recomputation". Each wrong choice now needs its own arithmetic or idea.
MEMORY_CHOICES = (
    ("z3x64", "ZeRO-3, and twice the GPUs (64)", {**LONG, "dp": 64, "zero": 3},
     lambda a: f"ZeRO-3 shards all 16 bytes: {gb(a['state_bytes'])} of state. But no "
               "stage shards the activations: each GPU keeps its sequence's 34·s·h·L = "
               f"{gb(_acts(a))} and {gb(_logits(a))} of logits however many GPUs there "
               "are: {value}."),
    ("z2full", "ZeRO-2, and full recomputation", {**LONG, "zero": 2, "recompute": "full"},
     lambda a: f"ZeRO-2 keeps the 2 B of bf16 weights whole, {gb(2 * P70)}: "
               f"{gb(a['state_bytes'])} of state. But full recomputation keeps only each "
               f"layer's input, 2·s·h·L = {gb(_acts(a))}, with {gb(_logits(a))} of "
               "logits: {value}, for about a third more compute."),
    ("z1x128full", "ZeRO-1 on 128 GPUs instead of 32, and full recomputation",
     {**LONG, "dp": 128, "recompute": "full"},
     lambda a: f"Recomputation cuts the activations to {gb(_acts(a))}, but four times the "
               "GPUs shrink only the sharded optimizer state: ZeRO-1 keeps the 4 B of "
               f"weights and gradients whole, {gb(4 * P70)}, so "
               f"{gb(a['state_bytes'])} of state, {{value}}."),
    # Round-24 cold reading A, finding 4: "ZeRO-3, and selective recomputation" lost to "ZeRO-3,
    # and twice the GPUs" once step 6 is learnt (selective keeps 34·s·h under fused attention).
    ("z1offfull", "ZeRO-1 with the optimizer offloaded to CPU (step 7), and full recomputation",
     {**LONG, "offload": True, "recompute": "full"},
     lambda a: "Offload moves the fp32 master weights and Adam moments, 12 B a parameter, to "
               "host RAM, and recomputation cuts the activations to "
               f"{gb(_acts(a))}; but ZeRO-1 keeps the 4 B of bf16 weights and gradients whole "
               f"on every GPU, {gb(4 * P70)}: {{value}}."),
)


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "zero-predict-stage2-16",
        f"Llama 3.1 8B ({P8 / 1e9:.2f}B parameters, a model the page's table does not "
        "show), 16 bytes of state per parameter, ZeRO-2 over 16 GPUs. Predict the training "
        "state (no activations) on each GPU, in GB.",
        "zero", {"model": "llama-3.1-8b", "dp": 16, "zero": 2}, "state_bytes", unit="GB",
        scale=1e-9,
        hint="ZeRO-2 shards gradients and optimizer state (2 + 12 B); the 2 B of bf16 "
             "weights stay whole: 2·P + 14·P/16.",
        explanation=f"{{answer}} GB: 2 B × {P8 / 1e9:.2f}B + 14 B × {P8 / 1e9:.2f}B / 16.",
        rel_tol=0.05,
        mistakes=(
            Mistake("zero3", lambda: _stage_state(3),
                    "that shards all 16 bytes, the weights too: ZeRO-3. ZeRO-2 leaves the "
                    "bf16 weights whole on every GPU."),
            Mistake("zero1", lambda: _stage_state(1),
                    "that keeps the gradients whole, as ZeRO-1 does. ZeRO-2 shards them "
                    "too; only the weights stay whole."),
            Mistake("whole", lambda: _stage_state(0),
                    "that is the whole state; ZeRO-2 shards the gradients and the optimizer "
                    "state over the 16 GPUs."),
        )),
    # Round-17 cold reading of EP03, finding 4: the decide asked 405B's ZeRO-1 against ZeRO-3
    # on the same GPUs and more GPUs at lower stages; the most-sharded option won without any
    # arithmetic. At 16,384 tokens the 70B's activations outweigh its state, so sharding is
    # not the answer: what steps 3 (activations are not sharded) and 6 (recomputation) teach.
    decide(
        "zero-decide-memory",
        f"Llama 3.1 70B ({B70}) on 32 GPUs with ZeRO-1, fused attention and nothing "
        "recomputed, one "
        f"{LONG['seq_len']:,}-token sequence per GPU. Which change cuts each GPU's memory most?",
        "zero", "total_bytes",
        MEMORY_CHOICES,
        best="min", fmt=gb,
        solution=_memory_solution,
        reveals=("ZeRO-2 with full recomputation",)),
)
