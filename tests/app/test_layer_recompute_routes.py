"""The layer-granular recomputation mode through the app: the option comes from the catalogue
on every page with a recomputation control, the APIs take it, and a bad value is still a 422
naming the field."""

import re

import pytest

from tests.app.test_parser import api_messages

MODE = "every-2nd"
# The mode's option, selected (EP01 titles the modes it does not teach: ccef548).
OPTION = re.compile(r'<option value="every-2nd" selected(?: title="[^"]*")?>'
                    r'full, every 2nd layer</option>')


@pytest.mark.parametrize("page", ["/episodes/memory", "/episodes/zero", "/episodes/recipe-3d",
                                  "/episodes/pipeline", "/episodes/low-precision"])
def test_each_recompute_control_offers_and_keeps_the_mode(client, page):
    response = client.get(page, params={"recompute": MODE})
    assert response.status_code == 200
    assert OPTION.search(response.text)


def test_api_memory_counts_half_the_layers_input_only(client):
    # Llama 3.1 8B at s = 4096, no parallelism: 16 x 2sbh + 16 x 34sbh (Korthikanti Table 2).
    base = {"model": "llama-3.1-8b", "seq_len": 4096}
    body = client.get("/api/memory", params={**base, "recompute": MODE}).json()
    s, h = 4096, 4096
    assert body["breakdown"]["activations"] == pytest.approx(16 * 2 * s * h + 16 * 34 * s * h,
                                                             rel=1e-12)
    assert any("16 of 32 layers" in n for n in body["assumptions"])


def test_api_recipe_and_export_take_the_mode(client):
    plan = {"model": "llama-3.1-8b", "tp": 2, "pp": 2, "dp": 2, "microbatches": 8, "nodes": 1}
    step = {mode: client.get("/api/recipe", params={**plan, "recompute": mode}).json()["step_s"]
            for mode in ("flash", MODE, "full")}
    assert step["flash"] < step[MODE] < step["full"]
    megatron = client.get("/api/export", params={**plan, "recompute": MODE}).json()
    assert "--recompute-method block" in megatron["text"]
    assert "--recompute-num-layers 8" in megatron["text"]  # half of a stage's 16
    zero = client.get("/api/zero", params={"model": "llama-3.1-8b", "recompute": MODE})
    assert zero.status_code == 200
    assert MODE in [r["recompute"] for r in zero.json()["recompute"]]


@pytest.mark.parametrize("api", ["memory", "recipe", "zero", "pipeline"])
def test_a_bad_recomputation_is_still_a_422(client, api):
    messages = api_messages(client, api, {"recompute": "every-3rd"})
    assert set(messages) == {"recompute"}
