"""What of EP05's bench waits for a guess (round-12 cold reading of EP04-EP05, finding 1: no
EP05 figure was masked, so the bench's own controls showed steps 2 and 5's bubbles, step 6's
111 GB and both number drills' answers before they were asked). Each figure is keyed, as an
.answer-mask's data-after-guess (static/js/lab.js), to every step or drill whose answer it
gives at this state: a step's id waits for that step's guess, a drill's form id
("drill-<id>") until the drill is answered. ``figures`` draws the three charts
(app/charts/pipeline.py) and veils them so."""

from dataclasses import replace
from functools import lru_cache

from app.charts import veiled_after
from app.charts.pipeline import (
    MEMORY_ACTIVATIONS,
    activations_figure,
    gantt_figure,
    rank_points,
    stage_memory_figure,
)
from app.charts.units import fmt_bytes, fmt_pct, gb_axis
from app.lesson_drills import LESSON_DRILLS
from app.routers.pipeline_lesson import DRILL_M, DRILL_P, drill_answer, facts
from app.routers.pipeline_state import PipelineState
from labs.schedules.catalogue import INTERLEAVED, SPLIT_BACKWARD

STEP_1, STEP_2, PEAKS, STEP_4, STEP_5, STEP_6 = (f"step-{n}" for n in range(1, 7))
BUBBLE_DRILL, GPIPE_DRILL, DECIDE_DRILL = (
    "drill-pipeline-bubble", "drill-pipeline-predict-gpipe-memory", "drill-pipeline-decide-bubble")
# The decide's best plan (ZB-H1 at its 4 x 8, app/lesson_drills/pipeline.py): the one state
# whose bubble ranks its choices.
DECIDE_STATE = ("zb-h1", 4, 8)
# The rank whose peak step 3 asks for, at its state (facts' "good": 1F1B, 8 x 32): one far
# down the line, so the glossary's "at most p" (rank 0's) does not answer it (round-16 cold
# reading of EP05, finding 8: rank 2's 6 was p − 2, one step from the tip).
PEAK_RANK = 5
# How a mask names what it waits for.
WAITS = {STEP_1: "step 1's guess", STEP_2: "step 2's guess", PEAKS: "step 3's guess",
         STEP_4: "step 4's guess", STEP_5: "step 5's guess", STEP_6: "step 6's guess",
         BUBBLE_DRILL: "step 4's derive drill", GPIPE_DRILL: "step 3's memory drill",
         DECIDE_DRILL: "step 5's decide drill"}


@lru_cache(maxsize=1)
def answers() -> dict:
    """Each bubble a step or drill asks for, with the stages x micro-batches it asks about
    (a state at that shape answers it whatever the schedule), and each memory figure, as the
    page prints them: from the facts its why quotes and the drills' own answers."""
    lesson = facts()

    def shape(name: str) -> tuple[int, int]:
        inp = lesson[name]["result"].result.input
        return inp.stages, inp.microbatches

    def bubble(name: str) -> str:
        return fmt_pct(lesson[name]["api"]["bubble_fraction"])

    gpipe = next(d for d in LESSON_DRILLS["pipeline"]
                 if d.id == GPIPE_DRILL.removeprefix("drill-"))
    long = lesson["long"]["result"].memory
    return {
        "bubbles": {STEP_1: (shape("bad"), bubble("bad")),
                    STEP_2: (shape("six10"), bubble("six10")),
                    BUBBLE_DRILL: ((DRILL_P, DRILL_M), fmt_pct(drill_answer() / 100)),
                    STEP_5: (None, bubble("zb"))},
        # Step 6's rank 0 at 32,768 tokens, and the unit it multiplies by 8 to get there.
        "memory": {STEP_6: {fmt_bytes(long.total_bytes[0]), fmt_bytes(long.unit_bytes)},
                   GPIPE_DRILL: {fmt_bytes(gpipe.answer() * 1e9)}},  # asked in GB
    }


def row_held(figure: dict, result) -> dict:
    """The Gantt at step 3's state (1F1B, 8 x 32, step 2's "8 × 32" link) with the row of
    the rank step 3 asks about held until its guess: its forwards before its first backward
    count the answer (round-14 cold reading of EP02-EP05, finding 9: six, counted off the
    Gantt). The other ranks stay drawn, so step 2's link still moves the chart; a label on
    the held row says what waits, and once guessed gives the rank's peak."""
    inp, rank = result.input, PEAK_RANK
    good = facts()["good"]["result"].result.input
    shape = (inp.schedule, inp.stages, inp.microbatches)
    points = rank_points(result, rank)
    if shape != (good.schedule, good.stages, good.microbatches) or not points:
        return figure
    layout = figure["layout"]
    notes = layout.setdefault("annotations", [])
    notes.append({"xref": "paper", "x": 1, "xanchor": "right", "yref": "y",
                  "y": f"rank {rank}", "showarrow": False,
                  "text": f"rank {rank} holds {result.peak_activations[rank]} micro-batches "
                          "at its peak", "bgcolor": "rgba(255,255,255,0.85)"})
    layout["meta"] = {"masked": {len(notes) - 1: f"rank {rank}'s bars: ? (after "
                                                 f"{WAITS[PEAKS]})"},
                      "partly": True,
                      "owners": [{"step": PEAKS, "points": points,
                                  "annotations": [len(notes) - 1]}]}
    return figure


def schedule_keys(result) -> tuple[str, ...]:
    """What the schedule's times (the bubble, the textbook's, idle over ideal, the makespan,
    each rank's busy and idle time, the Gantt) answer at this state: step 1 one micro-batch
    alone down the line; step 2, step 4's derive drill and step 5 the shape or the bubble
    they ask for; step 4 an interleaved schedule's chunks (its idle time against plain
    1F1B's); step 5 a split backward; the decide its best plan."""
    inp = result.input
    shown = {fmt_pct(result.bubble_fraction), fmt_pct(result.textbook_bubble)}
    keys = [STEP_1] if inp.microbatches == 1 and inp.stages > 1 else []
    keys += [key for key, (shape, printed) in answers()["bubbles"].items()
             if shape == (inp.stages, inp.microbatches) or printed in shown]
    if inp.schedule in INTERLEAVED and inp.chunks > 1:
        keys.append(STEP_4)
    if inp.schedule in SPLIT_BACKWARD:
        keys.append(STEP_5)
    if (inp.schedule, inp.stages, inp.microbatches) == DECIDE_STATE:
        keys.append(DECIDE_DRILL)
    return tuple(dict.fromkeys(keys))


def memory_keys(memory) -> tuple[str, ...]:
    """What the memory panel's activations and totals answer: step 3 always (a rank's
    activations over the unit are its peak, what step 3 asks), and step 6 or the GPipe drill
    where a rank's total, or the unit, prints theirs; step 6 too at its plan with any sequence
    longer than its 4,096 tokens (round-16 cold reading of EP05, finding 7: at 16,384 rank
    0's activations, doubled, gave its 32,768-token answer)."""
    shown = {fmt_bytes(t) for t in memory.total_bytes} | {fmt_bytes(memory.unit_bytes)}
    plan = facts()["fits"]["result"].memory.ledger.input
    longer = (memory.ledger.input.seq_len > plan.seq_len
              and replace(memory.ledger.input, seq_len=plan.seq_len) == plan)
    return (PEAKS, *(key for key, printed in answers()["memory"].items()
                     if printed & shown or key == STEP_6 and longer))


def waits_for(keys) -> str:
    """What a mask says it waits for: "step 2's guess and step 4's derive drill"."""
    return " and ".join(WAITS[k] for k in keys)


def memory_veiled(figure: dict, memory) -> dict:
    """The memory chart on the lesson page: veiled whole while step 6 or the GPipe drill waits
    at this state (``memory_keys``); else, till step 3's guess, only its activations (each
    rank's peak held, what step 3 asks) are hidden, with the total they make in its summary
    and the y-axis's reach, so that the state and the one-unit ticks stay drawn and the
    micro-batch size moves the chart before step 3 (lab.js partlyVeiled, meta.axes)."""
    keys = memory_keys(memory)
    veiled_after(figure, tuple(k for k in keys if k != PEAKS))
    head = f"Peak memory per rank against {fmt_bytes(memory.gpu_memory_bytes)}"
    tail = figure["summary"].removeprefix(head)
    reach = max(memory.gpu_memory_bytes,
                *(s + u for s, u in zip(memory.state_per_rank, memory.unit_bytes_per_rank,
                                        strict=True)))
    figure["layout"]["meta"] = {
        **figure["layout"].get("meta", {}), "masked": {}, "partly": True,
        # Its legend name short, so the four entries take two rows at 390 px, not four.
        "names": {str(MEMORY_ACTIVATIONS): "Activations: ?"},
        "owners": [{"step": PEAKS, "traces": [MEMORY_ACTIVATIONS],
                    "summary": [tail, f": each rank's state and one unit drawn; its "
                                      f"activations after {WAITS[PEAKS]}"]}],
        "axes": {"yaxis": {**figure["layout"]["yaxis"], **gb_axis(reach * 1.12)}}}
    return figure


def figures(state: PipelineState) -> dict:
    """The three charts, each veiled on the lesson page while a step or drill its state
    answers waits for its guess (``veiled_after``)."""
    times = schedule_keys(state.result)
    out = {"gantt": veiled_after(row_held(gantt_figure(state.result), state.result), times),
           # Its time axis runs to the makespan too.
           "activations": veiled_after(activations_figure(state.result), (PEAKS, *times))}
    if state.memory is not None:
        out["memory"] = memory_veiled(stage_memory_figure(state.memory), state.memory)
    return out
