"""EP09's shapes: an RL placement (``RLPlacementInput``, every control checked where it is
built) and its answer (``RLPlacementResult``: the recipe's ``Check`` list, each pool's memory,
every GPU's role and the step's ``Phase`` timeline). ``labs.rl.lab`` computes them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from labs.core.errors import LabInputError
from labs.core.limits import (
    KV_DTYPES,
    MAX_DEGREE,
    MAX_ENGINES,
    MAX_POOL_GPUS,
    MAX_PROMPT_LEN,
    MAX_PROMPTS,
    MAX_RESPONSE_LEN,
    MAX_RESPONSES,
    MAX_TRAIN_GPUS,
    PLACEMENTS,
    RECOMPUTE,
)
from labs.core.validate import ONE_OF, flag, one_of, whole
from labs.hardware.gpus import GPUSpec
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout
from labs.rl.serving import ServingLayout


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class RLPlacementInput:
    model: ModelSpec
    gpu: GPUSpec
    train_gpus: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    placement: str = "colocated"
    engine_gpus: int = 1
    engines: int | None = None  # separate pools: rollout engines (None: as many GPUs as training)
    prefill_engines: int | None = None  # separate-pd: how many engines prefill (None: 1/4)
    response_len: int = 4096
    prompt_len: int = 1024
    prompts: int = 8
    responses_per_prompt: int = 8
    cpu_adam: bool = False
    # A KL loss against a reference model (slime's --use-kl-loss with --ref-load): one more
    # forward over the batch, under the reference's weights (labs.rl.timeline.train_parts).
    ref_model: bool = False
    recompute: str = "full"
    kv_dtype: str = "bf16"
    external_engines: int = 0  # engines served outside the cluster (more rollout capacity)
    # How a MoE engine places its weights (the recipe's SGLang flags); None: an even split.
    serving: ServingLayout | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset")
        if not isinstance(self.gpu, GPUSpec):
            raise LabInputError("gpu", "choose a GPU preset")
        whole("train_gpus", self.train_gpus, 1, MAX_TRAIN_GPUS, "training GPUs")
        ParallelLayout(tp=self.tp, pp=self.pp, cp=self.cp, ep=self.ep)  # each degree in range
        one_of("placement", self.placement, PLACEMENTS, "placement",
               ONE_OF + " (got {value!r})")
        whole("engine_gpus", self.engine_gpus, 1, MAX_DEGREE, "GPUs per serving engine")
        if self.engines is not None:
            whole("engines", self.engines, 1, MAX_ENGINES, "rollout engines")
        if self.prefill_engines is not None:
            whole("prefill_engines", self.prefill_engines, 1, MAX_ENGINES, "prefill engines")
        whole("response_len", self.response_len, 1, MAX_RESPONSE_LEN, "response length")
        whole("prompt_len", self.prompt_len, 1, MAX_PROMPT_LEN, "prompt length")
        whole("prompts", self.prompts, 1, MAX_PROMPTS, "prompts per step")
        whole("responses_per_prompt", self.responses_per_prompt, 1, MAX_RESPONSES,
              "responses per prompt")
        whole("external_engines", self.external_engines, 0, MAX_ENGINES, "external engines")
        flag("cpu_adam", self.cpu_adam, "CPU Adam")
        flag("ref_model", self.ref_model, "reference model")
        one_of("recompute", self.recompute, RECOMPUTE, "recomputation")
        one_of("kv_dtype", self.kv_dtype, KV_DTYPES, "KV dtype")
        if self.serving is not None and not isinstance(self.serving, ServingLayout):
            raise LabInputError("serving", "choose a recipe's serving layout")
        if self.rollout_gpus + self.train_gpus > MAX_POOL_GPUS:
            raise LabInputError("engines", f"{self.train_gpus:,} training + "
                                           f"{self.rollout_gpus:,} rollout GPUs exceed the "
                                           f"{MAX_POOL_GPUS:,} the lab draws")

    @property
    def samples(self) -> int:
        return self.prompts * self.responses_per_prompt

    @property
    def colocated(self) -> bool:
        return self.placement == "colocated"

    @property
    def engine_count(self) -> int:
        """In-cluster rollout engines: colocated, as many as tile the training GPUs."""
        if self.colocated:
            return max(1, self.train_gpus // self.engine_gpus)
        if self.engines is not None:
            return self.engines
        # As many rollout GPUs as training ones; a prefill/decode split needs two engines.
        least = 2 if self.placement == "separate-pd" else 1
        return max(least, self.train_gpus // self.engine_gpus)

    @property
    def prefill_count(self) -> int:
        if self.placement != "separate-pd":
            return 0
        if self.prefill_engines is not None:
            return self.prefill_engines
        return max(1, self.engine_count // 4)

    @property
    def rollout_gpus(self) -> int:
        """GPUs reserved for rollout beyond the training pool (0 when colocated)."""
        return 0 if self.colocated else self.engine_count * self.engine_gpus

    @property
    def seq_len(self) -> int:
        """Prompt + response, padded to whole 2·CP chunks (zigzag context parallelism)."""
        step = 2 * self.cp if self.cp > 1 else 1
        return math.ceil((self.prompt_len + self.response_len) / step) * step


@dataclass(frozen=True)
class Pool:
    role: str  # "training", "rollout", "prefill", "decode" or "colocated"
    gpus: int
    memory_per_gpu_bytes: float
    gpu_memory_bytes: float
    breakdown: dict[str, float]
    host_bytes_per_gpu: float = 0.0
    engines: int = 0
    detail: str = ""

    @property
    def fits(self) -> bool:
        return self.memory_per_gpu_bytes <= self.gpu_memory_bytes


@dataclass(frozen=True)
class Phase:
    lane: str  # "colocated", "training" or "rollout"
    phase: str  # "rollout", "train" or "weight_sync"
    step: int
    start: float
    end: float


@dataclass(frozen=True)
class RLPlacementResult:
    input: RLPlacementInput
    checks: tuple[Check, ...]
    pools: tuple[Pool, ...]
    gpus: tuple[dict, ...]  # one entry per cluster GPU: role, node, training coordinates...
    timeline: tuple[Phase, ...]
    rollout_seconds: float
    train_seconds: float
    sync_seconds: float
    sync_bytes_per_gpu: float
    sync_link: str
    sync_rate: float  # bytes/s: the busBW the sync's bytes move at (its link's, EP02)
    sync_switch_seconds: float  # colocated: a step's two phase switches over PCIe, in the sync
    # The rollout's parts: prefill_s, decode_weights_s, decode_kv_s and decode_compute_s of
    # the fullest decode engine, its decode_requests, experts_touched (the chance a decode step
    # visits a given routed expert), for a MoE engine experts_per_gpu, expert_gpus and
    # busiest_experts (what the busiest GPU visits), and for a prefill/decode split kv_move_s
    # (labs.rl.lab._rollout_parts).
    rollout_parts: dict
    step_seconds: float
    samples_per_second: float
    dp: int
    stage_layers: tuple[int, ...]
    train_memory_bytes: float | None  # per GPU, None when the layout is broken
    rollout_memory_bytes: float
    colocated_bytes: float | None
    transition_overhead_bytes: float
    replicas: dict = field(default_factory=dict)
    train_breakdown: dict = field(default_factory=dict)  # the ledger's, per training GPU
    rollout_breakdown: dict = field(default_factory=dict)  # the heaviest engine GPU's
    # attention_groups, group_gpus and params by part of one engine GPU (labs.rl.serving)
    serving_weights: dict = field(default_factory=dict)
    # the heaviest training GPU's stage and its parameters (``labs.rl.lab._train_stage``)
    train_stage: dict = field(default_factory=dict)
    # The training phase's parts: EP08's step on the plan and its segments, the log-prob
    # forward's factor, CPU Adam's PCIe trip (``labs.rl.timeline.train_parts``)
    train_parts: dict = field(default_factory=dict)
    # colocated: the switches' PCIe bytes, the trainer's weights, gradients and any optimizer
    # state on the GPU offloaded after training and brought back before the next (EP09 step
    # 6); separate: zeros
    sync_switch_bytes: tuple[float, float] = (0.0, 0.0)
    # colocated: the PCIe link that switch crosses (``labs.rl.timeline.PCIE_LINK``'s preset) and
    # its datasheet rate, bytes/s, the one the switch's seconds are timed at; separate: "", 0
    sync_switch_link: str = ""
    sync_switch_rate: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def all_ok(self) -> bool:
        return all(c.ok for c in self.checks)
