"""EP04's shapes: where the TP group talks (``Topology``), the question (``TPInput``, every
control checked where it is built, in page order) and its answer (``TPResult``: the cost of
each degree, a layer's matrices, the ledger against t). ``labs.tensor_parallel.lab`` computes
them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.limits import (
    MAX_MFU,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    MAX_TP,
    MIN_MFU,
    RECOMPUTE,
)
from labs.core.validate import FRACTION, flag, number, one_of, whole
from labs.hardware.comm import CommCost, nccl_collective
from labs.hardware.gpus import GPUSpec
from labs.hardware.links import Cluster, Link, check_peer_link, link_alone
from labs.memory.inputs import MemoryResult
from labs.model.spec import ModelSpec
from labs.parallel.layer_time import tp_collective_count
from labs.parallel.layout import ParallelLayout, problems


@dataclass(frozen=True)
class Topology:
    """Where a TP group's GPUs talk: on one link (a scale-out link puts each GPU in its own
    node, one port each), or packed into a cluster's nodes (crossing nodes once t exceeds a
    node, on the slower inter-node link)."""

    name: str
    link: Link | None = None
    cluster: Cluster | None = None

    def __post_init__(self) -> None:
        if (self.link is None) == (self.cluster is None):
            raise LabInputError("link", "give either one link or a cluster")

    @property
    def max_group(self) -> int | None:
        """Most GPUs a group can span here (a scale-up link's domain), None for no limit."""
        return self.link.domain if self.link is not None and self.link.kind == "scale-up" \
            else None

    def cluster_for(self, gpu: GPUSpec, group: int) -> Cluster:
        """The cluster a group of ``group`` GPUs runs on here: the topology's own, or, for one
        link, the group on it alone (a scale-up link: one node of ``group``; a scale-out
        link: each GPU in its own node, one port each)."""
        if self.cluster is not None:
            return self.cluster
        return link_alone(gpu, self.link, group)

    def collective(self, kind: str, size: float, group: int, gpu: GPUSpec) -> CommCost:
        """One collective of the group, as NCCL runs it (labs.hardware.comm.nccl_collective,
        the function the layer's TP collectives are timed by)."""
        return nccl_collective(kind, size, group, self.cluster_for(gpu, group))

    def slowest_link(self, group: int) -> Link:
        if self.cluster is None:
            return self.link
        c = self.cluster
        return c.intra if group <= c.gpus_per_node else c.inter


@dataclass(frozen=True)
class TPInput:
    model: ModelSpec
    gpu: GPUSpec
    topology: Topology
    tp: int = 8
    sp: bool = True  # sequence parallelism
    seq_len: int = 4096
    micro_batch: int = 1
    # An override of the GPU's measured full-wave GEMM rate, a fraction of its dense peak (the
    # query's old "mfu" control; None: the kernels at their measured rates).
    mfu: float | None = None
    recompute: str = "selective"

    def __post_init__(self) -> None:  # one check per control, in page order
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset")
        check_model(self.model)
        if not isinstance(self.gpu, GPUSpec):
            raise LabInputError("gpu", "choose a GPU preset")
        whole("tp", self.tp, 1, MAX_TP, "the tensor-parallel degree")
        for found in problems(self.model, ParallelLayout(tp=self.tp)):
            if found.field == "tp":
                raise found
        link = self.topology.link
        if link is not None and link.kind == "scale-up":  # a node's GPUs on the link they ship
            check_peer_link(self.gpu, link, "link")  # with (never PCIe between SXM modules)
        most = self.topology.max_group
        if most is not None and self.tp > most:
            raise LabInputError("tp", f"{self.topology.link.name} connects at most {most} GPUs: "
                                      f"TP={self.tp} must cross nodes (choose a cluster)")
        flag("sp", self.sp, "sequence parallelism")
        whole("seq_len", self.seq_len, 1, MAX_SEQ_LEN, "sequence length")
        whole("micro_batch", self.micro_batch, 1, MAX_MICRO_BATCH, "micro-batch size")
        if self.mfu is not None:
            number("mfu", self.mfu, MIN_MFU, MAX_MFU, "MFU", FRACTION)
        one_of("recompute", self.recompute, RECOMPUTE, "recomputation")


def check_model(model: ModelSpec) -> None:
    """This lab draws dense decoder layers with (grouped-query) multi-head attention."""
    if model.is_moe:
        raise LabInputError("model", f"{model.name} is a mixture of experts: its experts are "
                                     "split by expert parallelism (EP07); choose a dense model")
    if model.uses_mla:
        raise LabInputError("model", f"{model.name} uses multi-head latent attention, whose "
                                     "low-rank projections are not split like Q, K and V; "
                                     "choose a dense model")


@dataclass(frozen=True)
class Shapes:
    """One layer's matrices (rows x columns of W in y = xW) and each GPU's share at TP = t."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    gated: bool
    tp: int

    @property
    def heads_per_gpu(self) -> int:
        return self.heads // self.tp

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads each GPU holds; one replica each once TP exceeds the KV heads."""
        return math.ceil(self.kv_heads / self.tp)

    @property
    def ffn_per_gpu(self) -> int:
        return self.ffn // self.tp

    @property
    def qkv_columns(self) -> int:
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    @property
    def qkv_columns_per_gpu(self) -> int:
        return (self.heads_per_gpu + 2 * self.kv_heads_per_gpu) * self.head_dim


@dataclass(frozen=True)
class TPCost:
    """The cost of one TP degree on one topology, per GPU; seconds and bytes."""

    tp: int
    compute_s: float  # per layer per step (forward + backward)
    comm_s: float  # per layer per step, the 4 collectives' exposed time (forward pair blocks)
    comm_bytes: float  # bytes each GPU sends per layer per step
    step_compute_s: float  # whole model, one micro-batch, forward + backward
    step_comm_s: float
    step_comm_bytes: float
    single_gpu_s: float  # one layer on one GPU
    single_gpu_step_s: float
    algorithm: str
    bottleneck: str  # the link that bounds the collectives
    # The layer's kernels by kind (forward + backward, per step) and its GEMMs' FLOPs: TP
    # shrinks the matrices, and smaller ones run at a lower rate (labs.hardware.kernels).
    gemm_s: float = 0.0
    attention_s: float = 0.0
    memory_s: float = 0.0
    gemm_flops: float = 0.0
    # One f or g exchange as NCCL runs it (its seconds and the bytes each GPU sends, ring-
    # equivalent: 2(t-1)/t of the tensor for an all-reduce), and comm_s split by pass: the
    # forward's block whole, the backward's count only what outlasts the GEMM beside them.
    collective_s: float = 0.0
    collective_sent: float = 0.0
    forward_comm_s: float = 0.0
    backward_comm_s: float = 0.0
    # Of compute_s, the forward's kernels (a forward's wait is set against these, EP12 step 5)
    forward_compute_s: float = 0.0
    # The layer's TP collectives one after another, none hidden: the time to move its bytes
    # (the crossover's communication, labs.tensor_parallel.crossover).
    comm_total_s: float = 0.0
    # Each backward exchange's own GEMM, the one it runs beside (its weight-gradient GEMM):
    # (the GEMM's name, its seconds; 0 for one that hides nothing), so the backward's exposed
    # time is derivable: the sum of what each exchange outlasts its GEMM by (EP12 step 5,
    # round-6 cold reading, item 6).
    backward_beside: tuple[tuple[str, float], ...] = ()
    # The kernels sequence parallelism splits along the sequence (labs.model.ops
    # SEQUENCE_SPLIT: the norms and the residual adds), forward + backward: their bytes and
    # seconds on one GPU (memory-bound: the bytes at the GPU's achieved HBM rate). Without SP
    # every GPU of the group runs them on all the tokens; with it on s/t (EP04 step 5).
    seq_split_bytes: float = 0.0
    seq_split_s: float = 0.0
    # The same bytes kernel by kernel: (name, forward bytes, backward bytes), so a page can
    # say what each reads and writes per element (round-17 cold reading of EP04, finding 2:
    # step 5 quoted 2.95 GB with nothing to derive it from).
    seq_split_kernels: tuple[tuple[str, float, float], ...] = ()

    @property
    def bus_bandwidth(self) -> float:
        """Bytes/s one exchange reaches, sent bytes over its time (NCCL's bus bandwidth at
        this size, its latency included); 0 at t = 1."""
        return self.collective_sent / self.collective_s if self.collective_s else 0.0

    @property
    def gemm_rate(self) -> float:
        """FLOP/s the layer's GEMMs reach on one GPU at this t."""
        return self.gemm_flops / self.gemm_s if self.gemm_s else 0.0

    @property
    def layer_s(self) -> float:
        return self.compute_s + self.comm_s

    @property
    def step_s(self) -> float:
        return self.step_compute_s + self.step_comm_s

    @property
    def speedup(self) -> float:
        return self.single_gpu_s / self.layer_s

    @property
    def efficiency(self) -> float:
        return self.speedup / self.tp

    @property
    def step_speedup(self) -> float:
        return self.single_gpu_step_s / self.step_s

    @property
    def step_efficiency(self) -> float:
        return self.step_speedup / self.tp


@dataclass(frozen=True)
class MemoryAtTP:
    tp: int
    memory: MemoryResult | None  # None: Megatron refuses this TP for training
    refused: str = ""


@dataclass(frozen=True)
class TPResult:
    input: TPInput
    cost: TPCost
    shapes: Shapes
    collective_bytes: float  # s·b·h·2: the tensor of each collective
    memory: MemoryResult  # the EP01 ledger at this TP and SP (training, adam16)
    sweep: tuple[TPCost, ...]  # the chosen topology, against t
    by_link: dict[str, tuple[TPCost, ...]]  # COMPARE_LINKS, each against t
    memory_sweep: tuple[MemoryAtTP, ...]  # the ledger at each TP of ``sweep_degrees``

    @property
    def collectives_per_layer(self) -> int:
        """The TP collectives a layer runs per step as the engine times them: 4 all-reduces,
        or with SP 4 forward and 6 backward (``tp_schedule``)."""
        return tp_collective_count(self.input.sp)
