"""Bring your own model: published config.json files -> the presets' exact counts, and every
refusal naming the JSON field (labs.model.hf_config)."""

import json
from pathlib import Path

import pytest

from labs.core.errors import LabInputError
from labs.core.limits import MAX_CONFIG_BYTES
from labs.model.code import decode
from labs.model.hf_config import SUPPORTED, parse_config, parse_config_text
from labs.model.presets import get_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
CONFIGS = sorted(p.stem for p in FIXTURES.glob("*.json"))


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_every_preset_with_a_published_config_has_a_fixture():
    assert set(CONFIGS) == {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mixtral-8x7b",
                            "qwen2.5-7b", "deepseek-v3", "deepseek-r1", "glm-4.7", "glm-4-9b"}


@pytest.mark.parametrize("preset", CONFIGS)
def test_published_config_reproduces_the_preset_exactly(preset):
    parsed = parse_config_text((FIXTURES / f"{preset}.json").read_text())
    spec, want = parsed.spec, get_model(preset)
    # Exact: the same weights counted by the same rules, to the parameter.
    assert spec.params == want.params
    assert spec.active_params == want.active_params
    assert spec.expert_params == want.expert_params
    for name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "experts",
                 "top_k", "shared_experts", "expert_ffn", "dense_layers", "kv_lora_rank"):
        assert getattr(spec, name) == getattr(want, name), name
    assert decode(parsed.code) == spec  # the code every lab receives is this very shape


def test_published_totals_within_their_rounding():
    # Llama 3 report: 8B/70B/405B; Mixtral paper: 46.7B total, 12.9B active; DeepSeek-V3
    # report: 671B total, 37B activated (MTP excluded) -- rounded figures, so 1 % tolerance.
    v3 = parse_config(load("deepseek-v3")).spec
    assert v3.params == pytest.approx(671e9, rel=0.01)
    assert v3.active_params == pytest.approx(37e9, rel=0.02)
    mixtral = parse_config(load("mixtral-8x7b")).spec
    assert mixtral.params == pytest.approx(46.7e9, rel=0.005)
    assert mixtral.active_params == pytest.approx(12.9e9, rel=0.005)
    assert parse_config(load("llama-3.1-405b")).spec.params == pytest.approx(405e9, rel=0.01)


def test_mtp_layer_is_left_out_and_said_so():
    parsed = parse_config(load("deepseek-v3"))
    assert any("num_nextn_predict_layers" in note for note in parsed.notes)
    without = {k: v for k, v in load("deepseek-v3").items() if k != "num_nextn_predict_layers"}
    assert parse_config(without).spec.params == parsed.spec.params


def test_transformers_defaults_apply():
    cfg = load("llama-3.1-8b")
    for key in ("num_key_value_heads", "tie_word_embeddings", "attention_bias", "mlp_bias"):
        del cfg[key]
    spec = parse_config(cfg).spec
    assert spec.kv_heads == spec.heads == 32  # absent KV heads: multi-head attention
    assert spec.head_dim == 4096 // 32
    assert not spec.tied_embeddings
    cfg["num_key_value_heads"] = None
    assert parse_config(cfg).spec.kv_heads == 32
    # Qwen3Config: head_dim 128 when absent; q/k norms count 2 x head_dim per layer.
    qwen3 = {**load("qwen2.5-7b"), "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}
    q3 = parse_config(qwen3).spec
    assert q3.head_dim == 128 and q3.qk_norm and not q3.qkv_bias


def test_tied_embeddings_drop_the_head():
    cfg = load("llama-3.1-8b")
    tied = parse_config({**cfg, "tie_word_embeddings": True}).spec
    assert parse_config(cfg).spec.params - tied.params == 128256 * 4096


def test_mistral_and_model_type_fallback():
    cfg = {k: v for k, v in load("llama-3.1-8b").items() if k != "architectures"}
    assert parse_config({**cfg, "model_type": "mistral"}).architecture == "MistralForCausalLM"
    assert parse_config(cfg).architecture == "LlamaForCausalLM"


def test_qwen3_moe_dense_layers_first():
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 48, "hidden_size": 2048,
           "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
           "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
           "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": False,
           "decoder_sparse_step": 1, "mlp_only_layers": []}
    spec = parse_config(cfg).spec
    # Qwen3-30B-A3B: "30.5B total, 3.3B activated" (Qwen3 model card).
    assert spec.params == pytest.approx(30.5e9, rel=0.005)
    assert spec.active_params == pytest.approx(3.3e9, rel=0.02)
    assert parse_config({**cfg, "mlp_only_layers": [0, 1]}).spec.dense_layers == 2
    with pytest.raises(LabInputError) as err:
        parse_config({**cfg, "mlp_only_layers": [5]})
    assert err.value.field == "mlp_only_layers"


@pytest.mark.parametrize("change, field, words", [
    ({"num_key_value_heads": 7}, "num_key_value_heads", "must divide num_attention_heads (64)"),
    ({"num_hidden_layers": None}, "num_hidden_layers", "missing"),
    ({"hidden_size": "8192"}, "hidden_size", "whole number"),
    ({"num_hidden_layers": 100_000}, "num_hidden_layers", "from 1 to 512"),
    ({"vocab_size": -1}, "vocab_size", "from 1"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings", "true or false"),
    ({"architectures": ["GPT2LMHeadModel"]}, "architectures", "LlamaForCausalLM"),
    ({"architectures": "LlamaForCausalLM"}, "architectures", "list"),
    ({"attention_bias": True}, "attention_bias", "not supported"),
])
def test_errors_name_the_json_field(change, field, words):
    cfg = {**load("llama-3.1-70b"), **change}
    if change.get("num_hidden_layers", 0) is None:
        del cfg["num_hidden_layers"]
    with pytest.raises(LabInputError) as err:
        parse_config(cfg)
    assert err.value.field == field
    assert words in err.value.message


def test_unsupported_architecture_lists_the_supported_ones():
    with pytest.raises(LabInputError) as err:
        parse_config({"architectures": ["FalconForCausalLM"]})
    assert all(arch in err.value.message for arch in SUPPORTED)
    with pytest.raises(LabInputError) as err:
        parse_config({**load("qwen2.5-7b"), "architectures": ["Qwen2MoeForCausalLM"]})
    assert "shared_expert_intermediate_size" in err.value.message


def test_cross_field_rule_names_the_config():
    with pytest.raises(LabInputError) as err:
        parse_config({**load("mixtral-8x7b"), "num_experts_per_tok": 9})
    assert err.value.field == "config" and "top_k" in err.value.message


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("   ", "empty"), ("{not json", "not valid JSON (line 1"),
    ("[1, 2]", "JSON object"), ("42", "JSON object"), ("[" * 60_000, "not valid JSON"),
    (" " * (MAX_CONFIG_BYTES + 1), "limit"),
], ids=["empty", "blank", "broken", "list", "number", "deep", "large"])
def test_body_errors(text, words):
    with pytest.raises(LabInputError) as err:
        parse_config_text(text)
    assert err.value.field == "config"
    assert words in err.value.message


@pytest.mark.parametrize("text, field", [
    (b"\xff\xfe{", "config"),
    ('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1e400}', "num_hidden_layers"),
    ('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": ' + "9" * 200 + "}",
     "num_hidden_layers"),
    ('{"architectures": [], "model_type": ["llama"]}', "architectures"),
], ids=["not-utf8", "infinite", "huge", "empty-architectures"])
def test_hostile_configs_are_refused_by_field(text, field):
    with pytest.raises(LabInputError) as err:
        parse_config_text(text)
    assert err.value.field == field


def test_attention_dropout_is_read_and_checked():
    """attention_dropout (0.0 in every published config here) decides whether unfused
    attention keeps a dropout mask and output beside its scores (labs.model.activations)."""
    cfg = load("llama-3.1-70b")
    assert cfg["attention_dropout"] == 0.0 and not parse_config(cfg).spec.dropout
    parsed = parse_config({**cfg, "attention_dropout": 0.1})
    assert parsed.spec.dropout and parsed.code.endswith(".drop")
    assert decode(parsed.code).dropout
    for bad in (1.5, "0.1", True):
        with pytest.raises(LabInputError) as err:
            parse_config({**cfg, "attention_dropout": bad})
        assert err.value.field == "attention_dropout" and "from 0 up to 1" in err.value.message
