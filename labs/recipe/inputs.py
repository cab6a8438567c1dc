"""EP08's shapes: a training plan's decisions (``Plan``, each degree checked where it is built;
whether they fit together is what ``labs.recipe.lab.evaluate`` audits), the compute rate it
is timed at, and the answer (``RecipeResult``, with its ``Audit`` checks)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from labs.core.catalogue import RECIPES, TE_CAST_BYTES
from labs.core.errors import LabInputError
from labs.core.limits import (
    DEFAULT_MATMUL_EFFICIENCY,
    MAX_DP,
    MAX_MATMUL_EFFICIENCY,
    MAX_MICRO_BATCH,
    MAX_MICROBATCHES,
    MAX_SEQ_LEN,
    MAX_STAGE_LAYERS,
    MAX_STAGES,
    MAX_VIRTUAL,
    MIN_MATMUL_EFFICIENCY,
    RECOMPUTE,
    TRAIN_RECIPES,
)
from labs.core.validate import UNKNOWN_BARE, number, one_of, whole
from labs.hardware.links import Cluster
from labs.memory.inputs import MemoryResult
from labs.model.ops import ComputeOptions
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout
from labs.recipe.timing import StepOptions, Timing
from labs.schedules.catalogue import SCHEDULES


@dataclass(frozen=True)
class Audit:
    name: str
    ok: bool
    detail: str
    field: str = ""  # the control to change when it fails



# Plan's software settings (not the layout): what a published run's configuration fixes.
SOFTWARE = ("attention", "dropout", "fp8", "sequence_parallel", "tp_overlap", "ep_overlap",
            "ep_dispatch", "dp_overlap", "grad_accum_fusion", "kernels")
# ZeRO-3's FSDP settings (StepOptions): the page's and the API's, not the planner's, which
# searches every ZeRO stage with FSDP's defaults.
FSDP = ("fsdp_prefetch", "reshard_after_forward", "dp_shard")


@lru_cache(maxsize=16384)
def _layout(tp: int, pp: int, cp: int, dp: int, ep: int) -> ParallelLayout:
    return ParallelLayout(tp=tp, pp=pp, cp=cp, dp=dp, ep=ep)


@dataclass(frozen=True)
class Plan:
    """The decisions of a training plan. Degrees are validated one by one here; whether they
    fit together (and the cluster) is what ``evaluate`` audits."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    zero: int = 0
    recompute: str = "selective"
    schedule: str = "1f1b"
    virtual: int = 1
    micro_batch: int = 1
    microbatches: int = 1
    seq_len: int = 4096
    recipe: str = "adam16"
    # Megatron's --decoder-first/last-pipeline-num-layers (0: not set, even stages): the
    # middle stages split the rest evenly (labs.schedules.stages.stage_layer_counts).
    first_stage_layers: int = 0
    last_stage_layers: int = 0
    # How the run's software works, as published runs set it (labs.recipe.step_time
    # StepOptions; labs.model.ops ComputeOptions). Defaults: Megatron Core today.
    attention: str = "auto"  # auto (the GPU's fastest fused kernel), unfused, flash2, flash3
    dropout: bool = False  # GPT-3-style hidden and attention dropout
    fp8: bool = False  # FP8 linear layers (Transformer Engine)
    sequence_parallel: bool = True  # with TP > 1
    tp_overlap: str = "backward"  # none, backward (Megatron's default), all (--tp-comm-overlap)
    ep_overlap: bool = False  # EP all-to-all beside another micro-batch (DualPipe)
    ep_dispatch: str = "alltoall"  # alltoall (NCCL, a copy per expert) or deepep (per node)
    dp_overlap: bool = True  # gradient buckets reduced during the last backward
    grad_accum_fusion: bool = True  # weight-gradient GEMMs accumulate into fp32 main_grad
    # The memory-bound ops' kernels and the stack around them (labs.model.ops KERNELS):
    # fused (Megatron Core / Transformer Engine), compiled (torch.compile) or eager (PyTorch
    # eager); the PyTorch ones shard with FSDP2 under ZeRO-3 (labs.recipe.dp_time).
    kernels: str = "fused"
    # ZeRO-3 only (StepOptions): FSDP's backward prefetch and reshard_after_forward.
    fsdp_prefetch: bool = True
    reshard_after_forward: bool = True
    # HSDP (ZeRO-3 only): the data-parallel ranks each shard group spans, torchtitan's
    # data_parallel_shard_degree; DP = dp_shard x replicas. 0: all of DP (plain FSDP).
    dp_shard: int = 0

    def __post_init__(self) -> None:
        ParallelLayout(tp=self.tp, pp=self.pp, cp=self.cp, dp=self.dp, ep=self.ep)
        whole("dp_shard", self.dp_shard, 0, MAX_DP, "FSDP shard degree")
        whole("pp", self.pp, 1, MAX_STAGES, "pipeline stages")
        whole("zero", self.zero, 0, 3, "ZeRO stage")
        one_of("recompute", self.recompute, RECOMPUTE, "recomputation")
        one_of("schedule", self.schedule, SCHEDULES, "schedule", UNKNOWN_BARE)
        whole("virtual", self.virtual, 1, MAX_VIRTUAL, "model chunks per rank")
        whole("micro_batch", self.micro_batch, 1, MAX_MICRO_BATCH, "micro-batch size")
        whole("microbatches", self.microbatches, 1, MAX_MICROBATCHES, "micro-batches per step")
        whole("seq_len", self.seq_len, 1, MAX_SEQ_LEN, "sequence length")
        if self.recipe not in TRAIN_RECIPES:
            raise LabInputError("recipe", f"choose a training recipe: {', '.join(TRAIN_RECIPES)}")
        whole("first_stage_layers", self.first_stage_layers, 0, MAX_STAGE_LAYERS,
              "layers on the first stage")
        whole("last_stage_layers", self.last_stage_layers, 0, MAX_STAGE_LAYERS,
              "layers on the last stage")
        self.step_options(None)  # the software settings' own checks

    def software(self) -> tuple[tuple[str, object], ...]:
        """The run's software settings (SOFTWARE), as (field, value) pairs."""
        return tuple((name, getattr(self, name)) for name in SOFTWARE)

    @property
    def fp8_gemms(self) -> bool:
        """The linear layers' GEMMs run in FP8: the ``fp8`` flag, or an FP8 recipe (whose
        weight copies exist to feed FP8 GEMMs: TransformerEngine, DeepSeek-V3)."""
        return self.fp8 or RECIPES[self.recipe].family == "fp8"

    def step_options(self, matmul_efficiency: float | None = None) -> StepOptions:
        """The run's software settings for the step model (FP8 GEMMs: ``fp8_gemms``)."""
        return _step_options(self.attention, self.dropout, self.fp8_gemms,
                             self.sequence_parallel,
                             self.tp_overlap, self.ep_overlap, self.dp_overlap,
                             self.grad_accum_fusion, matmul_efficiency, self.kernels,
                             RECIPES[self.recipe].cast_bytes or TE_CAST_BYTES,
                             self.ep_dispatch, self.fsdp_prefetch, self.reshard_after_forward,
                             self.replicas if self.hybrid else 1)

    @property
    def shard_degree(self) -> int:
        """The data-parallel ranks ZeRO shards over: ``dp_shard``, or all of DP."""
        return self.dp_shard or self.dp

    @property
    def replicas(self) -> int:
        """HSDP's replicas of each shard group, torchtitan's data_parallel_replicate_degree:
        DP / dp_shard (1: plain FSDP; a dp_shard that does not divide DP is ``rule_problems``'
        to report, so this floors)."""
        return max(1, self.dp // self.shard_degree)

    @property
    def hybrid(self) -> bool:
        """HSDP: ZeRO-3 sharded over part of DP and replicated over the rest."""
        return self.zero == 3 and self.replicas > 1 and self.dp % self.shard_degree == 0

    @property
    def uneven(self) -> bool:
        """Megatron's uneven first/last stages are set."""
        return bool(self.first_stage_layers or self.last_stage_layers)

    @property
    def layout(self) -> ParallelLayout:
        """The plan's degrees (built once per set of them: the planner asks on every bound)."""
        return _layout(self.tp, self.pp, self.cp, self.dp, self.ep)

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def global_batch(self) -> int:
        """Sequences per step: micro-batch x micro-batches x DP."""
        return self.micro_batch * self.microbatches * self.dp


# The step bar's segments (RecipeResult.segments) as EP08 names them: its chart and the cheat
# sheet's step-time line both read these.
SEGMENT_LABELS = {
    "compute": "Compute",
    "stages": "Uneven stages (waits)",
    "tp": "TP collectives (exposed)",
    "cp": "CP ring (exposed)",
    "ep": "EP all-to-all (exposed)",
    "sends": "Pipeline sends",
    "bubble": "Pipeline bubble",
    "dp": "DP sync (exposed)",
    "optimizer": "Optimizer step",
}


@dataclass(frozen=True)
class RecipeResult:
    plan: Plan
    model: ModelSpec
    cluster: Cluster
    nodes: int
    audits: tuple[Audit, ...]
    problems: tuple[LabInputError, ...]  # broken layout or schedule rules (empty when legal)
    memory: MemoryResult | None = None
    timing: Timing | None = None
    bubble_fraction: float = 0.0
    step_s: float = 0.0
    ideal_s: float = 0.0  # the slowest stage's kernels, at an even share of the stages
    # The full-wave GEMM rate the step was timed at, a fraction of the dense peak: the GPU's
    # measured one (labs.hardware.kernels.matmul_rate) unless overridden.
    matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY
    parts: dict[str, float] | None = None  # efficiency factors: stages, tp, cp, ep, sends, ...
    segments: dict[str, float] | None = None  # the step bar, seconds, summing to step_s (keys:
    # SEGMENT_LABELS, in that order)

    @property
    def legal(self) -> bool:
        return not self.problems

    @property
    def gpus(self) -> int:
        return self.nodes * self.cluster.gpus_per_node

    @property
    def fits(self) -> bool:
        return self.memory is not None and self.memory.fits

    @property
    def passes(self) -> bool:
        return all(a.ok for a in self.audits)

    @property
    def memory_per_gpu_bytes(self) -> float | None:
        return None if self.memory is None else self.memory.total_bytes

    @property
    def efficiency(self) -> float:
        return self.ideal_s / self.step_s if self.step_s else 0.0

    @property
    def tokens_per_step(self) -> int:
        return self.plan.global_batch * self.plan.seq_len

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_s if self.step_s else 0.0

    @property
    def mfu(self) -> float:
        if not self.step_s or self.timing is None:
            return 0.0
        flops = self.timing.model_flops_per_token * self.tokens_per_step
        return flops / (self.step_s * self.plan.world_size * self.cluster.gpu.bf16_flops)


@lru_cache(maxsize=256)
def _step_options(attention: str, dropout: bool, fp8: bool, sp: bool, tp_overlap: str,
                  ep_overlap: bool, dp_overlap: bool, fusion: bool,
                  matmul_efficiency: float | None, kernels: str = "fused",
                  cast_bytes: float = TE_CAST_BYTES,
                  ep_dispatch: str = "alltoall", fsdp_prefetch: bool = True,
                  reshard_after_forward: bool = True, replicas: int = 1) -> StepOptions:
    return StepOptions(ComputeOptions(attention=attention, dropout=dropout, fp8=fp8,
                                      kernels=kernels, fp32_wgrad=fusion,
                                      fp8_cast_bytes=cast_bytes),
                       tp_overlap=tp_overlap, ep_overlap=ep_overlap, ep_dispatch=ep_dispatch,
                       dp_overlap=dp_overlap,
                       grad_accum_fusion=fusion, sequence_parallel=sp,
                       matmul_efficiency=matmul_efficiency, fsdp_prefetch=fsdp_prefetch,
                       reshard_after_forward=reshard_after_forward, dp_replicas=replicas)


def check_matmul_efficiency(value: object) -> None:
    """None (the GPU's measured GEMM rate) or an override of it, a fraction of the peak."""
    if value is None:
        return
    number("matmul_efficiency", value, MIN_MATMUL_EFFICIENCY, MAX_MATMUL_EFFICIENCY,
           "matmul efficiency", "{what} must be a fraction of the peak from {low} to {high}")
