"""EP07's shapes: a mixture-of-experts layer laid out on a cluster (``MoEInput``, every control
checked where it is built, in page order, then the world-size and model rules) and one
forward pass of it (``Routing`` per skew, ``MoEResult``). ``labs.experts.layer`` computes a
``Routing``, ``labs.experts.lab`` the ``MoEResult``."""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.limits import (
    MAX_CAPACITY_FACTOR,
    MAX_MOE_TOKENS,
    MAX_NODES,
    MAX_SKEW,
    MOE_GROUP_KINDS,
)
from labs.core.validate import number, one_of, whole
from labs.hardware.links import Cluster
from labs.model.spec import ModelSpec
from labs.parallel.dispatch import check_ep_dispatch
from labs.parallel.layout import ParallelLayout, problems, world_problems
from labs.parallel.rank_map import GpuColouring, GroupLink, GroupSummary


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
    # How the tokens travel (labs.parallel.dispatch): NCCL's all-to-all, a copy per routed
    # expert, or DeepEP's, a copy per destination node over the network and per destination
    # GPU on NVLink.
    ep_dispatch: str = "alltoall"
    # An override of the GPU's measured full-wave GEMM rate for the experts, a fraction of its
    # dense peak (None: the grouped GEMMs at their shapes' measured rates).
    mfu: float | None = None
    group: str = "ep"  # which groups the rank map colours (labs.core.limits.MOE_GROUP_KINDS)

    def __post_init__(self) -> None:  # one check per control, in page order
        if not isinstance(self.model, ModelSpec) or not self.model.is_moe:
            name = getattr(self.model, "name", "this model")
            raise LabInputError("model", f"{name} has no experts: choose a mixture-of-experts "
                                         "model (Mixtral, DeepSeek, GLM-4.7)")
        if not isinstance(self.cluster, Cluster):
            raise LabInputError("link", "choose a cluster preset (its GPUs and links)")
        whole("nodes", self.nodes, 1, MAX_NODES, "the number of nodes")
        check_ep_dispatch(self.ep_dispatch)
        for name, value, high in (("skew", self.skew, MAX_SKEW),
                                  ("capacity_factor", self.capacity_factor, MAX_CAPACITY_FACTOR),
                                  ("mfu", 0.5 if self.mfu is None else self.mfu, 1.0)):
            number(name, value, 0, high, name)
        if self.mfu == 0:
            raise LabInputError("mfu", "MFU must be above 0")
        whole("tokens", self.tokens, 1, MAX_MOE_TOKENS, "tokens per GPU")
        one_of("group", self.group, MOE_GROUP_KINDS, "", "the rank map colours one of {choices}")
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
    # Each kind of group's traffic on the cluster's links (labs.experts.lab.network): TP, PP,
    # DP, EP, expert-DP where their degree is above 1.
    network: tuple[GroupLink, ...] = ()
    # The same groups on the same leaves with a 1:1 spine (``network`` itself where the spine
    # is 1:1): which of them an oversubscribed spine slowed (EP07 step 7).
    network_nonblocking: tuple[GroupLink, ...] = ()
    # The experts' GEMMs against the tokens that reach one expert
    # (labs.experts.lab.expert_efficiency): (tokens, share of the GPU's BF16 peak) on a sweep,
    # this state's mean routed expert, and the shared expert (every local token; None without
    # one).
    gemm_curve: tuple[tuple[int, float], ...] = ()
    tokens_per_expert: float = 0.0
    gemm_efficiency: float = 0.0
    shared_tokens: int | None = None
    shared_efficiency: float | None = None
    # The same GEMMs timed one expert at a time (an ungrouped loop of kernels: part-empty
    # waves), the shared expert's forward seconds, and the GPU's achieved matmul FLOP/s and
    # HBM bytes/s the roofline uses (their ratio: the tokens an expert needs to be
    # compute-bound).
    gemm_curve_alone: tuple[tuple[int, float], ...] = ()
    alone_efficiency: float = 0.0
    shared_s: float | None = None
    matmul_rate: float = 0.0
    hbm_rate: float = 0.0
    # This state's balance loss, E·Σ f·P (its curve against skew: labs.experts.lab.balance_of).
    balance_loss: float = 1.0

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
