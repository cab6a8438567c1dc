"""Collective communication cost: the α–β model on a cluster's links.

Time = steps x α + bytes each GPU sends / bandwidth (Hockney's model; for ring collectives
Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication Operations in
MPICH", and Patarasuk & Yuan 2009 for the bandwidth-optimal ring all-reduce). With S the full
tensor's bytes and N GPUs in the group, each GPU sends:
- ring all-reduce: 2(N−1)/N · S in 2(N−1) steps (reduce-scatter then all-gather);
- all-gather, reduce-scatter: (N−1)/N · S in N−1 steps;
- all-to-all: (N−1)/N · S (its S bytes minus the share it keeps), pairwise, N−1 steps;
- point-to-point: S in one step.
A group inside one node runs on the scale-up link. A group that spans nodes is bounded by the
slower link: NCCL runs one ring per port in parallel, each crossing every node boundary once,
so a flat ring across nodes moves at min(scale-up bandwidth, ports x port bandwidth) per GPU
(NCCL's "bus bandwidth", nccl-tests doc/PERFORMANCE.md). The hierarchical all-reduce
(reduce-scatter in the node, all-reduce of 1/g of the data across nodes, all-gather in the
node; Horovod/NCCL's tree-of-rings idea, Sergeev & Del Balso 2018, arXiv:1802.05799) is used
when it is faster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.validate import UNKNOWN_BARE, is_int, is_number, one_of
from labs.hardware.links import Cluster

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")
_FACTOR = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "all_to_all": 1.0}


@dataclass(frozen=True)
class CommCost:
    """One collective's cost on one GPU of the group."""

    collective: str
    group: int
    size_bytes: float  # the full tensor S (per GPU for all-to-all and p2p)
    bytes_per_gpu: float  # bytes each GPU sends (and receives)
    seconds: float
    algorithm: str  # "ring", "hierarchical", "pairwise" or "direct"
    bottleneck: str  # the link that bounds it


def _check(kind: str, size: float, group: int, per_node: int | None) -> None:
    one_of("collective", kind, COLLECTIVES, "collective", UNKNOWN_BARE)
    if not is_number(size) or size < 0:
        raise LabInputError("size", "the message size must be a number of bytes >= 0")
    if not is_int(group) or group < 1:
        raise LabInputError("group", "a group has a whole number >= 1 of GPUs")
    if per_node is not None and (not is_int(per_node) or per_node < 1):
        raise LabInputError("per_node", "GPUs per node must be a whole number >= 1")


def ring(kind: str, size: float, group: int, bandwidth: float, latency: float) -> float:
    """Seconds for a ring collective of ``group`` GPUs on one link (α–β)."""
    if group == 1:
        return 0.0
    factor = _FACTOR[kind]
    return factor * (group - 1) * latency + factor * (group - 1) / group * size / bandwidth


def collective(kind: str, size: float, group: int, cluster: Cluster,
               per_node: int | None = None) -> CommCost:
    """Cost of ``kind`` over ``group`` GPUs of ``cluster``.

    ``per_node`` is how many members share a node; by default the group is packed into as
    few nodes as possible (a TP group); a DP group strided across nodes has ``per_node`` 1.
    """
    _check(kind, size, group, per_node)
    g = min(group, cluster.gpus_per_node if per_node is None else per_node,
            cluster.gpus_per_node)
    nodes = math.ceil(group / g)
    intra, inter = cluster.intra, cluster.inter
    if kind == "p2p":
        link = intra if nodes == 1 else inter
        secs = 0.0 if group == 1 else link.latency + size / link.bandwidth
        return CommCost(kind, group, size, size if group > 1 else 0.0, secs, "direct", link.id)
    sent = _FACTOR.get(kind, 1.0) * (group - 1) / group * size
    if nodes == 1:
        secs = ring(kind, size, group, intra.bandwidth, intra.latency)
        algo = "pairwise" if kind == "all_to_all" else "ring"
        return CommCost(kind, group, size, sent, secs, algo, intra.id)
    # Members of a node share its ports: each GPU's share of the node's outbound bandwidth.
    per_gpu_out = min(cluster.nics_per_node, g) * inter.bandwidth / g
    if kind == "all_to_all":
        # Of its (N−1)/N·S, a GPU sends (g−1)/N·S inside the node and (N−g)/N·S out of it.
        inside = (g - 1) / group * size / intra.bandwidth
        outside = (group - g) / group * size / per_gpu_out
        secs = (group - 1) * inter.latency + max(inside, outside)
        return CommCost(kind, group, size, sent, secs, "pairwise", inter.id)
    flat_bw = min(intra.bandwidth, min(cluster.nics_per_node, g) * inter.bandwidth)
    flat = ring(kind, size, group, flat_bw, inter.latency)
    best = CommCost(kind, group, size, sent, flat, "ring",
                    inter.id if flat_bw < intra.bandwidth else intra.id)
    if kind == "all_reduce" and g > 1:
        # Reduce-scatter in the node, all-reduce S/g across the nodes (g such rings share the
        # node's ports), all-gather in the node.
        local = 2 * ring("reduce_scatter", size, g, intra.bandwidth, intra.latency)
        across = ring("all_reduce", size / g, nodes, per_gpu_out, inter.latency)
        if local + across < flat:
            moved = 2 * (g - 1) / g * size + 2 * (nodes - 1) / nodes * size / g
            best = CommCost(kind, group, size, moved, local + across, "hierarchical", inter.id)
    return best


@dataclass(frozen=True)
class Scaling:
    gpus: int
    compute_seconds: float
    comm_seconds: float
    speedup: float
    efficiency: float


def data_parallel_scaling(grad_bytes: float, gpus: int, cluster: Cluster,
                          compute_seconds: float, *, weak: bool = True) -> Scaling:
    """Speedup of N data-parallel replicas whose gradients are all-reduced after compute.

    Weak scaling (each GPU keeps its micro-batch): step = compute + all-reduce, speedup =
    N·compute / step. Strong scaling (a fixed global batch): step = compute/N + all-reduce,
    speedup = compute / step. No overlap of communication with compute is assumed.
    """
    if not (isinstance(compute_seconds, int | float) and compute_seconds > 0):
        raise LabInputError("compute", "compute time per step must be a positive number")
    comm = collective("all_reduce", grad_bytes, gpus, cluster).seconds
    if weak:
        speedup = gpus * compute_seconds / (compute_seconds + comm)
    else:
        speedup = compute_seconds / (compute_seconds / gpus + comm)
    return Scaling(gpus, compute_seconds, comm, speedup, speedup / gpus)
