"""EP08's step-time parts: what one GPU spends per micro-batch and per step, by cause.

Each part is a collective on the cluster's links (``labs.hardware.comm``, α–β) or compute at
``matmul_efficiency`` of the GPU's dense BF16 peak (``labs.model.flops``), for the group the part
runs over, placed by Megatron's rank order (``ParallelLayout.group_pattern``: TP
fastest, then CP, DP, PP). Sources:
- TP: EP04's model itself (``tensor_parallel.comm``): per layer, the activations (s/CP)·b·h in bf16
  go through 2 of Megatron's f/g collectives in forward and 2 in backward (with sequence
  parallelism, on whenever TP > 1 as in the ledger, a reduce-scatter + all-gather each).
  Blocking (``tensor_parallel.comm.TP_OVERLAP``). Full recomputation runs the forward's 2 again.
- CP (ring attention, Liu et al. 2023, arXiv:2310.01889; Megatron's context parallelism):
  each layer passes its K and V chunk around the CP ring, CP−1 hops, in forward; in backward K,
  V and their gradients. A hop overlaps the attention block it feeds, so only what exceeds the
  attention compute is exposed.
- EP (GShard, Lepikhin et al. 2020; Megatron Core MoE): two all-to-alls (dispatch, combine) per
  MoE layer in forward and two in backward, each of the tokens x top-k hidden vectors; on the
  critical path: the experts wait for their tokens and the next layer for the combine.
  Hiding them needs a second micro-batch's compute alongside (DeepSeek-V3's DualPipe, arXiv:
  2412.19437 sec 3.2.1; Megatron Core's optional EP all-to-all overlap), not modelled here.
- DP (PyTorch DDP, Li et al. 2020, arXiv:2006.15704, gradient buckets; Megatron Core's
  DistributedDataParallelConfig overlap_grad_reduce / overlap_param_gather, buckets of
  max(40M, 1M x DP) parameters): the gradients are reduced once per step (all-reduce;
  reduce-scatter with ZeRO-1/2, then an all-gather of the updated bf16 weights). Megatron's
  pipeline schedules turn gradient sync on only for the last micro-batch, so a stage's
  buckets are reduced, one after another, as its *last* backward produces them
  (``labs.data_parallel.lab.exposed_after_window``) and into whatever idle time the schedule
  leaves that stage after it; the all-gather is prefetched bucket by bucket behind the next
  step's first forward and the idle time before it. Those idle times are measured off the
  simulated schedule (``labs.recipe.lab.pipeline_slack``), stage by stage: in 1F1B the first
  stage finishes last and has none, the last stage has p−1 backwards' worth. The step waits
  for the worst stage. ZeRO-3/FSDP (Rajbhandari et al. 2020; Zhao et al. 2023,
  arXiv:2304.11277) gathers the weights before every forward and backward and reduce-scatters
  the gradients after every backward, each prefetched behind that pass's compute.
Only what does not fit behind compute (or idle time) is *exposed*, i.e. lengthens the step.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from labs.core.catalogue import RECIPES, RECOMPUTATION
from labs.core.limits import DEFAULT_MATMUL_EFFICIENCY
from labs.data_parallel.lab import exposed_after_window
from labs.hardware.comm import collective
from labs.hardware.links import Cluster
from labs.model.flops import (
    attention_flops_per_token,
    hardware_flops_per_token,
    model_flops_per_token,
)
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout
from labs.schedules.catalogue import chunks_per_rank
from labs.schedules.stages import stage_params
from labs.tensor_parallel.comm import tp_collectives, tp_exchange

ACT_BYTES = 2  # bf16 activations on the wire


@dataclass(frozen=True)
class Spread:
    """How one kind of rank group sits on the nodes (its worst group)."""

    size: int
    nodes: int  # most nodes any one group spans
    per_node: int  # fewest members sharing a node, in the worst group: the ring's bottleneck


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
    # The slowest stage's layers over the average stage's (1: even stages): the micro-batch
    # above is timed on that stage, since a pipeline runs at its slowest stage's pace.
    stage_imbalance: float = 1.0


@lru_cache(maxsize=8192)  # a plan's stages and buckets ask the same collective again and again
def _cost(kind: str, size: float, s: Spread, cluster: Cluster):
    return collective(kind, size, s.size, cluster, per_node=s.per_node)


def step_parts(model: ModelSpec, layout: ParallelLayout, cluster: Cluster, *, seq_len: int,
               micro_batch: int, microbatches: int, recompute: str, zero: int,
               schedule: str, virtual: int, recipe: str = "adam16",
               matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY,
               bubble: float = 0.0, slack: tuple[tuple[float, float], ...] = (),
               first: int = 0, last: int = 0) -> Timing:
    """Per-micro-batch time on the heaviest stage and every communication part of a step.

    ``bubble`` is the schedule's idle fraction and ``slack`` each stage's idle time before its
    first forward and after its last backward, as fractions of the pipeline's makespan
    (``labs.recipe.lab.pipeline_slack``; empty: none). ``first``/``last``: Megatron's uneven
    first and last stages (0: not set).

    Unequal stages: the simulator takes one forward and one backward cost for every stage, so
    every stage is timed as the slowest (the most layers; a stage's compute and TP/CP traffic
    scale with its layers). In the steady state a pipeline moves at its slowest stage's pace
    (each micro-batch passes every stage), so that is exact there; in the warm-up and
    cool-down the lighter stages would finish their part sooner, which this ignores: the
    step is over-estimated by at most the lighter stages' saving on the p − 1 ramp slots."""
    m, lay, g = model, layout, cluster.gpus_per_node
    tokens = seq_len * micro_batch  # one micro-batch
    peak = cluster.gpu.bf16_flops * matmul_efficiency  # the rate compute runs at
    # Compute: each GPU does 1/(TP·CP·PP) of a micro-batch's FLOPs (balanced experts assumed).
    share = lay.tp * lay.cp * lay.pp
    model_tok = model_flops_per_token(m, seq_len)
    hard_tok = hardware_flops_per_token(m, seq_len, recompute)
    stages = stage_params(m, lay.pp, "1f1b", 1, first, last)
    layers = max(s.layers for s in stages)  # the slowest stage's
    imbalance = layers * lay.pp / m.layers if lay.pp > 1 else 1.0
    # forward is 2 of the 6 FLOPs per parameter; the slowest stage does `imbalance` times
    # the even share (the output head's matmul is spread evenly, as before).
    fwd = model_tok / 3 * tokens / share / peak * imbalance
    bwd = (hard_tok - model_tok / 3) * tokens / share / peak * imbalance
    moe_layers = max(s.moe_layers for s in stages)
    passes = 3 if RECOMPUTATION[recompute].forward_again else 2  # forward, (again), backward

    act = seq_len / lay.cp * micro_batch * m.hidden * ACT_BYTES
    tp_s = spread(lay, "tp", g)
    tp_ar = tp_exchange(lambda kind, size: _cost(kind, size, tp_s, cluster), act,
                        sp=lay.tp > 1)
    tp_count = tp_collectives(layers, recompute)
    tp_mb = tp_count * tp_ar.seconds

    cp_s, cp_hop, cp_total_mb, cp_exposed_mb = cp_ring(m, lay, cluster, seq_len, micro_batch,
                                                       recompute, layers, peak)

    ep_s = spread(lay, "ep", g) if lay.ep > 1 else Spread(1, 1, 1)
    routed = tokens / (lay.cp * lay.tp) * m.top_k * m.hidden * ACT_BYTES
    ep_a2a = _cost("all_to_all", routed, ep_s, cluster)
    ep_mb = 2 * passes * moe_layers * ep_a2a.seconds

    micro = MicroBatchTime(fwd, bwd, tp_mb, cp_exposed_mb, ep_mb)
    mb = microbatches
    pipeline_s = mb * micro.total / (1 - bubble)
    parts = [
        Part("tp", "reduce_scatter + all_gather" if lay.tp > 1 else "all_reduce", tp_s.size,
             tp_s.nodes, tp_ar.bottleneck, mb * tp_count * tp_ar.bytes_per_gpu, mb * tp_mb,
             mb * tp_mb),
        Part("cp", "ring pass (all_gather)", cp_s.size, cp_s.nodes, cp_hop.bottleneck,
             mb * layers * (passes + 1) * cp_hop.bytes_per_gpu, mb * cp_total_mb,
             mb * cp_exposed_mb),
        Part("ep", "all_to_all", ep_s.size, ep_s.nodes, ep_a2a.bottleneck,
             mb * 2 * passes * moe_layers * ep_a2a.bytes_per_gpu, mb * ep_mb, mb * ep_mb),
        _dp_part(m, lay, cluster, micro, mb, zero, schedule, virtual, recipe,
                 tuple((a * pipeline_s, b * pipeline_s) for a, b in slack), first, last),
    ]
    return Timing(micro, tuple(parts), model_tok, hard_tok, imbalance)


def cp_ring(m: ModelSpec, lay: ParallelLayout, cluster: Cluster, seq_len: int,
            micro_batch: int, recompute: str, layers: int, peak: float):
    """CP's ring passes for one micro-batch through ``layers`` layers: (spread, one hop,
    seconds, exposed seconds). Each hop hides behind the attention block it feeds."""
    cp_s = spread(lay, "cp", cluster.gpus_per_node)
    kv_heads = m.heads if m.uses_mla else m.kv_heads
    kv_chunk = 2 * seq_len / lay.cp * micro_batch * max(1, kv_heads // lay.tp) \
        * m.head_dim * ACT_BYTES
    cp_hop = _cost("all_gather", kv_chunk * lay.cp, cp_s, cluster)
    attn_layer = attention_flops_per_token(m, seq_len) / m.layers * seq_len * micro_batch \
        / (lay.cp * lay.tp) / peak  # forward + backward, one layer
    passes = 3 if RECOMPUTATION[recompute].forward_again else 2  # forward, (again), backward
    cp_fwd = cp_hop.seconds
    cp_bwd = 2 * cp_hop.seconds
    total = layers * (cp_fwd * (passes - 1) + cp_bwd)
    exposed = layers * ((passes - 1) * max(0.0, cp_fwd - attn_layer / 3)
                        + max(0.0, cp_bwd - 2 * attn_layer / 3))
    return cp_s, cp_hop, total, exposed


def megatron_bucket_params(dp_size: int) -> int:
    """Megatron Core's default gradient bucket, in parameters: max(40M, 1M x DP size)
    (DistributedDataParallelConfig.bucket_size: larger DP groups get larger buckets so the
    collectives do not become latency-bound)."""
    return max(40_000_000, 1_000_000 * dp_size)


def _buckets(params: float, bucket_params: int) -> tuple[int, float]:
    """How many buckets ``params`` fill and the last one's parameters."""
    count = max(1, math.ceil(params / bucket_params))
    return count, params - (count - 1) * bucket_params


def gather_delay(window_s: float, bucket_s: float, last_s: float, buckets: int,
                 bucket_share: float) -> float:
    """Seconds a forward of ``window_s`` waits for bucketed weight all-gathers started with
    it (Megatron's overlap_param_gather: bucket k is needed once the forward has used k−1
    buckets, at (k−1)·share·window; the gathers run one after another). The wait, finish(k) −
    need(k), is linear in k, so its largest value is at the first or the last bucket. The
    gathers are taken back to back from the start: Megatron issues them as the forward's
    hooks reach each bucket, which can only wait longer, so this is the least exposure."""
    first = bucket_s if buckets > 1 else last_s
    last = (buckets - 1) * bucket_s + last_s - (buckets - 1) * bucket_share * window_s
    return max(first, last)


def _stage_dp(dense: float, expert: float, spreads: tuple[Spread, Spread], cluster: Cluster,
              micro: MicroBatchTime, windows: tuple[float, float], mb: int, zero: int,
              recipe: str, idle: tuple[float, float]) -> tuple[float, float, float, str]:
    """One stage's DP traffic: (seconds, exposed, bytes sent, bounding link)."""
    # ZeRO-3 gathers the recipe's gathered copy: bf16, or FP8 for FP8 parameters.
    grad_bytes, weight_bytes = RECIPES[recipe].gradients, RECIPES[recipe].gathered_bytes
    first_fwd, last_bwd = windows
    total = exposed = sent = 0.0
    link = cluster.intra.id
    reduce_exposed = gather_exposed = 0.0
    for params, s in ((dense, spreads[0]), (expert, spreads[1])):
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
            continue
        count, last = _buckets(params, megatron_bucket_params(s.size))
        full = min(params, megatron_bucket_params(s.size))
        kind = "all_reduce" if zero == 0 else "reduce_scatter"
        bucket = _cost(kind, full * grad_bytes, s, cluster)
        tail = _cost(kind, last * grad_bytes, s, cluster)
        total += (count - 1) * bucket.seconds + tail.seconds
        sent += (count - 1) * bucket.bytes_per_gpu + tail.bytes_per_gpu
        reduce_exposed += exposed_after_window(last_bwd, bucket.seconds, tail.seconds, count,
                                               full / params)
        link = bucket.bottleneck
        if zero in (1, 2):
            bucket = _cost("all_gather", full * weight_bytes, s, cluster)
            tail = _cost("all_gather", last * weight_bytes, s, cluster)
            total += (count - 1) * bucket.seconds + tail.seconds
            sent += (count - 1) * bucket.bytes_per_gpu + tail.bytes_per_gpu
            gather_exposed += gather_delay(first_fwd, bucket.seconds, tail.seconds, count,
                                           full / params)
    exposed += max(0.0, reduce_exposed - idle[1]) + max(0.0, gather_exposed - idle[0])
    return total, exposed, sent, link


def _dp_part(model: ModelSpec, lay: ParallelLayout, cluster: Cluster, micro: MicroBatchTime,
             mb: int, zero: int, schedule: str, virtual: int, recipe: str,
             idle: tuple[tuple[float, float], ...], first: int = 0, last: int = 0) -> Part:
    """Gradient (and ZeRO weight) traffic over the DP groups, stage by stage: the part is
    the stage whose traffic lengthens the step most (on a tie, the heaviest)."""
    g = cluster.gpus_per_node
    stages = stage_params(model, lay.pp, schedule, virtual, first, last)
    dense_s = spread(lay, "dp-cp", g)
    expert_s = spread(lay, "edp", g) if any(s.experts for s in stages) else Spread(1, 1, 1)
    # The overlap windows: one model chunk's backward (the last) and forward (the first).
    chunks = chunks_per_rank(schedule, virtual) if lay.pp > 1 else 1
    windows = (micro.forward / chunks, micro.backward / chunks)
    worst = None
    for rank, sp in enumerate(stages):
        dense = sp.tp_split / lay.tp + sp.replicated
        expert = sp.experts / (lay.ep * lay.etp)
        found = _stage_dp(dense, expert, (dense_s, expert_s), cluster, micro, windows, mb,
                          zero, recipe, idle[rank] if rank < len(idle) else (0.0, 0.0))
        key = (found[1], dense + expert)
        if worst is None or key > worst[0]:
            worst = (key, found)
    total, exposed, sent, link = worst[1]
    name = {0: "all_reduce", 1: "reduce_scatter + all_gather", 2: "reduce_scatter + all_gather",
            3: "all_gather x2 + reduce_scatter per micro-batch"}[zero]
    return Part("dp", name, dense_s.size, max(dense_s.nodes, expert_s.nodes), link, sent,
                total, exposed)
