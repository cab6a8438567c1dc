"""Bring your own model on the web: POST /api/models/parse, the page form (htmx and plain),
and the registry-wide contract that every lab with a model control takes a model code."""

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from app.schemas import ParsedModel
from labs.core.limits import MAX_CONFIG_BYTES
from labs.model import hf_config
from labs.model.code import encode
from labs.model.presets import get_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
CONFIGS = sorted(p.stem for p in FIXTURES.glob("*.json"))
LLAMA_70B = "L80.h8192.a64.k8.f28672.v128256"
MODEL_LABS = sorted(n for n, v in VIEWS.items() if "model" in v.query_model.model_fields)


def config_text(name: str) -> str:
    return (FIXTURES / f"{name}.json").read_text()


@pytest.mark.parametrize("preset", CONFIGS)
def test_api_parse_reproduces_each_preset(client, preset):
    answer = client.post("/api/models/parse", content=config_text(preset),
                         headers={"content-type": "application/json"})
    assert answer.status_code == 200
    body = ParsedModel.model_validate(answer.json())
    want = get_model(preset)
    assert (body.params, body.active_params) == (want.params, want.active_params)
    assert body.code == encode(want)
    assert body.name.startswith("Your model (")


def test_api_parse_says_what_the_count_leaves_out(client):
    body = client.post("/api/models/parse", content=config_text("deepseek-v3")).json()
    assert body["architecture"] == "DeepseekV3ForCausalLM"
    assert body["kv_lora_rank"] == 512 and body["experts"] == 256
    assert any("num_nextn_predict_layers" in note for note in body["notes"])


@pytest.mark.parametrize("body, field, words", [
    ("{not json", "config", "not valid JSON"),
    ("[1, 2]", "config", "JSON object"),
    ('{"architectures": ["BertModel"]}', "architectures", "LlamaForCausalLM"),
    (json.dumps({**json.loads(config_text("llama-3.1-70b")), "num_key_value_heads": 7}),
     "num_key_value_heads", "must divide num_attention_heads (64)"),
    (json.dumps({**json.loads(config_text("llama-3.1-70b")), "vocab_size": "big"}),
     "vocab_size", "whole number"),
], ids=["not-json", "array", "architecture", "kv-heads", "type"])
def test_api_parse_errors_name_the_field(client, body, field, words):
    answer = client.post("/api/models/parse", content=body)
    assert answer.status_code == 422
    detail = answer.json()["detail"][0]
    assert detail["loc"] == ["body", field]
    assert words in detail["msg"]


def test_api_parse_refuses_a_large_body_unread(client):
    answer = client.post("/api/models/parse", content=b" " * (MAX_CONFIG_BYTES + 1))
    assert answer.status_code == 413
    assert answer.json()["detail"][0]["loc"] == ["body", "config"]
    # A declared length over the bound is refused on the header alone.
    answer = client.post("/api/models/parse", content=b"{}",
                         headers={"content-length": str(10 * MAX_CONFIG_BYTES)})
    assert answer.status_code == 413


def test_api_parse_is_documented(client):
    spec = client.get("/openapi.json").json()
    route = spec["paths"]["/api/models/parse"]["post"]
    assert "requestBody" in route and "422" in route["responses"]


@pytest.mark.parametrize("name", MODEL_LABS)
def test_every_lab_takes_a_model_code(client, name):
    """The code of a lab's default preset draws exactly the preset's answer (only the model's
    id and name differ), on the API and on the page, which names it "Your model (...)"."""
    view = VIEWS[name]
    default = view.query_model.model_fields["model"].default or "llama-3.1-70b"
    code = encode(get_model(default))
    preset = client.get(f"/api/{name}", params={"model": default})
    coded = client.get(f"/api/{name}", params={"model": code})
    assert preset.status_code == coded.status_code == 200, coded.text[:300]
    strip = ("model", "model_name")
    want = {k: v for k, v in preset.json().items() if k not in strip}
    got = {k: v for k, v in coded.json().items() if k not in strip}
    # Links may leave out a lab's default preset (the playground's panel links do) but must
    # spell out a code: compare with the default's "model=" omitted on both sides.
    def same(answer: dict) -> str:
        # (nested answers, the playground's panels, name the model too)
        return json.dumps(answer, sort_keys=True).replace(code, default).replace(
            f"model={default}&", "").replace(get_model(code).name, get_model(default).name)
    assert same(got) == same(want)
    for path, headers in ((f"/embed/{name}", {}), (view.episode.url, {"HX-Request": "true"})):
        answer = client.get(path, params={"model": code}, headers=headers)
        # The state drawn carries the code (data-state, embed links), not the preset.
        assert answer.status_code == 200 and f"model={code}" in answer.text, path
    page = client.get(view.episode.url, params={"model": code}).text
    name_shown = get_model(code).name
    assert name_shown.startswith("Your model (")
    assert f'<option value="{code}" selected>{name_shown}</option>' in page
    assert 'id="byom"' in page and "<details class=\"byom\" id=\"byom\" open>" in page


@pytest.mark.parametrize("name", MODEL_LABS)
def test_a_bad_code_is_a_422_naming_the_model(client, name):
    answer = client.get(f"/api/{name}", params={"model": "L80.h8192.a64.k7.f28672.v128256"})
    assert answer.status_code == 422
    detail = answer.json()["detail"][0]
    assert detail["loc"][-1] == "model" and "KV heads" in detail["msg"]


def test_custom_params_still_work(client):
    assert client.get("/api/memory", params={"model": "custom", "params": "7e9"}).json()[
        "params"] == 7_000_000_000
    assert client.get("/api/tp", params={"model": "custom", "params": "30e9"}).status_code == 200
    answer = client.get("/api/moe", params={"model": "custom", "params": "30e9"})
    assert answer.status_code == 422 and "mixture-of-experts" in answer.text


def test_plain_form_redirects_to_the_page_with_the_code(client):
    answer = client.post("/models/parse", data={
        "config": config_text("llama-3.1-70b"),
        "return_to": "/episodes/memory?gpu=a100-80gb&model=custom&params=7e9"},
        follow_redirects=False)
    assert answer.status_code == 303
    target = urlsplit(answer.headers["location"])
    assert target.path == "/episodes/memory"
    assert parse_qs(target.query) == {"model": [LLAMA_70B], "gpu": ["a100-80gb"]}
    page = client.get(answer.headers["location"])
    assert page.status_code == 200 and "Your model (70.6B)" in page.text


def test_plain_form_never_redirects_off_site(client):
    answer = client.post("/models/parse", data={
        "config": config_text("llama-3.1-8b"), "return_to": "https://evil.example/x"},
        follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/?model=")


def test_plain_form_error_is_a_page_naming_the_field(client):
    answer = client.post("/models/parse", data={"config": '{"architectures": ["GPT2"]}',
                                                "return_to": "/episodes/memory"})
    assert answer.status_code == 422
    assert "architectures:" in answer.text and 'href="/episodes/memory"' in answer.text


def test_htmx_form_answers_the_fragment(client):
    headers = {"HX-Request": "true"}
    ok = client.post("/models/parse", headers=headers, data={
        "config": config_text("mixtral-8x7b"), "return_to": "/episodes/experts"})
    assert ok.status_code == 200
    assert 'data-use-model="L32.h4096.a32.k8.f14336.v32000.E8.K2.F14336"' in ok.text
    assert "<html" not in ok.text and "46,702,792,704" in ok.text
    bad = client.post("/models/parse", headers=headers, data={"config": "[]"})
    assert bad.status_code == 200  # htmx swaps 2xx only: the message is the fragment
    assert 'data-field="config"' in bad.text and "data-use-model" not in bad.text


# --- every field of a pasted config, by type, at its depth (issue 20) ---------------------

QWEN3_MOE = {  # Qwen/Qwen3-30B-A3B's config.json, the fields the count reads
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
    "intermediate_size": 6144, "num_attention_heads": 32, "num_key_value_heads": 4,
    "num_hidden_layers": 48, "vocab_size": 151936, "head_dim": 128, "num_experts": 128,
    "num_experts_per_tok": 8, "moe_intermediate_size": 768, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "tie_word_embeddings": False}


def read_fields() -> list[str]:
    """Every config field labs/model/hf_config.py reads, found in its source: new ones are
    fuzzed as soon as they are read."""
    source = (Path(hf_config.__file__)).read_text()
    found = set(re.findall(r'\.(?:whole|flag|layer_list|rate)\(\s*"(\w+)"', source))
    found |= set(re.findall(r'cfg(?:\.get\(|\[)"(\w+)"', source))
    found |= set(re.findall(r'"(\w+)" (?:not )?in cfg', source))
    return sorted(found)


FIELDS = read_fields()
BASES = [QWEN3_MOE, *(json.loads(config_text(name)) for name in CONFIGS)]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(), st.text(max_size=30),
    st.sampled_from([0, 1, 2, 3, 64, 512, 513, 1e300, -0.0, 1.0, 2.5, "8", "", "LlamaForCausalLM",
                     "qwen3_moe", 10**4000]))
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=6)
    | st.dictionaries(st.sampled_from([*FIELDS, "x"]), inner, max_size=6), max_leaves=24)
# Lists of layer indices or class names with a stranger among them.
MIXED_LISTS = st.lists(st.one_of(st.integers(min_value=-2, max_value=60), SCALARS,
                                 st.lists(SCALARS, max_size=2),
                                 st.dictionaries(st.text(max_size=2), SCALARS, max_size=1)),
                       max_size=6)
# Sizes and depths a hand-written strategy would not reach.
LARGE = st.sampled_from([
    list(range(48)), list(range(47)), list(range(5000)), [0] * 3, [[0]] * 3, "x" * 60_000,
    [0, "a"], [None, 1], [{}, {}], [0, [1]], [False, True], [0.0, 1.0],
    json.loads("[" * 900 + "]" * 900), json.loads('{"a":' * 900 + "1" + "}" * 900)])


def assert_says_which_field(answer, fields):
    assert answer.status_code in (200, 413, 422), (answer.status_code, answer.text[:300])
    if answer.status_code != 200:
        detail = answer.json()["detail"][0]
        assert detail["loc"][0] == "body" and detail["loc"][1] in fields, detail
        assert detail["msg"].startswith(f"{detail['loc'][1]}: "), detail


def test_the_field_list_covers_the_reader():
    assert {"mlp_only_layers", "num_hidden_layers", "architectures", "model_type",
            "num_nextn_predict_layers", "first_k_dense_replace", "kv_lora_rank"} <= set(FIELDS)


@pytest.mark.parametrize("value", [[0, "a"], [None, 1], [{}, {}], [0, [1]], [False, True],
                                   [0.0, 1.0], "0", {"0": 1}, [0, 0], [48]])
def test_bad_dense_layer_lists_name_the_field(client, value):
    """Issue 20: these were a TypeError at sorted(); booleans and floats passed as indices."""
    body = json.dumps({**QWEN3_MOE, "mlp_only_layers": value})
    answer = client.post("/api/models/parse", content=body)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "mlp_only_layers"]
    form = client.post("/models/parse", data={"config": body, "return_to": "/episodes/memory"})
    assert form.status_code == 422 and "mlp_only_layers:" in form.text


def test_leading_dense_layers_are_read(client):
    body = client.post("/api/models/parse",
                       content=json.dumps({**QWEN3_MOE, "mlp_only_layers": [1, 0]})).json()
    assert body["dense_layers"] == 2


@pytest.mark.parametrize("base", BASES, ids=["qwen3-moe", *CONFIGS])
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_config_field_value_is_a_5xx(client, base, data):
    """Each architecture's own fields (and every field the reader knows) set to any JSON
    value, of any type, nesting and size; a few dropped."""
    field = st.one_of(st.sampled_from(sorted(base)), st.sampled_from(FIELDS))
    value = st.one_of(JSON_VALUES, MIXED_LISTS, LARGE)
    changes = data.draw(st.lists(st.tuples(field, value), min_size=1, max_size=3))
    dropped = data.draw(st.lists(field, max_size=2))
    cfg = {k: v for k, v in base.items() if k not in dropped}
    cfg.update(changes)
    answer = client.post("/api/models/parse", content=json.dumps(cfg))
    assert_says_which_field(answer, {*FIELDS, "config"})


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.one_of(JSON_VALUES, MIXED_LISTS, LARGE, st.binary(max_size=64)))
def test_no_document_is_a_5xx(client, document):
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    assert_says_which_field(client.post("/api/models/parse", content=body), {*FIELDS, "config"})
    form = client.post("/models/parse", data={"config": body.decode("utf-8", "replace")},
                       headers={"HX-Request": "true"})
    assert form.status_code == 200, form.text[:300]  # the message is htmx's fragment
