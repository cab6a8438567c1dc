"""Bring your own model: a Hugging Face ``config.json`` read into the lab's ModelSpec.

Each supported architecture maps its config fields with the meaning (and the defaults) that
Hugging Face Transformers gives them in ``src/transformers/models/<type>/configuration_<type>.py``
and builds the weights in ``modeling_<type>.py``; the ModelSpec then counts those weights by
the same rules as the presets (labs/model/presets.py), so a preset's published config.json gives
exactly the preset's count (tests/labs/test_hf_config.py). A config whose weights the
ModelSpec fields cannot express exactly is refused with the reason, never approximated.

Size fields (layers, widths, heads, vocabulary, experts) are required: a config missing one is
an error naming it, rather than silently taking a reference model's default. Every number is
bounded by labs.core.limits.MODEL_BOUNDS so no pasted model can make a lab slow. Errors are
LabInputError naming the JSON field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from labs.core.errors import LabInputError
from labs.core.limits import MAX_CONFIG_BYTES, MODEL_BOUNDS
from labs.model.code import canonical, encode
from labs.model.spec import ModelSpec

CONFIG = "config"  # the field named when the body as a whole is wrong


def _shown(value: Any) -> str:
    """A field's value as a message quotes it: scalars as written (cut short), containers by
    their kind (a pasted value can be nested thousands deep; its repr is never built)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return f"{value!r:.40}"


@dataclass(frozen=True)
class ParsedConfig:
    """A config.json read: its architecture, the lab's shape for it and the model code."""

    architecture: str
    spec: ModelSpec  # canonical: what decoding ``code`` gives every lab
    code: str
    notes: tuple[str, ...]


class _Reader:
    """Typed, bounded access to a config's fields; errors name the field."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg

    def whole(self, key: str, bound: str, default: int | None = None, *,
              null_is: int | None = None) -> int:
        value = self.cfg.get(key, default)
        if value is None and key in self.cfg and null_is is not None:
            value = null_is
        if value is None:
            raise LabInputError(key, "missing: this architecture needs it")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise LabInputError(key, f"must be a whole number (got {_shown(value)})")
        low, high = MODEL_BOUNDS[bound]
        if not low <= value <= high:
            raise LabInputError(key, f"must be from {low:,} to {high:,} (got {value:,})")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise LabInputError(key, f"must be true or false (got {_shown(value)})")
        return value

    def rate(self, key: str) -> float:
        """A probability from 0 up to 1 (absent or null: 0, Transformers' default)."""
        value = self.cfg.get(key)
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise LabInputError(key, f"must be a number from 0 up to 1 (got {_shown(value)})")
        return float(value)

    def layer_list(self, key: str, layers: int) -> list[int]:
        """A list of distinct layer indices, each a whole number from 0 to ``layers`` - 1
        (JSON true/false and 1.0 are not indices); absent or null is no layer."""
        value = self.cfg.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise LabInputError(key, f"must be a list of layer indices (got {_shown(value)})")
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) \
                    or not 0 <= item < layers:
                raise LabInputError(key, f"must hold layer indices, whole numbers from 0 to "
                                         f"{layers - 1:,} (got {_shown(item)})")
        if len(set(value)) != len(value):
            raise LabInputError(key, "lists a layer twice")
        return value

    def attention(self, *, head_dim_default: int | None = None) -> dict[str, int]:
        """Layers, hidden, heads, KV heads and head width, as every decoder config names them."""
        layers = self.whole("num_hidden_layers", "layers")
        hidden = self.whole("hidden_size", "hidden")
        heads = self.whole("num_attention_heads", "heads")
        # Transformers: num_key_value_heads None (or absent) means multi-head attention.
        kv_heads = self.whole("num_key_value_heads", "kv_heads", heads, null_is=heads)
        if heads % kv_heads:
            raise LabInputError("num_key_value_heads",
                                f"must divide num_attention_heads ({heads}); got {kv_heads}")
        # LlamaConfig/MistralConfig: head_dim defaults to hidden_size // num_attention_heads.
        default = head_dim_default if head_dim_default is not None else hidden // heads
        head_dim = self.whole("head_dim", "head_dim", default, null_is=default)
        return {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv_heads,
                "head_dim": head_dim}

    def common(self) -> dict[str, Any]:
        return {"vocab": self.whole("vocab_size", "vocab"),
                # PretrainedConfig: tie_word_embeddings defaults to True, but every
                # configuration_<type>.py here passes False unless the config says otherwise.
                "tied_embeddings": self.flag("tie_word_embeddings", False),
                # attention_dropout (0.0 in every current config): unfused attention keeps a
                # dropout mask and output beside its scores only when it is on.
                "dropout": self.rate("attention_dropout") > 0}


def _unsupported(field: str, why: str) -> LabInputError:
    return LabInputError(field, f"not supported: {why}")


def _llama_like(r: _Reader, arch: str, *, head_dim_default: int | None = None,
                qkv_bias: bool = False, qk_norm: bool = False) -> dict[str, Any]:
    shape = {**r.attention(head_dim_default=head_dim_default), **r.common(),
             "ffn": r.whole("intermediate_size", "ffn"), "qkv_bias": qkv_bias, "qk_norm": qk_norm}
    # LlamaAttention: attention_bias puts a bias on q, k, v AND o_proj; LlamaMLP: mlp_bias on
    # gate, up and down. Both on is GPT-style "bias on every linear layer"; either alone has no
    # ModelSpec field (qkv_bias covers q, k, v only).
    attention_bias = r.flag("attention_bias", False)
    mlp_bias = r.flag("mlp_bias", False)
    if attention_bias and mlp_bias:
        shape["linear_bias"] = True
    elif attention_bias:
        raise _unsupported("attention_bias", f"{arch} then biases q, k, v and o_proj; the lab "
                           "counts a q/k/v-only bias, or biases on every linear layer "
                           "(attention_bias and mlp_bias both true)")
    elif mlp_bias:
        raise _unsupported("mlp_bias", "an MLP bias without attention_bias has no lab field")
    return shape


def _llama(r: _Reader, arch: str) -> dict[str, Any]:
    return _llama_like(r, arch)


def _mistral(r: _Reader, arch: str) -> dict[str, Any]:
    # MistralAttention/MistralMLP have no biases (no attention_bias/mlp_bias options).
    return {**r.attention(), **r.common(), "ffn": r.whole("intermediate_size", "ffn")}


def _qwen2(r: _Reader, arch: str) -> dict[str, Any]:
    # Qwen2Attention: q/k/v_proj always carry a bias, o_proj never (modeling_qwen2.py).
    return {**r.attention(), **r.common(), "ffn": r.whole("intermediate_size", "ffn"),
            "qkv_bias": True}


def _qwen3(r: _Reader, arch: str) -> dict[str, Any]:
    # Qwen3Config: head_dim defaults to 128; Qwen3Attention adds q_norm and k_norm (RMSNorm over
    # head_dim) and biases q, k, v and o_proj when attention_bias (default false).
    if r.flag("attention_bias", False):
        raise _unsupported("attention_bias", "Qwen3 then biases o_proj too; the lab counts a "
                           "q/k/v-only bias")
    return {**r.attention(head_dim_default=128), **r.common(),
            "ffn": r.whole("intermediate_size", "ffn"), "qk_norm": True}


def _mixtral(r: _Reader, arch: str) -> dict[str, Any]:
    # MixtralSparseMoeBlock: a bias-free router (num_local_experts x hidden) and
    # num_local_experts SwiGLU experts of width intermediate_size in every layer.
    ffn = r.whole("intermediate_size", "ffn")
    experts = r.whole("num_local_experts", "experts")
    return {**r.attention(), **r.common(), "ffn": ffn, "expert_ffn": ffn, "experts": experts,
            "top_k": r.whole("num_experts_per_tok", "top_k")}


def _qwen3_moe(r: _Reader, arch: str) -> dict[str, Any]:
    # Qwen3MoeDecoderLayer: layer i is sparse unless i is in mlp_only_layers, and only when
    # (i + 1) % decoder_sparse_step == 0. The lab's MoE model has its dense layers first.
    layers = r.whole("num_hidden_layers", "layers")
    step = r.whole("decoder_sparse_step", "layers", 1)
    if step != 1:
        raise _unsupported("decoder_sparse_step", "only every layer sparse (1) is supported: "
                           "the lab's MoE model has its dense layers first")
    dense = r.layer_list("mlp_only_layers", layers)
    if sorted(dense) != list(range(len(dense))) or len(dense) >= layers:
        raise _unsupported("mlp_only_layers", "dense layers must be the first ones, e.g. "
                           "[0, 1, 2], and fewer than num_hidden_layers")
    if r.flag("attention_bias", False):
        raise _unsupported("attention_bias", "Qwen3-MoE then biases o_proj too")
    return {**r.attention(), **r.common(), "ffn": r.whole("intermediate_size", "ffn"),
            "qk_norm": True, "experts": r.whole("num_experts", "experts"),
            "top_k": r.whole("num_experts_per_tok", "top_k"),
            "expert_ffn": r.whole("moe_intermediate_size", "expert_ffn"),
            "dense_layers": len(dense)}


def _qwen2_moe(r: _Reader, arch: str) -> dict[str, Any]:
    raise _unsupported("architectures", "Qwen2-MoE's shared expert has its own width "
                       "(shared_expert_intermediate_size) and a sigmoid gate (hidden x 1) per "
                       "layer, which the lab's MoE shape cannot express exactly")


def _deepseek_moe(r: _Reader) -> dict[str, Any]:
    """The DeepSeekMoE block shared by DeepSeek-V3 and GLM-4.5 (Glm4MoeSparseMoeBlock reuses
    DeepseekV3TopkRouter): a router with an aux-loss-free bias per expert
    (e_score_correction_bias; DeepSeek-V3 sec 2.1.2), n_routed_experts experts of width
    moe_intermediate_size, and one shared MLP of width n_shared_experts x that (the same
    weights as n_shared_experts experts), after first_k_dense_replace dense layers."""
    layers = r.whole("num_hidden_layers", "layers")
    dense = r.whole("first_k_dense_replace", "dense_layers", 0)
    if dense >= layers:
        raise LabInputError("first_k_dense_replace", f"must be fewer than num_hidden_layers "
                                                     f"({layers})")
    if r.whole("moe_layer_freq", "layers", 1) != 1:
        raise _unsupported("moe_layer_freq", "only 1 (every layer after the dense ones is MoE)")
    # Node-limited routing (DeepSeek-V3 sec 2.1.2): the top-k among the experts of the best
    # topk_group of n_group groups; one group (GLM-4.5) is no limit.
    groups = r.whole("n_group", "route_groups", 1, null_is=1)
    limit = r.whole("topk_group", "route_group_limit", groups, null_is=groups)
    routing = {"route_groups": groups, "route_group_limit": limit} \
        if 1 <= limit < groups else {}
    return {"experts": r.whole("n_routed_experts", "experts"),
            "top_k": r.whole("num_experts_per_tok", "top_k"),
            "shared_experts": r.whole("n_shared_experts", "shared_experts", 0, null_is=0),
            "expert_ffn": r.whole("moe_intermediate_size", "expert_ffn"),
            "dense_layers": dense, "router_bias": True, **routing}


def _deepseek_v3(r: _Reader, arch: str) -> dict[str, Any]:
    # DeepseekV3Attention (MLA, DeepSeek-V2 arXiv:2405.04434 sec 2.1): q_lora_rank null means a
    # full-rank query projection. attention_bias would bias q_a, kv_a and o_proj: no lab field.
    if r.flag("attention_bias", False):
        raise _unsupported("attention_bias", "biased MLA projections have no lab field")
    layers = r.whole("num_hidden_layers", "layers")
    hidden = r.whole("hidden_size", "hidden")
    heads = r.whole("num_attention_heads", "heads")
    v_head_dim = r.whole("v_head_dim", "v_head_dim")
    mla = {"q_lora_rank": r.whole("q_lora_rank", "q_lora_rank", null_is=0),
           "kv_lora_rank": r.whole("kv_lora_rank", "kv_lora_rank"),
           "qk_nope_head_dim": r.whole("qk_nope_head_dim", "qk_nope_head_dim"),
           "qk_rope_head_dim": r.whole("qk_rope_head_dim", "qk_rope_head_dim"),
           "v_head_dim": v_head_dim}
    if mla["kv_lora_rank"] < 1:
        raise LabInputError("kv_lora_rank", "must be at least 1 (MLA's latent width)")
    # MLA expands its latent into a K and V per query head; head_dim (unused by the count) is
    # the value head width, as the DeepSeek presets set it.
    return {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": heads,
            "head_dim": v_head_dim, **r.common(), "ffn": r.whole("intermediate_size", "ffn"),
            **mla, **_deepseek_moe(r)}


def _glm4_moe(r: _Reader, arch: str) -> dict[str, Any]:
    # Glm4MoeAttention = Glm4Attention: q/k/v_proj biased when attention_bias, o_proj never;
    # use_qk_norm adds q_norm and k_norm over head_dim. Glm4MoeConfig: head_dim default 128.
    return {**r.attention(head_dim_default=128), **r.common(),
            "ffn": r.whole("intermediate_size", "ffn"),
            "qkv_bias": r.flag("attention_bias", False), "qk_norm": r.flag("use_qk_norm", False),
            **_deepseek_moe(r)}


def _glm(r: _Reader, arch: str) -> dict[str, Any]:
    # GlmForCausalLM (GLM-4-9B's -hf checkpoints): GlmAttention biases q/k/v when
    # attention_bias, not o_proj; GlmMLP's fused gate_up_proj and down_proj are bias-free.
    return {**r.attention(), **r.common(), "ffn": r.whole("intermediate_size", "ffn"),
            "qkv_bias": r.flag("attention_bias", True)}


def _chatglm(r: _Reader, arch: str) -> dict[str, Any]:
    # THUDM's ChatGLM/GLM-4 remote code (modeling_chatglm.py): num_layers, ffn_hidden_size,
    # kv_channels (the head width), multi_query_group_num KV heads when multi_query_attention,
    # add_qkv_bias on the fused QKV only, padded_vocab_size for both the embedding and the
    # separate output_layer, RMSNorm when rmsnorm.
    if r.flag("add_bias_linear", False):
        raise _unsupported("add_bias_linear", "a bias on o_proj and the MLP with a q/k/v-only "
                           "bias choice has no lab field")
    if not r.flag("rmsnorm", True):
        raise _unsupported("rmsnorm", "LayerNorm ChatGLM variants are not supported")
    if r.flag("apply_residual_connection_post_layernorm", False) or \
            not r.flag("post_layer_norm", True):
        raise _unsupported("post_layer_norm", "only the GLM-4 layout (pre-norm, final norm)")
    heads = r.whole("num_attention_heads", "heads")
    kv = r.whole("multi_query_group_num", "kv_heads", heads) \
        if r.flag("multi_query_attention", False) else heads
    if heads % kv:
        raise LabInputError("multi_query_group_num",
                            f"must divide num_attention_heads ({heads}); got {kv}")
    hidden = r.whole("hidden_size", "hidden")
    return {"layers": r.whole("num_layers", "layers"), "hidden": hidden, "heads": heads,
            "kv_heads": kv, "head_dim": r.whole("kv_channels", "head_dim", hidden // heads),
            "ffn": r.whole("ffn_hidden_size", "ffn"),
            "vocab": r.whole("padded_vocab_size", "vocab"),
            "tied_embeddings": r.flag("tie_word_embeddings", False),
            "qkv_bias": r.flag("add_qkv_bias", False)}


ARCHITECTURES: dict[str, Callable[[_Reader, str], dict[str, Any]]] = {
    "LlamaForCausalLM": _llama,
    "MistralForCausalLM": _mistral,
    "MixtralForCausalLM": _mixtral,
    "Qwen2ForCausalLM": _qwen2,
    "Qwen3ForCausalLM": _qwen3,
    "Qwen3MoeForCausalLM": _qwen3_moe,
    "Qwen2MoeForCausalLM": _qwen2_moe,
    "DeepseekV3ForCausalLM": _deepseek_v3,
    "Glm4MoeForCausalLM": _glm4_moe,
    "GlmForCausalLM": _glm,
    "ChatGLMModel": _chatglm,
    "ChatGLMForConditionalGeneration": _chatglm,
}
# model_type -> architecture, for a config that lists no "architectures".
MODEL_TYPES = {
    "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
    "mixtral": "MixtralForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM", "glm4_moe": "Glm4MoeForCausalLM",
    "glm": "GlmForCausalLM", "chatglm": "ChatGLMModel",
}
SUPPORTED = tuple(a for a in ARCHITECTURES if a != "Qwen2MoeForCausalLM")


def architecture(cfg: Mapping[str, Any]) -> str:
    archs = cfg.get("architectures")
    if archs is not None:
        if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
            raise LabInputError("architectures", "must be a list of class names, e.g. "
                                                 '["LlamaForCausalLM"]')
        known = [a for a in archs if a in ARCHITECTURES]
        if known:
            return known[0]
        raise LabInputError("architectures", f"{archs[0][:60]!r} is not supported; supported: "
                                             f"{', '.join(SUPPORTED)}")
    model_type = cfg.get("model_type")
    if isinstance(model_type, str) and model_type in MODEL_TYPES:
        return MODEL_TYPES[model_type]
    raise LabInputError("architectures", "missing (and no known model_type): name one of "
                                         f"{', '.join(SUPPORTED)}")


def parse_config(cfg: Any) -> ParsedConfig:
    """A config.json's dict -> the lab's shape, its code and what the count leaves out."""
    if not isinstance(cfg, dict):
        raise LabInputError(CONFIG, "a config.json must be a JSON object ({...})")
    # VLMs and some MoE checkpoints nest the language model's config under text_config.
    if "text_config" in cfg and isinstance(cfg["text_config"], dict) and \
            "num_hidden_layers" not in cfg:
        raise _unsupported("text_config", "paste the language model's own config (the "
                           "text_config object), with its architecture")
    arch = architecture(cfg)
    reader = _Reader(cfg)
    shape = ARCHITECTURES[arch](reader, arch)
    notes = []
    mtp = reader.whole("num_nextn_predict_layers", "dense_layers", 0, null_is=0) \
        if "num_nextn_predict_layers" in cfg else 0
    if mtp > 0:
        # DeepSeek-V3 sec 2.2 / GLM-4.5: the multi-token-prediction module ships in the
        # checkpoint but is not part of the main model; the presets (and the papers' 671B and
        # 355B) leave it out, and so does this count.
        notes.append(f"num_nextn_predict_layers = {mtp}: the multi-token-prediction layer(s) "
                     "are left out of the count, as in the paper's total")
    try:
        spec = ModelSpec(id="parsed", name="parsed", source="config.json", **shape)
    except LabInputError as exc:  # a rule across fields (top_k > experts, say)
        raise LabInputError(CONFIG, exc.message.removeprefix("parsed: ")) from None
    spec = canonical(spec)
    return ParsedConfig(architecture=arch, spec=spec, code=encode(spec), notes=tuple(notes))


def parse_config_text(text: str | bytes) -> ParsedConfig:
    """A config.json's text (bounded, refused before parsing when too large)."""
    size = len(text.encode() if isinstance(text, str) else text)
    if size > MAX_CONFIG_BYTES:
        raise LabInputError(CONFIG, f"{size:,} bytes is more than a config.json's "
                                    f"{MAX_CONFIG_BYTES:,}-byte limit")
    if not size or not (text.strip() if isinstance(text, str) else text.strip()):
        raise LabInputError(CONFIG, "empty: paste a model's config.json")
    try:
        cfg = json.loads(text)
    except (ValueError, RecursionError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if hasattr(exc, "lineno") else ""
        raise LabInputError(CONFIG, f"not valid JSON{where}") from None
    return parse_config(cfg)
