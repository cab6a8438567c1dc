"""EP08's step time: what one GPU spends per micro-batch and per step, by cause, op by op.

A micro-batch on a pipeline stage is its layers' kernels and collectives
(``labs.parallel.layer_time``: every GEMM at its shape's achieved rate, the attention core at
its kernel's published rate, every memory-bound op at achieved HBM bandwidth, each TP, CP and
EP collective as NCCL runs it where its group sits, exposed or hidden), plus the first
stage's embedding and the last stage's output layer and loss (``labs.model.ops.head_ops``)
and, where the weight-gradient GEMMs do not accumulate into fp32 themselves, each
micro-batch's gradient accumulation. The pipeline runs at its slowest stage's pace (every
micro-batch passes every stage), so the step is timed on that stage:

    step = m·(t_mb + sends) / (1 − bubble) + DP exposed + optimizer

- sends: Megatron's pipeline sends the s·b·h activations forward and their gradients back at
  every chunk boundary, synchronously (``_communicate``), 2·v per micro-batch on the
  critical path; across nodes each TP rank sends 1/t and an NVLink all-gather rebuilds the
  rest (Narayanan et al. 2021, arXiv:2104.04473, sec 4.1, scatter/gather), with sequence
  parallelism the tensor is already split;
- bubble: the simulated schedule's idle fraction (``labs.recipe.lab.measured_bubble``);
- DP: the gradients reduced once per step in buckets (Megatron Core's DDP: all-reduce, or
  reduce-scatter then all-gather of the updated weights with the distributed optimizer) as
  the last micro-batch's backward produces them, and into the idle time the schedule leaves
  the stage (``labs.recipe.lab.pipeline_slack``); or, without overlap (Megatron 2021's
  "local" DDP, Korthikanti et al. 2022 sec 6.3), all after the backward. ZeRO-3/FSDP
  (Rajbhandari et al. 2020; Zhao et al. 2023, arXiv:2304.11277) gathers every layer's weights
  before its forward and backward and reduce-scatters its gradients after, per micro-batch,
  one layer ahead of the compute (FSDP's backward and forward prefetch): each pays NCCL's
  ring latency over the whole DP group, and only what outlasts its layer's compute is
  exposed, plus the first layer's gather of each pass. Tied input and output embeddings on
  different stages all-reduce their gradient between the two (Megatron's embedding group);
- optimizer: the stage's local parameters (divided by DP x CP under ZeRO ≥ 1) through the
  optimizer's HBM-bound kernels (``labs.model.ops.optimizer_time``).
Only what does not fit behind compute (or idle time) is *exposed*, i.e. lengthens the step.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache

from labs.core.catalogue import RECIPES
from labs.core.errors import LabInputError
from labs.data_parallel.lab import exposed_after_window
from labs.hardware.kernels import with_matmul_efficiency
from labs.hardware.links import Cluster
from labs.hardware.nccl import nccl_time
from labs.model.flops import hardware_flops_per_token, model_flops_per_token
from labs.model.ops import (
    DEFAULT_OPTIONS,
    ComputeOptions,
    accumulate_time,
    head_ops,
    optimizer_time,
)
from labs.model.spec import ModelSpec
from labs.parallel.layer_time import Group, LayerTime, check_tp_overlap, layer_time
from labs.parallel.layout import ParallelLayout
from labs.schedules.catalogue import chunks_per_rank
from labs.schedules.stages import StageParams, stage_params

ACT_BYTES = 2  # bf16 activations on the wire


@dataclass(frozen=True)
class StepOptions:
    """How a run's software overlaps and fuses, beside its kernels' ``ComputeOptions``: each a
    property of the published configuration (Megatron flags), not a tuned knob.

    ``tp_overlap``: "none", "backward" (Megatron's async TP collectives in backward, the
    default since 2022) or "all" (--tp-comm-overlap); ``ep_overlap``: DualPipe / Megatron's
    EP all-to-all overlap; ``dp_overlap``: gradient buckets reduced during the last backward
    (--overlap-grad-reduce; False: Megatron 2021's local DDP, after it); ``grad_accum_fusion``:
    the weight-gradient GEMM accumulates into fp32 main_grad (--gradient-accumulation-fusion);
    ``matmul_efficiency``: an override of the GPU's measured full-wave GEMM rate as a fraction
    of its dense peak (None: the preset's MAMF x sustain)."""

    compute: ComputeOptions = DEFAULT_OPTIONS
    tp_overlap: str = "backward"
    ep_overlap: bool = False
    dp_overlap: bool = True
    grad_accum_fusion: bool = True
    scatter_gather: bool = True
    sequence_parallel: bool = True  # with TP > 1 (Korthikanti et al. 2022; 2021 runs: off)
    matmul_efficiency: float | None = None

    def __post_init__(self) -> None:
        check_tp_overlap(self.tp_overlap)
        for name in ("ep_overlap", "dp_overlap", "grad_accum_fusion", "scatter_gather",
                     "sequence_parallel"):
            if not isinstance(getattr(self, name), bool):
                raise LabInputError(name, f"{name} is true or false")


DEFAULT_STEP = StepOptions()


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


@dataclass(frozen=True)
class Part:
    """One kind of communication on one GPU: total seconds per step, hidden and exposed."""

    name: str  # "tp", "cp", "ep", "pp", "dp"
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
    """One micro-batch through the slowest pipeline stage on one GPU, in seconds: its kernels
    by kind and its exposed collectives by kind."""

    compute_forward: float  # kernels
    compute_backward: float  # kernels, recomputation and gradient accumulation included
    tp: float  # exposed, forward + backward
    cp_exposed: float
    ep: float
    gemm: float = 0.0
    attention: float = 0.0
    memory: float = 0.0  # memory-bound ops (norms, activations, loss, accumulation)
    exposed_forward: float = 0.0  # of tp + cp + ep, in the forward pass
    sends: float = 0.0  # pipeline sends on the critical path, per micro-batch

    @property
    def total(self) -> float:
        return self.compute_forward + self.compute_backward + self.tp + self.cp_exposed \
            + self.ep + self.sends

    @property
    def forward(self) -> float:
        return self.compute_forward + self.exposed_forward

    @property
    def backward(self) -> float:
        return self.total - self.sends - self.forward

    @property
    def compute(self) -> float:
        return self.compute_forward + self.compute_backward


@dataclass(frozen=True)
class Cause:
    """One cause of the step's time on the slowest stage, per step: seconds on the critical
    path and seconds overlapped (hidden) behind something else."""

    name: str  # gemm, attention, memory, optimizer, tp, cp, ep, pp, dp, bubble, stages
    label: str
    exposed: float
    hidden: float = 0.0


@dataclass(frozen=True)
class Timing:
    micro: MicroBatchTime
    parts: tuple[Part, ...]  # tp, cp, ep, pp (per step: m micro-batches) and dp
    model_flops_per_token: float
    hardware_flops_per_token: float
    # The slowest stage's micro-batch over the average stage's (1: even stages): the
    # micro-batch above is timed on that stage, since a pipeline runs at its slowest pace.
    stage_imbalance: float = 1.0
    optimizer_s: float = 0.0  # the optimizer step, after the pipeline
    attention: str = ""  # the attention implementation timed

    def causes(self, microbatches: int, bubble_s: float) -> tuple[Cause, ...]:
        """The step by cause on the slowest stage (``bubble_s``: the pipeline's idle time):
        what EP08's "why MFU is not 85%" chart draws. Divide by the micro-batches for one
        micro-batch's share."""
        u, m = self.micro, microbatches
        parts = {p.name: p for p in self.parts}
        rows = [Cause("gemm", "GEMMs", m * u.gemm),
                Cause("attention", "Attention", m * u.attention),
                Cause("memory", "Memory-bound ops", m * u.memory)]
        for name, label in (("tp", "TP collectives"), ("cp", "CP ring"),
                            ("ep", "EP all-to-all"), ("pp", "Pipeline sends"),
                            ("dp", "DP / ZeRO sync")):
            p = parts[name]
            rows.append(Cause(name, label, p.exposed, p.hidden))
        rows += [Cause("bubble", "Pipeline bubble", bubble_s),
                 Cause("optimizer", "Optimizer step", self.optimizer_s)]
        return tuple(rows)


def _cost(kind: str, size: float, s: Spread, cluster: Cluster):
    return nccl_time(kind, size, s.size, cluster, s.per_node)


def _sent(kind: str, size: float, n: int) -> float:
    if n <= 1:
        return 0.0
    return (2.0 if kind == "all_reduce" else 1.0) * (n - 1) / n * size


@dataclass(frozen=True)
class _Stage:
    """One stage's micro-batch: its layers' and head's time, and its pieces for DP."""

    params: StageParams
    forward: float  # compute
    backward: float  # compute (recompute, accumulation)
    exposed_forward: float
    exposed_backward: float
    gemm: float
    attention: float
    memory: float
    tp: float
    cp: float
    ep: float
    tp_total: float
    cp_total: float
    ep_total: float
    # (count, time, local dense parameters, local expert parameters) of its dense and MoE
    # layers
    layers: tuple[tuple[int, LayerTime, float, float], ...]

    @property
    def seconds(self) -> float:
        return self.forward + self.backward + self.tp + self.cp + self.ep


def _stage(sp: StageParams, dense: tuple, moe: tuple, head, accumulate: float) -> _Stage:
    """``dense``, ``moe``: (layer time, local dense params, local expert params) of a layer."""
    parts = [(sp.dense_layers, *dense), (sp.moe_layers, *moe)]
    parts = [p for p in parts if p[0] and p[1] is not None]
    acc = dict(forward=0.0, backward=0.0, exposed_forward=0.0, exposed_backward=0.0,
               gemm=0.0, attention=0.0, memory=0.0)
    comm = {k: [0.0, 0.0] for k in ("tp", "cp", "ep")}
    for n, lt, *_ in parts:
        for pass_, key in ((lt.forward, "forward"), (lt.backward, "backward")):
            acc[key] += n * pass_.compute
            acc["exposed_" + key] += n * pass_.exposed
            acc["gemm"] += n * pass_.gemm
            acc["attention"] += n * pass_.attention
            acc["memory"] += n * pass_.memory
            for c in pass_.comms:
                comm[c.name][0] += n * c.exposed
                comm[c.name][1] += n * c.seconds
    for passes, key in ((head[0], "forward"), (head[1], "backward")):
        for p in passes:
            acc[key] += p.seconds
            acc["gemm"] += p.of("gemm")
            acc["memory"] += p.of("memory")
    acc["backward"] += accumulate
    acc["memory"] += accumulate
    return _Stage(sp, acc["forward"], acc["backward"], acc["exposed_forward"],
                  acc["exposed_backward"], acc["gemm"], acc["attention"], acc["memory"],
                  comm["tp"][0], comm["cp"][0], comm["ep"][0], comm["tp"][1],
                  comm["cp"][1], comm["ep"][1], tuple(parts))


@dataclass(frozen=True)
class StageTimes:
    """Every pipeline stage's micro-batch (kernels and the TP, CP, EP collectives), the
    slowest one, and the pipeline sends: what a step's pipeline part is made of."""

    stages: tuple[_Stage, ...]
    slow: _Stage
    imbalance: float  # the slowest stage over the mean
    sends: float  # per micro-batch, on the critical path
    send_part: Part  # per micro-batch
    spreads: tuple[Spread, Spread, Spread]  # tp, cp, ep
    chunks: int
    sp: bool
    cluster: Cluster  # with any matmul override applied
    attention: str

    @property
    def micro(self) -> MicroBatchTime:
        s = self.slow
        return MicroBatchTime(s.forward, s.backward, s.tp, s.cp, s.ep, s.gemm, s.attention,
                              s.memory, s.exposed_forward, self.sends)

    def optimizer_s(self, lay: ParallelLayout, zero: int) -> float:
        """The slowest stage's optimizer step (its local parameters; ZeRO ≥ 1: their shard)."""
        local = _local_params(self.slow.params, lay) / (lay.dp * lay.cp if zero >= 1 else 1)
        return optimizer_time(self.cluster.gpu, local)


@lru_cache(maxsize=4096)
def stage_times(model: ModelSpec, layout: ParallelLayout, cluster: Cluster, *, seq_len: int,
                micro_batch: int, accumulate: bool, recompute: str, schedule: str,
                virtual: int, options: StepOptions = DEFAULT_STEP, first: int = 0,
                last: int = 0) -> StageTimes:
    """Each stage's micro-batch on one GPU (``accumulate``: more than one micro-batch, so
    unfused gradient accumulation runs); cached, since ZeRO and the bubble do not change it."""
    m, lay = model, layout
    cluster = with_matmul_efficiency(cluster, options.matmul_efficiency)
    gpu, g = cluster.gpu, cluster.gpus_per_node
    sp = lay.tp > 1 and options.sequence_parallel
    tp_s, cp_s = spread(lay, "tp", g), spread(lay, "cp", g)
    ep_s = spread(lay, "ep", g) if lay.ep > 1 else Spread(1, 1, 1)
    common = dict(tp=tp_s.group, cp=cp_s.group, ep=ep_s.group, micro_batch=micro_batch,
                  seq_len=seq_len, sp=sp, recompute=recompute, options=options.compute,
                  etp=lay.etp, tp_overlap=options.tp_overlap, ep_overlap=options.ep_overlap)
    dense = layer_time(m, cluster, **common)
    moe = layer_time(m, cluster, moe=True, **common) if m.is_moe else None
    h = head_ops(m, gpu, tp=lay.tp, cp=lay.cp, micro_batch=micro_batch, seq_len=seq_len,
                 sp=sp, options=options.compute)
    per_layer = _layer_params(m, lay)
    stages, distinct = [], {}
    for sp_ in stage_params(m, lay.pp, schedule, virtual, first, last):
        key = (sp_.layers, sp_.moe_layers, sp_.first, sp_.last)
        if key not in distinct:  # most middle stages are alike: time each kind once
            head = ([h.embedding_forward] if sp_.first else []) + \
                ([h.output_forward] if sp_.last else []), \
                ([h.embedding_backward] if sp_.first else []) + \
                ([h.output_backward] if sp_.last else [])
            acc = accumulate_time(gpu, _local_params(sp_, lay)) \
                if accumulate and not options.grad_accum_fusion else 0.0
            distinct[key] = _stage(sp_, (dense, *per_layer[0]), (moe, *per_layer[1]), head,
                                   acc)
        stages.append(distinct[key])
    slow = max(stages, key=lambda s: s.seconds)
    mean = math.fsum(s.seconds for s in stages) / len(stages)
    # Pipeline sends (per micro-batch: 2 per chunk boundary the stage owns).
    chunks = chunks_per_rank(schedule, virtual) if lay.pp > 1 else 1
    sends, send_part = _sends(m, lay, cluster, seq_len, micro_batch, chunks, sp,
                              options.scatter_gather)
    return StageTimes(tuple(stages), slow, slow.seconds / mean if mean else 1.0, sends,
                      send_part, (tp_s, cp_s, ep_s), chunks, sp, cluster, dense.ops.attention)


def step_parts(model: ModelSpec, layout: ParallelLayout, cluster: Cluster, *, seq_len: int,
               micro_batch: int, microbatches: int, recompute: str, zero: int,
               schedule: str, virtual: int, recipe: str = "adam16",
               options: StepOptions = DEFAULT_STEP,
               bubble: float = 0.0, slack: tuple[tuple[float, float], ...] = (),
               first: int = 0, last: int = 0) -> Timing:
    """Per-micro-batch time on the slowest stage and every communication part of a step.

    ``bubble`` is the schedule's idle fraction and ``slack`` each stage's idle time before its
    first forward and after its last backward, as fractions of the pipeline's makespan
    (``labs.recipe.lab.pipeline_slack``; empty: none). ``first``/``last``: Megatron's uneven
    first and last stages (0: not set)."""
    m, lay = model, layout
    st = stage_times(m, lay, cluster, seq_len=seq_len, micro_batch=micro_batch,
                     accumulate=microbatches > 1, recompute=recompute, schedule=schedule,
                     virtual=virtual, options=options, first=first, last=last)
    cluster, slow, micro, mb = st.cluster, st.slow, st.micro, microbatches
    tp_s, cp_s, ep_s = st.spreads
    pipeline_s = mb * micro.total / (1 - bubble)
    parts = [
        Part("tp", "reduce_scatter + all_gather" if st.sp else "all_reduce", tp_s.size,
             tp_s.nodes, cluster.intra.id, mb * _bytes_of(slow, "tp"), mb * slow.tp_total,
             mb * slow.tp),
        Part("cp", "ring send/recv", cp_s.size, cp_s.nodes,
             cluster.intra.id if cp_s.nodes == 1 else cluster.inter.id,
             mb * _bytes_of(slow, "cp"), mb * slow.cp_total, mb * slow.cp),
        Part("ep", "all_to_all" + (", overlapped" if options.ep_overlap else ""), ep_s.size,
             ep_s.nodes, cluster.intra.id if ep_s.nodes == 1 else cluster.inter.id,
             mb * _bytes_of(slow, "ep"), mb * slow.ep_total, mb * slow.ep),
        # The ramp's sends (2(p−1) hops before the first backward and after the last
        # forward) are in the bubble's stretch of m·sends / (1 − bubble).
        replace(st.send_part, bytes_per_step=mb * st.send_part.bytes_per_step,
                seconds=mb * st.sends, exposed=mb * st.sends),
        _dp_part(m, lay, cluster, micro, list(st.stages), mb, zero, recipe, options,
                 st.chunks, tuple((a * pipeline_s, b * pipeline_s) for a, b in slack)),
    ]
    return Timing(micro, tuple(parts), model_flops_per_token(m, seq_len),
                  hardware_flops_per_token(m, seq_len, recompute), st.imbalance,
                  st.optimizer_s(lay, zero), st.attention)


def _layer_params(m: ModelSpec, lay: ParallelLayout) -> tuple[tuple[float, float], ...]:
    """(dense, expert) parameters one GPU holds of one dense layer and of one MoE layer, as
    ``ModelSpec`` counts them: projections and MLPs split by TP, norms and the router
    replicated, routed experts split by EP x expert-TP."""
    norms = 2 * (m.hidden if m.norm == "rmsnorm" else 2 * m.hidden)
    dense = (m.attention_params + m._mlp_params(m.ffn)) / lay.tp + norms  # noqa: SLF001
    if not m.is_moe:
        return (dense, 0.0), (0.0, 0.0)
    router = m.experts * m.hidden + (m.experts if m.router_bias else 0)
    moe = (m.attention_params + m.shared_experts * m.expert_size) / lay.tp + norms + router
    return (dense, 0.0), (moe, m.experts * m.expert_size / (lay.ep * lay.etp))


def _local_params(sp: StageParams, lay: ParallelLayout) -> float:
    return sp.tp_split / lay.tp + sp.replicated + sp.experts / (lay.ep * lay.etp)


def _bytes_of(stage: _Stage, name: str) -> float:
    total = 0.0
    for n, lt, *_ in stage.layers:
        for pass_ in (lt.forward, lt.backward):
            c = pass_.comm(name)
            total += n * (c.bytes_per_gpu if c else 0.0)
    return total


def _sends(m: ModelSpec, lay: ParallelLayout, cluster: Cluster, seq_len: int,
           micro_batch: int, chunks: int, sp: bool, scatter_gather: bool) -> tuple[float, Part]:
    """(seconds per micro-batch on the critical path, the part per micro-batch)."""
    if lay.pp == 1:
        return 0.0, Part("pp", "send/recv", 1, 1, cluster.intra.id, 0.0, 0.0, 0.0)
    pp_s = spread(lay, "pp", cluster.gpus_per_node)
    across = pp_s.nodes > 1
    size = seq_len // lay.cp * micro_batch * m.hidden * ACT_BYTES
    per_node = 1 if across else 2
    if sp:  # the sequence-parallel activations are already split t ways
        hop = nccl_time("p2p", size / lay.tp, 2, cluster, per_node).seconds
        sent = size / lay.tp
    elif across and scatter_gather and lay.tp > 1:
        hop = nccl_time("p2p", size / lay.tp, 2, cluster, per_node).seconds \
            + nccl_time("all_gather", size, lay.tp, cluster, lay.tp).seconds
        sent = size / lay.tp
    else:
        hop = nccl_time("p2p", size, 2, cluster, per_node).seconds
        sent = size
    per_mb = 2 * chunks * hop
    link = cluster.inter.id if across else cluster.intra.id
    return per_mb, Part("pp", "send/recv (activations, gradients)", 2, pp_s.nodes, link,
                        2 * chunks * sent, hop, per_mb)


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


def zero3_exposure(stage: _Stage, lay: ParallelLayout, s: tuple[Spread, Spread], cluster: Cluster,
           mb: int, weight_bytes: float, grad_bytes: float) -> tuple[float, float, float]:
    """ZeRO-3 / FSDP on one stage, per step: (seconds, exposed, bytes sent). Per micro-batch,
    each layer's weights are gathered before its forward and again before its backward, and
    its gradients reduce-scattered after, one layer ahead of the compute: a layer's
    collectives are exposed where they outlast the layer beside which they run, and each
    pass waits for its first layer's gather."""
    total = exposed = sent = 0.0
    first_gather = 0.0
    for n, lt, *params in stage.layers:
        ag = rs = 0.0
        for count, grp in zip(params, s, strict=True):
            if grp.size == 1 or not count:
                continue
            ag += _cost("all_gather", count * weight_bytes, grp, cluster).seconds
            rs += _cost("reduce_scatter", count * grad_bytes, grp, cluster).seconds
            sent += mb * n * (2 * _sent("all_gather", count * weight_bytes, grp.size)
                              + _sent("reduce_scatter", count * grad_bytes, grp.size))
        total += mb * n * (2 * ag + rs)
        exposed += mb * n * (max(0.0, ag - lt.forward.seconds)
                             + max(0.0, ag + rs - lt.backward.seconds))
        first_gather = first_gather or ag
    return total, exposed + mb * 2 * first_gather, sent


def _stage_dp(stage: _Stage, lay: ParallelLayout, spreads: tuple[Spread, Spread],
              cluster: Cluster, micro: MicroBatchTime, windows: tuple[float, float], mb: int,
              zero: int, recipe: str, overlap: bool,
              idle: tuple[float, float]) -> tuple[float, float, float, str]:
    """One stage's DP traffic: (seconds, exposed, bytes sent, bounding link)."""
    # ZeRO-3 gathers the recipe's gathered copy: bf16, or FP8 for FP8 parameters.
    grad_bytes, weight_bytes = RECIPES[recipe].gradients, RECIPES[recipe].gathered_bytes
    first_fwd, last_bwd = windows
    sp = stage.params
    dense = sp.tp_split / lay.tp + sp.replicated
    expert = sp.experts / (lay.ep * lay.etp)
    link = cluster.intra.id
    if zero == 3:
        total, exposed, sent = zero3_exposure(stage, lay, spreads, cluster, mb, weight_bytes,
                                      grad_bytes)
        if spreads[0].nodes > 1:
            link = cluster.inter.id
        return total, exposed, sent, link
    total = sent = 0.0
    reduce_exposed = gather_exposed = 0.0
    for params, s in ((dense, spreads[0]), (expert, spreads[1])):
        if s.size == 1 or not params:
            continue
        count, last = _buckets(params, megatron_bucket_params(s.size))
        full = min(params, megatron_bucket_params(s.size))
        kind = "all_reduce" if zero == 0 else "reduce_scatter"
        bucket = _cost(kind, full * grad_bytes, s, cluster)
        tail = _cost(kind, last * grad_bytes, s, cluster)
        total += (count - 1) * bucket.seconds + tail.seconds
        sent += (count - 1) * _sent(kind, full * grad_bytes, s.size) \
            + _sent(kind, last * grad_bytes, s.size)
        if overlap:
            reduce_exposed += exposed_after_window(last_bwd, bucket.seconds, tail.seconds,
                                                   count, full / params)
        else:
            reduce_exposed += (count - 1) * bucket.seconds + tail.seconds
        link = bucket.bottleneck
        if zero in (1, 2):
            bucket = _cost("all_gather", full * weight_bytes, s, cluster)
            tail = _cost("all_gather", last * weight_bytes, s, cluster)
            total += (count - 1) * bucket.seconds + tail.seconds
            sent += (count - 1) * _sent("all_gather", full * weight_bytes, s.size) \
                + _sent("all_gather", last * weight_bytes, s.size)
            if overlap:
                gather_exposed += gather_delay(first_fwd, bucket.seconds, tail.seconds, count,
                                               full / params)
            else:
                gather_exposed += (count - 1) * bucket.seconds + tail.seconds
    exposed = max(0.0, reduce_exposed - idle[1]) + max(0.0, gather_exposed - idle[0])
    return total, exposed, sent, link


def _dp_part(model: ModelSpec, lay: ParallelLayout, cluster: Cluster, micro: MicroBatchTime,
             stages: list[_Stage], mb: int, zero: int, recipe: str, options: StepOptions,
             chunks: int, idle: tuple[tuple[float, float], ...]) -> Part:
    """Gradient (and ZeRO weight) traffic over the DP groups, stage by stage: the part is
    the stage whose traffic lengthens the step most (on a tie, the heaviest)."""
    g = cluster.gpus_per_node
    dense_s = spread(lay, "dp-cp", g)
    expert_s = spread(lay, "edp", g) if any(s.params.experts for s in stages) \
        else Spread(1, 1, 1)
    # The overlap windows: one model chunk's backward (the last) and forward (the first).
    windows = (micro.forward / chunks, micro.backward / chunks)
    worst = None
    for rank, st in enumerate(stages):
        found = _stage_dp(st, lay, (dense_s, expert_s), cluster, micro, windows, mb, zero,
                          recipe, options.dp_overlap,
                          idle[rank] if rank < len(idle) else (0.0, 0.0))
        key = (found[1], st.seconds)
        if worst is None or key > worst[0]:
            worst = (key, found)
    total, exposed, sent, link = worst[1]
    if lay.pp > 1 and model.tied_embeddings:
        # Megatron's embedding group: the first and last stages sum the tied weights' grads.
        grads = model.vocab * model.hidden / lay.tp * RECIPES[recipe].gradients
        tie = nccl_time("all_reduce", grads, 2, cluster, 1).seconds
        total += tie
        exposed += tie
    name = {0: "all_reduce", 1: "reduce_scatter + all_gather", 2: "reduce_scatter + all_gather",
            3: "all_gather x2 + reduce_scatter per layer per micro-batch"}[zero]
    return Part("dp", name, dense_s.size, max(dense_s.nodes, expert_s.nodes), link, sent,
                total, exposed)
