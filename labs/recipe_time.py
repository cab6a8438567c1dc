"""EP08's step-time parts: what one GPU spends per micro-batch and per step, by cause.

Each part is a collective on the cluster's links (``labs.comm``, α–β) or compute at the GPU's
dense BF16 peak (``labs.compute``), for the group the part runs over, placed by Megatron's rank
order (``labs.layout.ParallelLayout.groups``: TP fastest, then CP, DP, PP). Sources:
- TP (Megatron-LM, Shoeybi et al. 2019, arXiv:1909.08053 sec 3; with sequence parallelism,
  Korthikanti et al. 2022, arXiv:2205.05198 sec 4.2.2): per layer, the activations
  (s/CP)·b·h in bf16 are all-reduced twice in forward and twice in backward (with SP, an
  all-gather and a reduce-scatter each, the same bytes). Blocking: on the critical path. Full
  recomputation runs the forward, and its two all-reduces, again.
- CP (ring attention, Liu et al. 2023, arXiv:2310.01889; Megatron's context parallelism):
  each layer passes its K and V chunk around the CP ring, CP−1 hops, in forward; in backward K,
  V and their gradients. A hop overlaps the attention block it feeds, so only what exceeds the
  attention compute is exposed.
- EP (GShard, Lepikhin et al. 2020; Megatron Core MoE): two all-to-alls (dispatch, combine) per
  MoE layer in forward and two in backward, each of the tokens x top-k hidden vectors; on the
  critical path.
- DP (PyTorch DDP, Li et al. 2020, arXiv:2006.15704, gradient buckets; Megatron-LM's
  --overlap-grad-reduce and --overlap-param-gather): the gradients are reduced once per step
  (all-reduce; reduce-scatter with ZeRO-1/2, then an all-gather of the updated bf16 weights),
  the reduce hidden behind the last micro-batch's backward, the all-gather behind the next
  step's first forward. ZeRO-3/FSDP (Rajbhandari et al. 2020; Zhao et al. 2023,
  arXiv:2304.11277) gathers the weights before every forward and backward and reduce-scatters
  the gradients after every backward, each prefetched behind that pass's compute.
Only what does not fit behind compute is *exposed*, i.e. lengthens the step.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from labs.activations import chunks_per_rank
from labs.comm import collective
from labs.compute import (
    attention_flops_per_token,
    hardware_flops_per_token,
    model_flops_per_token,
)
from labs.layout import ParallelLayout
from labs.links import Cluster
from labs.memory import RECIPES
from labs.placement import stage_params
from labs.presets import ModelSpec

ACT_BYTES = 2  # bf16 activations on the wire


@dataclass(frozen=True)
class Spread:
    """How one kind of rank group sits on the nodes (its worst group)."""

    size: int
    nodes: int  # most nodes any one group spans
    per_node: int  # fewest members sharing a node, in the worst group: the ring's bottleneck


@lru_cache(maxsize=512)
def spread(layout: ParallelLayout, kind: str, gpus_per_node: int) -> Spread:
    """Where the groups of ``kind`` ("tp", "cp", "dp-cp", "ep"...) fall, node = rank // g."""
    size, nodes, per_node = 1, 1, gpus_per_node
    for group in layout.groups(kind):
        counts = Counter(rank // gpus_per_node for rank in group)
        size = len(group)
        nodes = max(nodes, len(counts))
        per_node = min(per_node, min(counts.values()))
    return Spread(size, nodes, min(per_node, size))


@dataclass(frozen=True)
class Part:
    """One kind of communication on one GPU: total seconds per step, hidden and exposed."""

    name: str  # "tp", "cp", "ep", "dp"
    collective: str
    group: int
    nodes: int
    link: str  # the link id that bounds it
    bytes_per_step: float  # bytes one GPU sends per step
    seconds: float  # per step, if nothing overlapped
    exposed: float  # per step, on the critical path

    @property
    def hidden(self) -> float:
        return self.seconds - self.exposed


@dataclass(frozen=True)
class MicroBatchTime:
    """One micro-batch through one pipeline stage on one GPU, in seconds."""

    compute_forward: float
    compute_backward: float  # recomputation included
    tp: float  # forward + backward, exposed
    cp_exposed: float
    ep: float

    @property
    def total(self) -> float:
        return self.compute_forward + self.compute_backward + self.tp + self.cp_exposed + self.ep

    @property
    def forward(self) -> float:
        return self.compute_forward + (self.total - self.compute) / 3

    @property
    def backward(self) -> float:
        return self.total - self.forward

    @property
    def compute(self) -> float:
        return self.compute_forward + self.compute_backward


@dataclass(frozen=True)
class Timing:
    micro: MicroBatchTime
    parts: tuple[Part, ...]  # tp, cp, ep (per step: m micro-batches) and dp
    model_flops_per_token: float
    hardware_flops_per_token: float


def _cost(kind: str, size: float, s: Spread, cluster: Cluster):
    return collective(kind, size, s.size, cluster, per_node=s.per_node)


def step_parts(model: ModelSpec, layout: ParallelLayout, cluster: Cluster, *, seq_len: int,
               micro_batch: int, microbatches: int, recompute: str, zero: int,
               schedule: str, virtual: int, recipe: str = "adam16") -> Timing:
    """Per-micro-batch time on the heaviest stage and every communication part of a step."""
    m, lay, g = model, layout, cluster.gpus_per_node
    tokens = seq_len * micro_batch  # one micro-batch
    peak = cluster.gpu.bf16_flops
    # Compute: each GPU does 1/(TP·CP·PP) of a micro-batch's FLOPs (balanced experts assumed).
    share = lay.tp * lay.cp * lay.pp
    model_tok = model_flops_per_token(m, seq_len)
    hard_tok = hardware_flops_per_token(m, seq_len, recompute)
    fwd = model_tok / 3 * tokens / share / peak  # forward is 2 of the 6 FLOPs per parameter
    bwd = (hard_tok - model_tok / 3) * tokens / share / peak
    layers = math.ceil(m.layers / lay.pp)
    moe_layers = max(s.moe_layers for s in stage_params(m, lay.pp, "1f1b", 1))
    passes = 3 if recompute == "full" else 2  # forward, (forward again), backward

    act = seq_len / lay.cp * micro_batch * m.hidden * ACT_BYTES
    tp_s = spread(lay, "tp", g)
    tp_ar = _cost("all_reduce", act, tp_s, cluster)
    tp_mb = 2 * passes * layers * tp_ar.seconds

    cp_s = spread(lay, "cp", g)
    kv_heads = m.heads if m.uses_mla else m.kv_heads
    kv_chunk = 2 * seq_len / lay.cp * micro_batch * max(1, kv_heads // lay.tp) \
        * m.head_dim * ACT_BYTES
    cp_hop = _cost("all_gather", kv_chunk * lay.cp, cp_s, cluster)
    attn_layer = attention_flops_per_token(m, seq_len) / m.layers * tokens \
        / (lay.cp * lay.tp) / peak  # forward + backward, one layer
    cp_fwd = cp_hop.seconds
    cp_bwd = 2 * cp_hop.seconds
    cp_total_mb = layers * (cp_fwd * (passes - 1) + cp_bwd)
    cp_exposed_mb = layers * ((passes - 1) * max(0.0, cp_fwd - attn_layer / 3)
                              + max(0.0, cp_bwd - 2 * attn_layer / 3))

    ep_s = spread(lay, "ep", g) if lay.ep > 1 else Spread(1, 1, 1)
    routed = tokens / (lay.cp * lay.tp) * m.top_k * m.hidden * ACT_BYTES
    ep_a2a = _cost("all_to_all", routed, ep_s, cluster)
    ep_mb = 2 * passes * moe_layers * ep_a2a.seconds

    micro = MicroBatchTime(fwd, bwd, tp_mb, cp_exposed_mb, ep_mb)
    mb = microbatches
    parts = [
        Part("tp", "all_reduce", tp_s.size, tp_s.nodes, tp_ar.bottleneck,
             mb * 2 * passes * layers * tp_ar.bytes_per_gpu, mb * tp_mb, mb * tp_mb),
        Part("cp", "ring pass (all_gather)", cp_s.size, cp_s.nodes, cp_hop.bottleneck,
             mb * layers * (passes + 1) * cp_hop.bytes_per_gpu, mb * cp_total_mb,
             mb * cp_exposed_mb),
        Part("ep", "all_to_all", ep_s.size, ep_s.nodes, ep_a2a.bottleneck,
             mb * 2 * passes * moe_layers * ep_a2a.bytes_per_gpu, mb * ep_mb, mb * ep_mb),
        _dp_part(m, lay, cluster, micro, mb, zero, schedule, virtual, recipe),
    ]
    return Timing(micro, tuple(parts), model_tok, hard_tok)


def _dp_part(model: ModelSpec, lay: ParallelLayout, cluster: Cluster, micro: MicroBatchTime,
             mb: int, zero: int, schedule: str, virtual: int, recipe: str) -> Part:
    """Gradient (and ZeRO weight) traffic of the heaviest stage over its DP groups."""
    g = cluster.gpus_per_node
    stages = stage_params(model, lay.pp, schedule, virtual)
    heavy = max(stages, key=lambda s: s.tp_split / lay.tp + s.replicated + s.experts / lay.ep)
    dense = heavy.tp_split / lay.tp + heavy.replicated
    expert = heavy.experts / (lay.ep * lay.etp)
    grad_bytes = RECIPES[recipe].gradients
    weight_bytes = RECIPES[recipe].weights
    dense_s = spread(lay, "dp-cp", g)
    expert_s = spread(lay, "edp", g) if expert else Spread(1, 1, 1)
    # The overlap windows: one model chunk's backward (the last) and forward (the first).
    chunks = chunks_per_rank(schedule, virtual) if lay.pp > 1 else 1
    first_fwd, last_bwd = micro.forward / chunks, micro.backward / chunks
    total = exposed = sent = 0.0
    link, nodes = cluster.intra.id, max(dense_s.nodes, expert_s.nodes)
    for params, s in ((dense, dense_s), (expert, expert_s)):
        if s.size == 1 or not params:
            continue
        if zero == 3:
            gather = _cost("all_gather", params * weight_bytes, s, cluster)
            reduce = _cost("reduce_scatter", params * grad_bytes, s, cluster)
            total += mb * (2 * gather.seconds + reduce.seconds)
            sent += mb * (2 * gather.bytes_per_gpu + reduce.bytes_per_gpu)
            exposed += mb * (max(0.0, gather.seconds - micro.compute_forward)
                             + max(0.0, gather.seconds + reduce.seconds
                                   - micro.compute_backward))
            link = reduce.bottleneck
        elif zero in (1, 2):
            reduce = _cost("reduce_scatter", params * grad_bytes, s, cluster)
            gather = _cost("all_gather", params * weight_bytes, s, cluster)
            total += reduce.seconds + gather.seconds
            sent += reduce.bytes_per_gpu + gather.bytes_per_gpu
            exposed += max(0.0, reduce.seconds - last_bwd) + max(0.0, gather.seconds - first_fwd)
            link = reduce.bottleneck
        else:
            reduce = _cost("all_reduce", params * grad_bytes, s, cluster)
            total += reduce.seconds
            sent += reduce.bytes_per_gpu
            exposed += max(0.0, reduce.seconds - last_bwd)
            link = reduce.bottleneck
    name = {0: "all_reduce", 1: "reduce_scatter + all_gather", 2: "reduce_scatter + all_gather",
            3: "all_gather x2 + reduce_scatter per micro-batch"}[zero]
    return Part("dp", name, dense_s.size, nodes, link, sent, total, exposed)
