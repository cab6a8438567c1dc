"""torchtitan's op-level recomputation through the app: the option on every recomputation
control, the APIs taking it, and a model the policy does not describe refused with a reason."""

import re

import pytest

# The mode's option, selected (EP01 titles the modes it does not teach: ccef548).
OPTION = re.compile(r'<option value="op" selected(?: title="[^"]*")?>op-level, torchtitan</option>')


@pytest.mark.parametrize("page", ["/episodes/memory", "/episodes/zero", "/episodes/recipe-3d",
                                  "/episodes/pipeline", "/episodes/low-precision"])
def test_each_recompute_control_offers_and_keeps_the_mode(client, page):
    response = client.get(page, params={"recompute": "op"})
    assert response.status_code == 200
    assert OPTION.search(response.text)


def test_api_memory_and_recipe_take_the_mode(client):
    body = client.get("/api/memory", params={"model": "llama-3.1-8b", "seq_len": 4096,
                                             "recompute": "op"}).json()
    # 32 layers x 4096 tokens x 63,616 B (tests/labs/test_op_checkpoint.py's count).
    assert body["breakdown"]["activations"] == pytest.approx(32 * 4096 * 63_616, rel=1e-9)
    plan = {"model": "llama-3.1-8b", "tp": 2, "pp": 2, "dp": 2, "microbatches": 8, "nodes": 1}
    step = {mode: client.get("/api/recipe", params={**plan, "recompute": mode}).json()["step_s"]
            for mode in ("flash", "op", "full")}
    assert step["flash"] < step["op"] < step["full"]


@pytest.mark.parametrize("api", ["memory", "recipe", "zero"])
def test_an_expert_model_is_refused_with_the_reason(client, api):
    response = client.get(f"/api/{api}", params={"model": "mixtral-8x7b", "recompute": "op"})
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"][-1] == "recompute" and "dense Llama-style" in detail["msg"]
