"""Where a layout's rank groups fall on the nodes (``spread``): how many nodes its worst group
of each kind spans and how few of its members share a node, which is what NCCL's ring is
bounded by (``labs.hardware.nccl``). The step model prices every TP, CP, EP, PP and DP
collective on it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from labs.parallel.layer_time import Group
from labs.parallel.layout import ParallelLayout


@dataclass(frozen=True)
class Spread:
    """How one kind of rank group sits on the nodes (its worst group)."""

    size: int
    nodes: int  # most nodes any one group spans
    per_node: int  # fewest members sharing a node, in the worst group: the ring's bottleneck

    @property
    def group(self) -> Group:
        return Group(self.size, self.per_node)


@lru_cache(maxsize=4096)
def spread(layout: ParallelLayout, kind: str, gpus_per_node: int) -> Spread:
    """Where the groups of ``kind`` ("tp", "cp", "dp-cp", "ep"...) fall, node = rank // g.

    Every group is the first one shifted by a base, and a base b = q·g + r puts its members on
    the nodes q + (r + offset) // g: how a group sits depends on b mod g alone. So only the
    distinct residues of the bases are walked (at most g, each over one group), not the
    world's ranks: the same worst group as ``layout.groups``, at 16,384 GPUs too."""
    offsets, fixed = layout.group_pattern(kind)
    return _spread_of(offsets, fixed, (), gpus_per_node)


def _spread_of(offsets, fixed, bases, g: int) -> Spread:
    """The worst group of ``offsets`` shifted by every combination of ``fixed``'s (stride,
    size) dimensions and of ``bases`` (more offsets, listed), on nodes of ``g`` GPUs."""
    residues = {0}
    for stride, size in fixed:  # i·stride mod g repeats with a period of at most g
        residues = {(r + i * stride) % g for r in residues for i in range(min(size, g))}
    if bases:
        residues = {(r + b) % g for r in residues for b in bases}
    nodes, per_node = 1, g
    for r in residues:
        counts = Counter([(r + o) // g for o in offsets])
        nodes = max(nodes, len(counts))
        per_node = min(per_node, min(counts.values()))
    return Spread(len(offsets), nodes, min(per_node, len(offsets)))



@lru_cache(maxsize=512)
def hybrid_spreads(layout: ParallelLayout, kind: str, replicas: int,
                   gpus_per_node: int) -> tuple[Spread, Spread]:
    """HSDP's two groups inside each group of ``kind`` ("dp-cp", or "edp" for the experts),
    split into ``replicas`` replica sets: (the shard group, the replica group).

    The data-parallel dimension is the slowest of the group (Megatron's order; torchtitan's
    mesh ["dp_replicate", "dp_shard", "cp", "tp"] puts the replicas outermost too), so a
    group's ranks, sorted, are its ``replicas`` shard groups one after another: the first
    shard group is the first size/replicas ranks, and a replica group is one rank of each,
    ``size/replicas`` ranks apart in that order. ``replicas`` must divide the group."""
    offsets, fixed = layout.group_pattern(kind)
    n = len(offsets) // replicas
    shard, first = offsets[:n], offsets[::n]
    step = offsets[n] if replicas > 1 else 0
    g = gpus_per_node
    return (_spread_of(shard, (*fixed, (step, replicas)), (), g),
            _spread_of(first, fixed, shard, g))
