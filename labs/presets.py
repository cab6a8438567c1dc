"""Model and GPU presets: published shapes and datasheet figures, loaded from JSON data files.

Every parameter count here is *computed* from a model's shape (layer sizes from its published
``config.json`` or paper), never typed in, so the lab's totals can be checked against the
published ones (see ``tests/labs/test_presets.py``). The counting rules follow the Hugging Face
Transformers implementations of each architecture (LlamaForCausalLM, MixtralForCausalLM,
Qwen2ForCausalLM, DeepseekV3ForCausalLM, Glm4MoeForCausalLM, Glm4MoeLiteForCausalLM) and, for
GPT-3, Brown et al. 2020 (arXiv:2005.14165) with GPT-2's layer layout.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import Any

from labs.errors import LabInputError

_DATA_DIR = Path(__file__).parent / "presets"

# Custom models: the synthesized shape keeps Llama 3.1's tokenizer (128,256 entries, untied
# output head; Llama 3 report, arXiv:2407.21783) and its aspect ratio, hidden ≈ 128 x layers.
CUSTOM_VOCAB = 128_256
CUSTOM_MIN_PARAMS = 1_000_000_000  # 1B: below this the embedding table dominates
CUSTOM_MAX_PARAMS = 100_000_000_000_000  # 100T


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only transformer, enough to count its weights exactly.

    ``ffn`` is the dense MLP's intermediate width (used by the first ``dense_layers`` layers of
    a MoE model, and by every layer of a dense one); ``expert_ffn`` is one routed or shared
    expert's intermediate width. MLA fields (``kv_lora_rank`` > 0) switch attention to
    DeepSeek's multi-head latent attention (DeepSeek-V2, arXiv:2405.04434).
    """

    id: str
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    source: str
    tied_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU: gate, up, down (3 matrices); GPT-style: up, down (2)
    qkv_bias: bool = False  # Qwen2, GLM-4: bias on the Q, K, V projections only
    linear_bias: bool = False  # GPT-2/3: bias on every linear layer (also o-proj and MLP)
    qk_norm: bool = False  # GLM-4.5/4.7: RMSNorm on each query and key head (head_dim weights)
    norm: str = "rmsnorm"  # "rmsnorm" (weight only) or "layernorm" (weight and bias)
    experts: int = 0  # routed experts per MoE layer (0 = dense model)
    top_k: int = 0  # routed experts each token visits
    shared_experts: int = 0  # always-on experts per MoE layer (DeepSeek, GLM)
    expert_ffn: int = 0
    dense_layers: int = 0  # leading layers with a dense MLP in a MoE model
    router_bias: bool = False  # aux-loss-free balancing bias per expert (DeepSeek-V3, GLM-4.5)
    q_lora_rank: int = 0  # MLA query compression rank (0 = full-rank query projection)
    kv_lora_rank: int = 0  # MLA latent width (0 = ordinary multi-head / grouped-query attention)
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    max_positions: int = 0  # learned absolute position embeddings (GPT-3: 2048); 0 for RoPE
    notes: str = ""
    params_override: int | None = None  # custom models only: the requested total
    # True when the config is not published and a published architecture stands in for it,
    # scaled to the stated size (``notes`` says which and how): pages label it "stand-in shape".
    stand_in: bool = False

    def __post_init__(self) -> None:
        for name in ("id", "name", "source"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise LabInputError("model", f"model field '{name}' must be a non-empty string")
        positive = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")
        non_negative = (
            "experts", "top_k", "shared_experts", "expert_ffn", "dense_layers", "q_lora_rank",
            "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "max_positions",
        )
        for name in positive:
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise LabInputError("model", f"{self.id}: '{name}' must be a whole number >= 1")
        for name in non_negative:
            value = getattr(self, name)
            if not _is_int(value) or value < 0:
                raise LabInputError("model", f"{self.id}: '{name}' must be a whole number >= 0")
        if self.norm not in ("rmsnorm", "layernorm"):
            raise LabInputError("model", f"{self.id}: norm must be 'rmsnorm' or 'layernorm'")
        if not self.uses_mla and self.heads % self.kv_heads:
            raise LabInputError(
                "model", f"{self.id}: {self.heads} query heads cannot share {self.kv_heads} "
                "KV heads evenly"
            )
        if self.experts:
            if not 1 <= self.top_k <= self.experts or self.expert_ffn < 1:
                raise LabInputError(
                    "model", f"{self.id}: a MoE model needs 1 <= top_k <= experts and "
                    "expert_ffn > 0"
                )
            if self.dense_layers >= self.layers:
                raise LabInputError("model", f"{self.id}: dense_layers must be fewer than layers")
        elif self.top_k or self.shared_experts or self.dense_layers:
            raise LabInputError("model", f"{self.id}: top_k/shared/dense_layers need experts > 0")
        if self.uses_mla and not (self.qk_rope_head_dim and self.qk_nope_head_dim
                                  and self.v_head_dim):
            raise LabInputError("model", f"{self.id}: MLA needs qk_nope, qk_rope and v head dims")
        if self.params_override is not None and (
            not _is_int(self.params_override) or self.params_override < 1
        ):
            raise LabInputError("model", f"{self.id}: params_override must be a positive integer")

    # ----- shape helpers -------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    def _norm(self, width: int) -> int:
        # RMSNorm has a gain only; LayerNorm a gain and a bias (Ba et al. 2016).
        return width if self.norm == "rmsnorm" else 2 * width

    @cached_property
    def attention_params(self) -> int:
        """Weights of one attention block (projections, biases, q/k norms), per layer."""
        h = self.hidden
        if self.uses_mla:
            # DeepSeek-V2 (arXiv:2405.04434) sec 2.1.2 / HF DeepseekV3Attention: low-rank query
            # (q_a, q_a_layernorm, q_b), joint KV latent plus a shared RoPE key (kv_a_proj_with_mqa,
            # kv_a_layernorm, kv_b), output projection from heads x v_head_dim.
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                rank = self.q_lora_rank
                q = h * rank + rank + rank * self.heads * qk_head
            else:
                q = h * self.heads * qk_head
            kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
                  + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim))
            return q + kv + self.heads * self.v_head_dim * h
        q_width = self.heads * self.head_dim
        kv_width = self.kv_heads * self.head_dim
        params = h * q_width + 2 * h * kv_width + q_width * h  # Q, K, V, O (GQA: Ainslie 2023)
        if self.qkv_bias or self.linear_bias:
            params += q_width + 2 * kv_width
        if self.linear_bias:
            params += h
        if self.qk_norm:
            params += 2 * self.head_dim
        return params

    def _mlp_params(self, width: int) -> int:
        # SwiGLU (Shazeer 2020): gate and up h x f, down f x h; GPT MLP: up and down.
        matrices = 3 if self.gated_mlp else 2
        params = matrices * self.hidden * width
        if self.linear_bias:
            params += (matrices - 1) * width + self.hidden
        return params

    @cached_property
    def expert_size(self) -> int:
        """Weights of one routed expert (a SwiGLU MLP of width expert_ffn)."""
        return self._mlp_params(self.expert_ffn) if self.is_moe else 0

    @cached_property
    def _shape_totals(self) -> tuple[int, int, int]:
        """(total, routed-expert, active) weights computed from the shape alone."""
        h = self.hidden
        layer_norms = 2 * self._norm(h)
        dense_layer = self.attention_params + self._mlp_params(self.ffn) + layer_norms
        n_dense = self.layers - self.moe_layers
        total = n_dense * dense_layer
        routed = active_routed = 0
        if self.is_moe:
            # Switch/Mixtral/DeepSeekMoE layer: router (experts x h, plus the aux-loss-free bias
            # of DeepSeek-V3 sec 2.1.2), shared experts that every token uses, routed experts.
            router = self.experts * h + (self.experts if self.router_bias else 0)
            shared = self.shared_experts * self.expert_size
            moe_common = self.attention_params + layer_norms + router + shared
            total += self.moe_layers * moe_common
            routed = self.moe_layers * self.experts * self.expert_size
            active_routed = self.moe_layers * self.top_k * self.expert_size
        embeddings = self.vocab * h + self.max_positions * h
        head = 0 if self.tied_embeddings else self.vocab * h
        total += embeddings + head + self._norm(h)  # final norm
        return total + routed, routed, total + active_routed

    # ----- the counts the lab uses ---------------------------------------------------------
    @property
    def shape_params(self) -> int:
        """Total weights implied by the shape (equals ``params`` except for custom models)."""
        return self._shape_totals[0]

    @property
    def params(self) -> int:
        """Total parameters: what memory must hold (embeddings and head included)."""
        return self.params_override if self.params_override is not None else self.shape_params

    @property
    def expert_params(self) -> int:
        """All routed-expert weights: the part expert parallelism divides."""
        return 0 if self.params_override is not None else self._shape_totals[1]

    @property
    def dense_params(self) -> int:
        """Everything but routed experts: attention, dense/shared MLPs, routers, embeddings."""
        return self.params - self.expert_params

    @property
    def embedding_params(self) -> int:
        """Token (and position) embeddings plus an untied output head. Some model cards quote
        active counts without them (GLM-4.5's 32B), others with them (Mixtral's 12.9B)."""
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.vocab * self.hidden + self.max_positions * self.hidden + head

    @property
    def active_params(self) -> int:
        """Weights one token touches: dense part + shared experts + its top_k routed experts."""
        if self.params_override is not None:
            return self.params
        return self._shape_totals[2]


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator's datasheet figures (bytes and bytes/s use SI prefixes: GB = 1e9 B)."""

    id: str
    name: str
    memory_bytes: float
    bf16_flops: float  # dense tensor-core BF16, no 2:4 sparsity
    scale_up_bandwidth: float  # bytes/s per direction per GPU (NVLink, Infinity Fabric, PCIe)
    network_bandwidth: float  # bytes/s per GPU scale-out (NIC)
    scale_up_domain: int  # GPUs sharing the scale-up fabric (8 in an HGX board)
    source: str
    memory_note: str = ""

    def __post_init__(self) -> None:
        for name in ("id", "name", "source"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise LabInputError("gpu", f"GPU field '{name}' must be a non-empty string")
        for name in ("memory_bytes", "bf16_flops", "scale_up_bandwidth", "network_bandwidth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise LabInputError("gpu", f"{self.id}: '{name}' must be a positive number")
        if not _is_int(self.scale_up_domain) or self.scale_up_domain < 1:
            raise LabInputError("gpu", f"{self.id}: scale_up_domain must be a whole number >= 1")


def _load(filename: str, cls: type) -> dict[str, Any]:
    with open(_DATA_DIR / filename, encoding="utf-8") as fh:
        entries = json.load(fh)
    known = {f.name for f in fields(cls)}
    loaded: dict[str, Any] = {}
    for entry in entries:
        unknown = set(entry) - known
        if unknown:
            raise ValueError(f"{filename}: unknown keys {sorted(unknown)} in {entry.get('id')}")
        spec = cls(**entry)
        if spec.id in loaded:
            raise ValueError(f"{filename}: duplicate id {spec.id}")
        loaded[spec.id] = spec
    return loaded


@cache
def _models() -> dict[str, ModelSpec]:
    return _load("models.json", ModelSpec)


@cache
def _gpus() -> dict[str, GPUSpec]:
    return _load("gpus.json", GPUSpec)


def models() -> dict[str, ModelSpec]:
    """All model presets by id, in file order (a fresh dict; the specs are shared and frozen)."""
    return dict(_models())


def gpus() -> dict[str, GPUSpec]:
    """All GPU presets by id, in file order."""
    return dict(_gpus())


def get_model(model_id: str) -> ModelSpec:
    """A preset by id, or the shape a model code describes (bring your own model: a pasted
    config.json travels as a code, ``L80.h8192.a64...``; labs.model_code)."""
    presets = _models()
    if model_id not in presets:
        from labs.model_code import decode, is_code  # model_code builds on ModelSpec
        if isinstance(model_id, str) and is_code(model_id):
            return decode(model_id)
        raise LabInputError(
            "model", f"unknown model {model_id!r}; choose one of: {', '.join(presets)}, or a "
            "model code (Bring your own model)"
        )
    return presets[model_id]


def get_gpu(gpu_id: str) -> GPUSpec:
    presets = _gpus()
    if gpu_id not in presets:
        raise LabInputError("gpu", f"unknown GPU {gpu_id!r}; choose one of: {', '.join(presets)}")
    return presets[gpu_id]


def _custom_shape(layers: int, hidden: int) -> ModelSpec:
    # Llama-like: head_dim 128, MHA, SwiGLU with ffn = 8/3 h rounded to 256 (Llama 2/3 papers).
    heads = hidden // 128
    ffn = 256 * max(1, round(8 * hidden / 3 / 256))
    return ModelSpec(
        id="custom", name="custom", layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
        head_dim=128, ffn=ffn, vocab=CUSTOM_VOCAB,
        source="synthesized: Llama-style dense shape (Dubey et al. 2024, arXiv:2407.21783)",
    )


# Bounded: every distinct custom size a class types would otherwise stay in memory for good.
@lru_cache(maxsize=256)
def _custom_model(params: int) -> ModelSpec:
    # Search hidden in steps of 1024 (heads a multiple of 8, so TP = 1, 2, 4, 8 divide them:
    # Megatron needs heads % tp == 0) and layers in steps of 4 (so PP = 2, 4 divide them). For
    # each hidden, take the layer count that best matches the request, and keep the shape whose
    # own count is closest, mildly preferring Llama 3.1's aspect ratio hidden ≈ 128 x layers.
    scored: list[tuple[bool, float, ModelSpec]] = []
    for k in range(1, 160):
        hidden = 1024 * k
        four, eight = _custom_shape(4, hidden).shape_params, _custom_shape(8, hidden).shape_params
        per_layer = (eight - four) / 4
        exact_layers = (params - (four - 4 * per_layer)) / per_layer / 4
        for layers in {4 * max(1, math.floor(exact_layers)), 4 * max(1, math.ceil(exact_layers))}:
            shape = _custom_shape(layers, hidden)
            aspect = hidden / (128 * layers)
            score = abs(math.log(shape.shape_params / params)) + 0.05 * abs(math.log(aspect))
            scored.append((not 0.6 <= aspect <= 1.7, score, shape))
    shape = min(scored, key=lambda item: item[:2])[2]
    label = f"{params / 1e9:.1f}B" if params < 1e12 else f"{params / 1e12:.2f}T"
    name = f"Custom {label} (dense, {shape.layers} layers x {shape.hidden} hidden)"
    return ModelSpec(**{**{f.name: getattr(shape, f.name) for f in fields(ModelSpec)},
                        "name": name, "params_override": params})


def custom_model(params: int | float) -> ModelSpec:
    """A dense Llama-like model whose ``params`` is exactly ``params``.

    The layer shapes (used for activations and KV cache) are the nearest Llama-style shape;
    ``shape_params`` tells how far that shape's own count is from the request.
    """
    if isinstance(params, bool) or not isinstance(params, int | float) or not math.isfinite(params):
        raise LabInputError("params", "the custom parameter count must be a number, e.g. 7e9")
    if params != int(params):
        raise LabInputError("params", "the custom parameter count must be a whole number")
    count = int(params)
    if not CUSTOM_MIN_PARAMS <= count <= CUSTOM_MAX_PARAMS:
        raise LabInputError(
            "params",
            f"a custom model must have between {CUSTOM_MIN_PARAMS / 1e9:g}B and "
            f"{CUSTOM_MAX_PARAMS / 1e12:g}T parameters (got {count:,})",
        )
    return _custom_model(count)
