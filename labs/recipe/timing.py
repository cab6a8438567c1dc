"""The step model's options and answers (``labs.recipe.step_time``): how a run's software
overlaps and fuses (``StepOptions``), one communication kind's time on a GPU per step (``Part``),
one micro-batch on the slowest stage (``MicroBatchTime``) and the step by cause (``Timing``,
``Cause``: what EP08's "why MFU falls short of the GEMM rate" chart draws)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from labs.core.errors import LabInputError
from labs.model.ops import DEFAULT_OPTIONS, ComputeOptions
from labs.parallel.dispatch import check_ep_dispatch
from labs.parallel.layer_time import check_tp_overlap


@dataclass(frozen=True)
class StepOptions:
    """How a run's software overlaps and fuses, beside its kernels' ``ComputeOptions``: each a
    property of the published configuration (Megatron flags), not a tuned knob.

    ``tp_overlap``: "none", "backward" (Megatron's async TP collectives in backward, the
    default since 2022) or "all" (--tp-comm-overlap); ``ep_overlap``: DualPipe / Megatron's
    EP all-to-all overlap; ``ep_dispatch``: how the MoE tokens travel ("alltoall": NCCL, a
    copy per routed expert; "deepep": DeepEP, a copy per destination node, forwarded on
    NVLink; ``labs.parallel.dispatch``); ``dp_overlap``: gradient buckets reduced during the
    last backward (--overlap-grad-reduce; False: Megatron 2021's local DDP, after it);
    ``grad_accum_fusion``: the weight-gradient GEMM accumulates into fp32 main_grad
    (--gradient-accumulation-fusion; its GEMMs then read and write it, ``ComputeOptions``);
    ``matmul_efficiency``: an override of the GPU's measured full-wave GEMM rate as a fraction
    of its dense peak (None: the preset's MAMF x sustain)."""

    compute: ComputeOptions = DEFAULT_OPTIONS
    tp_overlap: str = "backward"
    ep_overlap: bool = False
    ep_dispatch: str = "alltoall"
    dp_overlap: bool = True
    grad_accum_fusion: bool = True
    scatter_gather: bool = True
    sequence_parallel: bool = True  # with TP > 1 (Korthikanti et al. 2022; 2021 runs: off)
    matmul_efficiency: float | None = None
    # ZeRO-3 / FSDP (labs.recipe.dp_time.zero3_layer): each layer's backward gather issued
    # ahead, beside the layer before (FSDP2's default backward prefetch; false: at the
    # layer's own pre-backward hook, set_modules_to_backward_prefetch([]), FSDP1's
    # backward_prefetch=None), and the gathered weights freed after the forward
    # (reshard_after_forward; false: kept until the backward, which gathers nothing).
    fsdp_prefetch: bool = True
    reshard_after_forward: bool = True
    # HSDP (labs.recipe.dp_time.hsdp_replicas): ZeRO-3's shard groups replicated this many
    # times across the data-parallel group (1: plain FSDP, sharded over all of it).
    dp_replicas: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.dp_replicas, int) or self.dp_replicas < 1:
            raise LabInputError("dp_shard", "HSDP's replicas are a whole number, 1 or more")
        check_tp_overlap(self.tp_overlap)
        check_ep_dispatch(self.ep_dispatch)
        for name in ("ep_overlap", "dp_overlap", "grad_accum_fusion", "scatter_gather",
                     "sequence_parallel", "fsdp_prefetch", "reshard_after_forward"):
            if not isinstance(getattr(self, name), bool):
                raise LabInputError(name, f"{name} is true or false")


DEFAULT_STEP = StepOptions()



@dataclass(frozen=True)
class Buckets:
    """One bucketed collective of a step's gradient sync (ZeRO-0/1/2, ``labs.recipe.dp_time``),
    once a step over one group's parameters: Megatron's buckets, one after another, bucket j
    ready at j·share·window and the last at the window's end (the reduction, in the last
    backward) or needed from (j−1)·share·window (the weights' all-gather, in the first
    forward)."""

    kind: str  # all_reduce or reduce_scatter (the gradients), all_gather (the weights)
    group: str  # "dense" or "experts"
    params: float  # the group's parameters on this GPU
    count: int  # buckets
    bucket_s: float  # a full bucket's collective
    last_s: float  # the last bucket's
    share: float  # a full bucket's share of the parameters
    window_s: float  # the pass it runs beside
    exposed: float  # the reduction's left after the window, or the forward's wait (all of
    # it without DP overlap), before the pipeline's idle time takes its part

    @property
    def seconds(self) -> float:
        return (self.count - 1) * self.bucket_s + self.last_s

    def runs(self) -> list[tuple[int, float, float]]:
        """Each bucket's (number, start, end) from its window's start as the step model runs
        them (``labs.data_parallel.lab.exposed_after_window``): bucket j ready at
        j·share·window, the last at the window's end, one after another; the last ends
        ``exposed`` past the window (without DP overlap the window is empty, and all of it
        is). A reduction's only: the weights' all-gather is timed by its wait alone
        (``labs.recipe.dp_time.gather_delay``)."""
        out, t = [], 0.0
        for j in range(1, self.count + 1):
            last = j == self.count
            start = max(self.window_s if last else j * self.share * self.window_s, t)
            t = start + (self.last_s if last else self.bucket_s)
            out.append((j, start, t))
        return out


def concurrent(buckets) -> bool:
    """Whether one collective's groups run at once: with DP overlap (each window > 0), see
    ``group_wait``."""
    return all(b.window_s > 0 for b in buckets)


def group_wait(buckets) -> float:
    """What the step waits for one collective (the reductions, or the weights' all-gathers)
    over its groups' ``Buckets`` (the dense layers' and the experts'), before the pipeline's
    idle time takes its part. With DP overlap (each window > 0) Megatron Core's DDP issues
    each group's buckets asynchronously on its own communicator (the dense buffers' on the
    data-parallel group, the expert buffers' on the expert-data-parallel group), so the two
    run at once and the step waits for the later tail: the largest. Without it each bucket's
    collective is issued synchronously (``async_op=False``: the compute stream waits for it
    before the next is issued), so the groups run one after another: the sum."""
    if concurrent(buckets):
        return max((b.exposed for b in buckets), default=0.0)
    return math.fsum(b.exposed for b in buckets)


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
    sm: float = 0.0  # of exposed: compute slowed by the SMs NCCL's kernels took (ZeRO-3)
    # ZeRO-3: the forward passes' share of seconds, exposed and sm (gathers before each layer)
    forward: tuple[float, float, float] = (0.0, 0.0, 0.0)
    # ZeRO-0/1/2 (dp): the stage's bucketed collectives, its idle time before its first
    # forward and after its last backward (the pipeline's), and the tied embeddings' all-reduce
    buckets: tuple[Buckets, ...] = ()
    idle: tuple[float, float] = (0.0, 0.0)
    tie: float = 0.0

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
    # (pass, kind, seconds, exposed, of it SMs lent) of the TP, CP and EP collectives
    comms: tuple[tuple[str, str, float, float, float], ...] = ()

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
    # What the step was read from, for the views that lay it out (``labs.recipe.layer_view``):
    # the slowest stage (a ``labs.recipe.stage_time.Stage``), every stage, and the options.
    slow: object = field(default=None, compare=False)
    stages: tuple = field(default=(), compare=False)
    options: StepOptions = field(default=DEFAULT_STEP, compare=False)

    def causes(self, microbatches: int, bubble_s: float) -> tuple[Cause, ...]:
        """The step by cause on the slowest stage (``bubble_s``: the pipeline's idle time):
        what EP08's "why MFU falls short of the GEMM rate" chart draws. Divide by the
        micro-batches for one micro-batch's share."""
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

