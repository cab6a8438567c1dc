"""EP01 The memory ledger: page, embed and JSON for the per-GPU memory bill.
Its controls, run and answer are ``memory_state.py``, the lesson's states, the derivations
their whys print and the derive drill ``memory_lesson.py``, what of the bench waits for which
guess and the bill's chart ``memory_keys.py``; here the page context, cases and view."""

from fastapi import APIRouter

from app.charts.memory import COMPONENTS
from app.charts.units import fmt_bytes
from app.episodes import BY_LAB, BY_SLUG
from app.labkit import Case, Diagram, LabView, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import SEQ_LENGTHS, gpu_options, model_options, with_value
from app.routers.memory_keys import bench_keys, ledger_figure, waits_for
from app.routers.memory_lesson import (
    _BAD,
    _GOOD,
    H100_DRIVER_MIB,  # noqa: F401  (imported from here by other routers)
    STATE_DRILL,
    driver_memory,  # noqa: F401
    facts,
    own_layer,  # noqa: F401
)
from app.routers.memory_state import (
    DEFAULT_MODEL,  # noqa: F401
    EP01_RECIPES,
    EP01_RECOMPUTE,
    EP10_RECOMPUTE,
    LESSON_RECIPE_LABELS,
    UNTAUGHT_RECOMPUTE,
    MemoryQuery,
    degree_options,
    run,
    to_api,
    unbilled,  # noqa: F401
)
from app.routers.pipeline import SCHEDULE_LABELS
from app.schemas import MemoryAnswer
from labs.core.limits import TRAIN_RECIPES
from labs.core.recomputation import RECOMPUTATION

router = APIRouter()


def extra_context(state) -> dict:
    query, result = state.query, state.result
    spec = result.input.model
    return {
        "facts": facts(),
        "model_options": model_choices(model_options(), query.model_value),
        "gpu_options": gpu_options(),
        "recipes": LESSON_RECIPE_LABELS,
        "train_recipes": TRAIN_RECIPES,
        "taught_recipes": EP01_RECIPES,
        "taught_recompute": EP01_RECOMPUTE,
        "later_recompute": EP10_RECOMPUTE,
        "untaught_recompute": UNTAUGHT_RECOMPUTE,
        "recompute_phrases": {k: r.phrase for k, r in RECOMPUTATION.items()},
        "precision_episode": BY_LAB["precision"],
        "components": COMPONENTS,
        "model_value": query.model_value,
        "recipe_value": result.input.recipe,
        "degree_options": degree_options(spec, query, infer=query.mode == "infer",
                                         uneven_pp=query.uneven_pp),
        "seq_options": with_value(SEQ_LENGTHS, query.seq_len),
        "schedules": SCHEDULE_LABELS,
        # What each of the bench's figures waits for (its steps' and drills' answers).
        "bench_keys": bench_keys, "waits_for": waits_for,
    }


def _case(query: dict) -> dict:
    return to_api(run(MemoryQuery(**query)))


def _waits(query: dict) -> dict:
    """What a case's headline (its fit and bytes per GPU, the bill's keys at its state) waits
    for on the lesson page, as the steps whose guesses lift it (a step's prediction is
    "predict-memory-<n>", ``waits_for``)."""
    def steps() -> tuple[str, ...]:  # read when drawn: bench_keys reads the lesson's drills
        bill = bench_keys(run(MemoryQuery(**query)))["bill"]
        return tuple(f"step-{k.rsplit('-', 1)[1]}" if k.startswith("predict-") else k
                     for k in bill)

    return {"waiting": "Its fit and bytes per GPU show", "waits_for": steps}


VIEW = LabView(
    name="memory",
    episode=BY_SLUG["memory"],
    query_model=MemoryQuery,
    run=run,
    to_api=to_api,
    figures=lambda result: {"ledger": ledger_figure(result)},
    diagrams=(Diagram("ledger", "Memory per GPU, by component (GB)", element_id="memory-chart",
                      embed_height=520),),
    labels={
        "model": "Model", "params": "Custom params", "gpu": "GPU", "mode": "Mode",
        "recipe": "Recipe", "seq_len": "Sequence length", "micro_batch": "Micro-batch",
        "recompute": "Recomputation", "tp": "TP (tensor)", "pp": "PP (pipeline)",
        "cp": "CP (context)", "dp": "DP (data)", "ep": "EP (expert)", "zero": "ZeRO stage",
        "offload": "Optimizer offload", "uneven_pp": "Uneven stages",
        "activation_model": "Activation model",
        "sp": "Sequence parallelism", "schedule": "Schedule", "virtual": "Chunks per rank",
        "microbatches": "Micro-batches per step",
    },
    response_model=MemoryAnswer,
    embed_height=1100,
    oob_template="partials/_memory_options_oob.html",
    extra_context=extra_context,
    summary="The per-GPU memory bill of one training step or inference (bytes)",
    good=Case(
        "Good case: Llama 2 7B, int8 inference", _GOOD,
        f"Llama 2 7B in int8 holds {fmt_bytes(_case(_GOOD)['breakdown']['weights'])} of "
        f"weights: it fits a {fmt_bytes(_case(_GOOD)['gpu_memory_bytes'])} gaming card.",
        **_waits(_GOOD),
    ),
    bad=Case(
        "Bad case: 70B training", _BAD,
        "Llama 3.1 70B, mixed-precision Adam, on one H100.",
        **_waits(_BAD),
    ),
    drills=(
        STATE_DRILL,
        *LESSON_DRILLS["memory"],  # predict and decide (app/lesson_drills/memory.py)
    ),
)

register(router, VIEW)
