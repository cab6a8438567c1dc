"""Collective communication cost on a cluster: what NCCL runs (``labs.hardware.nccl``).

With S the full tensor's bytes and N GPUs in the group, each GPU sends:
- ring all-reduce: 2(N−1)/N · S (reduce-scatter then all-gather; Patarasuk & Yuan 2009);
- all-gather, reduce-scatter: (N−1)/N · S;
- all-to-all: (N−1)/N · S (its S bytes minus the share it keeps), pairwise;
- point-to-point: S.
Its time is NCCL's own model (``labs.hardware.nccl.nccl_time``: the fastest of its ring and
tree algorithms and LL, LL128 and Simple protocols, base and per-hop latencies from
NVIDIA/nccl tuning.cc, at the bus bandwidth nccl-tests measures on each link). Across nodes
the hierarchical all-reduce (reduce-scatter in the node, all-reduce of 1/g of the data across
nodes, all-gather in the node; Horovod's, Sergeev & Del Balso 2018, arXiv:1802.05799, and
NCCL's CollNet) is taken when it is faster, each piece priced by NCCL's model, for the
data-parallel lessons' gradient all-reduce (``collective``). A tensor-parallel group's
collectives are not: Megatron's f and g are plain ``torch.distributed`` calls, which NCCL
runs as a ring or tree (CollNet needs a SHARP-capable network), so EP04's "one collective"
and every layer's TP collective are timed by ``nccl_collective`` alone: one collective, one
time (a ring across two nodes of 4 on 100 Gb/s Ethernet: 235 MB sent at the 4 ports' 48 GB/s,
not the hierarchical reading's 68 GB/s busBW, which no ring over those ports can reach).

``ring`` keeps the textbook α–β ring (Hockney's model: steps x α + bytes / bandwidth;
Thakur, Rabenseifner & Gropp 2005) at a link's datasheet figures, for the lessons that
compare the two readings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.validate import UNKNOWN_BARE, is_int, is_number, one_of
from labs.hardware.links import Cluster
from labs.hardware.nccl import nccl_time

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
    # NCCL's algorithm for the part that crosses nodes ("ring" or "tree"; a hierarchical
    # all-reduce's middle step); "" where nothing crosses nodes.
    across: str = ""


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


def nccl_collective(kind: str, size: float, group: int, cluster: Cluster,
                    per_node: int | None = None) -> CommCost:
    """``kind`` over ``group`` GPUs of ``cluster`` with the algorithms NCCL itself picks
    among (``labs.hardware.nccl.nccl_time``: ring, tree, NVLS): what a framework's plain
    ``torch.distributed`` call runs. A TP group's collectives (Megatron's f and g) are timed
    by this one function everywhere: EP04's "one collective" and every layer's
    (``labs.parallel.layer_time``). Across nodes a ring's busBW is bounded by the ports it
    crosses (nccl-tests doc/PERFORMANCE.md: the bus bandwidth "should reflect the speed of
    the hardware bottleneck"), here the group's share of each node's NICs.

    ``per_node`` is how many members share a node; by default the group is packed into as
    few nodes as possible (a TP group); a DP group strided across nodes has ``per_node`` 1.
    """
    _check(kind, size, group, per_node)
    g = min(group, cluster.gpus_per_node if per_node is None else per_node,
            cluster.gpus_per_node)
    nodes = math.ceil(group / g)
    t = nccl_time(kind, size, group, cluster, per_node)
    if kind == "p2p":
        return CommCost(kind, group, size, size if group > 1 else 0.0, t.seconds, "direct",
                        t.bottleneck)
    sent = _FACTOR[kind] * (group - 1) / group * size
    return CommCost(kind, group, size, sent, t.seconds, t.algorithm, t.bottleneck,
                    t.algorithm if nodes > 1 else "")


def collective(kind: str, size: float, group: int, cluster: Cluster,
               per_node: int | None = None) -> CommCost:
    """Cost of ``kind`` over ``group`` GPUs of ``cluster``: ``nccl_collective``, or for an
    all-reduce across nodes the hierarchical one where it is faster (the data-parallel
    lessons' gradient all-reduce, module docstring).

    ``per_node`` is how many members share a node; by default the group is packed into as
    few nodes as possible (a TP group); a DP group strided across nodes has ``per_node`` 1.
    """
    best = nccl_collective(kind, size, group, cluster, per_node)
    g = min(group, cluster.gpus_per_node if per_node is None else per_node,
            cluster.gpus_per_node)
    nodes = math.ceil(group / g)
    if kind == "all_reduce" and nodes > 1 and g > 1:
        # Reduce-scatter in the node, all-reduce S/g across the nodes (g such rings share the
        # node's ports: one member per node each), all-gather in the node.
        local = nccl_time("reduce_scatter", size, g, cluster, g).seconds \
            + nccl_time("all_gather", size, g, cluster, g).seconds
        across = nccl_time("all_reduce", size / g, nodes, cluster, 1)
        if local + across.seconds < best.seconds:
            moved = 2 * (g - 1) / g * size + 2 * (nodes - 1) / nodes * size / g
            best = CommCost(kind, group, size, moved, local + across.seconds, "hierarchical",
                            across.bottleneck, across.algorithm)
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
