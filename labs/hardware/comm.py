"""Collective communication cost on a cluster: what NCCL runs (``labs.hardware.nccl``).

With S the full tensor's bytes and N GPUs in the group, each GPU sends:
- ring all-reduce: 2(N−1)/N · S (reduce-scatter then all-gather; Patarasuk & Yuan 2009);
- all-gather, reduce-scatter: (N−1)/N · S;
- all-to-all: (N−1)/N · S (its S bytes minus the share it keeps), pairwise;
- point-to-point: S.
Its time is NCCL's own model (``labs.hardware.nccl.nccl_time``: the fastest of its ring and
tree algorithms and LL, LL128 and Simple protocols, base and per-hop latencies from
NVIDIA/nccl tuning.cc, at the bus bandwidth nccl-tests measures on each link). One collective
has one time: ``nccl_collective`` times every group's collectives, a data-parallel gradient
all-reduce (EP02, EP03, the rank map, EP08's ``labs.recipe.dp_time``) as well as a
tensor-parallel group's (EP04, ``labs.parallel.layer_time``). Across nodes NCCL runs a ring or
a tree (NCCL_ALGO's defaults; NVIDIA/nccl-tests#196: "on two nodes, NCCL uses the tree (or
nvlstree)"), not a two-level hierarchical all-reduce (Horovod's, Sergeev & Del Balso 2018,
arXiv:1802.05799), which it has no algorithm for; CollNet needs a SHARP-capable network and
NVLSTree an NVLS node of NCCL 2.18 on, which the lab's 2.8-era tuning model leaves out (so
the lab errs slow where they run). A ring across nodes runs at the busBW of the ports it
crosses (nccl-tests doc/PERFORMANCE.md: the bus bandwidth "should reflect the speed of the
hardware bottleneck"): 64 GPUs in 8 servers of one 100 Gb/s port send 2·63/64 x 14 GB through
each server's port at its 12 GB/s busBW.

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
    algorithm: str  # "ring", "tree", "nvls", "pairwise" or "direct"
    bottleneck: str  # the link that bounds it
    # NCCL's algorithm where the collective crosses nodes ("ring" or "tree"); "" where
    # nothing crosses nodes.
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
    ``torch.distributed`` call runs: every collective of the lab, a TP group's (Megatron's f
    and g) and a DP group's gradient all-reduce alike (module docstring). Across nodes a
    ring's busBW is bounded by the ports it crosses (nccl-tests doc/PERFORMANCE.md: the bus
    bandwidth "should reflect the speed of the hardware bottleneck"),
    here the group's share of each node's NICs.

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
    comm = nccl_collective("all_reduce", grad_bytes, gpus, cluster).seconds
    if weak:
        speedup = gpus * compute_seconds / (compute_seconds + comm)
    else:
        speedup = compute_seconds / (compute_seconds / gpus + comm)
    return Scaling(gpus, compute_seconds, comm, speedup, speedup / gpus)
