"""EP01's shapes: what the ledger is asked (``MemoryInput``, every control checked where it is
built, in page order) and what it answers (``MemoryResult``, one ``StageBill`` per pipeline
rank); the recipes' bytes per parameter are records in ``labs.core.catalogue``.
``labs.memory.lab`` computes the bill.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from labs.core.catalogue import RECIPES
from labs.core.errors import LabInputError
from labs.core.limits import (
    ACTIVATION_MODELS,
    MAX_MICRO_BATCH,
    MAX_MICROBATCHES,
    MAX_SEQ_LEN,
    MAX_VIRTUAL,
    MODES,
    RECOMPUTE,
)
from labs.core.validate import UNKNOWN_BARE, flag, one_of, whole
from labs.hardware.gpus import GPUSpec
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout, problems
from labs.schedules.catalogue import CATALOGUE, SCHEDULES, chunks_per_rank
from labs.schedules.inputs import check_shape
from labs.schedules.stages import stage_params, stage_slots, uneven_problems

BREAKDOWN_KEYS = (
    "weights", "gradients", "master_weights", "optimizer_moments", "activations",
    "embedding_and_logits", "kv_cache", "workspace",
)
STATE_KEYS = ("weights", "gradients", "master_weights", "optimizer_moments")

# A serving engine runs at most one prefill chunk of tokens through a forward pass, however
# many sequences it holds: vLLM's OpenAI server on a GPU of 70 GiB or more (H100, not A100)
# defaults max_num_batched_tokens to 8,192 (vllm/engine/arg_utils.py, EngineArgs
# get_batch_defaults), a setting, not a rule; SGLang's chunked_prefill_size plays the same part.
# Decoding runs one token per sequence, far fewer.
PREFILL_CHUNK_TOKENS = 8192


def check_activation_controls(seq_len: object, micro_batch: object, recompute: object,
                              activation_model: object) -> None:
    """The controls every lab that sizes activations with this ledger shares, in page order:
    sequence length, micro-batch size, recomputation and the activation model."""
    whole("seq_len", seq_len, 1, MAX_SEQ_LEN, "sequence length")
    whole("micro_batch", micro_batch, 1, MAX_MICRO_BATCH, "micro-batch size")
    if recompute not in RECOMPUTE:
        names = ", ".join(repr(r) for r in RECOMPUTE)
        raise LabInputError("recompute", f"recomputation must be one of {names} "
                                         f"(got {recompute!r})")
    if activation_model not in ACTIVATION_MODELS:
        raise LabInputError("activation_model", "the activation model must be 'classic' or "
                                                f"'megatron' (got {activation_model!r})")


@dataclass(frozen=True)
class MemoryInput:
    model: ModelSpec
    gpu: GPUSpec
    mode: str = "train"  # "train" | "infer"
    recipe: str = "adam16"  # adam16/adam18 for train; bf16/int8/int4 for infer
    seq_len: int = 4096
    micro_batch: int = 1
    recompute: str = "selective"  # labs.core.recomputation.RECOMPUTATION (train only)
    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 1
    ep: int = 1
    zero: int = 0  # ZeRO stage 0..3 (train only)
    offload: bool = False  # optimizer (CPU Adam) offload (train only)
    # Megatron requires layers % pp == 0 unless uneven first/last stages are asked for
    # (--decoder-first/last-pipeline-num-layers); True gives the first L mod p stages one more.
    uneven_pp: bool = False
    # Or Megatron's two flags themselves: layers on the first and last stages (0: not set),
    # the middle stages splitting the rest evenly (labs.schedules.stages.stage_layer_counts).
    first_stage_layers: int = 0
    last_stage_layers: int = 0
    etp: int = 1  # expert tensor parallelism
    sp: bool | None = None  # sequence parallelism; None = on whenever tp > 1 (Megatron's advice)
    activation_model: str = "classic"  # "classic" (Korthikanti 34sbh) | "megatron"
    schedule: str = "1f1b"  # pipeline schedule (labs.schedules.catalogue.SCHEDULES)
    microbatches: int | None = None  # per step; None = as few as fill the pipeline
    virtual: int = 1  # model chunks per rank (interleaved 1F1B)
    # ZeRO-3 without resharding after the forward (FSDP2's reshard_after_forward=False): every
    # layer's gathered weights are held from its forward to its backward.
    keep_gathered: bool = False
    # HSDP (ZeRO-3): the shard groups' replicas across DP; state is sharded over DP x CP /
    # replicas (``shard_group``), the rest of DP holding copies (1: plain ZeRO/FSDP).
    replicas: int = 1

    def __post_init__(self) -> None:  # one check per control, in page order
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset or a custom parameter count")
        if not isinstance(self.gpu, GPUSpec):
            raise LabInputError("gpu", "choose a GPU preset")
        if self.mode not in MODES:
            raise LabInputError("mode", f"mode must be 'train' or 'infer' (got {self.mode!r})")
        fitting = [r for r in RECIPES.values() if r.mode == self.mode]
        names = ", ".join(r.id for r in fitting)
        if self.recipe not in RECIPES or RECIPES[self.recipe].mode != self.mode:
            raise LabInputError("recipe", f"recipe {self.recipe!r} does not fit mode "
                                          f"{self.mode!r}; choose one of: {names}")
        check_activation_controls(self.seq_len, self.micro_batch, self.recompute,
                                  self.activation_model)
        layout = self.layout  # validates each degree, naming its field
        whole("zero", self.zero, 0, 3, "ZeRO stage")
        for name in ("offload", "uneven_pp", "keep_gathered"):
            flag(name, getattr(self, name), name)
        whole("replicas", self.replicas, 1, self.dp, "HSDP replicas")
        if self.replicas > 1 and (self.zero != 3 or self.dp % self.replicas
                                  or layout.expert_dp % self.replicas):
            raise LabInputError("replicas", "HSDP replicas are ZeRO-3's, and divide DP and "
                                            "the experts' data-parallel group")
        if self.sp is not None:
            flag("sp", self.sp, "sequence parallelism")
        self._check_schedule()
        if self.mode == "infer" and self.zero:
            raise LabInputError("zero", "ZeRO shards training state (gradients, optimizer); "
                                        "inference has none: use ZeRO stage 0")
        if self.mode == "infer" and self.offload:
            raise LabInputError("offload", "optimizer offload only applies to training; "
                                           "turn it off for inference")
        found = problems(self.model, layout, seq_len=self.seq_len,
                         uneven_pp=self.uneven_pp or self.split_set, mode=self.mode)
        found += uneven_problems(self.model.layers, self.pp, self.first_stage_layers,
                                 self.last_stage_layers, self.pipeline_chunks)
        if found:
            raise found[0]
        slots = (sum(stage_slots(self.model.layers, self.pp, self.first_stage_layers,
                                 self.last_stage_layers)) if self.split_set
                 else self.model.layers)  # an uneven end stage's embedding/head chunk
        if self.pp * self.pipeline_chunks > slots:
            raise LabInputError("virtual", f"{self.model.name} has {self.model.layers} layers: "
                                           f"it cannot fill {self.pp} stages x "
                                           f"{self.pipeline_chunks} chunks = "
                                           f"{self.pp * self.pipeline_chunks} model chunks; use "
                                           "fewer stages or chunks")

    def _check_schedule(self) -> None:
        one_of("schedule", self.schedule, SCHEDULES, "schedule", UNKNOWN_BARE)
        if self.microbatches is not None:
            whole("microbatches", self.microbatches, 1, MAX_MICROBATCHES, "micro-batches")
        whole("virtual", self.virtual, 1, MAX_VIRTUAL, "model chunks per rank")
        if self.pp > 1:
            # The pipeline lab's own rules (labs.schedules.inputs.check_shape, reading each
            # schedule's record) are the one source for what a schedule accepts: chunks,
            # rounds of micro-batches, the V's 2p minimum.
            check_shape(self.schedule, self.pp, self.pipeline_microbatches, self.virtual)

    @cached_property  # asked 10-20 times an answer (each shard group, each stage's bill)
    def layout(self) -> ParallelLayout:
        """The degrees as one layout, built (and each validated) once per input."""
        return ParallelLayout(tp=self.tp, pp=self.pp, cp=self.cp, dp=self.dp, ep=self.ep,
                              etp=self.etp)

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def shard_groups(self) -> tuple[int, int]:
        """The ranks ZeRO shards dense and expert state over: DP x CP and expert-DP
        (``ParallelLayout``), each over HSDP's replicas."""
        lay = self.layout
        return lay.dense_shard_group // self.replicas, lay.expert_dp // self.replicas

    @property
    def sequence_parallel(self) -> bool:
        return self.tp > 1 if self.sp is None else self.sp and self.tp > 1

    @property
    def pipeline_microbatches(self) -> int:
        """Micro-batches per step; unset, the fewest that fill the pipeline (p, or 2p for
        DualPipeV: the schedule's ``fill``), the textbook 'at least as many micro-batches as
        stages'."""
        if self.microbatches is not None:
            return self.microbatches
        return CATALOGUE[self.schedule].fill * self.pp

    @property
    def pipeline_chunks(self) -> int:
        """Model chunks per rank the schedule uses (1 without pipelining)."""
        return chunks_per_rank(self.schedule, self.virtual) if self.pp > 1 else 1

    @property
    def split_set(self) -> bool:
        """Megatron's uneven first/last stage layers are given."""
        return bool(self.first_stage_layers or self.last_stage_layers)

    @property
    def stage_layers(self) -> int:
        """Layers on the most loaded pipeline rank."""
        return max(s.layers for s in stage_params(self.model, self.pp, self.schedule,
                                                  self.virtual, self.first_stage_layers,
                                                  self.last_stage_layers))


@dataclass(frozen=True)
class StageBill:
    """One pipeline rank's bytes per GPU."""

    rank: int
    layers: int
    moe_layers: int
    in_flight: float  # peak activations held, in micro-batches x this rank's layers
    breakdown: dict[str, float]
    host_bytes: float

    @property
    def total_bytes(self) -> float:
        return sum(self.breakdown.values())


@dataclass(frozen=True)
class MemoryResult:
    input: MemoryInput
    params: int
    active_params: int
    breakdown: dict[str, float]  # bytes per GPU on the heaviest rank, keys in BREAKDOWN_KEYS
    total_bytes: float
    gpu_memory_bytes: float
    fits: bool
    headroom_bytes: float  # negative when it does not fit
    state_bytes: float  # whole model, unsharded: params x bytes/param of the recipe
    min_gpus: int  # fewest GPUs the state alone needs
    world_size: int
    host_bytes: float  # per GPU rank, in host RAM (optimizer offload)
    bytes_per_param: float
    assumptions: tuple[str, ...]
    recipe_description: str
    stages: tuple[StageBill, ...] = ()  # one per pipeline rank
    heaviest_stage: int = 0

    @property
    def stage_layers(self) -> tuple[int, ...]:
        return tuple(s.layers for s in self.stages)
