"""The per-GPU memory ledger (EP01, EP03): what one GPU must hold for a training or inference step.

Sources, cited where each formula is used:
- mixed-precision Adam bytes per parameter: Micikevicius et al. 2018, "Mixed Precision
  Training" (arXiv:1710.03740); Rajbhandari et al. 2020, "ZeRO" (arXiv:1910.02054) sec 3;
- ZeRO stages 1/2/3: Rajbhandari et al. 2020, Figure 1;
- TP/PP/SP/recomputation activations: Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models" (arXiv:2205.05198), Table 2 and sec 4.2.3;
- 1F1B pipelines: Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM" (arXiv:2104.04473) sec 2.2;
- expert parallelism and its rank groups: Megatron Core MoE docs ("expert-model-parallel-size",
  expert-tensor-parallel-size) and DeepSeek-V3 (arXiv:2412.19437) sec 3.2;
- KV cache and MLA latent cache: DeepSeek-V2 (arXiv:2405.04434) sec 2.1; vLLM's memory profiling
  (docs.vllm.ai, "gpu_memory_utilization") for the inference workspace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.errors import LabInputError
from labs.presets import GPUSpec, ModelSpec

MODES = ("train", "infer")
RECOMPUTE = ("none", "selective", "full")
BREAKDOWN_KEYS = (
    "weights", "gradients", "master_weights", "optimizer_moments", "activations", "kv_cache",
    "workspace",
)
MAX_SEQ_LEN = 1_048_576
MAX_MICRO_BATCH = 1024
MAX_DEGREE = 4096
MAX_DP = 100_000
MAX_WORLD = 1_000_000
ACT_BYTES = 2  # bf16 activations and KV cache


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


def _whole(field: str, value: object, low: int, high: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise LabInputError(field, f"{what} must be a whole number from {low:,} to {high:,} "
                                   f"(got {value!r})")


def _divisors(n: int) -> str:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    found = sorted({*small, *(n // d for d in small)})
    return ", ".join(str(d) for d in found if d <= MAX_DEGREE)


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
    # (--decoder-first/last-pipeline-num-layers); True sizes the heaviest stage, ceil(L/pp).
    uneven_pp: bool = False

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
        _whole("seq_len", self.seq_len, 1, MAX_SEQ_LEN, "sequence length")
        _whole("micro_batch", self.micro_batch, 1, MAX_MICRO_BATCH, "micro-batch size")
        if self.recompute not in RECOMPUTE:
            raise LabInputError("recompute", "recomputation must be 'none', 'selective' or "
                                             f"'full' (got {self.recompute!r})")
        for name, what in (("tp", "tensor parallel degree"), ("pp", "pipeline stages"),
                           ("cp", "context parallel degree"), ("ep", "expert parallel degree")):
            _whole(name, getattr(self, name), 1, MAX_DEGREE, what)
        _whole("dp", self.dp, 1, MAX_DP, "data parallel degree")
        _whole("zero", self.zero, 0, 3, "ZeRO stage")
        for name in ("offload", "uneven_pp"):
            if not isinstance(getattr(self, name), bool):
                raise LabInputError(name, f"{name} must be true or false")
        if self.mode == "infer" and self.zero:
            raise LabInputError("zero", "ZeRO shards training state (gradients, optimizer); "
                                        "inference has none: use ZeRO stage 0")
        if self.mode == "infer" and self.offload:
            raise LabInputError("offload", "optimizer offload only applies to training; "
                                           "turn it off for inference")
        if self.world_size > MAX_WORLD:
            raise LabInputError("dp", f"TP x PP x CP x DP = {self.world_size:,} GPUs; the lab "
                                      f"simulates at most {MAX_WORLD:,}")
        m = self.model
        if m.heads % self.tp:
            raise LabInputError("tp", f"Megatron splits attention by heads: {m.heads} heads "
                                      f"do not divide by TP={self.tp}; choose one of "
                                      f"{_divisors(m.heads)}")
        if self.pp > m.layers:
            raise LabInputError("pp", f"{m.layers} layers cannot fill {self.pp} pipeline "
                                      "stages; each stage needs at least one layer")
        if m.layers % self.pp and not self.uneven_pp:
            raise LabInputError("pp", f"{m.layers} layers do not split evenly into "
                                      f"{self.pp} stages; choose one of "
                                      f"{_divisors(m.layers)} (or allow uneven stages)")
        if self.seq_len % self.cp:
            raise LabInputError("cp", f"CP={self.cp} must divide the sequence length "
                                      f"{self.seq_len:,} so every rank gets whole tokens")
        if self.cp > 1 and self.seq_len % (2 * self.cp):
            raise LabInputError("cp", f"zigzag context parallelism cuts the sequence into 2 x "
                                      f"CP = {2 * self.cp:,} equal chunks (rank r takes chunks r "
                                      "and 2CP-1-r to balance causal work); the sequence length "
                                      f"{self.seq_len:,} must be a multiple of {2 * self.cp:,}")
        if not m.is_moe and self.ep != 1:
            raise LabInputError("ep", f"{m.name} is dense (no experts): expert parallelism "
                                      "must be 1")
        if m.is_moe and m.experts % self.ep:
            raise LabInputError("ep", f"EP={self.ep} must divide the {m.experts} experts so "
                                      "every GPU holds the same number")
        if (self.tp * self.cp * self.dp) % self.ep:
            # Megatron Core MoE: with expert-TP = 1 the world N = TP*PP*CP*DP is re-grouped as
            # EP x expert-DP x PP, so EP*PP must divide N, i.e. EP | TP*CP*DP (CURRICULUM EP07).
            raise LabInputError("ep", f"EP={self.ep} must divide TP x CP x DP = "
                                      f"{self.tp * self.cp * self.dp}: experts regroup the same "
                                      "GPUs of each pipeline stage, they do not add GPUs")

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def stage_layers(self) -> int:
        """Layers on the heaviest pipeline stage."""
        return math.ceil(self.model.layers / self.pp)


@dataclass(frozen=True)
class MemoryResult:
    input: MemoryInput
    params: int
    active_params: int
    breakdown: dict[str, float]  # bytes per GPU, keys in BREAKDOWN_KEYS order
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


def activation_bytes_per_layer(model: ModelSpec, seq_len: int, micro_batch: int = 1,
                               tp: int = 1, cp: int = 1, recompute: str = "selective") -> float:
    """Activation bytes one transformer layer keeps for backward, per micro-batch, per GPU.

    Korthikanti et al. 2022, Table 2, with sequence parallelism on whenever t > 1:
    none sbh(34 + 5as/h)/t, selective 34sbh/t, full 2sbh (the layer input only). With CP each
    rank keeps s/cp tokens; its attention scores pair local queries with all keys: 5a(s/cp)s b.
    """
    h, a, b = model.hidden, model.heads, micro_batch
    s_local = seq_len / cp
    if recompute == "full":
        return 2 * s_local * b * h
    per_token = 34 * s_local * b * h / tp
    if recompute == "selective":
        return per_token
    return per_token + 5 * a * s_local * seq_len * b / tp


def kv_cache_bytes(model: ModelSpec, seq_len: int, micro_batch: int = 1, tp: int = 1,
                   pp: int = 1, cp: int = 1) -> float:
    """bf16 KV cache per GPU for micro_batch sequences of seq_len tokens.

    GQA/MHA: K and V, (layers/pp) x ceil(kv_heads/tp) heads x head_dim per token; when TP
    exceeds the KV heads each rank keeps a replica of one (vLLM/Megatron replicate KV heads).
    MLA (DeepSeek-V2 sec 2.1.2): one latent of kv_lora_rank + qk_rope_head_dim per token and
    layer, shared by all heads, so TP does not split it.
    """
    stage_layers = math.ceil(model.layers / pp)
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


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _assumptions(inp: MemoryInput) -> tuple[str, ...]:
    m, train = inp.model, inp.mode == "train"
    notes: list[str] = []
    if m.params_override is not None:
        notes.append(f"Custom model: exactly {m.params:,} parameters; layer sizes come from the "
                     f"nearest Llama-style shape ({m.layers} layers x {m.hidden} hidden, whose "
                     f"own count is {m.shape_params / 1e9:.2f}B).")
    if m.notes:
        notes.append(m.notes)
    if m.is_moe:
        notes.append("MoE: memory holds all experts (total parameters); compute uses only the "
                     f"active ones ({m.active_params / 1e9:.1f}B of {m.params / 1e9:.1f}B).")
    if train:
        shape = [x for x, on in (("GQA", m.kv_heads < m.heads and not m.uses_mla),
                                 ("MLA", m.uses_mla), ("SwiGLU", m.gated_mlp),
                                 ("MoE routing", m.is_moe)) if on]
        notes.append("Activations use the classic GPT formulas of Korthikanti et al. 2022 "
                     "(selective: 34·s·b·h bytes per layer)"
                     + (f"; this model's {_and(shape)} "
                        f"{'make' if len(shape) > 1 else 'makes'} them approximate."
                        if shape else "."))
        notes.append("Embedding, logits and loss activations are not counted (the fp32 logits "
                     "alone are about s·b·vocab·4 B on the last stage).")
        if inp.tp > 1:
            notes.append("Sequence parallelism is on with TP, so every activation term "
                         "divides by TP.")
        if inp.pp > 1:
            notes.append("Pipeline: 1F1B with at least as many micro-batches as stages; the "
                         "first stage holds p micro-batches of L/p layers, i.e. L layers' "
                         "worth of activations.")
        if inp.zero:
            notes.append(f"ZeRO-{inp.zero} shards dense state over DP x CP = {inp.dp * inp.cp} "
                         "ranks (Megatron's distributed optimizer includes CP)"
                         + (f" and expert state over expert-DP = "
                            f"{inp.tp * inp.cp * inp.dp // inp.ep}" if m.is_moe else "") + ".")
        if inp.offload:
            notes.append("Optimizer offload: master weights and Adam moments live in host RAM "
                         "and the update runs on the CPU; PCIe bandwidth and host memory "
                         "become the limits.")
    else:
        notes.append("KV cache in bf16 for every token of every sequence; "
                     + ("MLA caches one compressed latent per token and layer, not split by TP."
                        if m.uses_mla else
                        "with TP > KV heads each GPU keeps a replica of one KV head."))
        notes.append("Workspace is an estimate of one layer's forward intermediates "
                     "(vLLM profiles a forward pass to reserve it).")
    if m.is_moe:
        notes.append("Experts: expert-TP = 1, so each GPU holds experts/EP of its stage's MoE "
                     "layers, replicated over expert-DP = TP x CP x DP / EP.")
    notes.append("Weights are spread evenly over pipeline stages (the real first and last "
                 "stages also carry the embedding and output head).")
    if inp.model.layers % inp.pp:
        notes.append(f"{m.layers} layers over {inp.pp} stages: the heaviest stage holds "
                     f"{inp.stage_layers} layers, and that stage is sized here.")
    notes.append("Not counted: CUDA context, communication buffers and allocator "
                 "fragmentation (often a few GB per GPU).")
    return tuple(notes)


def compute_memory(inp: MemoryInput) -> MemoryResult:
    """Bytes one GPU holds for ``inp`` (the heaviest pipeline stage)."""
    m, r = inp.model, RECIPES[inp.recipe]
    # Parameters local to one GPU: dense part split by TP within a stage, routed experts split
    # by EP (expert-TP = 1); a stage holds stage_layers/L of each (= 1/PP when even).
    stage_share = inp.stage_layers / m.layers
    dense_local = m.dense_params * stage_share / inp.tp
    expert_local = m.expert_params * stage_share / inp.ep
    breakdown = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
    host = 0.0
    if inp.mode == "train":
        dense_group = inp.dp * inp.cp  # distributed optimizer shards over DP incl. CP
        expert_group = inp.tp * inp.cp * inp.dp // inp.ep  # expert-DP

        def sharded(bytes_per_param: float, from_stage: int) -> float:
            # ZeRO (Rajbhandari 2020, Fig. 1): stage 1 shards optimizer state (master + moments),
            # stage 2 also gradients, stage 3 also the bf16 weights.
            on = inp.zero >= from_stage
            return bytes_per_param * (dense_local / (dense_group if on else 1)
                                      + expert_local / (expert_group if on else 1))

        breakdown["weights"] = sharded(r.weights, 3)
        breakdown["gradients"] = sharded(r.gradients, 2)
        optimizer = {"master_weights": sharded(r.master_weights, 1),
                     "optimizer_moments": sharded(r.optimizer_moments, 1)}
        if inp.offload:
            host = sum(optimizer.values())
        else:
            breakdown.update(optimizer)
        per_layer = activation_bytes_per_layer(m, inp.seq_len, inp.micro_batch, inp.tp, inp.cp,
                                               inp.recompute)
        # 1F1B: the first stage holds p micro-batches x L/p layers = L layers' worth
        # (Korthikanti 2022 sec 4.2.3; Narayanan 2021 sec 2.2.1).
        breakdown["activations"] = inp.pp * inp.stage_layers * per_layer
    else:
        breakdown["weights"] = r.weights * (dense_local + expert_local)
        breakdown["kv_cache"] = kv_cache_bytes(m, inp.seq_len, inp.micro_batch, inp.tp, inp.pp,
                                               inp.cp)
        breakdown["workspace"] = workspace_bytes(m, inp.seq_len, inp.micro_batch, inp.tp, inp.cp)
    total = sum(breakdown.values())
    state = m.params * r.bytes_per_param
    return MemoryResult(
        input=inp,
        params=m.params,
        active_params=m.active_params,
        breakdown=breakdown,
        total_bytes=total,
        gpu_memory_bytes=inp.gpu.memory_bytes,
        fits=total <= inp.gpu.memory_bytes,
        headroom_bytes=inp.gpu.memory_bytes - total,
        state_bytes=state,
        min_gpus=math.ceil(state / inp.gpu.memory_bytes),
        world_size=inp.world_size,
        host_bytes=host,
        bytes_per_param=r.bytes_per_param,
        assumptions=_assumptions(inp),
        recipe_description=r.describe,
    )
