"""EP05 Pipeline parallelism: Gantt, activations held and per-rank memory, from a simulation."""

from dataclasses import replace
from functools import lru_cache
from typing import Literal

from fastapi import APIRouter
from pydantic import Field

from app.charts import veiled_after
from app.charts.pipeline import (
    KINDS,
    MEMORY_ACTIVATIONS,
    activations_figure,
    gantt_figure,
    rank_points,
    stage_memory_figure,
)
from app.charts.units import fmt_bytes, fmt_pct, gb_axis
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, lesson_state, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import (
    GpuChoice,
    ModelChoice,
    ModelControls,
    gpu_field,
    model_choices,
    model_field,
)
from app.options import SEQ_LENGTHS, gpu_options, link_choices, model_options, with_value
from app.schemas import PipelineAnswer
from labs.core.limits import (
    MAX_DEGREE,
    MAX_MICRO_BATCH,
    MAX_MICROBATCHES,
    MAX_SEQ_LEN,
    MAX_STAGES,
    MAX_VIRTUAL,
    RECOMPUTE,
)
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link, links
from labs.hardware.nccl import BASE_LATENCY, send_latency
from labs.model.activations import (
    GPT_COEFFICIENT,
    activation_bytes_per_layer,
    own_layer_coefficient,
    score_bytes_per_element,
)
from labs.model.spec import ModelSpec
from labs.pipeline.inputs import PipelineLabInput, PipelineLabResult
from labs.pipeline.lab import backward_split, forward_parts, run_pipeline_lab
from labs.schedules.catalogue import CATALOGUE, INTERLEAVED, SCHEDULES, SPLIT_BACKWARD
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate

router = APIRouter()

LINK_IDS = tuple(links())

# The engine's canonical field -> this page's control (the page calls PP "stages").
FIELD_ALIASES = {"pp": "stages"}

# The option list: each schedule's name and what it does (its record, labs.schedules.catalogue).
SCHEDULE_LABELS = {k: s.label for k, s in CATALOGUE.items()}


class PipelineQuery(ModelControls):
    """The controls of the pipeline lab. Costs are relative times (any unit; f = 1 is one
    stage's forward of one micro-batch); makespan and events come back in the same unit."""

    schedule: Literal[tuple(SCHEDULES)] = Field(
        "1f1b", description="Pipeline schedule.")
    stages: int = Field(4, ge=1, le=MAX_STAGES, description="Pipeline stages (ranks), p.")
    microbatches: int = Field(8, ge=1, le=MAX_MICROBATCHES, description="Micro-batches, m.")
    virtual: int = Field(1, ge=1, le=MAX_VIRTUAL,
                         description="Model chunks per rank, v (interleaved family: 2-8).")
    f: float = Field(1.0, gt=0, le=1000, description="Forward time of one micro-batch per stage.")
    b: float = Field(1.0, gt=0, le=1000,
                     description="Backward input-gradient time (I); unsplit B costs b + w.")
    w: float = Field(1.0, ge=0, le=1000, description="Backward weight-gradient time (W).")
    link: Literal[("none", *LINK_IDS)] = Field(
        "none", description="Link between neighbouring stages: each send costs its real size "
        "(s·b·h·2/TP bytes) on it, in units of f (one stage's forward of the model below, "
        "timed op by op as EP08 times it). 'none': sends are free unless p2p is given.")
    p2p: float | None = Field(
        None, ge=0, le=1000,
        description="Send latency between stages in units of f; overrides the link.")
    model: ModelChoice = model_field("llama-3.1-70b", "Model of the per-rank memory panel")
    gpu: GpuChoice = gpu_field("h100-sxm", "GPU of the memory panel")
    tp: int = Field(8, ge=1, le=MAX_DEGREE, description="Tensor-parallel degree inside each stage.")
    recompute: Literal[RECOMPUTE] = Field(
        "selective", description="Activation recomputation (Korthikanti et al. 2022).")
    seq_len: int = Field(4096, ge=1, le=MAX_SEQ_LEN, description="Tokens per sequence.")
    micro_batch: int = Field(1, ge=1, le=MAX_MICRO_BATCH, description="Sequences per micro-batch.")


# The engine's result is the page's state: the schedule and, when the model fills it, memory.
PipelineState = PipelineLabResult


def run(query: PipelineQuery) -> PipelineState:
    return run_pipeline_lab(PipelineLabInput(
        pipeline=PipelineInput(
            schedule=query.schedule, stages=query.stages, microbatches=query.microbatches,
            virtual=query.virtual, f=query.f, b=query.b, w=query.w, p2p=query.p2p),
        model=query.model_spec(), gpu=get_gpu(query.gpu), tp=query.tp,
        recompute=query.recompute, seq_len=query.seq_len, micro_batch=query.micro_batch,
        link=None if query.link == "none" else get_link(query.link),
    ))


def to_api(state: PipelineState) -> dict:
    result, memory = state.result, state.memory
    inp = result.input
    return {
        "schedule": inp.schedule,
        "stages": inp.stages,
        "microbatches": inp.microbatches,
        "virtual": inp.chunks,
        "makespan": result.makespan,
        "bubble_fraction": result.bubble_fraction,
        "textbook_bubble": result.textbook_bubble,
        # The papers' form: the same idle time over the ideal (busy) time, not the step.
        "idle_over_ideal": result.idle_over_ideal,
        "textbook_over_ideal": CATALOGUE[inp.schedule].textbook_over_ideal(
            inp.stages, inp.microbatches, inp.chunks),
        # One send between neighbouring stages (in f's units; in seconds when a link sizes
        # it) and the bytes each rank puts on the wire per step.
        "send_time": result.send_time,
        "send_seconds": result.send_seconds,
        "wire_bytes": [round(b) for b in result.wire_bytes],
        "busy": list(result.busy),
        "peak_activations": list(result.peak_activations),
        "memory": None if memory is None else {
            "state_bytes": round(memory.state_bytes),
            "state_per_rank_bytes": [round(x) for x in memory.state_per_rank],
            "activation_unit_bytes": round(memory.unit_bytes),
            "layers_per_chunk": memory.layers_per_chunk,
            "layers_per_rank": list(memory.layers_per_rank),
            "per_rank_bytes": [round(t) for t in memory.total_bytes],
            "gpu_memory_bytes": round(memory.gpu_memory_bytes),
            "fits": list(memory.fits),
        },
        "memory_note": state.memory_note,
        "events": [
            {"rank": e.rank, "kind": e.kind, "microbatch": e.microbatch, "chunk": e.chunk,
             "start": e.start, "end": e.end}
            for e in result.events
        ],
    }


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


# ---- What of the bench waits for a guess (round-12 cold reading of EP04-EP05, finding 1: no
# EP05 figure was masked, so the bench's own controls showed steps 2 and 5's bubbles, step
# 6's 111 GB and both number drills' answers before they were asked). Each figure is keyed,
# as an .answer-mask's data-after-guess (static/js/lab.js), to every step or drill whose
# answer it gives at this state: a step's id waits for that step's guess, a drill's form id
# ("drill-<id>") until the drill is answered. ----
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

    gpipe = next(d for d in VIEW.drills if d.id == GPIPE_DRILL.removeprefix("drill-"))
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


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes.

    One ``params`` dict per state feeds both the step's try link and the numbers quoted next to
    it, run through the same query model, simulator and ``to_api`` as GET /api/pipeline, so the
    prose cannot drift from what the link shows (tests/app/test_prose.py follows every link)."""
    state = lesson_state(PipelineQuery, run, to_api)

    p8 = {"stages": 8}
    interleaved = {"schedule": "interleaved-1f1b", **p8, "microbatches": 16}
    return {
        "bad": state(schedule="gpipe", **p8, microbatches=1),
        # Step 2's links are GPipe: 1F1B's warm-up (rank r holds p − r) would answer step 3
        # (round-20 cold reading Q, finding 5). The bubble is the same under both.
        "mid": state(schedule="gpipe", stages=4, microbatches=8),
        # Step 2's prediction: a state the page does not open at (it opens on "mid").
        "six10": state(schedule="gpipe", stages=6, microbatches=10),
        "good": state(schedule="1f1b", **p8, microbatches=32),
        "gpipe32": state(schedule="gpipe", **p8, microbatches=32),
        # Interleaving compared at one m (16, a multiple of p as Megatron-LM requires).
        "plain16": state(schedule="1f1b", **p8, microbatches=16),
        "v2": state(**interleaved, virtual=2),
        # v = 5, not 4: Llama 3.1 70B's 10 layers a rank split into 5 chunks of 2, where 4
        # chunks of 2.5 layers is a split Megatron-LM refuses (labs.pipeline.lab.check_chunks;
        # round-18 cold reading of EP05, finding 7).
        "v5": state(**interleaved, virtual=5),
        "v5_p2p": state(**interleaved, virtual=5, p2p=0.1),
        # The same sends sized on InfiniBand NDR for the memory panel's plan (70B, TP 8): what
        # the 0.1 f assumption is set against (round-5 cold reading, EP05 item 7).
        "v5_ndr": (v5_ndr := state(**interleaved, virtual=5, link="ib-ndr")),
        # Its f by part, one computation with the f it divides the send by (round-22 cold
        # reading Q, finding 11: "f is 23.8 ms" came with no working).
        "v5_forward": forward(PipelineQuery(**v5_ndr["params"])),
        # Its send's pieces as the one send model prices them (labs.hardware.nccl
        # send_latency: NCCL's Simple start-up, one network hop) on the port it runs on
        # (round-20 cold reading Q, finding 3).
        "ndr_port": get_link("ib-ndr").bandwidth,
        "send_startup": BASE_LATENCY["ring"]["Simple"] * 1e-6,
        "send_hop": send_latency(get_link("ib-ndr")) - BASE_LATENCY["ring"]["Simple"] * 1e-6,
        "zb": state(schedule="zb-h1", **p8, microbatches=32),
        "dualpipe": state(schedule="dualpipe-v", **p8, microbatches=32, virtual=2),
        # Step 6: fused attention (what current stacks run) breaks on a long sequence. The
        # unfused kernels of 2021-22 ("none") kept Llama's softmax output (2·a·s²·b: no
        # dropout, round-12 cold reading): it still fits at 4,096 tokens and breaks at 8,192.
        "fits": state(**p8, microbatches=32, tp=8, recompute="flash", seq_len=4096),
        "long": state(**p8, microbatches=32, tp=8, recompute="flash", seq_len=32768),
        "unfused": (unfused := state(**p8, microbatches=32, tp=8, recompute="none",
                                     seq_len=4096)),
        "unfused_8k": state(**p8, microbatches=32, tp=8, recompute="none", seq_len=8192),
        "unfused_layer": unfused_layer(PipelineQuery(**unfused["params"]).model_spec(), 4096, 8),
        "own_layer": own_layer(PipelineQuery(**unfused["params"]).model_spec()),
        # Step 5: why W is shorter than I, from the memory panel's plan's own kernels, and
        # ZB-H1 at those I/F and W/F (round-17 cold reading of EP05, finding 5).
        "passes": (passes := split(PipelineQuery(**unfused["params"]))),
        "zb_passes": state(schedule="zb-h1", **p8, microbatches=32,
                           # Three places: W/F is 0.87505, which the page's printed
                           # milliseconds give as 0.875 and two places would make 0.88
                           # (round-19 cold reading Y, finding 11).
                           b=round(passes.input_grad_s / passes.forward_s, 3),
                           w=round(passes.weight_grad_s / passes.forward_s, 3)),
    }


def forward(query: PipelineQuery):
    """The whole forward the query's f divides by its stages, by part
    (labs.pipeline.lab.forward_parts)."""
    return forward_parts(query.model_spec(), get_gpu(query.gpu), tp=query.tp,
                         seq_len=query.seq_len, micro_batch=query.micro_batch)


def split(query: PipelineQuery):
    """One layer's F, I and W on the query's plan (labs.pipeline.lab.backward_split)."""
    return backward_split(query.model_spec(), get_gpu(query.gpu), tp=query.tp,
                          seq_len=query.seq_len, micro_batch=query.micro_batch)


def own_layer(model: ModelSpec) -> dict:
    """Step 6's caveat on the 34 it charges: GPT's layer count, against ``model``'s own
    (labs.model.activations ``own_layer_coefficient``, as EP01 step 3 derives it): Llama 3.1
    70B's 33.5 makes the lab about 1.5% high (round-13 cold reading of EP05, finding 2)."""
    coefficient = own_layer_coefficient(model)
    return {"name": model.name, "gpt": GPT_COEFFICIENT, "coefficient": coefficient,
            "high": GPT_COEFFICIENT / coefficient - 1}


def unfused_layer(model: ModelSpec, seq_len: int, tp: int) -> dict:
    """Step 6's split of one layer's bytes on a rank without fused attention: the softmax
    output the unfused core keeps (``score_bytes`` a score: 2 without dropout) and the
    34·s·h/t of everything else, from labs.model.activations."""
    def per_layer(recompute: str) -> float:
        return activation_bytes_per_layer(model, seq_len, tp=tp, recompute=recompute)

    return {"scores": per_layer("none") - per_layer("flash"), "rest": per_layer("flash"),
            "score_bytes": score_bytes_per_element(model), "heads": model.heads}


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


def drill_answer() -> float:
    """Idle percentage of interleaved 1F1B with 6 stages, 12 micro-batches and 2 chunks a rank,
    measured (a state no step links to). Step 4's own formula, (p − 1)/(v·m + p − 1): until
    round 16 the drill asked plain 1F1B's, step 2's again (cold reading of EP05, finding 10)."""
    return 100 * _drill_bubble(DRILL_V)


def _drill_bubble(virtual: int) -> float:
    schedule = "interleaved-1f1b" if virtual > 1 else "1f1b"
    return simulate(PipelineInput(schedule=schedule, stages=DRILL_P, microbatches=DRILL_M,
                                  virtual=virtual)).bubble_fraction


DRILL_P, DRILL_M, DRILL_V = 6, 12, 2


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
                Mistake("plain", lambda: 100 * _drill_bubble(1),
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
