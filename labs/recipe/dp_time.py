"""Data-parallel and ZeRO traffic of a step and how much of it is exposed, for the step model
(``labs.recipe.step_time``).

The gradients are reduced once per step in buckets (Megatron Core's DDP: all-reduce, or
reduce-scatter then all-gather of the updated weights with the distributed optimizer) as the
last micro-batch's backward produces them, and into the idle time the schedule leaves the stage
(``labs.recipe.lab.pipeline_slack``); or, without overlap (Megatron 2021's "local" DDP,
Korthikanti et al. 2022 sec 6.3), all after the backward. An MoE model's dense parameters and
its experts' are reduced on different groups (data-parallel and expert-data-parallel), each
buffer's buckets on its own communicator: with overlap the two run at once and the step waits
for the later tail each way; without it each collective is synchronous, so they add
(``labs.recipe.timing.group_wait``). ZeRO-3/FSDP (Rajbhandari et al. 2020;
Zhao et al. 2023, arXiv:2304.11277) gathers every layer's weights before its forward and
backward and reduce-scatters its gradients after, per micro-batch, one layer ahead of the
compute (FSDP's backward and forward prefetch): each pays NCCL's ring latency over the whole DP
group, and only what outlasts its layer's compute is exposed, plus the first layer's gather of
each pass. PyTorch's FSDP2 (the "compiled" and "eager" kernels, ``labs.model.ops``) adds
its memory-bound copies (torch 2.5 distributed/_composable/fsdp/_fsdp_collectives.py):
after each all-gather, foreach_all_gather_copy_out's split_with_sizes_copy moves the
gathered flat buffer into each parameter (read and write each gathered byte), on the
compute stream, so on the critical path; before each reduce-scatter, foreach_reduce's
_chunk_cat packs the 16-bit gradients into the reduce-scatter input in the reduce dtype
(read 2 B, write the reduce dtype's bytes per parameter), on the reduce-scatter stream,
so ahead of the collective. Each layer's ZeRO-3 gathers and reduce-scatters, whichever
software runs them, take NCCL's SMs from the layer they run beside
(``labs.hardware.nccl.overlapped``). The gradient buckets of ZeRO-0/1/2 and TP's overlapped
collectives would pay the same and are left uncharged, so the lab's times there are a lower
bound (the calibration runs' published times are 2-13% longer). Tied input and output
embeddings on different stages all-reduce their gradient between the two (Megatron's
embedding group).

HSDP (hybrid sharded data parallelism: PyTorch FSDP2's ``fully_shard(mesh=2-D DeviceMesh)``,
"replicate across the 0th dim and shard across the 1st"; FSDP1's HYBRID_SHARD; torchtitan's
data_parallel_replicate_degree x data_parallel_shard_degree; Zhao et al. 2023 sec 3.2.2)
shards ZeRO-3's state over a shard group of DP x CP / R ranks and keeps R replicas of it.
Each layer's gathers and reduce-scatters run as above, inside the shard group, on the links
it spans (NVLink when it stays inside a node); after each layer's reduce-scatter its
gradient shard (its parameters / the shard group, in the gradient dtype) is all-reduced
across the R replicas (torch 2.5 _fsdp_collectives.foreach_reduce: reduce_scatter, then
all_reduce over the replicate group), on the links between them. FSDP2 all-reduces in every
backward unless ``set_requires_all_reduce(False)`` is set for all but the last micro-batch,
as its docs advise for gradient accumulation under HSDP; the lab times that: one all-reduce
per layer a step, each issued as its layer's reduce-scatter ends in the last micro-batch's
backward, hidden behind the rest of that backward (and the stage's idle time after it) as
the gradient buckets are, with the same uncharged SMs (``hsdp_replicas``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.core.catalogue import RECIPES
from labs.data_parallel.lab import exposed_after_window
from labs.hardware.comm import CommCost, nccl_collective
from labs.hardware.kernels import mem_time
from labs.hardware.links import Cluster
from labs.hardware.nccl import nccl_time, overlapped, sm_share
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout
from labs.recipe.groups import Spread, hybrid_spreads, spread
from labs.recipe.stage_time import Stage
from labs.recipe.timing import Buckets, MicroBatchTime, Part, StepOptions, group_wait


def _cost(kind: str, size: float, s: Spread, cluster: Cluster) -> CommCost:
    """The one function every lesson times a collective with (``labs.hardware.comm``): EP02's
    gradient all-reduce and this step's are the same collective, so they take the same time."""
    return nccl_collective(kind, size, s.size, cluster, s.per_node)


def _sent(kind: str, size: float, n: int) -> float:
    if n <= 1:
        return 0.0
    return (2.0 if kind == "all_reduce" else 1.0) * (n - 1) / n * size



def megatron_bucket_params(dp_size: int) -> int:
    """Megatron Core's default gradient bucket, in parameters: max(40M, 1M x DP size)
    (DistributedDataParallelConfig.bucket_size: larger DP groups get larger buckets so the
    collectives do not become latency-bound)."""
    return max(40_000_000, 1_000_000 * dp_size)


def _buckets(params: float, bucket_params: int) -> tuple[int, float]:
    """How many buckets ``params`` fill and the last one's parameters."""
    count = max(1, math.ceil(params / bucket_params))
    return count, params - (count - 1) * bucket_params


def _bucketed(kind: str, params: float, per_param: float, s: Spread, cluster: Cluster,
              overlap: tuple | None, group: str = "dense") -> tuple[float, float, float, str,
                                                                    Buckets]:
    """One collective over Megatron's gradient buckets of ``params`` parameters, one after
    another: (seconds, seconds exposed, bytes sent, bounding link, the buckets). ``overlap``:
    (the rule that gives the exposure, the window it runs in), or None: all of it is
    exposed."""
    count, last = _buckets(params, megatron_bucket_params(s.size))
    full = min(params, megatron_bucket_params(s.size))
    bucket = _cost(kind, full * per_param, s, cluster)
    tail = _cost(kind, last * per_param, s, cluster)
    seconds = (count - 1) * bucket.seconds + tail.seconds
    sent = (count - 1) * _sent(kind, full * per_param, s.size) \
        + _sent(kind, last * per_param, s.size)
    if overlap is None:
        exposed, window = seconds, 0.0
    else:
        rule, window = overlap
        exposed = rule(window, bucket.seconds, tail.seconds, count, full / params)
    return seconds, exposed, sent, bucket.bottleneck, Buckets(
        kind, group, params, count, bucket.seconds, tail.seconds, full / params, window,
        exposed)


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


@dataclass(frozen=True)
class Zero3Layer:
    """One layer's ZeRO-3 / FSDP traffic per micro-batch, beside its passes (``zero3_layer``):
    each seconds once, unscaled by layers or micro-batches."""

    gather: float  # one all-gather of its weights (dense and expert groups)
    gathers: int  # all-gathers per micro-batch: 2 (resharded after forward) or 1 (kept)
    reduce: float  # the reduce-scatter of its gradients (FSDP2: with the copy-in)
    copy_out: float  # FSDP2's copy-out after each gather, on the compute stream
    ahead: float  # what the next layer's gather adds to this layer's forward
    behind: float  # what the backward's gather (ahead, or its own) and reduce-scatter add
    sm_ahead: float  # of ahead, the compute slowed by NCCL's SMs
    sm_behind: float  # of behind, the same
    sent: float  # bytes one GPU sends for it per micro-batch


def zero3_layer(lt, params, s: tuple[Spread, Spread], cluster: Cluster, weight_bytes: float,
                grad_bytes: float, fsdp2: bool = False, prefetch: bool = True,
                reshard: bool = True) -> Zero3Layer:
    """One layer (``lt``: its ``LayerTime``; ``params``: its local dense and expert parameters)
    under ZeRO-3 (``zero3_exposure``). The next layer's forward gather runs beside this
    layer's forward: PyTorch's FSDP issues each all-gather on its own stream, so it overlaps
    the compute issued before it ("implicit forward prefetching, always enabled", PyTorch FSDP
    notes, "FSDP Prefetch Nuances"). In backward, ``prefetch``: the next layer's gather runs
    beside this layer's backward (FSDP2's default explicit backward prefetch in reverse
    post-forward order, pytorch/pytorch#128884; FSDP1's BACKWARD_PRE); off
    (``set_modules_to_backward_prefetch([])``, FSDP1's ``backward_prefetch=None``), each
    layer's gather is issued at its own pre-backward hook, and the layer waits for all of it.
    ``reshard``: FSDP2's ``reshard_after_forward`` (torchtitan's default for every block but
    the last); off, the gathered weights stay until the backward, which gathers nothing: the
    traffic of ZeRO-2's SHARD_GRAD_OP, for every layer's whole weights held from its forward
    to its backward (``labs.memory``). Each layer's reduce-scatter runs beside the next
    layer's backward in both."""
    ag = rs = copy_out = sent = sent_gather = 0.0
    for count, grp in zip(params, s, strict=True):
        if grp.size == 1 or not count:
            continue
        ag += _cost("all_gather", count * weight_bytes, grp, cluster).seconds
        rs += _cost("reduce_scatter", count * grad_bytes, grp, cluster).seconds
        sent_gather += _sent("all_gather", count * weight_bytes, grp.size)
        sent += 2 * _sent("all_gather", count * weight_bytes, grp.size) \
            + _sent("reduce_scatter", count * grad_bytes, grp.size)
        if fsdp2:
            copy_out += mem_time(cluster.gpu, 2 * count * weight_bytes)
            rs += mem_time(cluster.gpu, count * (2 + grad_bytes))
    share = sm_share(cluster)
    fwd, bwd = lt.forward.seconds, lt.backward.seconds
    gathers = 2 if reshard else 1
    sent -= 0.0 if reshard else sent_gather
    beside = ag + rs if reshard and prefetch else rs  # what runs beside the backward
    waited = ag if reshard and not prefetch else 0.0  # its own gather, before it
    ahead, behind = overlapped(ag, fwd, share), waited + overlapped(beside, bwd, share)
    # Of each, the SMs lent: what the compute beside it lost, up to all it added.
    return Zero3Layer(ag, gathers, rs, copy_out, ahead, behind,
                      min(ahead, share * min(ag, fwd)),
                      min(behind - waited, share * min(beside, bwd)), sent)


def zero3_exposure(stage: Stage, lay: ParallelLayout, s: tuple[Spread, Spread], cluster: Cluster,
           mb: int, weight_bytes: float, grad_bytes: float, fsdp2: bool = False,
           prefetch: bool = True, reshard: bool = True) -> tuple[float, float, float, float, tuple]:
    """ZeRO-3 / FSDP on one stage, per step: (seconds, exposed, bytes sent, of exposed the
    SMs lent, the forward passes' (seconds, exposed, SMs lent)). Per micro-batch,
    each layer's weights are gathered before its forward and again before its backward, and
    its gradients reduce-scattered after, one layer ahead of the compute: a layer's
    collectives are exposed where they outlast the layer beside which they run, and each
    pass waits for its first layer's gather. ``fsdp2``: with FSDP2's copies (module
    docstring): each gather's copy-out on the critical path, each reduce-scatter's copy-in
    ahead of it. ``prefetch`` and ``reshard``: FSDP's backward prefetch and
    reshard_after_forward (``zero3_layer``); kept parameters, the backward waits for no first
    gather."""
    total = exposed = sent = sm = fwd_total = fwd_exposed = fwd_sm = 0.0
    first_gather = 0.0
    g = 2 if reshard else 1
    for n, lt, *params in stage.layers:
        z = zero3_layer(lt, params, s, cluster, weight_bytes, grad_bytes, fsdp2, prefetch,
                        reshard)
        ag, rs, copy_out = z.gather, z.reduce, z.copy_out
        sent += mb * n * z.sent
        total += mb * n * (g * ag + rs + g * copy_out)
        exposed += mb * n * (z.ahead + z.behind + g * copy_out)
        lent = mb * n * z.sm_ahead
        sm += lent + mb * n * z.sm_behind
        fwd_sm += lent
        fwd_total += mb * n * (ag + copy_out)
        fwd_exposed += mb * n * (z.ahead + copy_out)
        first_gather = first_gather or ag
    # Each pass's first layer waits for its whole gather (backward without prefetch: counted
    # in every layer's own wait already).
    firsts = 1 + (1 if reshard and prefetch else 0)
    return (total, exposed + mb * firsts * first_gather, sent, sm,
            (fwd_total, fwd_exposed + mb * first_gather, fwd_sm))


def _stage_dp(stage: Stage, lay: ParallelLayout, spreads: tuple[Spread, ...],
              cluster: Cluster, micro: MicroBatchTime, windows: tuple[float, float], mb: int,
              zero: int, recipe: str, overlap: bool,
              idle: tuple[float, float], fsdp2: bool = False,
              fsdp: tuple[bool, bool] = (True, True)) -> tuple:
    """One stage's DP traffic: (seconds, exposed, bytes sent, bounding link, of exposed the
    SMs lent, ZeRO-3's forward (seconds, exposed), ZeRO-0/1/2's bucketed collectives)."""
    # ZeRO-3 gathers the recipe's gathered copy: bf16, or FP8 for FP8 parameters.
    grad_bytes, weight_bytes = RECIPES[recipe].gradients, RECIPES[recipe].gathered_bytes
    first_fwd, last_bwd = windows
    sp = stage.params
    dense = sp.tp_split / lay.tp + sp.replicated
    expert = sp.experts / (lay.ep * lay.etp)
    link = cluster.intra.id
    if zero == 3:
        total, exposed, sent, sm, fwd = zero3_exposure(stage, lay, spreads[:2], cluster, mb,
                                                       weight_bytes, grad_bytes, fsdp2,
                                                       *fsdp)
        if spreads[0].nodes > 1:
            link = cluster.inter.id
        if len(spreads) > 2:  # HSDP: the gradient shards' all-reduce across the replicas
            ar = hsdp_replicas(stage, spreads, cluster, grad_bytes, last_bwd, overlap)
            total, sent = total + ar.seconds, sent + ar.sent
            exposed += max(0.0, ar.exposed - idle[1])
            if ar.seconds and spreads[2].nodes > 1:
                link = cluster.inter.id
        return total, exposed, sent, link, sm, fwd, ()
    total = sent = 0.0
    buckets = []
    for params, s, group in ((dense, spreads[0], "dense"), (expert, spreads[1], "experts")):
        if s.size == 1 or not params:
            continue
        kind = "all_reduce" if zero == 0 else "reduce_scatter"
        seconds, _, moved, link, b = _bucketed(
            kind, params, grad_bytes, s, cluster,
            (exposed_after_window, last_bwd) if overlap else None, group)
        total, sent = total + seconds, sent + moved
        buckets.append(b)
        if zero in (1, 2):
            seconds, _, moved, _, b = _bucketed(
                "all_gather", params, weight_bytes, s, cluster,
                (gather_delay, first_fwd) if overlap else None, group)
            total, sent = total + seconds, sent + moved
            buckets.append(b)
    # Each way the groups' tails overlap (DP overlap: each group on its own communicator) or
    # add (without it): labs.recipe.timing.group_wait.
    reduce_exposed = group_wait([b for b in buckets if b.kind != "all_gather"])
    gather_exposed = group_wait([b for b in buckets if b.kind == "all_gather"])
    exposed = max(0.0, reduce_exposed - idle[1]) + max(0.0, gather_exposed - idle[0])
    return total, exposed, sent, link, 0.0, (0.0, 0.0, 0.0), tuple(buckets)


@dataclass(frozen=True)
class ReplicaSync:
    """HSDP's all-reduce of the gradient shards across the replicas, per step."""

    seconds: float  # every layer's, one after another
    exposed: float  # what outlasts the last micro-batch's backward
    sent: float  # bytes one GPU sends
    layer: float  # one layer's (the stage's first), for the lesson's hand count


def hsdp_replicas(stage: Stage, spreads: tuple[Spread, ...], cluster: Cluster,
                  grad_bytes: float, window_s: float, overlap: bool) -> ReplicaSync:
    """HSDP's replica all-reduce on one stage (module docstring): each layer's gradient shard,
    its local dense (and expert) parameters over the shard group (``spreads``: dense shard,
    expert shard, dense replica, expert replica), in the gradient dtype, all-reduced across
    the replica group once a step. Each layer's is ready as its backward ends, so the stage's
    layers are its buckets, the gradient produced evenly over the last backward
    (``labs.data_parallel.lab.exposed_after_window``); without ``overlap`` (the step's
    dp_overlap off) all of it is after the backward."""
    seconds = sent = first = 0.0
    layers = 0
    for n, _lt, *params in stage.layers:
        one = 0.0
        for count, shard, rep in zip(params, spreads[:2], spreads[2:], strict=True):
            if rep.size == 1 or not count:
                continue
            size = count / shard.size * grad_bytes
            one += _cost("all_reduce", size, rep, cluster).seconds
            sent += n * _sent("all_reduce", size, rep.size)
        seconds += n * one
        layers += n
        first = first or one
    if not seconds:
        return ReplicaSync(0.0, 0.0, 0.0, 0.0)
    if not overlap:
        return ReplicaSync(seconds, seconds, sent, first)
    each = seconds / layers
    return ReplicaSync(seconds, exposed_after_window(window_s, each, each, layers, 1 / layers),
                       sent, first)


def dp_spreads(lay: ParallelLayout, cluster: Cluster, stages: list[Stage],
               replicas: int = 1) -> tuple[Spread, ...]:
    """Where the dense parameters' DP (x CP) groups and the experts' fall on the nodes; with
    HSDP's ``replicas`` > 1, their shard groups, then their replica groups
    (``labs.recipe.groups.hybrid_spreads``)."""
    g = cluster.gpus_per_node
    experts = any(s.params.experts for s in stages)
    none = Spread(1, 1, 1)
    if replicas > 1:
        dense = hybrid_spreads(lay, "dp-cp", replicas, g)
        expert = hybrid_spreads(lay, "edp", replicas, g) if experts else (none, none)
        return dense[0], expert[0], dense[1], expert[1]
    return spread(lay, "dp-cp", g), (spread(lay, "edp", g) if experts else none)


def dp_part(model: ModelSpec, lay: ParallelLayout, cluster: Cluster, micro: MicroBatchTime,
             stages: list[Stage], mb: int, zero: int, recipe: str, options: StepOptions,
             chunks: int, idle: tuple[tuple[float, float], ...]) -> Part:
    """Gradient (and ZeRO weight) traffic over the DP groups, stage by stage: the part is
    the stage whose traffic lengthens the step most (on a tie, the heaviest)."""
    spreads = dp_spreads(lay, cluster, stages, options.dp_replicas if zero == 3 else 1)
    dense_s, expert_s = spreads[:2]
    # The overlap windows: one model chunk's backward (the last) and forward (the first).
    windows = (micro.forward / chunks, micro.backward / chunks)
    worst = None
    for rank, st in enumerate(stages):
        stage_idle = idle[rank] if rank < len(idle) else (0.0, 0.0)
        found = _stage_dp(st, lay, spreads, cluster, micro, windows, mb, zero,
                          recipe, options.dp_overlap, stage_idle,
                          options.compute.kernels != "fused",
                          (options.fsdp_prefetch, options.reshard_after_forward))
        key = (found[1], st.seconds)
        if worst is None or key > worst[0]:
            worst = (key, found, stage_idle)
    (total, exposed, sent, link, sm, forward, buckets), stage_idle = worst[1], worst[2]
    tie = 0.0
    if lay.pp > 1 and model.tied_embeddings:
        # Megatron's embedding group: the first and last stages sum the tied weights' grads.
        grads = model.vocab * model.hidden / lay.tp * RECIPES[recipe].gradients
        tie = nccl_time("all_reduce", grads, 2, cluster, 1).seconds
        total += tie
        exposed += tie
    name = {0: "all_reduce", 1: "reduce_scatter + all_gather", 2: "reduce_scatter + all_gather",
            3: "all_gather x2 + reduce_scatter per layer per micro-batch"
            if options.reshard_after_forward
            else "all_gather + reduce_scatter per layer per micro-batch"}[zero]
    if len(spreads) > 2:
        name += f" in groups of {dense_s.size}; all_reduce per layer across " \
                f"{options.dp_replicas} replicas"
    # HSDP's part spans the whole DP (x CP) group: its shard groups times their replicas.
    group = dense_s.size * (spreads[2].size if len(spreads) > 2 else 1)
    return Part("dp", name, group, max(s.nodes for s in spreads), link, sent,
                total, exposed, sm, forward, buckets, stage_idle, tie)

