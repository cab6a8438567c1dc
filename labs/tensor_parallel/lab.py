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
- cost: the layer's kernels one by one (labs.parallel.layer_time on labs.model.ops: each GEMM
  at its shape's achieved rate, so the t-times narrower shards run below the full matrices'
  rate; attention; the norms and element-wise ops, which without sequence parallelism every
  GPU of the group repeats in full), the collectives as NCCL runs them (labs.hardware.comm);
  the forward ones block the next matmul, the column-split layers' backward ones run beside
  their other GEMM, as Megatron does by default (``TP_OVERLAP_SETTING``).
- one TP model for the whole lab: ``tp_exchange`` (one of Megatron's f/g collectives on a
  group) and ``tp_collectives`` (how many a layer runs per step) are what EP08's recipe
  (labs.recipe.step_time) counts too, so EP04's efficiency against t and EP08's TP factor agree
  whenever their inputs (model, GPU, link, compute rate) do.
- memory: the EP01 ledger (labs.memory.lab) at the same TP and SP.
"""

from __future__ import annotations

import math
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.core.limits import MAX_GPUS_PER_NODE, TP_DEGREES
from labs.core.validate import whole
from labs.hardware.comm import nccl_collective
from labs.hardware.gpus import GPUSpec
from labs.hardware.kernels import with_matmul_efficiency
from labs.hardware.links import Cluster, check_peer_link, get_link, paired_cluster, peer_links
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.flops import attention_flops_per_token
from labs.model.head import head_ops
from labs.model.ops import SEQUENCE_SPLIT
from labs.model.spec import ModelSpec
from labs.parallel.layer_time import Group, layer_time
from labs.tensor_parallel.comm import (
    STEP_EXTRA_COLLECTIVES,
    TP_OVERLAP_SETTING,
    collective_bytes,
    tp_exchange,
)
from labs.tensor_parallel.inputs import MemoryAtTP, Shapes, Topology, TPCost, TPInput, TPResult

# The links the efficiency chart compares, each carrying the whole TP group alone: of the
# vendor fabrics, those the chosen GPU ships with (``compared_links``), then the rest.
COMPARE_LINKS = ("nvlink-3", "nvlink-4", "nvlink-4-h800", "nvlink-5", "nvl72",
                 "infinity-fabric-mi300x", "pcie-4", "pcie-5", "ib-ndr", "eth-100g", "eth-25g")
def compared_links(gpu: GPUSpec) -> tuple[str, ...]:
    """COMPARE_LINKS the GPU's TP group is ever built on: of the scale-up links, those its
    GPUs talk to each other over (``labs.hardware.links.peer_links``): an H100 is never drawn
    on an NVL72 rack (issue 36, error 6), nor on PCIe, its SXM module's link to the host
    only (round-18 cold reading of EP04, finding 2 drew it on PCIe 4.0, then 5.0); the RTX
    4090, a PCIe 4.0 card, on PCIe 4.0. Every scale-out link takes any GPU."""
    return tuple(k for k in COMPARE_LINKS if get_link(k).kind == "scale-out"
                 or k in peer_links(gpu))


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
    if gpus_per_node > 1:  # the node's GPUs talk over the link they ship with
        check_peer_link(gpu, intra, "intra_link")
    return paired_cluster(gpu, gpus_per_node, intra, inter)


def layer_params(model: ModelSpec) -> float:
    """Weights of one decoder layer: everything but the embeddings, head and final norm."""
    final_norm = model.hidden if model.norm == "rmsnorm" else 2 * model.hidden
    return (model.params - model.embedding_params - final_norm) / model.layers


def kv_params(model: ModelSpec) -> float:
    """K and V projection weights of one layer (h x kv_heads·d each, biases included)."""
    width = model.kv_heads * model.head_dim
    return 2 * width * (model.hidden + (1 if model.qkv_bias or model.linear_bias else 0))


def layer_weights(model: ModelSpec, tp: int = 1) -> float:
    """The weights of one layer one GPU of the group holds at TP = t: every matrix divided
    by t, except K and V once t exceeds the KV heads (each GPU then holds a replica)."""
    kv = kv_params(model)
    kv_share = math.ceil(model.kv_heads / tp) / model.kv_heads
    return (layer_params(model) - kv) / tp + kv * kv_share


def layer_flops(model: ModelSpec, seq_len: int, micro_batch: int, tp: int = 1) -> float:
    """Model FLOPs one GPU runs for one layer, forward and backward, at TP = t.

    6 FLOPs per weight per token (labs.model.flops) on the GPU's share of the weights, plus the
    attention scores of its heads (6·a·s·2d per token, labs.model.flops). Every matrix divides by
    t except K and V once t exceeds the KV heads (each GPU then computes a replica).
    """
    weights = layer_weights(model, tp)
    tokens = seq_len * micro_batch
    scores = attention_flops_per_token(model, seq_len) / model.layers / tp
    return tokens * (6 * weights + scores)


def head_flops(model: ModelSpec, seq_len: int, micro_batch: int, tp: int = 1) -> float:
    """The output layer's FLOPs per step on one GPU (vocabulary-parallel: split by t)."""
    return 6 * model.vocab * model.hidden * seq_len * micro_batch / tp


# Pure in its (frozen, hashable) inputs, and asked again and again: the lesson's sweeps over
# TP degrees and links stay the same while a student moves the other controls (issue 31).
@lru_cache(maxsize=8192)
def tp_cost(model: ModelSpec, gpu: GPUSpec, topology: Topology, tp: int, *, sp: bool,
            seq_len: int, micro_batch: int, mfu: float | None = None) -> TPCost:
    """Per-layer and per-step time of TP = ``tp``: the layer's kernels on one GPU of the group
    (``labs.parallel.layer_time``: every GEMM at its shape's achieved rate, attention and the
    memory-bound ops), then the blocking collectives as NCCL runs them. ``mfu`` overrides
    the GPU's measured full-wave GEMM rate (None: as measured)."""
    cluster = with_matmul_efficiency(topology.cluster_for(gpu, tp), mfu)
    lt = _layer(model, cluster, tp, sp, seq_len, micro_batch)
    one = _layer(model, with_matmul_efficiency(topology.cluster_for(gpu, 1), mfu), 1, sp,
                 seq_len, micro_batch)
    heads = head_ops(model, cluster.gpu, tp=tp, cp=1, micro_batch=micro_batch,
                     seq_len=seq_len, sp=sp and tp > 1)
    one_heads = head_ops(model, cluster.gpu, tp=1, cp=1, micro_batch=micro_batch,
                         seq_len=seq_len, sp=False)
    size = collective_bytes(model, seq_len, micro_batch)
    # One f or g timed by the function every layer's TP collectives are (nccl_collective,
    # the group packed as _layer places it): EP04's "one collective" is the layer's.
    per_node = min(tp, cluster.gpus_per_node)
    pair = tp_exchange(lambda kind, nbytes: nccl_collective(kind, nbytes, tp, cluster, per_node),
                       size, sp and tp > 1)
    compute = lt.forward.compute + lt.backward.compute
    tp_comms = [c for c in (lt.forward.comm("tp"), lt.backward.comm("tp")) if c]
    comm = sum(c.exposed for c in tp_comms)
    forward = lt.forward.comm("tp").exposed if lt.forward.comm("tp") else 0.0
    comm_bytes = sum(c.bytes_per_gpu for c in tp_comms)
    gemms = [k for p in (lt.ops.forward, lt.ops.backward) for k in p.kernels
             if k.kind == "gemm"]
    extra = STEP_EXTRA_COLLECTIVES if tp > 1 else 0
    # The GEMM beside each backward exchange, where it hides some of it (TP_OVERLAP_SETTING
    # "backward": the weight-gradient GEMMs); 0 where the exchange blocks (SP's re-gathers).
    backward = lt.backward.comm("tp")
    beside = tuple((piece.anchor, lt.ops.backward.named(piece.anchor)
                    if piece.exposed < piece.seconds else 0.0)
                   for piece in (backward.pieces if backward else ()))
    split = [k for p in (lt.ops.forward, lt.ops.backward) for k in p.kernels
             if k.name in SEQUENCE_SPLIT]
    return TPCost(
        tp=tp, compute_s=compute, comm_s=comm, comm_bytes=comm_bytes,
        step_compute_s=model.layers * compute + _head_s(heads),
        step_comm_s=model.layers * comm + extra * pair.seconds,
        step_comm_bytes=model.layers * comm_bytes + extra * pair.bytes_per_gpu,
        single_gpu_s=one.forward.compute + one.backward.compute,
        single_gpu_step_s=model.layers * (one.forward.compute + one.backward.compute)
        + _head_s(one_heads),
        algorithm=pair.algorithm, bottleneck=pair.bottleneck,
        gemm_s=lt.forward.gemm + lt.backward.gemm,
        attention_s=lt.forward.attention + lt.backward.attention,
        memory_s=lt.forward.memory + lt.backward.memory,
        gemm_flops=sum(k.flops for k in gemms),
        collective_s=pair.seconds if tp > 1 else 0.0,
        collective_sent=pair.bytes_per_gpu if tp > 1 else 0.0,
        forward_comm_s=forward, backward_comm_s=comm - forward,
        forward_compute_s=lt.forward.compute,
        comm_total_s=sum(c.seconds for c in tp_comms), backward_beside=beside,
        seq_split_bytes=sum(k.nbytes for k in split),
        seq_split_s=sum(k.seconds for k in split),
        seq_split_kernels=tuple(
            (name, *(sum(k.nbytes for k in p.kernels if k.name == name)
                     for p in (lt.ops.forward, lt.ops.backward)))
            for name in SEQUENCE_SPLIT))


def _layer(model: ModelSpec, cluster: Cluster, tp: int, sp: bool, seq_len: int,
           micro_batch: int):
    """One layer, no recomputation, the TP collectives overlapped as Megatron's default does
    (``TP_OVERLAP_SETTING``: the forward ones block, the column-split layers' backward ones
    run beside their other GEMM)."""
    return layer_time(model, cluster, tp=Group(tp, min(tp, cluster.gpus_per_node)),
                      cp=Group(), ep=Group(), micro_batch=micro_batch, seq_len=seq_len,
                      sp=sp and tp > 1, recompute="none", tp_overlap=TP_OVERLAP_SETTING)


def _head_s(h) -> float:
    """The embedding's and the output layer's kernels, forward and backward."""
    return sum(p.seconds for p in (h.embedding_forward, h.embedding_backward,
                                   h.output_forward, h.output_backward))


def sweep_degrees(model: ModelSpec, topology: Topology | None = None,
                  chosen: int | None = None, timed: bool = True) -> tuple[int, ...]:
    """The TP degrees drawn against t: those that split the heads whole (and fit the link),
    with the chosen degree among them where it does too (TP = 3 of GPT-3's 96 heads: the
    charts mark the chosen bar, so a sweep of powers of two alone has none to mark).
    ``timed``: only the degrees the lab times, those that also split the KV heads whole, as
    Megatron asserts for training (labs.parallel.layout refuses the rest: Llama 3.1 405B's 8
    KV heads stop its sweep at t = 8, not 32); without it, the memory chart's t past the KV
    heads, drawn there as refused."""
    most = topology.max_group if topology is not None else None
    return tuple(t for t in sorted({*TP_DEGREES, *([chosen] if chosen else [])})
                 if model.heads % t == 0 and (most is None or t <= most)
                 and (not timed or model.uses_mla or model.kv_heads % t == 0))


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
                  for t in sweep_degrees(m, inp.topology, inp.tp))
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
        by_link=compare_links(inp, compared_links(inp.gpu)),
        memory_sweep=tuple(memory_at(inp, t)
                           for t in sweep_degrees(m, chosen=inp.tp, timed=False)),
    )


def compare_links(inp: TPInput, link_ids: tuple[str, ...]) -> dict[str, tuple[TPCost, ...]]:
    """The same model and GPU with the TP group on each named link alone, against t."""
    kw = {"sp": inp.sp, "seq_len": inp.seq_len, "micro_batch": inp.micro_batch,
          "mfu": inp.mfu}
    out = {}
    for link_id in link_ids:
        topology = Topology(get_link(link_id).name, link=get_link(link_id))
        out[link_id] = tuple(tp_cost(inp.model, inp.gpu, topology, t, **kw)
                             for t in sweep_degrees(inp.model, topology, inp.tp))
    return out

