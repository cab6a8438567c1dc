"""EP05's state: the pipeline lab's controls (``PipelineQuery`` and its option lists), the
state they describe run through labs.pipeline (``run``: the schedule simulated and, when the
model fills it, the memory per rank) and its JSON answer (``to_api``).
``app.routers.pipeline`` serves them; ``pipeline_lesson.py`` runs the lesson's states through
them and ``pipeline_keys.py`` draws and keys their figures."""

from typing import Literal

from pydantic import Field

from app.model_controls import GpuChoice, ModelChoice, ModelControls, gpu_field, model_field
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
from labs.pipeline.inputs import PipelineLabInput, PipelineLabResult
from labs.pipeline.lab import run_pipeline_lab
from labs.schedules.catalogue import CATALOGUE, SCHEDULES
from labs.schedules.inputs import PipelineInput

LINK_IDS = tuple(links())

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
