"""EP03's predict and decide drills (``LESSON_DRILLS["zero"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb
from labs.model.presets import get_model

FOUR_OH_FIVE = {"model": "llama-3.1-405b"}  # EP03's decide drill: a model its table does not show
P405 = get_model(FOUR_OH_FIVE["model"]).params
B405 = f"{P405 / 1e9:.2f}B"
P8 = get_model("llama-3.1-8b").params  # EP03's predict drill: a model its table does not show


def _stage_state(stage: int) -> float:
    """GB of state a GPU holds for the predict drill's model and GPUs under another ZeRO
    stage, as the lab counts it (GET /api/zero): the drill's wrong answers."""
    return lab_value("zero", {"model": "llama-3.1-8b", "dp": 16, "zero": stage},
                     "state_bytes") / 1e9


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
    decide(
        "zero-decide-memory",
        "Llama 3.1 405B on 16 GPUs with ZeRO-1. Which change cuts each GPU's memory most?",
        "zero", "total_bytes",
        (("z2", "ZeRO-2 on the same 16 GPUs", {**FOUR_OH_FIVE, "dp": 16, "zero": 2},
          lambda a: "ZeRO-2 adds the gradients to what is sharded, but the bf16 weights stay "
                    f"whole on every GPU: 2 B × {B405} = {gb(2 * P405)} before any shard, "
                    f"{gb(a['state_bytes'])} of state in all: {{value}}."),
         ("z1x128", "ZeRO-1 on 128 GPUs instead of 16",
          {**FOUR_OH_FIVE, "dp": 128, "zero": 1},
          lambda a: "Eight times the GPUs shrink only the sharded optimizer state; the 4 B of "
                    f"weights and gradients stay whole: 4 B × {B405} = {gb(4 * P405)} on each "
                    "GPU however many there are: {value}."),
         ("z3", "ZeRO-3 on the same 16 GPUs", {**FOUR_OH_FIVE, "dp": 16, "zero": 3},
          lambda a: f"Shards all 16 bytes, weights included: 16 B × {B405} ÷ 16 = "
                    f"{gb(a['state_bytes'])} of state, {{value}} with the activations, at "
                    "about 1.5 times the traffic."),
         ("z0x128", "Plain data parallelism on 128 GPUs",
          {**FOUR_OH_FIVE, "dp": 128, "zero": 0},
          lambda a: "Plain DP shards nothing: every GPU keeps the whole 16 B × "
                    f"{B405} = {gb(a['state_bytes'])} of state, however many GPUs: "
                    "{value}.")),
        best="min", fmt=gb,
        solution="{best}. ZeRO-3 on 16 {z3}, ZeRO-2 on 16 {z2}, ZeRO-1 on 128 {z1x128}, "
                 "plain DP on 128 {z0x128}: what a stage leaves unsharded sets the floor, "
                 "and more GPUs cannot lower it.",
        reveals=("shards all 16 bytes, weights included",)),
)
