"""Where each rank of a job sits on the cluster, and which of its groups stay inside a node.

A cluster is ``nodes x gpus_per_node`` GPUs; global rank r runs on node r // gpus_per_node, slot
r % gpus_per_node (torchrun/SLURM assign ranks node by node, and Megatron-LM builds its groups
from the global rank: megatron/core/parallel_state.py, ``RankGenerator``). The groups come from
``ParallelLayout.groups`` in Megatron's order (TP fastest, PP slowest; the experts' grid
expert-TP, EP, expert-DP, PP), so a rank map shows at a glance whether TP (or EP) traffic stays
on the node's NVLink or has to cross the network.

``GpuColouring`` is the generic input of a rank-map figure (``app/charts/rank_map.py``): one
category per GPU plus its name. EP07 colours by parallel group; other labs (the 3D recipe,
RL placement) may colour by any other role by building a ``GpuColouring`` themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.core.limits import MAX_RANK_MAP_GPUS, MOE_GROUP_KINDS
from labs.core.validate import one_of
from labs.hardware.comm import nccl_collective
from labs.hardware.links import Cluster
from labs.hardware.nccl import nccl_time
from labs.parallel.layout import DEGREE_NAMES, DENSE_ORDER, EXPERT_ORDER, ParallelLayout

GROUP_TITLES = {**{k: v.removesuffix(" degree") for k, v in DEGREE_NAMES.items()},
                "edp": "expert data parallel"}
GROUP_SHORT = {"tp": "TP", "cp": "CP", "dp": "DP", "pp": "PP", "ep": "EP", "etp": "expert-TP",
               "edp": "expert-DP"}


@dataclass(frozen=True)
class GpuColouring:
    """One colouring of a cluster's GPUs, the input of ``rank_map_figure``.

    ``category[r]`` is the category (group, role) of global rank r, an index into ``names``;
    rank r sits on node r // gpus_per_node, slot r % gpus_per_node. ``title`` says what is
    coloured ("TP groups", "roles"). Ranks need not fill the last node: GPUs past
    ``len(category)`` are drawn as idle.
    """

    title: str
    gpus_per_node: int
    category: tuple[int, ...]
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.category or len(self.category) > MAX_RANK_MAP_GPUS:
            raise LabInputError("gpus", f"a rank map draws 1 to {MAX_RANK_MAP_GPUS:,} GPUs "
                                        f"(got {len(self.category):,})")
        if self.gpus_per_node < 1:
            raise LabInputError("gpus_per_node", "a node holds at least one GPU")
        if any(not 0 <= c < len(self.names) for c in self.category):
            raise LabInputError("category", "every GPU's category must name one of names")

    @property
    def nodes(self) -> int:
        return -(-len(self.category) // self.gpus_per_node)

    def members(self, category: int) -> tuple[int, ...]:
        return tuple(r for r, c in enumerate(self.category) if c == category)

    def nodes_spanned(self) -> tuple[int, ...]:
        """How many nodes each category's GPUs occupy (1 = inside one node)."""
        spans: list[set[int]] = [set() for _ in self.names]
        for rank, cat in enumerate(self.category):
            spans[cat].add(rank // self.gpus_per_node)
        return tuple(len(s) for s in spans)


@dataclass(frozen=True)
class GroupSummary:
    """One kind of group of a layout on a cluster."""

    kind: str  # "tp", "ep", ...
    size: int  # GPUs per group
    count: int  # groups of this kind
    nodes_spanned: int  # the most nodes any one group of this kind covers
    inside_node: bool  # every group of this kind sits inside one node


# A slider move (skew, capacity) keeps the layout: reuse its groups. 512 entries (each at most
# the world size's ints): a class's EP07 moves asked for 1,955 in 3,000 answers, 346 of them
# new to 128 entries (issue 31).
@lru_cache(maxsize=512)
def group_of_rank(layout: ParallelLayout, kind: str) -> tuple[int, ...]:
    """The index of each rank's ``kind`` group, numbered as ``layout.groups(kind)`` lists them
    (by their lowest rank). A rank's coordinates are the digits of
    its number in Megatron's mixed radix (TP fastest ... PP slowest, or expert-TP, EP,
    expert-DP, PP), and its group is fixed by the digits of the dimensions *not* in ``kind``."""
    names = kind.split("-")
    expert = any(n in ("ep", "etp", "edp") for n in names)
    order = EXPERT_ORDER if expert else DENSE_ORDER
    sizes = ({"etp": layout.etp, "ep": layout.ep, "edp": layout.expert_dp, "pp": layout.pp}
             if expert else {n: getattr(layout, n) for n in DENSE_ORDER})
    if any(n not in sizes for n in names):
        raise LabInputError("group", f"unknown group {kind!r}")
    radix = [(sizes[n], n in names) for n in order]
    # Groups numbered by their lowest rank are numbered by the mixed-radix value of the digits
    # *not* in ``kind`` (the lowest rank of a group has its member digits 0, and a slower
    # digit outweighs every faster one), so each rank's group is that value: built dimension
    # by dimension, slowest first, as ranks count (a list pass per dimension, not a divmod per
    # rank and dimension: 6.8 ms for EP07's six kinds on 2,048 ranks before; issue 31).
    if math.prod(size for size, _ in radix) != layout.world_size:
        return _group_of_rank_by_digits(layout.world_size, radix)  # degrees that do not tile
    weights, weight = [], 1
    for size, member in radix:  # fastest first
        weights.append(0 if member else weight)
        weight *= 1 if member else size
    out = [0]
    for (size, _), step in zip(reversed(radix), reversed(weights), strict=True):
        out = ([v + digit * step for v in out for digit in range(size)] if step
               else [v for v in out for _ in range(size)])
    return tuple(out)


def _group_of_rank_by_digits(world: int, radix: list[tuple[int, bool]]) -> tuple[int, ...]:
    """group_of_rank rank by rank, for degrees whose product is not the world size."""
    index: dict[tuple[int, ...], int] = {}
    out = []
    for rank in range(world):
        key, rest = [], rank
        for size, member in radix:
            rest, digit = divmod(rest, size)
            if not member:
                key.append(digit)
        out.append(index.setdefault(tuple(key), len(index)))
    return tuple(out)


def group_colouring(layout: ParallelLayout, kind: str, gpus_per_node: int) -> GpuColouring:
    """Every rank of ``layout`` coloured by its ``kind`` group (Megatron's groups, in order)."""
    one_of("group", kind, MOE_GROUP_KINDS, "", "colour by one of {choices}")
    world = layout.world_size
    if world > MAX_RANK_MAP_GPUS:
        raise LabInputError("gpus", f"a rank map draws at most {MAX_RANK_MAP_GPUS:,} GPUs; "
                                    f"this job has {world:,}")
    category = group_of_rank(layout, kind)
    short = GROUP_SHORT[kind]
    names = tuple(f"{short} group {i}" for i in range(max(category) + 1))
    return GpuColouring(f"{short} groups ({GROUP_TITLES[kind]})", gpus_per_node, category,
                        names)


@lru_cache(maxsize=128)
def group_summaries(layout: ParallelLayout, gpus_per_node: int,
                    kinds: tuple[str, ...] = MOE_GROUP_KINDS) -> tuple[GroupSummary, ...]:
    """For each kind of group: its size, count and whether every group stays in one node."""
    out = []
    for kind in kinds:
        spans: dict[int, set[int]] = {}
        for rank, group in enumerate(group_of_rank(layout, kind)):
            spans.setdefault(group, set()).add(rank // gpus_per_node)
        widest = max(len(nodes) for nodes in spans.values())
        out.append(GroupSummary(kind, layout.world_size // len(spans), len(spans), widest,
                                widest == 1))
    return tuple(out)


def members_per_node(members: tuple[int, ...], gpus_per_node: int) -> int:
    """The most members of one group that share a node (how a collective over the group
    splits between the scale-up link and the network)."""
    counts: dict[int, int] = {}
    for rank in members:
        counts[rank // gpus_per_node] = counts.get(rank // gpus_per_node, 0) + 1
    return max(counts.values())


# Where a group's traffic runs (``GroupLink.tier``): one GPU (no traffic), the node's scale-up
# link, the network under one leaf switch, or across the spine (labs.hardware.nccl, "The leaf
# and the spine").
TIERS = {"gpu": "one GPU: no traffic", "nvlink": "inside a node (NVLink)",
         "leaf": "network, under one leaf", "spine": "network, across the spine"}


@dataclass(frozen=True)
class GroupLink:
    """One kind of group's collective on the cluster: where it runs and the bandwidth each
    GPU gets from it (bytes it sends / seconds)."""

    kind: str
    collective: str  # "all_reduce", "all_to_all", "p2p"
    what: str  # what it moves ("one layer's activations", "the dense gradients")
    bytes_per_gpu: float  # each GPU sends
    seconds: float
    per_node: int  # members of one group on a node
    nodes: int  # nodes one group spans
    leaves: int  # leaves it spans (placed leaf by leaf)
    tier: str  # a key of TIERS

    @property
    def bandwidth(self) -> float:
        """Bytes/s each GPU moves: what the group's collective gets from its links."""
        return self.bytes_per_gpu / self.seconds if self.seconds > 0 else 0.0


def group_place(layout: ParallelLayout, kind: str, cluster: Cluster) -> tuple[int, int, int, str]:
    """(members per node, nodes, leaves, tier) of the first ``kind`` group, its members where
    Megatron's order places them and the job's nodes filled leaf by leaf. NCCL's model
    (labs.hardware.nccl) times a group over ``nodes`` nodes as if they sat leaf by leaf; a
    strided group (expert-DP, PP) may span more leaves than that, and ``leaves`` counts them."""
    gpn = cluster.gpus_per_node
    members = tuple(r for r, g in enumerate(group_of_rank(layout, kind)) if g == 0)
    per_node = members_per_node(members, gpn)
    nodes = math.ceil(len(members) / per_node)
    leaves = (len({r // gpn // cluster.leaf_nodes for r in members}) if cluster.leaf_nodes
              else 1)
    tier = ("gpu" if len(members) == 1 else "nvlink" if nodes == 1
            else "leaf" if leaves == 1 else "spine")
    return per_node, nodes, leaves, tier


def spine_flows(layout: ParallelLayout, kind: str, cluster: Cluster, ring: bool) -> int:
    """Flows of every ``kind`` group that leave the first group's first member's leaf on its
    rail at once (labs.hardware.nccl, "The leaf and the spine"): each group runs one ring (or,
    not ``ring``, a chain of sends: PP's stage to stage) over its members' nodes in rank order
    on each rail it has members on, and every group of a kind runs at once (DP's all-reduce,
    expert-DP's, PP's sends in steady 1F1B). A rail-aligned ring over contiguous nodes leaves
    the leaf once; many small strided groups (PP, expert-DP pairs) leave it once per node."""
    gpn, leaf = cluster.gpus_per_node, cluster.leaf_nodes
    if leaf is None:
        return 0
    ids = group_of_rank(layout, kind)
    first = ids.index(0)
    rail, home = first % gpn, first // gpn // leaf
    chains: dict[int, list[int]] = {}
    for r in range(rail, len(ids), gpn):
        chains.setdefault(ids[r], []).append(r // gpn)
    flows = 0
    for nodes in chains.values():
        edges = list(zip(nodes, nodes[1:], strict=False))
        if ring and len(nodes) > 1:
            edges.append((nodes[-1], nodes[0]))
        flows += sum(1 for u, v in edges if u // leaf == home and v // leaf != home)
    return flows


def group_link(layout: ParallelLayout, kind: str, cluster: Cluster, kind_of: str,
               size: float, what: str) -> GroupLink:
    """The first ``kind`` group's ``kind_of`` collective on ``size`` bytes (the full tensor;
    per GPU for p2p), timed by NCCL's model on ``cluster`` (labs.hardware.comm). Where its
    groups cross the spine, their network hops take max(1, flows / uplinks) as long, the
    flows that leave a leaf on one rail at once (``spine_flows``) over the leaf_nodes / r
    uplinks a rail has: r for PP's sends and expert-DP's pairs, whose every node sends across
    at once; max(1, r / leaf_nodes) for a contiguous ring (``labs.hardware.nccl.spine_ring``)."""
    per_node, nodes, leaves, tier = group_place(layout, kind, cluster)
    size_of = getattr(layout, {"edp": "expert_dp"}.get(kind, kind))
    if tier == "spine" and kind_of in ("p2p", "all_reduce"):
        flows = spine_flows(layout, kind, cluster, ring=kind_of != "p2p")
        slow = max(1.0, flows * cluster.oversubscription / cluster.leaf_nodes)
        if kind_of == "p2p":
            t = nccl_time("p2p", size, size_of, cluster, per_node)
            return GroupLink(kind, kind_of, what, size, t.latency + (t.seconds - t.latency) * slow,
                             per_node, nodes, leaves, tier)
        # The ring's network hops at 1/slow of a NIC: a leaf of one node at slow : 1 (what
        # ``spine_ring`` charges a ring over more than one node).
        cluster = replace(cluster, leaf_nodes=1, oversubscription=slow)
    cost = nccl_collective(kind_of, size, size_of, cluster, per_node)
    return GroupLink(kind, kind_of, what, cost.bytes_per_gpu, cost.seconds, per_node, nodes,
                     leaves, tier)
