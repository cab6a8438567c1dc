"""Each pipeline stage's micro-batch on one GPU (``stage_times``), for the step model
(``labs.recipe.step_time``).

A micro-batch on a stage is its layers' kernels and collectives (``labs.parallel.layer_time``:
every GEMM at its shape's achieved rate, the attention core at its kernel's published rate,
every memory-bound op at achieved HBM bandwidth, each TP, CP and EP collective as NCCL runs it
where its group sits, exposed or hidden), plus the first stage's embedding and the last
stage's output layer and loss (``labs.model.head.head_ops``) and, where the weight-gradient
GEMMs do not accumulate into fp32 themselves, each micro-batch's gradient accumulation.

Pipeline sends: Megatron's pipeline sends the s·b·h activations forward and their gradients
back at every chunk boundary, synchronously (``_communicate``), 2·v per micro-batch on the
critical path; across nodes each TP rank sends 1/t and an NVLink all-gather rebuilds the rest
(Narayanan et al. 2021, arXiv:2104.04473, sec 4.1, scatter/gather), with sequence parallelism
the tensor is already split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from labs.core.recomputation import RECOMPUTATION
from labs.hardware.kernels import with_matmul_efficiency
from labs.hardware.links import Cluster
from labs.hardware.nccl import nccl_time
from labs.model.head import accumulate_time, head_ops, optimizer_time
from labs.model.spec import ModelSpec
from labs.parallel.layer_time import LayerTime, layer_time, weight_grad_seconds
from labs.parallel.layout import ParallelLayout
from labs.recipe.groups import Spread, spread
from labs.recipe.timing import DEFAULT_STEP, MicroBatchTime, Part, StepOptions
from labs.schedules.catalogue import chunks_per_rank
from labs.schedules.stages import StageParams, stage_params

ACT_BYTES = 2  # bf16 activations on the wire


@dataclass(frozen=True)
class Stage:
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
    # (pass, kind, seconds, exposed, of it SMs lent) of the TP, CP and EP collectives of
    # each pass (``labs.recipe.overlap`` draws them)
    passes: tuple[tuple[str, str, float, float, float], ...] = ()

    @property
    def seconds(self) -> float:
        return self.forward + self.backward + self.tp + self.cp + self.ep

    @property
    def split(self) -> tuple[float, float, float]:
        """(F, I, W): the micro-batch as a zero-bubble schedule splits its backward (Qi et
        al. 2024 sec 2; EP05 step 5). W is the layers' weight-gradient GEMMs
        (``labs.parallel.layer_time.weight_grad_seconds``, as EP05 splits one layer); F the
        forward, kernels and exposed collectives; I the rest of the backward (input-gradient
        GEMMs, attention's and the memory-bound ops' backward, any recomputation, the head's
        backward, gradient accumulation, exposed collectives). F + I + W = ``seconds``."""
        w = math.fsum(n * weight_grad_seconds(lt) for n, lt, *_ in self.layers)
        f = self.forward + self.exposed_forward
        return f, self.seconds - f - w, w


def _stage(sp: StageParams, parts: list[tuple], head, accumulate: float) -> Stage:
    """``parts``: (layers, layer time, local dense params, local expert params) of each kind
    of layer the stage holds (dense or MoE, in each per-layer recomputation mode)."""
    parts = [p for p in parts if p[0] and p[1] is not None]
    acc = dict(forward=0.0, backward=0.0, exposed_forward=0.0, exposed_backward=0.0,
               gemm=0.0, attention=0.0, memory=0.0)
    comm = {k: [0.0, 0.0] for k in ("tp", "cp", "ep")}
    by_pass = {(p, k): [0.0, 0.0, 0.0] for p in ("forward", "backward")
               for k in ("tp", "cp", "ep")}
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
                row = by_pass[key, c.name]
                row[0] += n * c.seconds
                row[1] += n * c.exposed
                row[2] += n * c.sm
    for passes, key in ((head[0], "forward"), (head[1], "backward")):
        for p in passes:
            acc[key] += p.seconds
            acc["gemm"] += p.of("gemm")
            acc["memory"] += p.of("memory")
    acc["backward"] += accumulate
    acc["memory"] += accumulate
    return Stage(sp, acc["forward"], acc["backward"], acc["exposed_forward"],
                  acc["exposed_backward"], acc["gemm"], acc["attention"], acc["memory"],
                  comm["tp"][0], comm["cp"][0], comm["ep"][0], comm["tp"][1],
                  comm["cp"][1], comm["ep"][1], tuple(parts),
                  tuple((p, k, *v) for (p, k), v in by_pass.items() if v[0] > 0))


@dataclass(frozen=True)
class StageTimes:
    """Every pipeline stage's micro-batch (kernels and the TP, CP, EP collectives), the
    slowest one, and the pipeline sends: what a step's pipeline part is made of."""

    stages: tuple[Stage, ...]
    slow: Stage
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
                              s.memory, s.exposed_forward, self.sends, s.passes)

    def optimizer_s(self, lay: ParallelLayout, zero: int, replicas: int = 1) -> float:
        """The slowest stage's optimizer step (its local parameters; ZeRO ≥ 1: their shard,
        over DP x CP, or HSDP's shard group of DP x CP / ``replicas``)."""
        local = local_params(self.slow.params, lay) / (lay.dp * lay.cp // replicas
                                                       if zero >= 1 else 1)
        return optimizer_time(self.cluster.gpu, local)


@dataclass(frozen=True)
class LayerKinds:
    """One dense and one MoE layer's micro-batch in each per-layer mode a recomputation runs
    (one, or a layer-granular mode's two: labs.core.recomputation, Recomputation.groups),
    where the layout places their TP, CP and EP groups."""

    times: dict[str, tuple[LayerTime, LayerTime | None]]
    spreads: tuple[Spread, Spread, Spread]  # tp, cp, ep
    sp: bool
    cluster: Cluster  # with any matmul override applied


@lru_cache(maxsize=8192)
def layer_kinds(model: ModelSpec, layout: ParallelLayout, cluster: Cluster, *, seq_len: int,
                micro_batch: int, recompute: str,
                options: StepOptions = DEFAULT_STEP) -> LayerKinds:
    m, lay = model, layout
    cluster = with_matmul_efficiency(cluster, options.matmul_efficiency)
    g = cluster.gpus_per_node
    sp = lay.tp > 1 and options.sequence_parallel
    tp_s, cp_s = spread(lay, "tp", g), spread(lay, "cp", g)
    ep_s = spread(lay, "ep", g) if lay.ep > 1 else Spread(1, 1, 1)
    common = dict(tp=tp_s.group, cp=cp_s.group, ep=ep_s.group, micro_batch=micro_batch,
                  seq_len=seq_len, sp=sp, options=options.compute, etp=lay.etp,
                  tp_overlap=options.tp_overlap, ep_overlap=options.ep_overlap,
                  ep_dispatch=options.ep_dispatch)
    times = {mode: (layer_time(m, cluster, recompute=mode, **common),
                    layer_time(m, cluster, moe=True, recompute=mode, **common)
                    if m.is_moe else None)
             for mode, *_ in RECOMPUTATION[recompute].groups(m.layers)}
    return LayerKinds(times, (tp_s, cp_s, ep_s), sp, cluster)


@lru_cache(maxsize=512)
def _stage_layer_counts(model: ModelSpec, pp: int, schedule: str, virtual: int, first: int,
                        last: int) -> frozenset[tuple[int, int]]:
    """The distinct (dense, MoE) layer counts of the stages (a handful, however many)."""
    return frozenset((sp.dense_layers, sp.moe_layers)
                     for sp in stage_params(model, pp, schedule, virtual, first, last))


def layers_floor(model: ModelSpec, layout: ParallelLayout, cluster: Cluster, *,
                 seq_len: int, micro_batch: int, recompute: str, schedule: str, virtual: int,
                 options: StepOptions = DEFAULT_STEP, first: int = 0, last: int = 0) -> float:
    """The heaviest stage's layers alone (kernels and exposed TP, CP, EP collectives; no
    embedding, output layer, gradient accumulation or pipeline sends): never above
    ``stage_times(...).micro.total``, and a few lookups instead of building every stage, so
    the planner orders its candidates by it before it builds the stages of the few in reach."""
    kinds = layer_kinds(model, layout, cluster, seq_len=seq_len, micro_batch=micro_batch,
                        recompute=recompute, options=options)
    # A layer's share of its stage's micro-batch (``Stage.seconds``): kernels and exposed
    # collectives, both passes.
    per = {mode: (d.seconds, e.seconds if e else 0.0) for mode, (d, e) in kinds.times.items()}
    record = RECOMPUTATION[recompute]
    heaviest = max(math.fsum(dense * per[mode][0] + moe * per[mode][1]
                             for mode, dense, moe in record.groups(d, e))
                   for d, e in _stage_layer_counts(model, layout.pp, schedule, virtual, first,
                                                   last))
    return heaviest * (1 - 1e-9)  # shaved for float rounding: the stages sum in another order


@lru_cache(maxsize=4096)
def stage_times(model: ModelSpec, layout: ParallelLayout, cluster: Cluster, *, seq_len: int,
                micro_batch: int, accumulate: bool, recompute: str, schedule: str,
                virtual: int, options: StepOptions = DEFAULT_STEP, first: int = 0,
                last: int = 0) -> StageTimes:
    """Each stage's micro-batch on one GPU (``accumulate``: more than one micro-batch, so
    unfused gradient accumulation runs); cached, since ZeRO and the bubble do not change it."""
    m, lay = model, layout
    kinds = layer_kinds(model, layout, cluster, seq_len=seq_len, micro_batch=micro_batch,
                        recompute=recompute, options=options)
    cluster, sp, times = kinds.cluster, kinds.sp, kinds.times
    gpu = cluster.gpu
    record = RECOMPUTATION[recompute]
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
            acc = accumulate_time(gpu, local_params(sp_, lay)) \
                if accumulate and not options.grad_accum_fusion else 0.0
            parts = []
            for mode, dense, moe in record.groups(sp_.dense_layers, sp_.moe_layers):
                parts += [(dense, times[mode][0], *per_layer[0]),
                          (moe, times[mode][1], *per_layer[1])]
            distinct[key] = _stage(sp_, parts, head, acc)
        stages.append(distinct[key])
    slow = max(stages, key=lambda s: s.seconds)
    mean = math.fsum(s.seconds for s in stages) / len(stages)
    # Pipeline sends (per micro-batch: 2 per chunk boundary the stage owns).
    chunks = chunks_per_rank(schedule, virtual) if lay.pp > 1 else 1
    sends, send_part = _sends(m, lay, cluster, seq_len, micro_batch, chunks, sp,
                              options.scatter_gather)
    return StageTimes(tuple(stages), slow, slow.seconds / mean if mean else 1.0, sends,
                      send_part, kinds.spreads, chunks, sp, cluster,
                      next(iter(times.values()))[0].ops.attention)



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


def local_params(sp: StageParams, lay: ParallelLayout) -> float:
    return sp.tp_split / lay.tp + sp.replicated + sp.experts / (lay.ep * lay.etp)


def bytes_of(stage: Stage, name: str) -> float:
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

