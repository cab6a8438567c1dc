"""EP07 Experts: a mixture-of-experts layer laid out by expert parallelism, one forward pass.

A MoE layer replaces the MLP with E experts and a router: y(x) = Σ_{i in top-k(x)} g_i(x)·E_i(x)
(Shazeer et al. 2017, arXiv:1701.06538; GShard, Lepikhin et al. 2020, arXiv:2006.16668).
Memory holds every expert (total parameters); a token computes with k of them (active).

Expert parallelism (EP) puts E/EP experts on each GPU of an EP group; experts are numbered
contiguously, EP rank r holding experts r·E/EP ... (r+1)·E/EP − 1 (Megatron Core MoE,
``local_expert_indices``). One MoE layer's forward pays two all-to-alls over the EP group
(Megatron's ``MoEAlltoAllTokenDispatcher``; GShard sec 2.2):
- dispatch: every GPU sends each of its T tokens' k copies to the GPUs holding their experts;
- expert compute: each GPU runs its experts on what it received;
- combine: the results travel back the same way, and the k outputs are summed with their gates.
Each all-to-all is a collective, so each phase ends when its slowest member ends: the layer
takes max(dispatch) + max(compute) + max(combine) over the GPUs, and one hot expert makes one
GPU the slowest in all three.

Routing here is deterministic, not sampled: a ``skew`` from 0 to 1 moves each token's chance of
picking expert 0 from k/E (uniform) to 1 (every token picks it), the other experts sharing
the remaining k − p_0 equally (a token picks k *distinct* experts, so no expert can receive
more than every token once). Every GPU routes its T tokens with that distribution; counts are
whole tokens by largest remainder, so a URL fully describes the state.

Capacity (Switch Transformer, Fedus et al. 2021, arXiv:2101.03961 sec 2.2): each expert takes
at most C = ceil(capacity_factor · T·k / E) tokens from each GPU (Megatron's
``get_capacity`` on the local tokens x top-k); the rest are dropped and pass through the
residual connection only. A capacity factor of 0 means no limit (dropless, as Megatron's
default and DeepSeek-V3 train).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.limits import (
    MAX_CAPACITY_FACTOR,
    MAX_MOE_TOKENS,
    MAX_NODES,
    MAX_RANK_MAP_GPUS,
    MAX_SKEW,
    MOE_GROUP_KINDS,
)
from labs.core.validate import number, whole
from labs.hardware.comm import collective
from labs.hardware.links import Cluster
from labs.model.flops import expert_flops_per_token, model_flops_per_token
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout, problems, world_problems
from labs.parallel.rank_map import (
    GpuColouring,
    GroupSummary,
    group_colouring,
    group_of_rank,
    group_summaries,
    members_per_node,
)
from labs.schedules.stages import stage_params

ACTIVATION_BYTES = 2  # bf16 hidden states on the wire (DeepSeek-V3 sends FP8 in dispatch)


@dataclass(frozen=True)
class MoEInput:
    model: ModelSpec
    cluster: Cluster
    nodes: int = 2
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 8
    etp: int = 1
    skew: float = 0.0  # 0 = uniform routing, 1 = every token picks expert 0
    capacity_factor: float = 0.0  # 0 = no capacity limit (dropless)
    tokens: int = 4096  # tokens per GPU entering each MoE layer (one micro-batch)
    mfu: float = 0.4  # share of the BF16 peak the experts' matmuls reach
    group: str = "ep"  # which groups the rank map colours (labs.core.limits.MOE_GROUP_KINDS)

    def __post_init__(self) -> None:  # one check per control, in page order
        if not isinstance(self.model, ModelSpec) or not self.model.is_moe:
            name = getattr(self.model, "name", "this model")
            raise LabInputError("model", f"{name} has no experts: choose a mixture-of-experts "
                                         "model (Mixtral, DeepSeek, GLM-4.7)")
        if not isinstance(self.cluster, Cluster):
            raise LabInputError("link", "choose a cluster preset (its GPUs and links)")
        whole("nodes", self.nodes, 1, MAX_NODES, "the number of nodes")
        for name, value, high in (("skew", self.skew, MAX_SKEW),
                                  ("capacity_factor", self.capacity_factor, MAX_CAPACITY_FACTOR),
                                  ("mfu", self.mfu, 1.0)):
            number(name, value, 0, high, name)
        if self.mfu == 0:
            raise LabInputError("mfu", "MFU must be above 0")
        whole("tokens", self.tokens, 1, MAX_MOE_TOKENS, "tokens per GPU")
        if self.group not in MOE_GROUP_KINDS:
            raise LabInputError("group", f"the rank map colours one of "
                                         f"{', '.join(MOE_GROUP_KINDS)}")
        # World-size rules first (dense grouping TP·PP·CP, expert grouping EP·expert-TP·PP),
        # then the model's own (heads by TP, experts by EP); uneven stages are allowed, as
        # Megatron's --decoder-first/last-pipeline-num-layers (DeepSeek-V3: 61 layers, PP16).
        found = world_problems(self.world_size, tp=self.tp, pp=self.pp, cp=self.cp,
                               ep=self.ep, etp=self.etp)
        if found:
            raise found[0]
        found = problems(self.model, self.layout, uneven_pp=True)
        if found:
            raise found[0]

    @property
    def world_size(self) -> int:
        return self.nodes * self.cluster.gpus_per_node

    @property
    def layout(self) -> ParallelLayout:
        """DP is what divides the rest: world / (TP·PP·CP), as Megatron derives it."""
        return ParallelLayout(tp=self.tp, pp=self.pp, cp=self.cp,
                              dp=max(1, self.world_size // (self.tp * self.pp * self.cp)),
                              ep=self.ep, etp=self.etp)


@dataclass(frozen=True)
class Routing:
    """One EP group's tokens in one MoE layer, for a given skew."""

    pick_chance: tuple[float, ...]  # per expert: chance a token picks it (sums to k)
    routed_per_expert: tuple[int, ...]  # token copies the router sends each expert
    dropped_per_expert: tuple[int, ...]  # of those, over capacity
    capacity: int | None  # per expert over the EP group (None = no limit)
    tokens_per_gpu: tuple[int, ...]  # token copies each EP rank's experts compute
    received_bytes: tuple[float, ...]  # dispatch: bytes each EP rank receives from the others
    sent_bytes: tuple[float, ...]  # dispatch: bytes each EP rank sends to the others
    dispatch_s: tuple[float, ...]  # per EP rank, the all-to-all's time for its traffic
    compute_s: tuple[float, ...]
    layer_s: float


@dataclass(frozen=True)
class MoEResult:
    input: MoEInput
    layout: ParallelLayout
    experts_per_gpu: int
    ep_group: tuple[int, ...]  # global ranks of the first EP group
    ep_per_node: int  # EP group members sharing one node
    routing: Routing
    balanced: Routing  # the same layout with uniform routing
    slowest_gpu: int  # EP rank that sets the layer's time
    max_over_mean: float  # routed tokens: busiest expert / mean expert
    gpu_max_over_mean: float  # computed tokens: busiest GPU / mean GPU
    dropped_fraction: float
    expert_flops_per_token: float  # forward, one expert
    params: int  # total: what memory holds
    active_params: int  # what one token computes with
    expert_params: int  # all routed experts
    params_per_gpu: float  # weights held by one GPU of the heaviest pipeline stage
    experts_per_gpu_params: float  # of which routed experts
    flops_per_token: float  # training FLOPs per token (6·active + attention, s = 4,096)
    dense_equivalent_flops: float  # the same if every parameter were active
    groups: tuple[GroupSummary, ...]  # each kind of group: size, count, inside a node or not
    rank_map: GpuColouring | None  # every GPU by its ``input.group`` group (None: too many)

    @property
    def dispatch_s(self) -> float:
        return max(self.routing.dispatch_s)

    @property
    def compute_s(self) -> float:
        return max(self.routing.compute_s)

    @property
    def layer_s(self) -> float:
        return self.routing.layer_s

    @property
    def slowdown(self) -> float:
        """Layer time against the same layout with perfectly balanced routing."""
        return self.routing.layer_s / self.balanced.layer_s


def pick_chances(experts: int, top_k: int, skew: float) -> tuple[float, ...]:
    """Each expert's chance of being among a token's k picks: expert 0 from k/E to 1 as skew
    goes 0 -> 1, the rest sharing what is left equally (the chances sum to k)."""
    hot = top_k / experts + skew * (1 - top_k / experts)
    rest = (top_k - hot) / (experts - 1) if experts > 1 else 0.0
    return (hot, *([rest] * (experts - 1)))


def whole_tokens(tokens: int, chances: tuple[float, ...]) -> tuple[int, ...]:
    """Token copies per expert from one GPU's ``tokens``: tokens·p rounded by largest
    remainder (ties to the lower expert), so they sum to tokens·k exactly."""
    exact = [tokens * p for p in chances]
    counts = [math.floor(x + 1e-9) for x in exact]
    short = round(sum(exact)) - sum(counts)
    order = sorted(range(len(exact)), key=lambda e: (-(exact[e] - counts[e]), e))
    for e in order[:max(0, short)]:
        counts[e] += 1
    return tuple(counts)


def route(inp: MoEInput, skew: float, per_node: int) -> Routing:
    m, ep = inp.model, inp.ep
    per_gpu = m.experts // ep
    local = whole_tokens(inp.tokens, pick_chances(m.experts, m.top_k, skew))
    cap = (math.ceil(inp.capacity_factor * inp.tokens * m.top_k / m.experts)
           if inp.capacity_factor else None)
    kept = [n if cap is None else min(n, cap) for n in local]
    # Every GPU of the group routes alike, so each expert gets EP times one GPU's share.
    on_gpu = [sum(kept[g * per_gpu:(g + 1) * per_gpu]) for g in range(ep)]
    total_kept = sum(kept)
    token_bytes = m.hidden * ACTIVATION_BYTES
    received = tuple((ep - 1) * on_gpu[g] * token_bytes for g in range(ep))
    sent = tuple((total_kept - on_gpu[g]) * token_bytes for g in range(ep))
    flops = expert_flops_per_token(m)
    peak = inp.cluster.gpu.bf16_flops * inp.mfu
    # Expert-TP splits each expert's matmuls over etp GPUs (Megatron's expert-tensor-parallel
    # group); the all-gather of tokens inside that group is not priced here.
    compute = tuple(ep * on_gpu[g] * flops / (peak * inp.etp) for g in range(ep))
    dispatch = []
    for g in range(ep):
        traffic = max(received[g], sent[g])
        if ep == 1 or traffic == 0:
            dispatch.append(0.0)
            continue
        # A receiver hears equally from every peer, which is the even spread labs.hardware.comm's
        # all-to-all prices: (N−1)/N·S per GPU, split between NVLink and the network by how
        # many members share the node. S is the tensor whose (N−1)/N share is this traffic.
        size = traffic * ep / (ep - 1)
        dispatch.append(collective("all_to_all", size, ep, inp.cluster, per_node).seconds)
    # Combine sends the same bytes back the other way: the same time per GPU.
    layer = 2 * max(dispatch) + max(compute)
    return Routing(
        pick_chance=pick_chances(m.experts, m.top_k, skew),
        routed_per_expert=tuple(ep * n for n in local),
        dropped_per_expert=tuple(ep * (n - k) for n, k in zip(local, kept, strict=True)),
        capacity=None if cap is None else ep * cap,
        tokens_per_gpu=tuple(ep * n for n in on_gpu),
        received_bytes=received, sent_bytes=sent, dispatch_s=tuple(dispatch),
        compute_s=compute, layer_s=layer)


def simulate_moe(inp: MoEInput) -> MoEResult:
    m, layout = inp.model, inp.layout
    ep_ids = group_of_rank(layout, "ep")
    ep_group = tuple(r for r, g in enumerate(ep_ids) if g == 0)
    per_node = members_per_node(ep_group, inp.cluster.gpus_per_node)
    routing = route(inp, inp.skew, per_node)
    balanced = route(inp, 0.0, per_node)
    per_gpu = routing.tokens_per_gpu
    routed = routing.routed_per_expert
    slowest = max(range(inp.ep), key=lambda g: (routing.compute_s[g] + 2 * routing.dispatch_s[g],
                                                -g))
    # The heaviest pipeline stage's weights on one GPU: TP splits projections, EP x expert-TP
    # splits the routed experts, norms and routers are copied (labs.schedules.stages).
    stages = stage_params(m, inp.pp)
    held = [(s.tp_split / inp.tp + s.replicated, s.experts / (inp.ep * inp.etp))
            for s in stages]
    dense_local, expert_local = max(held, key=sum)
    seq = 4096
    dense_flops = model_flops_per_token(m, seq) + 6 * (m.params - m.active_params)
    return MoEResult(
        input=inp, layout=layout, experts_per_gpu=m.experts // inp.ep, ep_group=ep_group,
        ep_per_node=per_node, routing=routing, balanced=balanced, slowest_gpu=slowest,
        max_over_mean=max(routed) / (sum(routed) / len(routed)),
        gpu_max_over_mean=max(per_gpu) / (sum(per_gpu) / len(per_gpu)) if sum(per_gpu) else 1.0,
        dropped_fraction=sum(routing.dropped_per_expert) / sum(routed),
        expert_flops_per_token=expert_flops_per_token(m),
        params=m.params, active_params=m.active_params, expert_params=m.expert_params,
        params_per_gpu=dense_local + expert_local, experts_per_gpu_params=expert_local,
        flops_per_token=model_flops_per_token(m, seq), dense_equivalent_flops=dense_flops,
        groups=group_summaries(layout, inp.cluster.gpus_per_node),
        rank_map=(group_colouring(layout, inp.group, inp.cluster.gpus_per_node)
                  if layout.world_size <= MAX_RANK_MAP_GPUS else None),
    )
