"""The model code (labs.model.code): round trips over every preset and over the bounds, and
refusals naming the query field."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labs.core.errors import LabInputError
from labs.core.limits import MAX_MODEL_CODE, MODEL_BOUNDS
from labs.model.code import decode, encode, is_code
from labs.model.presets import models
from labs.model.spec import ModelSpec


def test_readable_code_of_llama_70b():
    # Only non-default fields: head_dim 128 = 8192 / 64 is implied.
    assert encode(models()["llama-3.1-70b"]) == "L80.h8192.a64.k8.f28672.v128256"


@pytest.mark.parametrize("preset", list(models()))
def test_every_preset_round_trips(preset):
    spec = models()[preset]
    code = encode(spec)
    assert is_code(code) and len(code) <= MAX_MODEL_CODE
    decoded = decode(code)
    assert (decoded.params, decoded.active_params, decoded.expert_params) == (
        spec.params, spec.active_params, spec.expert_params)
    assert encode(decoded) == code
    assert decoded.id == code and decoded.name.startswith("Your model (")


def _bounded(name, low=None, high=None):
    lo, hi = MODEL_BOUNDS[name]
    return st.integers(max(lo, low or lo), min(hi, high or hi))


@st.composite
def shapes(draw):
    heads = draw(_bounded("heads", 1, 256))
    kv_heads = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    layers = draw(_bounded("layers"))
    shape = dict(layers=layers, hidden=draw(_bounded("hidden")), heads=heads, kv_heads=kv_heads,
                 head_dim=draw(_bounded("head_dim")), ffn=draw(_bounded("ffn")),
                 vocab=draw(_bounded("vocab")), tied_embeddings=draw(st.booleans()),
                 qkv_bias=draw(st.booleans()), qk_norm=draw(st.booleans()))
    if draw(st.booleans()):
        experts = draw(_bounded("experts", 1))
        shape.update(experts=experts, top_k=draw(st.integers(1, experts)),
                     shared_experts=draw(_bounded("shared_experts")),
                     expert_ffn=draw(_bounded("expert_ffn", 1)),
                     dense_layers=draw(st.integers(0, layers - 1)),
                     router_bias=draw(st.booleans()))
    if draw(st.booleans()):
        shape.update(kv_lora_rank=draw(_bounded("kv_lora_rank", 1)),
                     q_lora_rank=draw(_bounded("q_lora_rank")),
                     qk_nope_head_dim=draw(_bounded("qk_nope_head_dim", 1)),
                     qk_rope_head_dim=draw(_bounded("qk_rope_head_dim", 1)),
                     v_head_dim=draw(_bounded("v_head_dim", 1)))
    return ModelSpec(id="x", name="x", source="x", **shape)


@settings(max_examples=300, deadline=None)
@given(shapes())
def test_round_trip_over_the_bounds(spec):
    code = encode(spec)
    assert len(code) <= MAX_MODEL_CODE
    decoded = decode(code)
    assert decoded.params == spec.params and decoded.active_params == spec.active_params
    assert encode(decoded) == code


@pytest.mark.parametrize("code, words", [
    ("L80.h8192.a64", "missing f, v"),
    ("L80.h8192.a64.k7.f28672.v128256", "cannot share 7 KV heads"),
    ("L80.h8192.a64.f28672.v128256.x9", "unknown token 'x9'"),
    ("L80.h8192.a64.f28672.v128256.L8", "L is given twice"),
    ("L9999.h8192.a64.f28672.v128256", "layers must be from 1 to 512"),
    ("L80.h8192.a64.f28672.v128256..", "is not a key"),
    ("L080.h8192.a64.f28672.v128256", "is not a key"),
    ("L80.h8192.a64.f28672.v128256.E8.K9.F100", "top_k"),
    ("L" + "1" * 200, "longer than"),
])
def test_bad_codes_name_the_model_field(code, words):
    with pytest.raises(LabInputError) as err:
        decode(code)
    assert err.value.field == "model"
    assert words in err.value.message


def test_decode_cache_is_bounded():
    assert decode.cache_info().maxsize == 256


@pytest.mark.parametrize("code, name", [
    ("L80.h8192.a64.k8.f28672.v128256", "Your model (70.6B)"),
    ("L32.h4096.a32.k8.f14336.v32000.E8.K2.F14336", "Your model (46.7B, 12.9B active)"),
    ("L2.h64.a1.f64.v1000", "Your model (0.2M)"),
    ("L512.h65536.a1024.f524288.v1048576", "Your model (61.71T)"),
])
def test_names_say_the_size(code, name):
    assert decode(code).name == name


def test_dropout_travels_in_the_code():
    """A model trained with dropout (GPT-3) writes ``drop``; a code without it decodes to no
    dropout, as Transformers' configs default attention_dropout to 0."""
    gpt3 = models()["gpt-3-175b"]
    assert gpt3.dropout and encode(gpt3).endswith(".drop")
    assert decode(encode(gpt3)).dropout
    assert not decode("L80.h8192.a64.k8.f28672.v128256").dropout
