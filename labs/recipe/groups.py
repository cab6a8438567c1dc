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


@lru_cache(maxsize=512)
def spread(layout: ParallelLayout, kind: str, gpus_per_node: int) -> Spread:
    """Where the groups of ``kind`` ("tp", "cp", "dp-cp", "ep"...) fall, node = rank // g.

    Every group is the first one shifted by a base, and a base b = q·g + r puts its members on
    the nodes q + (r + offset) // g: how a group sits depends on b mod g alone. So only the
    distinct residues of the bases are walked (at most g, each over one group), not the
    world's ranks: the same worst group as ``layout.groups``, at 16,384 GPUs too."""
    g = gpus_per_node
    offsets, fixed = layout.group_pattern(kind)
    residues = {0}
    for stride, size in fixed:  # i·stride mod g repeats with a period of at most g
        residues = {(r + i * stride) % g for r in residues for i in range(min(size, g))}
    nodes, per_node = 1, g
    for r in residues:
        counts = Counter([(r + o) // g for o in offsets])
        nodes = max(nodes, len(counts))
        per_node = min(per_node, min(counts.values()))
    return Spread(len(offsets), nodes, min(per_node, len(offsets)))

