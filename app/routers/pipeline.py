"""EP05 Pipeline parallelism: Gantt, activations held and per-rank memory, from a simulation.
Its controls, run and answer are ``pipeline_state.py``, the lesson's states and the
derivations their whys show ``pipeline_lesson.py``, its figures and what of them waits for
which guess ``pipeline_keys.py``; here the page context, cases, drills and view."""

from fastapi import APIRouter

from app.charts.pipeline import KINDS
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import SEQ_LENGTHS, gpu_options, link_choices, model_options, with_value
from app.routers.pipeline_keys import (
    PEAK_RANK,
    PEAKS,
    STEP_2,
    STEP_6,
    figures,
    memory_keys,
    schedule_keys,
    waits_for,
)
from app.routers.pipeline_lesson import (
    DRILL_M,
    DRILL_P,
    DRILL_V,
    drill_answer,
    drill_bubble,
    facts,
)
from app.routers.pipeline_state import (
    SCHEDULE_LABELS,
    PipelineQuery,
    run,
    to_api,
)
from app.schemas import PipelineAnswer
from labs.hardware.links import links
from labs.schedules.catalogue import INTERLEAVED, SCHEDULES

router = APIRouter()


def extra_context(state) -> dict:
    return {
        "facts": facts(),
        "model_options": model_choices(model_options("layers"), state.query.model_value),
        "model_value": state.query.model_value,
        "gpu_options": gpu_options(),
        "schedules": SCHEDULE_LABELS,
        "kinds": KINDS,
        "tp_options": with_value((1, 2, 4, 8, 16, 32, 64), state.query.tp),
        "interleaved": INTERLEAVED,
        "interleaved_names": ", ".join(SCHEDULES[k] for k in INTERLEAVED),
        "link_options": (("none", "None: sends are free", ""),
                         *link_choices(links(), lambda v: f"{v.name} "
                                                          f"({v.bandwidth / 1e9:,.1f} GB/s)")),
        "seq_options": with_value(SEQ_LENGTHS, state.query.seq_len),
        # What each of the bench's figures waits for (its steps' and drills' answers).
        "schedule_keys": schedule_keys, "memory_keys": memory_keys, "waits_for": waits_for,
        "peaks_key": PEAKS, "formula_key": STEP_2, "long_key": STEP_6,
        "peak_rank": PEAK_RANK,
    }


VIEW = LabView(
    name="pipeline",
    episode=BY_SLUG["pipeline"],
    query_model=PipelineQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=(
        Diagram("gantt", "Schedule: one row per rank, one bar per action", embed_height=560),
        Diagram("activations", "Activations held per rank over time", embed_height=440),
        Diagram("memory", "Peak memory per rank (GB)", embed_height=440),
    ),
    labels={
        "schedule": "Schedule", "stages": "Stages p", "microbatches": "Micro-batches m",
        "virtual": "Chunks per rank v", "f": "Forward f", "b": "Backward input-grad b",
        "w": "Weight-grad w", "p2p": "Send latency (override, f units)",
        "link": "Link between stages",
        "model": "Model", "params": "Custom params", "gpu": "GPU",
        "tp": "TP per stage", "recompute": "Recomputation", "seq_len": "Sequence length",
        "micro_batch": "Micro-batch size",
    },
    # The engine names pipeline stages pp (labs.memory.lab) and chunks chunks; this page does not.
    aliases={"pp": "stages", "chunks": "virtual"},
    response_model=PipelineAnswer,
    events_key="events",
    embed_height=1500,
    extra_context=extra_context,
    # The bare lesson page opens on GPipe at the defaults' 4 x 8 (step 2's "4 × 8" link), the
    # schedule steps 1-2 teach: at 1F1B its chart showed 1F1B's warm-up (rank r holds p − r)
    # before step 3 asks for it (round-20 cold reading Q, finding 5). The API and the embeds
    # keep 1F1B, as OpenAPI documents; every query that names a control draws what it drew.
    opening={"schedule": "gpipe"},
    summary="Simulate a pipeline schedule: events, measured bubble, activations held per rank",
    good=Case(
        "Good case: 8 stages × 32 micro-batches",
        {"schedule": "1f1b", "stages": 8, "microbatches": 32},
        "Many micro-batches follow each other down 8 stages (if the global batch allows: "
        "step 2's limit).",
        diagram="pipeline-gantt",  # pressed at step 6, the memory chart in view is not theirs
        # Its Gantt holds rank PEAK_RANK's row, step 3's answer, until that guess (row_held).
        waiting=f"Rank {PEAK_RANK}'s bars show",
        waits_for=(PEAKS,),
    ),
    bad=Case(
        "Bad case: 8 stages × 1 micro-batch",
        {"schedule": "gpipe", "stages": 8, "microbatches": 1},
        "One micro-batch walks the 8 stages alone.",
        diagram="pipeline-gantt",
        held_until="step-1",  # every bar of its Gantt is step 1's answer
    ),
    drills=(
        Drill(
            id="pipeline-bubble",
            question=(
                "A pipeline has 6 stages and 12 micro-batches, every stage equally fast, "
                "interleaved with v = 2 chunks per rank (each chunk half a stage's layers). "
                "What percentage of the ranks' time is idle (the bubble, as a share of the "
                "step)?"
            ),
            answer=drill_answer,
            unit="%",
            hint="The warm-up and cool-down are still p − 1 passes, but each is a chunk's, "
                 "1/v of a stage's; the work is the same m micro-batches through every stage.",
            explanation="{answer}%: counted in chunk passes, (p − 1)/(v·m + p − 1) = 5/29 of "
                        "the step is idle. The papers' form (Narayanan et al. 2021, §2.2.2) "
                        "divides the same idle time by the ideal time instead: (p − 1)/(v·m) "
                        "= 5/24 = 20.8% of it. Plain 1F1B, one chunk a rank, would idle 5/17 "
                        "of the step.",
            mistakes=(
                Mistake("papers", lambda: drill_answer() * (DRILL_V * DRILL_M + DRILL_P - 1)
                        / (DRILL_V * DRILL_M),
                        "that is (p − 1)/(v·m), the papers' form: the idle time over the ideal "
                        "time. As a share of the step it divides by the whole step, "
                        "v·m + p − 1 chunk passes."),
                Mistake("plain", lambda: 100 * drill_bubble(1),
                        "that is plain 1F1B's bubble, one chunk a rank. With 2 chunks each "
                        "warm-up and cool-down pass is half as long, against the same work."),
                Mistake("p-idle", lambda: 100 * DRILL_P / (DRILL_V * DRILL_M + DRILL_P),
                        "the first stage starts at once and the last finishes last: the "
                        "warm-up and cool-down leave p − 1 chunk passes idle, not p."),
            ),
        ),
        *LESSON_DRILLS["pipeline"],  # predict and decide (app/lesson_drills/pipeline.py)
    ),
)

register(router, VIEW)
