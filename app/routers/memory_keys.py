"""EP01 The memory ledger's keys: what of the bench waits for which step's guess or drill
(``bench_keys``, ``waits_for``) and the bill's chart veiled by them (``ledger_figure``)."""

from app.charts.memory import COMPONENTS, memory_figure
from app.charts.units import fmt_bytes, gb_axis
from app.lesson_drills import LESSON_DRILLS
from app.routers.memory_lesson import STATE_DRILL, facts
from app.routers.memory_state import to_api
from labs.memory.inputs import STATE_KEYS, MemoryInput

# ---- What of the bench waits for a guess (round-13 cold reading of EP01, findings 1 and 4:
# EP01 masked nothing, so the bench's own selects, and each step's try link, printed steps 2
# to 5's answers and the 405B/H200 drill's before they were asked, and any training bill over
# its weights gave step 1's ratio). The bill is one sum: a figure left drawn beside the total
# gives any part masked, so every figure of it but the weights waits for the union of what
# the state answers (``bench_keys``), as an .answer-mask's data-after-guess keys it
# (static/js/lab.js): a prediction's beat id ("predict-memory-<n>", step n's) until that
# step's guess (not its step's id: the playground's panel draws this chart beside steps of
# its own), a drill's form id ("drill-<id>") until it is answered. The weights wait too
# where a drill or a step after step 1 asks (they are 2 of its 16 bytes); step 1 states
# them, so they stay drawn for it. ----
# Each step that asks one figure of a state: the fact whose state it asks about, the figure,
# and what of a state makes it the same question (its model and mode; step 3's activations
# also its tokens a sequence, micro-batch included). Step 6 asks of any mixture of experts.
ASKED = {
    "predict-memory-2": ("l405", "state_bytes", ("model", "mode")),
    "predict-memory-3": ("l8_flash_16k", "breakdown.activations", ("model", "mode", "tokens")),
    "predict-memory-4": ("l70_serve", "breakdown.kv_cache", ("model", "mode")),
    "predict-memory-5": ("l405_18", "min_gpus", ("model", "mode", "recipe")),
    "predict-memory-6": ("mixtral", "min_gpus", ("experts", "mode")),
}
# The number drills that ask a GPU's share of the state, those that ask its whole bill, and
# the step each sits in (templates/episodes/memory.html's step_drill).
STATE_DRILLS = {"memory-state-8b": 2}
TOTAL_DRILLS = {"memory-predict-8b-32k": 3, "memory-predict-405b-h200": 5}
DRILL_STEPS = {**STATE_DRILLS, **TOTAL_DRILLS}
# A step whose question's model (in another recipe) keys the fewest GPUs alone, not the bill:
# the 405B's 16-byte bill is step 2's answer, its own to draw once step 2 is guessed (round-14
# cold reading of EP01-EP03, finding 5: step 5's key left step 2's try link one grey bar).
GPUS_ASKED = {"predict-memory-5": ("model", "mode")}
STEP_1 = "predict-memory-1"


def _shape(inp: MemoryInput, what: str):
    """One thing a question fixes of its state."""
    return {"model": inp.model.id, "mode": inp.mode, "experts": bool(inp.model.experts),
            "tokens": inp.seq_len * inp.micro_batch, "recipe": inp.recipe}[what]


def _printed(api: dict, field: str) -> str:
    """A figure of GET /api/memory's answer as the bench prints it (bytes as GB)."""
    value = api
    for part in field.split("."):
        value = value[part]
    return str(value) if field == "min_gpus" else fmt_bytes(value)


def bench_keys(result) -> dict[str, tuple[str, ...]]:
    """What the bench's figures wait for at ``result``'s state: ``bill`` (the total, the
    headroom, the state, the fewest GPUs, every part but the weights, the chart's bars) and
    ``weights`` (the weights' row and bar) and ``gpus`` (the fewest GPUs: the bill's keys,
    and ``GPUS_ASKED``'s steps wherever their model is). Step 1 at every training state (its
    bill over its weights is the ratio step 1 asks); steps 2 to 6 at the state their question
    asks about (``ASKED``), or wherever the bench prints their figure; a state-share drill
    where a GPU's state is its answer."""
    inp, api = result.input, to_api(result)
    lesson = facts()
    keys = [STEP_1] if inp.mode == "train" else []
    for key, (name, field, same) in ASKED.items():
        asked = lesson[name]
        if (all(_shape(inp, s) == _shape(asked["result"].input, s) for s in same)
                or _printed(api, field) == _printed(asked["api"], field)):
            keys.append(key)
    share = sum(result.breakdown[k] for k in STATE_KEYS) / 1e9
    total = result.total_bytes / 1e9
    drills = [f"drill-{d.id}" for d in (STATE_DRILL, *LESSON_DRILLS["memory"])
              if (d.id in STATE_DRILLS and abs(share - d.answer()) <= d.rel_tol * d.answer())
              or (d.id in TOTAL_DRILLS and abs(total - d.answer()) <= d.rel_tol * d.answer())]
    gpus = [k for k, same in GPUS_ASKED.items() if k not in keys and all(
        _shape(inp, s) == _shape(lesson[ASKED[k][0]]["result"].input, s) for s in same)]
    return {"bill": (*keys, *drills),
            "weights": (*(k for k in keys if k != STEP_1), *drills),
            "gpus": (*keys, *gpus, *drills)}


def waits_for(keys) -> str:
    """What a mask says it waits for: "step 1's guess and step 5's drill"."""
    return " and ".join(f"step {DRILL_STEPS[k[6:]]}'s drill" if k.startswith("drill-")
                        else f"step {k.rsplit('-', 1)[1]}'s guess" for k in keys)


def ledger_figure(result) -> dict:
    """The bill's chart, its bars veiled on the lesson page while their keys are masked
    (layout.meta.owners, static/js/lab.js partlyVeiled): every part but the weights, with the
    summary, drawn on an axis to the weights and the GPU's line (layout.meta.axes: the real
    axis's top is the bill's); the weights with them where ``bench_keys`` keys them too."""
    figure = memory_figure(result)
    keys = bench_keys(result)
    if not keys["bill"]:
        return figure
    data, summary = figure["data"], figure["summary"]
    weights = COMPONENTS["weights"][0]
    told = summary.index(f"{fmt_bytes(result.total_bytes)} per GPU")
    owners = [{"step": " ".join(keys["bill"]),
               "traces": [i for i, t in enumerate(data) if t["name"] != weights],
               "summary": [summary[told:], f"its bill shows after {waits_for(keys['bill'])}"]}]
    if keys["weights"]:
        owners.append({"step": " ".join(keys["weights"]),
                       "traces": [i for i, t in enumerate(data) if t["name"] == weights]})
    # Drawn partly, the weights alone: the axis reaches them and the GPU's line.
    top = 1.12 * max(result.breakdown["weights"], result.gpu_memory_bytes)
    figure["layout"]["meta"] = {"masked": {}, "partly": True, "owners": owners,
                                "axes": {"yaxis": gb_axis(top)}}
    return figure
