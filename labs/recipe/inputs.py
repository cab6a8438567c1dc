"""EP08's shapes: a training plan's decisions (``Plan``, each degree checked where it is built;
whether they fit together is what ``labs.recipe.lab.evaluate`` audits), the compute rate it
is timed at, and the answer (``RecipeResult``, with its ``Audit`` checks)."""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.limits import (
    DEFAULT_MATMUL_EFFICIENCY,
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
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout
from labs.recipe.step_time import Timing
from labs.schedules.catalogue import SCHEDULES


@dataclass(frozen=True)
class Audit:
    name: str
    ok: bool
    detail: str
    field: str = ""  # the control to change when it fails



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

    def __post_init__(self) -> None:
        ParallelLayout(tp=self.tp, pp=self.pp, cp=self.cp, dp=self.dp, ep=self.ep)
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

    @property
    def uneven(self) -> bool:
        """Megatron's uneven first/last stages are set."""
        return bool(self.first_stage_layers or self.last_stage_layers)

    @property
    def layout(self) -> ParallelLayout:
        return ParallelLayout(tp=self.tp, pp=self.pp, cp=self.cp, dp=self.dp, ep=self.ep)

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def global_batch(self) -> int:
        """Sequences per step: micro-batch x micro-batches x DP."""
        return self.micro_batch * self.microbatches * self.dp


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
    ideal_s: float = 0.0  # the GPU's FLOPs of the step at its compute rate
    matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY  # that rate, a fraction of the peak
    parts: dict[str, float] | None = None  # efficiency factors: tp, cp, ep, pp, dp
    segments: dict[str, float] | None = None  # the step bar, seconds, summing to step_s

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


def check_matmul_efficiency(value: object) -> None:
    number("matmul_efficiency", value, MIN_MATMUL_EFFICIENCY, MAX_MATMUL_EFFICIENCY,
           "matmul efficiency", "{what} must be a fraction of the peak from {low} to {high}")
