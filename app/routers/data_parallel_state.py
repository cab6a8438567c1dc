"""EP02's state: the data-parallel lab's controls (``DataParallelQuery`` and its option
lists), the state they describe run through labs.data_parallel (``run``), and its answers
(``to_api``, the figures). ``app.routers.data_parallel`` serves them, with the page context,
cases and drills, and ``app.routers.data_parallel_lesson`` holds the lesson's states."""

from typing import ClassVar, Literal

from pydantic import Field

from app.charts.data_parallel import STEP10, WHAT, replica_keys, veiled
from app.charts.data_parallel_scaling import scaling_figure
from app.charts.data_parallel_time import ratio_figure, time_figure
from app.charts.memory import memory_figure
from app.cluster_controls import LinkFollowsGpu
from app.model_controls import ModelChoice
from app.options import LabQuery
from labs.core.errors import LabInputError
from labs.core.limits import (
    DP_OVERLAPS,
    DP_SCALINGS,
    MAX_DP_BUCKET_BYTES,
    MAX_DP_COMPUTE_S,
    MAX_DP_GLOBAL_BATCH,
    MAX_DP_GPUS,
    MAX_DP_GRAD_BYTES,
    MAX_MICRO_BATCH,
    MAX_MICROBATCHES,
    MAX_NICS_PER_NODE,
    MAX_SEQ_LEN,
    MIN_DP_BUCKET_BYTES,
    MIN_DP_COMPUTE_S,
    MIN_DP_GRAD_BYTES,
)
from labs.data_parallel.inputs import DDP_BUCKET_BYTES, DataParallelInput, DataParallelResult
from labs.data_parallel.lab import GRAD_BYTES_PER_PARAM, link_family, simulate
from labs.hardware.links import get_link, links
from labs.model.presets import custom_model, get_model

DEFAULT_GRAD_BYTES = 14e9  # CURRICULUM EP02: a 7B model's bf16 gradients
GPU_CHOICES = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 256, 512, 1024)
MICRO_CHOICES = (1, 2, 4, 8, 16)
MICROBATCH_CHOICES = (1, 2, 4, 8, 16, 32, 64)
SEQ_CHOICES = (1024, 2048, 4096, 8192)
BUCKET_CHOICES = (1024 * 1024, 5 * 1024 * 1024, DDP_BUCKET_BYTES, 100 * 1024 * 1024,
                  500 * 1024 * 1024, 2e9)
GRAD_CHOICES = (2e9, 14e9, 16e9, 140e9, 810e9)


class DataParallelQuery(LabQuery, LinkFollowsGpu):
    """The controls of the data-parallel lab; sizes in bytes, times in seconds. A chosen GPU
    with the link left out takes the GPU's own fabric, as /api/tp does; a link given that the
    GPU never ships with, NVLink 4 included, is refused (app.cluster_controls.LinkFollowsGpu)."""

    follow_gpu: ClassVar[tuple[str, ...]] = ("link",)

    # The shared model type (presets, custom, model codes); here a custom size is grad_bytes.
    model: ModelChoice | None = Field(
        None,
        description="Model preset id (GET /api/models) or a model code (POST "
        "/api/models/parse): its bf16 gradients (2 bytes per parameter) are all-reduced. "
        "'custom' or absent: grad_bytes (default 14e9, a 7B model).")
    grad_bytes: float | None = Field(
        None, ge=MIN_DP_GRAD_BYTES, le=MAX_DP_GRAD_BYTES,
        description="Gradient bytes all-reduced per step (a custom model of grad_bytes/2 "
        "parameters); only without a model preset.")
    gpus: int = Field(8, ge=1, le=MAX_DP_GPUS, description="Data-parallel GPUs N.")
    link: str = Field("nvlink-4", max_length=64,
                      description="Link preset id (GET /api/links) the all-reduce runs on.")
    gpu: str | None = Field(
        None, max_length=64,
        description="GPU preset id (GET /api/gpus). Absent: the GPU the link ships with, "
        "the H100 PCIe on PCIe, the H100 SXM on NVLink 4 and the networks (the answer's "
        "gpu). A GPU whose peers never talk over the chosen scale-up link is refused, as "
        "/api/tp refuses it (the H100 SXM on PCIe); the chart's other links keep their own "
        "GPU where this one does not go on them.")
    compute_s: float | None = Field(
        None, ge=MIN_DP_COMPUTE_S, le=MAX_DP_COMPUTE_S,
        description="Override of the compute seconds per step (weak scaling, one GPU's step; "
        "strong, the whole global batch on one GPU). Absent: 6 x parameters x tokens per GPU "
        "over the GPU's achieved FLOP/s (ratio.rate).")
    scaling: Literal[DP_SCALINGS] = Field(
        "weak", description="weak: each GPU keeps its micro-batch; strong: a fixed global "
        "batch split N ways.")
    overlap: Literal[DP_OVERLAPS] = Field(
        "none", description="none: all-reduce after backward; bucketed: buckets all-reduced "
        "during backward (PyTorch DDP).")
    bucket_bytes: float = Field(
        DDP_BUCKET_BYTES, ge=MIN_DP_BUCKET_BYTES, le=MAX_DP_BUCKET_BYTES,
        description="Gradient bucket size in bytes (PyTorch DDP: 25 MiB).")
    nics_per_node: int = Field(
        1, ge=1, le=MAX_NICS_PER_NODE,
        description="Network ports per 8-GPU server (InfiniBand or Ethernet links).")
    global_batch: int = Field(
        1024, ge=1, le=MAX_DP_GLOBAL_BATCH,
        description="Sequences per step; strong scaling splits it, so N ≤ global_batch.")
    seq_len: int = Field(4096, ge=1, le=MAX_SEQ_LEN, description="Tokens per sequence.")
    micro_batch: int = Field(4, ge=1, le=MAX_MICRO_BATCH,
                             description="Sequences per micro-batch on each GPU.")
    microbatches: int = Field(
        1, ge=1, le=MAX_MICROBATCHES,
        description="Micro-batches per step (gradient accumulation), weak scaling: the "
        "global batch is micro_batch x microbatches x gpus sequences.")


def is_custom(query: DataParallelQuery) -> bool:
    return query.model in (None, "custom")


def run(query: DataParallelQuery) -> DataParallelResult:
    if is_custom(query):
        grad = DEFAULT_GRAD_BYTES if query.grad_bytes is None else query.grad_bytes
        model = custom_model(round(grad / GRAD_BYTES_PER_PARAM))
    else:
        if query.grad_bytes is not None:
            raise LabInputError("grad_bytes", "grad_bytes sets a custom size: choose "
                                              "model=custom or clear it")
        model = get_model(query.model)
        grad = GRAD_BYTES_PER_PARAM * model.params
    return simulate(DataParallelInput(
        model=model, grad_bytes=grad, gpus=query.gpus, link=query.link, gpu=query.gpu,
        compute_s=query.compute_s, scaling=query.scaling, overlap=query.overlap,
        bucket_bytes=query.bucket_bytes, nics_per_node=query.nics_per_node,
        global_batch=query.global_batch, seq_len=query.seq_len,
        micro_batch=query.micro_batch, microbatches=query.microbatches))


def _point(p) -> dict:
    return {
        "link": p.link, "kind": link_family(get_link(p.link)), "gpu": p.gpu, "gpus": p.gpus,
        "speedup": round(p.speedup, 2), "efficiency": round(p.efficiency, 6),
        "compute_s": round(p.compute_s, 9), "comm_s": round(p.comm_s, 9),
        "exposed_comm_s": round(p.exposed_comm_s, 9),
        "overlapped_comm_s": round(p.overlapped_comm_s, 9), "step_s": round(p.step_s, 9),
        "allreduce_bytes_per_gpu": round(p.allreduce_bytes_per_gpu),
        "buckets": p.buckets, "algorithm": p.algorithm, "bottleneck": p.bottleneck,
        "bucket_s": round(p.bucket_s, 9), "bucket_algorithm": p.bucket_algorithm,
        "bucket_across": p.bucket_across,
        "backward_s": round(p.backward_s, 9),
        "first_bucket_fill_s": round(p.first_bucket_fill_s, 9),
    }


def _ratio(r) -> dict:
    return {
        "tokens_per_gpu": r.tokens_per_gpu, "global_batch_tokens": r.global_batch_tokens,
        "flops_per_gpu": r.flops_per_gpu, "gpu": r.gpu, "gpu_name": r.gpu_name,
        "peak_flops": r.peak_flops,
        "achieved_share": round(r.achieved_share, 6), "rate": round(r.rate),
        "compute_s": round(r.compute_s, 9), "allreduce_s": round(r.allreduce_s, 9),
        "busbw": round(r.busbw), "crossover_tokens": round(r.crossover_tokens, 1),
        "ratio": round(r.ratio, 4) if r.allreduce_s else None,
        "sweep": [[t, round(s, 9)] for t, s in r.sweep],
    }


def to_api(result: DataParallelResult) -> dict:
    inp, replica = result.input, result.replica
    return {
        **_point(result.point),
        "model": inp.model.id, "model_name": inp.model.name, "grad_bytes": inp.grad_bytes,
        "scaling": inp.scaling, "overlap": inp.overlap, "bucket_bytes": inp.bucket_bytes,
        "nics_per_node": inp.nics_per_node, "global_batch": inp.global_batch,
        "seq_len": inp.seq_len, "micro_batch": inp.micro_batch,
        "microbatches": inp.microbatches, "ratio": _ratio(result.ratio),
        "max_gpus": result.max_gpus, "curve_links": list(result.curve_links),
        "curve": [_point(p) for p in result.curve],
        "flat_ring": _point(result.flat_ring) if result.flat_ring else None,
        "replica": {
            "gpu": replica.input.gpu.id, "total_bytes": round(replica.total_bytes),
            "state_bytes": round(replica.state_bytes),
            "breakdown": {k: round(v) for k, v in replica.breakdown.items()},
            "gpu_memory_bytes": round(replica.gpu_memory_bytes), "fits": replica.fits,
        },
        "assumptions": list(result.assumptions),
    }


def link_names() -> dict[str, str]:
    return {i: link.name for i, link in links().items()}


def figures(result: DataParallelResult) -> dict:
    families = {i: link_family(link) for i, link in links().items()}
    replica = memory_figure(result.replica)
    # N drawn on the chart: a link that changes only N shows that the replica does not change.
    layout = replica["layout"]
    layout["annotations"] = [*layout.get("annotations", []), {
        "xref": "paper", "yref": "paper", "x": 1, "y": 1, "xanchor": "right", "yanchor": "top",
        "showarrow": False, "bgcolor": "rgba(47,91,211,0.15)", "borderpad": 8,
        "font": {"size": 16, "color": "#1d2330"},
        "text": f"<b>N = {result.input.gpus:,}</b>: every replica<br>holds all of it"}]
    return {"scaling": scaling_figure(result, link_names(), families),
            "time": time_figure(result), "ratio": ratio_figure(result),
            # At step 10's state its parts (the 8B's state and activations) wait for its guess.
            "replica": veiled(replica, replica_keys(result), WHAT[STEP10])}
