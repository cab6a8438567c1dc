"""EP02 Data parallelism: N replicas, each on its share of the batch, then a gradient all-reduce.

Step time = compute + the all-reduce's *exposed* part. Compute is one GPU's tokens per step at
6·P FLOPs a token (2 forward + 4 backward per parameter, Kaplan et al. 2020; attention's
FLOPs left out, so the lab errs fast) over the GPU's achieved rate: the datasheet's dense bf16
FLOP/s x its preset's measured matmul share (``matmul_efficiency`` x ``matmul_sustain``). A
GPU takes ``micro_batch`` sequences per micro-batch and runs ``microbatches`` of them per step
(gradient accumulation): global batch = micro-batch x micro-batches x N, and the gradients are
all-reduced once per step, not per micro-batch (DDP's ``no_sync``), so only the last
micro-batch's backward can hide it. The compute-to-communication ratio
(``compute_to_comm``): compute = 6·P·T/R for T tokens per GPU at rate R, the all-reduce moves
2(D−1)/D·2P bytes at the bus bandwidth busBW, so the two are equal at
T* = (2/3)·(D−1)/D·R/busBW tokens per GPU; P cancels (the Scaling Book's data-parallel bound,
Austin et al. 2025, "How to Scale Your Model", sec. "Data Parallelism").

The all-reduce itself comes from ``labs.hardware.comm`` (α–β ring, Patarasuk & Yuan 2009;
NCCL's ring or tree across nodes), so a ring moves 2(N−1)/N x the gradient bytes per GPU.
Two readings of "adding GPUs":

- weak scaling (each GPU keeps its micro-batch, the global batch grows with N):
  speedup = N x compute / (compute + exposed all-reduce);
- strong scaling (a fixed global batch of B sequences split N ways, so N ≤ B):
  speedup = compute / (compute/N + exposed all-reduce).

Where the GPUs sit: a scale-up link (NVLink, PCIe, Infinity Fabric) joins the whole group,
up to its preset's ``domain`` (8 for NVLink 4: one HGX board); past that a count is refused
(``DataParallelInput``) and its curve stops (``curve_counts``). A scale-out link
(InfiniBand, Ethernet) joins servers of 8 H100s on NVLink 4 (an HGX board) through
``nics_per_node`` ports of that link per server; NCCL runs one ring (or tree) through all
the GPUs, whose network hops share the server's ports
(``labs.hardware.comm.nccl_collective``, the function EP08 times the same all-reduce with).

Which GPU: the one the link ships with (``timed_gpu``), so no curve times a GPU on a link it
never talks over (issue 36 #6; round-21 cold reading P, finding 1: an H100 SXM was timed over
PCIe, which EP04 refuses). NVLink 4 and the networks time H100 SXMs; PCIe the H100 sold as a
PCIe card (``PCIE_GPU``: 756 TFLOP/s dense, a Gen5 card at Gen4 in a PCIe 4.0 host); another
vendor fabric its own GPU. A chosen ``gpu`` replaces it on every link it goes on and is
refused on a scale-up link its GPUs never talk over (``labs.hardware.links.check_peer_link``,
EP04's rule).

Overlap: PyTorch DDP (Li et al. 2020, "PyTorch Distributed", VLDB; torch.nn.parallel.
DistributedDataParallel, ``bucket_cap_mb=25``) packs gradients into buckets and all-reduces
each one as soon as backward has produced it, on its own stream, one bucket after another.
Backward is taken as 2/3 of compute (4 of the 6·N·D training FLOPs, Kaplan et al. 2020) and
produces gradients at an even rate. The last bucket is only ready when backward ends, so at
least its all-reduce is always exposed; each bucket pays the ring's 2(N−1) latency steps again.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from labs.core.limits import MAX_DP_GPUS as MAX_GPUS
from labs.data_parallel.inputs import (
    ComputeToComm,
    DataParallelInput,
    DataParallelPoint,
    DataParallelResult,
)
from labs.hardware.comm import CommCost, nccl_collective, ring
from labs.hardware.gpus import GPUSpec, get_gpu
from labs.hardware.links import Cluster, Link, get_link, links, make_cluster, peer_links
from labs.hardware.nccl import NcclTime, nccl_time, ring_time
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory

# The four kinds of link the lesson compares, one preset each (labs/presets/links.json).
CURVE_LINKS = ("nvlink-4", "ib-ndr", "eth-100g", "pcie-4")
GPU_COUNTS = tuple(2 ** k for k in range(MAX_GPUS.bit_length()))  # 1 .. 1024, a log axis
BACKWARD_FRACTION = 2 / 3  # backward = 4ND of the 6ND training FLOPs (Kaplan et al. 2020)
GRAD_BYTES_PER_PARAM = 2  # bf16 gradients (the 16-byte mixed-precision Adam recipe)
FLOPS_PER_PARAM_TOKEN = 6  # 2 forward + 4 backward per parameter per token (Kaplan et al. 2020)
# Servers that a scale-out link joins: HGX H100 boards, 8 GPUs on NVLink 4.
SERVER_GPU, SERVER_LINK, GPUS_PER_SERVER = "h100-sxm", "nvlink-4", 8
# The GPUs PCIe joins: no H100 SXM board joins its GPUs over PCIe (labs.hardware.links.
# peer_links), so a PCIe group is the H100 sold as a PCIe card (round-21 cold reading P, 1).
PCIE_GPU = "h100-pcie"

_FAMILIES = (("nvlink", "nvlink"), ("nvl72", "nvlink"), ("ib-", "infiniband"),
             ("eth-", "ethernet"), ("pcie-", "pcie"), ("infinity-fabric", "infinity-fabric"))


def link_family(link: Link) -> str:
    """nvlink, infiniband, ethernet, pcie or infinity-fabric, from the preset's id."""
    return next(family for prefix, family in _FAMILIES if link.id.startswith(prefix))


def timed_gpu(link: Link, gpu: str | None = None) -> GPUSpec:
    """The GPU a group on ``link`` is timed with: ``gpu`` where it goes on that link (a
    network joins servers of any GPU; a scale-up link only the GPUs whose peers talk over it),
    else the link's own: a vendor fabric's first GPU (the H100 SXM on NVLink 4), PCIe's the
    H100 sold as a PCIe card (``PCIE_GPU``), a network's HGX H100 servers (``SERVER_GPU``)."""
    if gpu is not None and (link.kind == "scale-out" or link.id in peer_links(get_gpu(gpu))):
        return get_gpu(gpu)
    if link.kind == "scale-out":
        return get_gpu(SERVER_GPU)
    return get_gpu(link.gpus[0] if link.gpus else PCIE_GPU)


@lru_cache(maxsize=64)  # a handful of (GPU, link, ports) triples; building one reads presets
def server_cluster(link: Link, nics_per_node: int, gpu: GPUSpec | None = None) -> Cluster:
    """8-GPU servers (HGX H100 boards on NVLink 4, or ``gpu``'s on its own fabric) joined by
    ``nics_per_node`` ports of a scale-out link."""
    gpu = gpu or get_gpu(SERVER_GPU)
    return make_cluster(gpu, GPUS_PER_SERVER, get_link(peer_links(gpu)[0]), link,
                        nics_per_node)


def all_reduce(size: float, gpus: int, link: Link, nics_per_node: int = 1,
               flat: bool = False, ring_protocol: str | None = None,
               gpu: GPUSpec | None = None) -> CommCost:
    """One all-reduce of ``size`` bytes over ``gpus`` GPUs joined by ``link``, as NCCL runs it
    (``labs.hardware.comm.nccl_collective``): a scale-up link joins the whole group as one
    fabric; a scale-out link joins 8-GPU servers.

    ``flat``: the textbook reading, every GPU on its own port of ``link``, one α–β ring
    through all of them at the datasheet figures (2(N−1)/N·S/β + 2(N−1)·α).
    ``ring_protocol``: NCCL's ring on that protocol over the same servers, where its model
    may pick a tree (``labs.hardware.nccl.ring_time``; EP02 step 6). ``gpu``: the GPUs'
    (``timed_gpu``'s default: the link's own)."""
    if ring_protocol is not None and gpus > 1:
        t = nccl_all_reduce(size, gpus, link, nics_per_node, ring_protocol, gpu)
        across = "ring" if t.nodes > 1 else ""
        return CommCost("all_reduce", gpus, size, 2 * (gpus - 1) / gpus * size, t.seconds,
                        "ring", t.bottleneck, across)
    if flat:
        return CommCost("all_reduce", gpus, size, 2 * (gpus - 1) / gpus * size,
                        ring("all_reduce", size, gpus, link.bandwidth, link.latency),
                        "ring", link.id)
    return nccl_collective("all_reduce", size, gpus,
                           _cluster(link, gpus, nics_per_node, gpu))


def _cluster(link: Link, gpus: int, nics_per_node: int, gpu: GPUSpec | None) -> Cluster:
    gpu = gpu or timed_gpu(link)
    if link.kind == "scale-up":
        return fabric_cluster(link, gpus, gpu)
    return server_cluster(link, nics_per_node, gpu)


def nccl_all_reduce(size: float, gpus: int, link: Link, nics_per_node: int = 1,
                    ring_protocol: str | None = None, gpu: GPUSpec | None = None) -> NcclTime:
    """``all_reduce``'s collective as NCCL's cost model prices it, with its latency (and a
    tree's bandwidth) term by term: what EP02's steps 4 to 6 write out; with
    ``ring_protocol``, its ring on that protocol (step 6's ring, which NCCL does not pick)."""
    cluster = _cluster(link, gpus, nics_per_node, gpu)
    if ring_protocol is not None:
        return ring_time("all_reduce", size, gpus, cluster, ring_protocol)
    return nccl_time("all_reduce", size, gpus, cluster)


def fabric_cluster(link: Link, gpus: int, gpu: GPUSpec | None = None) -> Cluster:
    """``gpus`` GPUs (the link's own, ``timed_gpu``) on one scale-up fabric of ``link`` (at
    most its domain: the input refuses more)."""
    return make_cluster(gpu or timed_gpu(link), gpus, replace(link, domain=None),
                        get_link("ib-ndr"))


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


def achieved_share(gpu: GPUSpec) -> float:
    """The share of the dense bf16 peak ``gpu`` sustains on matmuls (its preset's MAMF share
    x sustained/burst, each measured or stated as assumed)."""
    kernels = gpu.kernels
    return kernels.matmul_efficiency * kernels.matmul_sustain


def gpu_rate(gpu: GPUSpec) -> float:
    """FLOP/s one GPU achieves: the datasheet's dense bf16 peak x ``achieved_share``."""
    return gpu.bf16_flops * achieved_share(gpu)


def tokens_per_gpu(inp: DataParallelInput, gpus: int) -> float:
    """Tokens one GPU computes per step: weak, its micro-batches; strong, B·s/N."""
    if inp.scaling == "weak":
        return inp.micro_batch * inp.microbatches * inp.seq_len
    return inp.global_batch * inp.seq_len / gpus


def step_compute(inp: DataParallelInput, gpus: int, gpu: GPUSpec) -> tuple[float, float]:
    """(compute seconds of one ``gpu``'s step, the last micro-batch's backward seconds): the
    window bucketed all-reduces can hide behind, since accumulation syncs once per step."""
    tokens = tokens_per_gpu(inp, gpus)
    micro = min(inp.micro_batch * inp.seq_len, tokens)  # the last micro-batch's tokens
    if inp.compute_s is None:
        compute = FLOPS_PER_PARAM_TOKEN * inp.model.active_params * tokens / gpu_rate(gpu)
    else:
        compute = inp.compute_s if inp.scaling == "weak" else inp.compute_s / gpus
    return compute, BACKWARD_FRACTION * compute * micro / tokens


def data_parallel_point(inp: DataParallelInput, gpus: int, link_id: str,
                        flat: bool = False, ring_protocol: str | None = None
                        ) -> DataParallelPoint:
    """One GPU count's step on one link, on the GPU that link is timed with (``timed_gpu``);
    ``flat`` and ``ring_protocol`` time its all-reduces another way (``all_reduce``)."""
    link, nics = get_link(link_id), inp.nics_per_node
    gpu = timed_gpu(link, inp.gpu)
    compute, window = step_compute(inp, gpus, gpu)
    how = {"flat": flat, "ring_protocol": ring_protocol, "gpu": gpu}
    whole = all_reduce(inp.grad_bytes, gpus, link, nics, **how)
    fill = 0.0
    if inp.overlap == "none" or gpus == 1:
        buckets, comm, exposed, bucket = 1, whole.seconds, whole.seconds, whole
    else:
        buckets = max(1, math.ceil(inp.grad_bytes / inp.bucket_bytes))
        last_size = inp.grad_bytes - (buckets - 1) * inp.bucket_bytes
        bucket = all_reduce(min(inp.bucket_bytes, inp.grad_bytes), gpus, link, nics, **how)
        bucket_s = bucket.seconds
        last_s = all_reduce(last_size, gpus, link, nics, **how).seconds
        comm = (buckets - 1) * bucket_s + last_s
        exposed = exposed_after_window(window, bucket_s, last_s, buckets,
                                       inp.bucket_bytes / inp.grad_bytes)
        # The stream starts once the first bucket is full (``exposed_after_window``'s j = 1):
        # EP02 step 5 derives what the backward hides from it (round-21 cold reading P,
        # finding 3). Real DDP caps its first bucket at 1 MiB (PyTorch's
        # torch/csrc/distributed/c10d/reducer.hpp, kDefaultFirstBucketBytes; Python's
        # dist._DEFAULT_FIRST_BUCKET_BYTES), so its stream starts sooner: the lab errs slow by
        # the difference, about a millisecond on EP02 step 5's 64 GPUs.
        fill = window * min(inp.bucket_bytes, inp.grad_bytes) / inp.grad_bytes
    step = compute + exposed
    speedup = (gpus * compute if inp.scaling == "weak" else step_compute(inp, 1, gpu)[0]) / step
    return DataParallelPoint(
        link=link.id, gpu=gpu.id, gpus=gpus, compute_s=compute, comm_s=comm,
        exposed_comm_s=exposed,
        overlapped_comm_s=comm - exposed, step_s=step, speedup=speedup,
        efficiency=speedup / gpus, allreduce_bytes_per_gpu=whole.bytes_per_gpu,
        buckets=buckets, algorithm=whole.algorithm, bottleneck=whole.bottleneck,
        bucket_s=bucket.seconds, bucket_algorithm=bucket.algorithm, bucket_across=bucket.across,
        backward_s=window, first_bucket_fill_s=fill)


def simulate(inp: DataParallelInput) -> DataParallelResult:
    max_gpus = min(MAX_GPUS, inp.global_batch) if inp.scaling == "strong" else MAX_GPUS
    curve_links = CURVE_LINKS if inp.link in CURVE_LINKS else (*CURVE_LINKS, inp.link)
    counts = sorted({n for n in GPU_COUNTS if n <= max_gpus} | {inp.gpus})
    curve = tuple(data_parallel_point(inp, n, link) for link in curve_links
                  for n in curve_counts(get_link(link), counts))
    point = next(p for p in curve if p.link == inp.link and p.gpus == inp.gpus)
    link = get_link(inp.link)
    flat = None
    if link.kind == "scale-out" and inp.gpus > GPUS_PER_SERVER:
        flat = data_parallel_point(inp, inp.gpus, inp.link, flat=True)
    # ZeRO 0: each replica holds the whole model's state whatever N is (Rajbhandari et al.).
    replica = compute_memory(MemoryInput(model=inp.model, gpu=get_gpu(point.gpu),
                                         dp=inp.gpus, seq_len=inp.seq_len,
                                         micro_batch=inp.micro_batch))
    return DataParallelResult(inp, point, curve, curve_links, max_gpus, replica, flat,
                              compute_to_comm(inp, point), assumptions(inp, link))


def curve_counts(link: Link, counts: list[int]) -> list[int]:
    """The GPU counts a link's curve is drawn at: a scale-up link's only up to its domain (a
    scale-up fabric joins no more GPUs than that; InfiniBand and Ethernet join servers)."""
    if link.kind == "scale-up" and link.domain:
        return [n for n in counts if n <= link.domain]
    return counts


SWEEP_TOKENS = tuple(2.0 ** k for k in range(8, 23))  # 256 .. 4M tokens per GPU, a log axis


def compute_to_comm(inp: DataParallelInput, point: DataParallelPoint) -> ComputeToComm:
    """The chosen state's compute against its whole-gradient all-reduce, and the crossover
    tokens per GPU T* = (2/3)·(D−1)/D·R/busBW where they are equal (module docstring)."""
    gpu = get_gpu(point.gpu)
    d, rate = inp.gpus, gpu_rate(gpu)
    tokens = tokens_per_gpu(inp, d)
    per_token = FLOPS_PER_PARAM_TOKEN * inp.model.active_params / rate  # seconds a token
    whole = all_reduce(inp.grad_bytes, d, get_link(inp.link), inp.nics_per_node, gpu=gpu) \
        if d > 1 else None
    allreduce_s = whole.seconds if whole else 0.0
    busbw = whole.bytes_per_gpu / allreduce_s if whole else 0.0
    # P cancels only when the gradients are the compute's 2 bytes a parameter (a dense model);
    # the general form is the all-reduce's seconds over one token's compute seconds.
    crossover = allreduce_s / per_token
    return ComputeToComm(
        tokens_per_gpu=tokens, global_batch_tokens=tokens * d,
        flops_per_gpu=FLOPS_PER_PARAM_TOKEN * inp.model.active_params * tokens,
        gpu=gpu.id, gpu_name=gpu.name, peak_flops=gpu.bf16_flops,
        achieved_share=achieved_share(gpu), rate=rate,
        compute_s=point.compute_s, allreduce_s=allreduce_s, busbw=busbw,
        crossover_tokens=crossover,
        ratio=point.compute_s / allreduce_s if allreduce_s else math.inf,
        sweep=tuple((t, t * per_token) for t in SWEEP_TOKENS))


def assumptions(inp: DataParallelInput, link: Link) -> tuple[str, ...]:
    out = ["Gradients are all-reduced in bf16 with NCCL's ring (2(N−1)/N x bytes per GPU); "
           "α–β link model (a message takes a fixed latency α plus its bytes ÷ the "
           "bandwidth β), no congestion."]
    gpu = timed_gpu(link, inp.gpu)
    if link.kind == "scale-up":
        # A PCIe server's ring crosses its two CPU sockets' link (round-23 cold reading P, 1).
        errs = "errs fast: EP02, step 1; " if link.id.startswith("pcie") else ""
        out.append(f"{link.name} joins the whole group of {gpu.name} as one fabric ({errs}at "
                   f"most {link.domain} GPUs); NCCL's ring, tree or NVLS, whichever its tuner "
                   "picks (EP02, step 6).")
    else:
        own = get_link(peer_links(gpu)[0]).name
        out.append(f"Servers of {GPUS_PER_SERVER} {gpu.name} on {own}, {inp.nics_per_node} "
                   f"{link.name} port(s) each; all-reduce inside the server first.")
    if inp.overlap == "bucketed":
        out.append("Backward is 2/3 of compute and yields gradients evenly; buckets are "
                   "all-reduced one at a time while it runs (PyTorch DDP).")
    return tuple(out)


def link_presets() -> list[Link]:
    return list(links().values())
