"""Tensor parallelism (EP04): where Megatron cuts each matrix, what the cut costs per layer and
per step, and what it saves in memory.

Sources:
- the split: Shoeybi et al. 2019, "Megatron-LM" (arXiv:1909.08053) sec 3: the first MLP matrix
  by columns, the second by rows (Y = XW = [XW₀ XW₁], Z = Y₀V₀ + Y₁V₁), Q, K, V by columns
  with whole heads on each GPU, the output projection by rows; an all-reduce after each
  row-split matrix in the forward pass (operator g) and one before each column-split matrix in
  the backward pass (operator f): 4 all-reduces of the s·b·h activations per layer per step.
  SwiGLU's gate and up matrices are both column-split (Megatron-LM's fused fc1).
- sequence parallelism: Korthikanti et al. 2022 (arXiv:2205.05198) sec 4.2.2: each all-reduce
  becomes a reduce-scatter plus an all-gather of the same total volume, and the norms' and
  dropouts' activations are split along the sequence (Table 2; labs.model.activations).
- grouped-query attention: Megatron asserts num_query_groups % TP == 0 (labs.parallel); beyond
  the KV heads an engine must replicate them (vLLM), so K and V stop shrinking.
- the vocabulary-parallel embedding and output layer (Megatron-LM's VocabParallelEmbedding
  and parallel_lm_logits): one more collective of s·b·h forward (embedding) and one backward
  (the output layer's input) per step; the cross-entropy's three all-reduces of s·b floats
  are left out (1/h of a layer's traffic).
- cost: compute on labs.model.flops (6·N + attention FLOPs per token, at an MFU of the GPU's dense
  BF16 peak), collectives on the α–β model of labs.hardware (comm, links); nothing overlapped: TP's
  collectives block the next matmul (``TP_OVERLAP``).
- one TP model for the whole lab: ``tp_exchange`` (one of Megatron's f/g collectives on a
  group) and ``tp_collectives`` (how many a layer runs per step) are what EP08's recipe
  (labs.recipe.step_time) counts too, so EP04's efficiency against t and EP08's TP factor agree
  whenever their inputs (model, GPU, link, compute rate) do.
- memory: the EP01 ledger (labs.memory.lab) at the same TP and SP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from labs.core.errors import LabInputError
from labs.core.limits import (
    DEFAULT_MFU,
    MAX_GPUS_PER_NODE,
    MAX_MFU,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    MAX_TP,
    MIN_MFU,
    RECOMPUTE,
    TP_DEGREES,
)
from labs.core.validate import FRACTION, number, whole
from labs.hardware.comm import CommCost, collective, ring
from labs.hardware.gpus import GPUSpec
from labs.hardware.links import Cluster, Link, get_link, make_cluster
from labs.memory.inputs import MemoryInput, MemoryResult
from labs.memory.lab import compute_memory
from labs.model.flops import attention_flops_per_token
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout, problems
from labs.tensor_parallel.comm import (  # noqa: F401 (re-exported: EP04's names)
    LAYER_COLLECTIVES,
    STEP_EXTRA_COLLECTIVES,
    TP_OVERLAP,
    collective_bytes,
    tp_collectives,
    tp_exchange,
)

# The links the efficiency chart compares, each carrying the whole TP group alone.
COMPARE_LINKS = ("nvlink-4", "nvl72", "pcie-4", "ib-ndr", "eth-100g", "eth-25g")


def tp_cluster(gpu: GPUSpec, gpus_per_node: int, intra_link: str, inter_link: str) -> Cluster:
    """Nodes of ``gpus_per_node`` GPUs on ``intra_link``, one ``inter_link`` port per GPU."""
    whole("gpus_per_node", gpus_per_node, 1, MAX_GPUS_PER_NODE, "GPUs per node")
    try:
        intra = get_link(intra_link)
    except LabInputError as exc:
        raise LabInputError("intra_link", exc.message) from None
    try:
        inter = get_link(inter_link)
    except LabInputError as exc:
        raise LabInputError("inter_link", exc.message) from None
    if intra.kind != "scale-up":
        raise LabInputError("intra_link", f"{intra.name} links nodes, not the GPUs inside one: "
                                          "choose NVLink, Infinity Fabric or PCIe")
    if inter.kind != "scale-out":
        raise LabInputError("inter_link", f"{inter.name} is a link inside a node: choose an "
                                          "InfiniBand or Ethernet link between nodes")
    if intra.domain is not None and gpus_per_node > intra.domain:
        raise LabInputError("gpus_per_node", f"{intra.name} connects at most {intra.domain} "
                                             f"GPUs; a node of {gpus_per_node} needs another "
                                             "link")
    return make_cluster(gpu, gpus_per_node, intra, inter)


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

    def collective(self, kind: str, size: float, group: int) -> CommCost:
        if self.cluster is not None:
            return collective(kind, size, group, self.cluster)
        link = self.link
        factor = 2.0 if kind == "all_reduce" else 1.0
        sent = factor * (group - 1) / group * size
        return CommCost(kind, group, size, sent,
                        ring(kind, size, group, link.bandwidth, link.latency), "ring", link.id)

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
    mfu: float = DEFAULT_MFU
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
        most = self.topology.max_group
        if most is not None and self.tp > most:
            raise LabInputError("tp", f"{self.topology.link.name} connects at most {most} GPUs: "
                                      f"TP={self.tp} must cross nodes (choose a cluster)")
        if not isinstance(self.sp, bool):
            raise LabInputError("sp", "sequence parallelism must be true or false")
        whole("seq_len", self.seq_len, 1, MAX_SEQ_LEN, "sequence length")
        whole("micro_batch", self.micro_batch, 1, MAX_MICRO_BATCH, "micro-batch size")
        number("mfu", self.mfu, MIN_MFU, MAX_MFU, "MFU", FRACTION)
        if self.recompute not in RECOMPUTE:
            raise LabInputError("recompute", f"recomputation must be one of "
                                             f"{', '.join(RECOMPUTE)}")


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


def layer_params(model: ModelSpec) -> float:
    """Weights of one decoder layer: everything but the embeddings, head and final norm."""
    final_norm = model.hidden if model.norm == "rmsnorm" else 2 * model.hidden
    return (model.params - model.embedding_params - final_norm) / model.layers


def kv_params(model: ModelSpec) -> float:
    """K and V projection weights of one layer (h x kv_heads·d each, biases included)."""
    width = model.kv_heads * model.head_dim
    return 2 * width * (model.hidden + (1 if model.qkv_bias or model.linear_bias else 0))


def layer_flops(model: ModelSpec, seq_len: int, micro_batch: int, tp: int = 1) -> float:
    """Model FLOPs one GPU runs for one layer, forward and backward, at TP = t.

    6 FLOPs per weight per token (labs.model.flops) on the GPU's share of the weights, plus the
    attention scores of its heads (6·a·s·2d per token, labs.model.flops). Every matrix divides by
    t except K and V once t exceeds the KV heads (each GPU then computes a replica).
    """
    kv = kv_params(model)
    kv_share = math.ceil(model.kv_heads / tp) / model.kv_heads
    weights = (layer_params(model) - kv) / tp + kv * kv_share
    tokens = seq_len * micro_batch
    scores = attention_flops_per_token(model, seq_len) / model.layers / tp
    return tokens * (6 * weights + scores)


def head_flops(model: ModelSpec, seq_len: int, micro_batch: int, tp: int = 1) -> float:
    """The output layer's FLOPs per step on one GPU (vocabulary-parallel: split by t)."""
    return 6 * model.vocab * model.hidden * seq_len * micro_batch / tp


@dataclass(frozen=True)
class TPCost:
    """The cost of one TP degree on one topology, per GPU; seconds and bytes."""

    tp: int
    compute_s: float  # per layer per step (forward + backward)
    comm_s: float  # per layer per step, the 4 blocking collectives
    comm_bytes: float  # bytes each GPU sends per layer per step
    step_compute_s: float  # whole model, one micro-batch, forward + backward
    step_comm_s: float
    step_comm_bytes: float
    single_gpu_s: float  # one layer on one GPU
    single_gpu_step_s: float
    algorithm: str
    bottleneck: str  # the link that bounds the collectives

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


def tp_cost(model: ModelSpec, gpu: GPUSpec, topology: Topology, tp: int, *, sp: bool,
            seq_len: int, micro_batch: int, mfu: float) -> TPCost:
    """Per-layer and per-step time of TP = ``tp``: compute ÷ t, then the blocking collectives."""
    rate = gpu.bf16_flops * mfu
    size = collective_bytes(model, seq_len, micro_batch)
    pair = tp_exchange(lambda kind, nbytes: topology.collective(kind, nbytes, tp), size, sp)
    # Each of the 4 all-reduces (or their all-gather + reduce-scatter pairs) of a layer.
    pair_s, pair_bytes = pair.seconds, pair.bytes_per_gpu
    n = tp_collectives(1, "none")
    compute = layer_flops(model, seq_len, micro_batch, tp) / rate
    head = head_flops(model, seq_len, micro_batch, tp) / rate
    one = layer_flops(model, seq_len, micro_batch, 1) / rate
    one_head = head_flops(model, seq_len, micro_batch, 1) / rate
    per_step = model.layers * n + STEP_EXTRA_COLLECTIVES
    return TPCost(
        tp=tp, compute_s=compute, comm_s=n * pair_s, comm_bytes=n * pair_bytes,
        step_compute_s=model.layers * compute + head, step_comm_s=per_step * pair_s,
        step_comm_bytes=per_step * pair_bytes,
        single_gpu_s=one, single_gpu_step_s=model.layers * one + one_head,
        algorithm=pair.algorithm, bottleneck=pair.bottleneck,
    )


def sweep_degrees(model: ModelSpec, topology: Topology | None = None) -> tuple[int, ...]:
    """The TP degrees drawn against t: those that split the heads whole (and fit the link)."""
    most = topology.max_group if topology is not None else None
    return tuple(t for t in TP_DEGREES
                 if model.heads % t == 0 and (most is None or t <= most))


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

    @cached_property
    def memory_sweep(self) -> tuple[MemoryAtTP, ...]:
        return tuple(memory_at(self.input, t) for t in sweep_degrees(self.input.model))

    @property
    def collectives_per_layer(self) -> int:
        return len(LAYER_COLLECTIVES) * (2 if self.input.sp else 1)


def memory_at(inp: TPInput, tp: int) -> MemoryAtTP:
    """The ledger at TP = ``tp`` (the input's SP, sequence and recomputation)."""
    try:
        memory = compute_memory(MemoryInput(
            model=inp.model, gpu=inp.gpu, seq_len=inp.seq_len, micro_batch=inp.micro_batch,
            recompute=inp.recompute, tp=tp, sp=inp.sp))
    except LabInputError as exc:
        return MemoryAtTP(tp, None, exc.message)
    return MemoryAtTP(tp, memory)


def tensor_parallel(inp: TPInput) -> TPResult:
    m = inp.model
    kw = {"sp": inp.sp, "seq_len": inp.seq_len, "micro_batch": inp.micro_batch,
          "mfu": inp.mfu}
    sweep = tuple(tp_cost(m, inp.gpu, inp.topology, t, **kw)
                  for t in sweep_degrees(m, inp.topology))
    memory = memory_at(inp, inp.tp)
    if memory.memory is None:  # the ledger's own rule, should TPInput's check ever differ
        raise LabInputError("tp", memory.refused)
    return TPResult(
        input=inp,
        cost=tp_cost(m, inp.gpu, inp.topology, inp.tp, **kw),
        shapes=Shapes(m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.gated_mlp, inp.tp),
        collective_bytes=collective_bytes(m, inp.seq_len, inp.micro_batch),
        memory=memory.memory,
        sweep=sweep,
        by_link=compare_links(inp, COMPARE_LINKS),
    )


def compare_links(inp: TPInput, link_ids: tuple[str, ...]) -> dict[str, tuple[TPCost, ...]]:
    """The same model and GPU with the TP group on each named link alone, against t."""
    kw = {"sp": inp.sp, "seq_len": inp.seq_len, "micro_batch": inp.micro_batch,
          "mfu": inp.mfu}
    out = {}
    for link_id in link_ids:
        topology = Topology(get_link(link_id).name, link=get_link(link_id))
        out[link_id] = tuple(tp_cost(inp.model, inp.gpu, topology, t, **kw)
                             for t in sweep_degrees(inp.model, topology))
    return out

