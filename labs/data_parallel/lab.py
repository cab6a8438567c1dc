"""EP02 Data parallelism: N replicas, each on its share of the batch, then a gradient all-reduce.

Step time = compute + the all-reduce's *exposed* part. The all-reduce itself comes from
``labs.hardware.comm`` (α–β ring, Patarasuk & Yuan 2009; hierarchical across nodes), so a ring moves
2(N−1)/N x the gradient bytes per GPU. Two readings of "adding GPUs":

- weak scaling (each GPU keeps its micro-batch, the global batch grows with N):
  speedup = N x compute / (compute + exposed all-reduce);
- strong scaling (a fixed global batch of B sequences split N ways, so N ≤ B):
  speedup = compute / (compute/N + exposed all-reduce).

Where the GPUs sit: a scale-up link (NVLink, PCIe, Infinity Fabric) is taken to join the
whole group in one ring at its per-GPU bandwidth (past one 8-GPU board this is an NVLink
Switch fabric, an upper bound). A scale-out link (InfiniBand, Ethernet) joins servers of 8
H100s on NVLink 4 (an HGX board) through ``nics_per_node`` ports of that link per server; NCCL
then reduces inside the server first (``labs.hardware.comm.collective``'s hierarchical all-reduce).

Overlap: PyTorch DDP (Li et al. 2020, "PyTorch Distributed", VLDB; torch.nn.parallel.
DistributedDataParallel, ``bucket_cap_mb=25``) packs gradients into buckets and all-reduces
each one as soon as backward has produced it, on its own stream, one bucket after another.
Backward is taken as 2/3 of compute (4 of the 6·N·D training FLOPs, Kaplan et al. 2020) and
produces gradients at an even rate. The last bucket is only ready when backward ends, so at
least its all-reduce is always exposed; each bucket pays the ring's 2(N−1) latency steps again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.core.limits import DP_OVERLAPS as OVERLAPS
from labs.core.limits import DP_SCALINGS as SCALINGS
from labs.core.limits import MAX_DP_BUCKET_BYTES as MAX_BUCKET_BYTES
from labs.core.limits import MAX_DP_COMPUTE_S as MAX_COMPUTE_S
from labs.core.limits import MAX_DP_GLOBAL_BATCH as MAX_GLOBAL_BATCH
from labs.core.limits import MAX_DP_GPUS as MAX_GPUS
from labs.core.limits import MAX_DP_GRAD_BYTES as MAX_GRAD_BYTES
from labs.core.limits import MAX_NICS_PER_NODE
from labs.core.limits import MIN_DP_BUCKET_BYTES as MIN_BUCKET_BYTES
from labs.core.limits import MIN_DP_COMPUTE_S as MIN_COMPUTE_S
from labs.core.limits import MIN_DP_GRAD_BYTES as MIN_GRAD_BYTES
from labs.core.validate import WHOLE_PLAIN, number, whole
from labs.hardware.comm import CommCost, collective, ring
from labs.hardware.gpus import get_gpu
from labs.hardware.links import Cluster, Link, get_link, links, make_cluster
from labs.memory.inputs import MemoryInput, MemoryResult
from labs.memory.lab import compute_memory
from labs.model.spec import ModelSpec

# The four kinds of link the lesson compares, one preset each (labs/presets/links.json).
CURVE_LINKS = ("nvlink-4", "ib-ndr", "eth-100g", "pcie-4")
GPU_COUNTS = tuple(2 ** k for k in range(MAX_GPUS.bit_length()))  # 1 .. 1024, a log axis
# PyTorch DDP's default bucket_cap_mb=25, in MiB (bucket_bytes_cap = int(25 * 1024 * 1024)).
DDP_BUCKET_BYTES = 25 * 1024 * 1024
BACKWARD_FRACTION = 2 / 3  # backward = 4ND of the 6ND training FLOPs (Kaplan et al. 2020)
GRAD_BYTES_PER_PARAM = 2  # bf16 gradients (the 16-byte mixed-precision Adam recipe)
# Servers that a scale-out link joins: HGX H100 boards, 8 GPUs on NVLink 4.
SERVER_GPU, SERVER_LINK, GPUS_PER_SERVER = "h100-sxm", "nvlink-4", 8

_FAMILIES = (("nvlink", "nvlink"), ("nvl72", "nvlink"), ("ib-", "infiniband"),
             ("eth-", "ethernet"), ("pcie-", "pcie"), ("infinity-fabric", "infinity-fabric"))


def link_family(link: Link) -> str:
    """nvlink, infiniband, ethernet, pcie or infinity-fabric, from the preset's id."""
    return next(family for prefix, family in _FAMILIES if link.id.startswith(prefix))


@dataclass(frozen=True)
class DataParallelInput:
    model: ModelSpec  # whose replica the ledger shows
    grad_bytes: float  # gradient bytes all-reduced per step (bf16: 2 x params)
    gpus: int = 8
    link: str = "nvlink-4"
    compute_s: float = 1.0  # weak: one micro-batch's step; strong: the global batch on 1 GPU
    scaling: str = "weak"
    overlap: str = "none"
    bucket_bytes: float = DDP_BUCKET_BYTES
    nics_per_node: int = 1
    global_batch: int = 1024  # sequences per step (strong scaling splits it N ways)

    def __post_init__(self) -> None:  # one check per control, in page order
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset or a gradient size")
        number("grad_bytes", self.grad_bytes, MIN_GRAD_BYTES, MAX_GRAD_BYTES, "gradient bytes")
        whole("gpus", self.gpus, 1, MAX_GPUS, "the GPU count", WHOLE_PLAIN)
        get_link(self.link)
        number("compute_s", self.compute_s, MIN_COMPUTE_S, MAX_COMPUTE_S,
               "compute seconds per step")
        if self.scaling not in SCALINGS:
            raise LabInputError("scaling", f"scaling must be one of {', '.join(SCALINGS)}")
        if self.overlap not in OVERLAPS:
            raise LabInputError("overlap", f"overlap must be one of {', '.join(OVERLAPS)}")
        number("bucket_bytes", self.bucket_bytes, MIN_BUCKET_BYTES, MAX_BUCKET_BYTES,
               "the bucket size in bytes")
        whole("nics_per_node", self.nics_per_node, 1, MAX_NICS_PER_NODE,
              "network ports per server", WHOLE_PLAIN)
        whole("global_batch", self.global_batch, 1, MAX_GLOBAL_BATCH, "the global batch",
              WHOLE_PLAIN)
        if self.scaling == "strong" and self.gpus > self.global_batch:
            raise LabInputError("gpus", f"a fixed global batch of {self.global_batch} sequences "
                                        f"gives at most {self.global_batch} GPUs one each "
                                        f"(got {self.gpus} GPUs)")


@dataclass(frozen=True)
class DataParallelPoint:
    """One GPU count on one link."""

    link: str
    gpus: int
    compute_s: float  # per GPU per step
    comm_s: float  # every all-reduce of the step, overlapped or not
    exposed_comm_s: float  # what the step waits for after compute
    overlapped_comm_s: float
    step_s: float
    speedup: float
    efficiency: float
    allreduce_bytes_per_gpu: float
    buckets: int
    algorithm: str
    bottleneck: str


@dataclass(frozen=True)
class DataParallelResult:
    input: DataParallelInput
    point: DataParallelPoint
    curve: tuple[DataParallelPoint, ...]  # one per GPU count per link, N ≤ max_gpus
    curve_links: tuple[str, ...]
    max_gpus: int  # strong scaling: the global batch; weak: the axis' end
    replica: MemoryResult  # the EP01 ledger of one replica (what every GPU holds)
    # A scale-out link read as in the textbook: a port per GPU, one flat ring through all N.
    flat_ring: DataParallelPoint | None
    assumptions: tuple[str, ...]


@lru_cache(maxsize=64)  # a handful of (link, ports) pairs; building one reads the presets
def server_cluster(link: Link, nics_per_node: int) -> Cluster:
    """8-GPU NVLink 4 servers joined by ``nics_per_node`` ports of a scale-out link."""
    return make_cluster(get_gpu(SERVER_GPU), GPUS_PER_SERVER, get_link(SERVER_LINK), link,
                        nics_per_node)


def all_reduce(size: float, gpus: int, link: Link, nics_per_node: int = 1,
               flat: bool = False) -> CommCost:
    """One all-reduce of ``size`` bytes over ``gpus`` GPUs joined by ``link``.

    ``flat``: every GPU on its own port of ``link``, one ring through all of them (the
    textbook 2(N−1)/N·S/β, what a scale-up link always gets here)."""
    if flat or link.kind == "scale-up":
        return CommCost("all_reduce", gpus, size, 2 * (gpus - 1) / gpus * size,
                        ring("all_reduce", size, gpus, link.bandwidth, link.latency),
                        "ring", link.id)
    return collective("all_reduce", size, gpus, server_cluster(link, nics_per_node))


def exposed_after_backward(compute_s: float, bucket_s: float, last_s: float,
                           buckets: int, bucket_share: float) -> float:
    """Seconds of all-reduce left after compute ends, buckets overlapped with backward.

    Bucket i (of k, each ``bucket_share`` of the gradients, the last one possibly smaller) is
    ready when backward has produced its bytes, at fwd + i·share·bwd (the last exactly at
    compute's end), and the buckets run one after
    another, so the last finishes at max over j of ready_j + (the all-reduces from j on). Its
    terms grow linearly in j up to k−1, so the maximum is at j = 1, k−1 or k.
    """
    return exposed_after_window(BACKWARD_FRACTION * compute_s, bucket_s, last_s, buckets,
                                bucket_share)


def exposed_after_window(window_s: float, bucket_s: float, last_s: float, buckets: int,
                         bucket_share: float) -> float:
    """Seconds of bucketed reduction left after a window of ``window_s`` seconds that
    produces the gradients evenly (a backward pass; EP08 uses a stage's last one). Bucket j is
    ready at j·share·window, the buckets run one after another (see above)."""
    full = buckets - 1  # buckets before the last
    if full == 0:
        return last_s

    def finish(j: int) -> float:  # bucket j (1-based) ready, then it and those after it run
        return j * bucket_share * window_s + (full - j + 1) * bucket_s + last_s

    return max(finish(1), finish(full), window_s + last_s) - window_s


def data_parallel_point(inp: DataParallelInput, gpus: int, link_id: str,
                        flat: bool = False) -> DataParallelPoint:
    link, nics = get_link(link_id), inp.nics_per_node
    compute = inp.compute_s if inp.scaling == "weak" else inp.compute_s / gpus
    whole = all_reduce(inp.grad_bytes, gpus, link, nics, flat)
    if inp.overlap == "none" or gpus == 1:
        buckets, comm, exposed = 1, whole.seconds, whole.seconds
    else:
        buckets = max(1, math.ceil(inp.grad_bytes / inp.bucket_bytes))
        last_size = inp.grad_bytes - (buckets - 1) * inp.bucket_bytes
        bucket_s = all_reduce(min(inp.bucket_bytes, inp.grad_bytes), gpus, link, nics,
                              flat).seconds
        last_s = all_reduce(last_size, gpus, link, nics, flat).seconds
        comm = (buckets - 1) * bucket_s + last_s
        exposed = exposed_after_backward(compute, bucket_s, last_s, buckets,
                                         inp.bucket_bytes / inp.grad_bytes)
    step = compute + exposed
    speedup = (gpus * compute if inp.scaling == "weak" else inp.compute_s) / step
    return DataParallelPoint(
        link=link.id, gpus=gpus, compute_s=compute, comm_s=comm, exposed_comm_s=exposed,
        overlapped_comm_s=comm - exposed, step_s=step, speedup=speedup,
        efficiency=speedup / gpus, allreduce_bytes_per_gpu=whole.bytes_per_gpu,
        buckets=buckets, algorithm=whole.algorithm, bottleneck=whole.bottleneck)


def simulate(inp: DataParallelInput) -> DataParallelResult:
    max_gpus = min(MAX_GPUS, inp.global_batch) if inp.scaling == "strong" else MAX_GPUS
    curve_links = CURVE_LINKS if inp.link in CURVE_LINKS else (*CURVE_LINKS, inp.link)
    counts = sorted({n for n in GPU_COUNTS if n <= max_gpus} | {inp.gpus})
    curve = tuple(data_parallel_point(inp, n, link) for link in curve_links for n in counts)
    point = next(p for p in curve if p.link == inp.link and p.gpus == inp.gpus)
    link = get_link(inp.link)
    flat = None
    if link.kind == "scale-out" and inp.gpus > GPUS_PER_SERVER:
        flat = data_parallel_point(inp, inp.gpus, inp.link, flat=True)
    # ZeRO 0: each replica holds the whole model's state whatever N is (Rajbhandari et al.).
    replica = compute_memory(MemoryInput(model=inp.model, gpu=get_gpu(SERVER_GPU),
                                         dp=inp.gpus))
    return DataParallelResult(inp, point, curve, curve_links, max_gpus, replica, flat,
                              assumptions(inp, link))


def assumptions(inp: DataParallelInput, link: Link) -> tuple[str, ...]:
    out = ["Gradients are all-reduced in bf16 with NCCL's ring (2(N−1)/N x bytes per GPU); "
           "α–β link model, no congestion."]
    if link.kind == "scale-up":
        out.append(f"{link.name} joins the whole group in one flat ring (past 8 GPUs an "
                   "NVLink Switch fabric: an upper bound); its 2(N−1) latency steps per "
                   "all-reduce grow with N (NCCL would switch to trees at scale).")
    else:
        out.append(f"Servers of {GPUS_PER_SERVER} H100 on NVLink 4, {inp.nics_per_node} "
                   f"{link.name} port(s) each; all-reduce inside the server first.")
    if inp.overlap == "bucketed":
        out.append("Backward is 2/3 of compute and yields gradients evenly; buckets are "
                   "all-reduced one at a time while it runs (PyTorch DDP).")
    return tuple(out)


def link_presets() -> list[Link]:
    return list(links().values())
