"""The per-GPU memory ledger (EP01, EP03): what one GPU must hold for a training or inference step.

Sources, cited where each formula is used:
- mixed-precision Adam bytes per parameter: Micikevicius et al. 2018, "Mixed Precision
  Training" (arXiv:1710.03740); Rajbhandari et al. 2020, "ZeRO" (arXiv:1910.02054) sec 3;
- ZeRO stages 1/2/3: Rajbhandari et al. 2020, Figure 1;
- activations, per layer and per pipeline rank: ``labs.model.activations`` (Korthikanti et al. 2022;
  Megatron-LM's theoretical memory estimate; Narayanan et al. 2021 for 1F1B);
- the weights each pipeline rank holds: ``labs.schedules.stages``; layout rules, ``labs.parallel``;
- KV cache and MLA latent cache: DeepSeek-V2 (arXiv:2405.04434) sec 2.1; vLLM's memory profiling
  (docs.vllm.ai, "gpu_memory_utilization") for the inference workspace.

Every pipeline rank gets its own bill (``MemoryResult.stages``); ``breakdown`` is the heaviest
rank's, the one that decides whether the plan fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
from labs.core.validate import whole
from labs.hardware.gpus import GPUSpec
from labs.model.activations import (
    ACT_BYTES,
    activation_bytes_per_layer,
    embedding_activation_bytes,
    output_activation_bytes,
)
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout, problems
from labs.schedules.catalogue import SCHEDULES
from labs.schedules.inflight import chunks_per_rank, in_flight
from labs.schedules.inputs import check_shape
from labs.schedules.stages import StageParams, stage_params, uneven_problems

__all__ = [
    "ACT_BYTES", "BREAKDOWN_KEYS", "RECIPES", "MemoryInput", "MemoryResult", "Recipe",
    "StageBill", "activation_bytes_per_layer", "compute_memory", "kv_cache_bytes",
    "workspace_bytes",
]

BREAKDOWN_KEYS = (
    "weights", "gradients", "master_weights", "optimizer_moments", "activations",
    "embedding_and_logits", "kv_cache", "workspace",
)
STATE_KEYS = ("weights", "gradients", "master_weights", "optimizer_moments")


@dataclass(frozen=True)
class Recipe:
    """Bytes per parameter for each kind of state a recipe keeps."""

    id: str
    mode: str
    weights: float
    gradients: float
    master_weights: float
    optimizer_moments: float
    describe: str

    @property
    def bytes_per_param(self) -> float:
        return self.weights + self.gradients + self.master_weights + self.optimizer_moments


# Mixed-precision Adam (Micikevicius 2018; ZeRO paper sec 3.1 counts 2 + 2 + 12 = 16 B/param):
# bf16 weights and grads, fp32 master copy, fp32 first and second moments (Kingma & Ba 2015).
# Keys in labs.core.limits.RECIPE_IDS order.
RECIPES: dict[str, Recipe] = {
    "adam16": Recipe("adam16", "train", 2, 2, 4, 8,
                     "mixed-precision Adam, 16 B/param: 2 B bf16 weights + 2 B bf16 gradients + "
                     "4 B fp32 master weights + 8 B fp32 Adam moments"),
    "adam18": Recipe("adam18", "train", 2, 4, 4, 8,
                     "mixed-precision Adam with fp32 gradients, 18 B/param: 2 B bf16 weights + "
                     "4 B fp32 gradients + 4 B fp32 master weights + 8 B fp32 Adam moments"),
    "bf16": Recipe("bf16", "infer", 2, 0, 0, 0, "bf16 inference, 2 B/param of weights"),
    "int8": Recipe("int8", "infer", 1, 0, 0, 0, "int8 weight-only inference, 1 B/param"),
    "int4": Recipe("int4", "infer", 0.5, 0, 0, 0, "int4 weight-only inference, 0.5 B/param"),
}


@dataclass(frozen=True)
class MemoryInput:
    model: ModelSpec
    gpu: GPUSpec
    mode: str = "train"  # "train" | "infer"
    recipe: str = "adam16"  # adam16/adam18 for train; bf16/int8/int4 for infer
    seq_len: int = 4096
    micro_batch: int = 1
    recompute: str = "selective"  # "none" | "selective" | "full" (train only)
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
        whole("seq_len", self.seq_len, 1, MAX_SEQ_LEN, "sequence length")
        whole("micro_batch", self.micro_batch, 1, MAX_MICRO_BATCH, "micro-batch size")
        if self.recompute not in RECOMPUTE:
            raise LabInputError("recompute", "recomputation must be 'none', 'selective' or "
                                             f"'full' (got {self.recompute!r})")
        if self.activation_model not in ACTIVATION_MODELS:
            raise LabInputError("activation_model", "the activation model must be 'classic' "
                                                    "or 'megatron' "
                                                    f"(got {self.activation_model!r})")
        layout = self.layout  # validates each degree, naming its field
        whole("zero", self.zero, 0, 3, "ZeRO stage")
        for name in ("offload", "uneven_pp"):
            if not isinstance(getattr(self, name), bool):
                raise LabInputError(name, f"{name} must be true or false")
        if self.sp is not None and not isinstance(self.sp, bool):
            raise LabInputError("sp", "sequence parallelism must be true or false")
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
        if self.pp * self.pipeline_chunks > self.model.layers:
            raise LabInputError("virtual", f"{self.model.name} has {self.model.layers} layers: "
                                           f"it cannot fill {self.pp} stages x "
                                           f"{self.pipeline_chunks} chunks = "
                                           f"{self.pp * self.pipeline_chunks} model chunks; use "
                                           "fewer stages or chunks")

    def _check_schedule(self) -> None:
        if self.schedule not in SCHEDULES:
            raise LabInputError("schedule", f"unknown schedule {self.schedule!r}; choose one "
                                            f"of {', '.join(SCHEDULES)}")
        if self.microbatches is not None:
            whole("microbatches", self.microbatches, 1, MAX_MICROBATCHES, "micro-batches")
        whole("virtual", self.virtual, 1, MAX_VIRTUAL, "model chunks per rank")
        if self.pp > 1:
            # The pipeline lab's own rules (labs.schedules.simulate) are the one source for
            # what a schedule accepts: chunks, rounds of micro-batches, the V's 2p minimum.
            check_shape(self.schedule, self.pp, self.pipeline_microbatches, self.virtual)

    @property
    def layout(self) -> ParallelLayout:
        return ParallelLayout(tp=self.tp, pp=self.pp, cp=self.cp, dp=self.dp, ep=self.ep,
                              etp=self.etp)

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def sequence_parallel(self) -> bool:
        return self.tp > 1 if self.sp is None else self.sp and self.tp > 1

    @property
    def pipeline_microbatches(self) -> int:
        """Micro-batches per step; unset, the fewest that fill the pipeline (p, or 2p for
        DualPipeV), which is the textbook 'at least as many micro-batches as stages'."""
        if self.microbatches is not None:
            return self.microbatches
        return 2 * self.pp if self.schedule == "dualpipe-v" else self.pp

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


def kv_cache_bytes(model: ModelSpec, seq_len: int, micro_batch: int = 1, tp: int = 1,
                   pp: int = 1, cp: int = 1, *, layers: int | None = None) -> float:
    """bf16 KV cache per GPU for micro_batch sequences of seq_len tokens.

    GQA/MHA: K and V, (layers/pp) x ceil(kv_heads/tp) heads x head_dim per token; when TP
    exceeds the KV heads each rank keeps a replica of one (vLLM/Megatron replicate KV heads).
    MLA (DeepSeek-V2 sec 2.1.2): one latent of kv_lora_rank + qk_rope_head_dim per token and
    layer, shared by all heads, so TP does not split it. ``layers`` overrides ceil(L/pp).
    """
    stage_layers = math.ceil(model.layers / pp) if layers is None else layers
    tokens = seq_len / cp * micro_batch
    if model.uses_mla:
        per_token_layer = model.kv_lora_rank + model.qk_rope_head_dim
    else:
        per_token_layer = 2 * math.ceil(model.kv_heads / tp) * model.head_dim
    return stage_layers * per_token_layer * tokens * ACT_BYTES


def workspace_bytes(model: ModelSpec, seq_len: int, micro_batch: int = 1, tp: int = 1,
                    cp: int = 1) -> float:
    """Estimate of one layer's forward intermediates in bf16: s·b·(4h + 2·ffn/tp)·2 B.

    vLLM profiles a forward pass before sizing its KV pool because these buffers exist on top
    of weights and cache; the 4h (QKV, attention output) + 2 x MLP width is our estimate.
    """
    width = model.ffn
    if model.is_moe:
        width = max(width if model.dense_layers else 0,
                    (model.top_k + model.shared_experts) * model.expert_ffn)
    return seq_len / cp * micro_batch * (4 * model.hidden + 2 * width / tp) * ACT_BYTES


def _stage_bill(inp: MemoryInput, sp: StageParams, r: Recipe) -> StageBill:
    m, lay = inp.model, inp.layout
    dense_local = sp.tp_split / inp.tp + sp.replicated
    expert_local = sp.experts / (inp.ep * inp.etp)
    bill = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
    host, held = 0.0, 0.0
    if inp.mode == "train":
        def sharded(bytes_per_param: float, from_stage: int) -> float:
            # ZeRO (Rajbhandari 2020, Fig. 1): stage 1 shards optimizer state (master + moments),
            # stage 2 also gradients, stage 3 also the bf16 weights; dense state over DP x CP,
            # expert state over expert-DP.
            on = inp.zero >= from_stage
            return bytes_per_param * (dense_local / (lay.dense_shard_group if on else 1)
                                      + expert_local / (lay.expert_dp if on else 1))

        bill["weights"] = sharded(r.weights, 3)
        bill["gradients"] = sharded(r.gradients, 2)
        optimizer = {"master_weights": sharded(r.master_weights, 1),
                     "optimizer_moments": sharded(r.optimizer_moments, 1)}
        if inp.offload:
            host = sum(optimizer.values())
        else:
            bill.update(optimizer)
        p, mb = inp.pp, inp.pipeline_microbatches
        held = in_flight(inp.schedule, p, mb, sp.rank, inp.virtual) if p > 1 else 1.0
        common = (m, inp.seq_len, inp.micro_batch, inp.tp, inp.cp, inp.recompute)
        kw = {"sp": inp.sequence_parallel, "activation_model": inp.activation_model,
              "ep": inp.ep, "etp": inp.etp}
        per_dense = activation_bytes_per_layer(*common, **kw)
        per_moe = activation_bytes_per_layer(*common, moe_layer=True, **kw)
        bill["activations"] = held * (sp.dense_layers * per_dense + sp.moe_layers * per_moe)
        shape = (m, inp.seq_len, inp.micro_batch, inp.tp, inp.cp, inp.sequence_parallel)
        if sp.first:
            bill["embedding_and_logits"] += held * embedding_activation_bytes(*shape)
        if sp.last:
            # The loss's backward starts right after its forward, except in GPipe.
            logits_held = mb if inp.schedule == "gpipe" and p > 1 else 1
            bill["embedding_and_logits"] += logits_held * output_activation_bytes(*shape)
    else:
        bill["weights"] = r.weights * (dense_local + expert_local)
        bill["kv_cache"] = kv_cache_bytes(m, inp.seq_len, inp.micro_batch, inp.tp, inp.pp,
                                          inp.cp, layers=sp.layers)
        bill["workspace"] = workspace_bytes(m, inp.seq_len, inp.micro_batch, inp.tp, inp.cp)
    return StageBill(sp.rank, sp.layers, sp.moe_layers, held, bill, host)


def compute_memory(inp: MemoryInput) -> MemoryResult:
    """Bytes one GPU holds for ``inp``: every pipeline rank's bill, and the heaviest."""
    from labs.memory.notes import assumptions  # the notes read the result's numbers

    m, r = inp.model, RECIPES[inp.recipe]
    bills = tuple(_stage_bill(inp, sp, r)
                  for sp in stage_params(m, inp.pp, inp.schedule, inp.virtual,
                                         inp.first_stage_layers, inp.last_stage_layers))
    worst = max(bills, key=lambda b: (b.total_bytes, -b.rank))
    total = worst.total_bytes
    state = m.params * r.bytes_per_param
    return MemoryResult(
        input=inp,
        params=m.params,
        active_params=m.active_params,
        breakdown=dict(worst.breakdown),
        total_bytes=total,
        gpu_memory_bytes=inp.gpu.memory_bytes,
        fits=total <= inp.gpu.memory_bytes,
        headroom_bytes=inp.gpu.memory_bytes - total,
        state_bytes=state,
        min_gpus=math.ceil(state / inp.gpu.memory_bytes),
        world_size=inp.world_size,
        host_bytes=worst.host_bytes,
        bytes_per_param=r.bytes_per_param,
        assumptions=assumptions(inp, bills, worst.rank),
        recipe_description=r.describe,
        stages=bills,
        heaviest_stage=worst.rank,
    )
