"""EP08 auto-planner routes: GET /api/plan's fields, its plans loading into the recipe page,
422s naming the field, the plan diagram fragment."""

from urllib.parse import parse_qs, urlsplit

import pytest

SEED_H100 = {"model": "gpt-3-175b", "gpu": "h100-sxm", "gpus": 64, "gpus_per_node": 8,
             "intra_link": "nvlink-4", "inter_link": "ib-ndr", "seq_len": 2048,
             "global_batch": 32}
DEGREES = ("tp", "pp", "dp", "cp", "ep", "zero", "recompute", "schedule", "virtual",
           "micro_batch", "microbatches")
FIGURES = ("memory_per_gpu_bytes", "step_s", "tokens_per_s", "mfu", "bubble_fraction",
           "pareto", "link")


@pytest.fixture(scope="module")
def seed_plans(client):
    response = client.get("/api/plan", params=SEED_H100)
    assert response.status_code == 200
    return response.json()


def test_plans_are_ranked_with_their_degrees_and_figures(seed_plans):
    plans = seed_plans["plans"]
    assert len(plans) == 20 and seed_plans["complete"] is True
    assert [p["rank"] for p in plans] == list(range(1, 21))
    speeds = [p["tokens_per_s"] for p in plans]
    assert speeds == sorted(speeds, reverse=True)
    for p in plans:
        assert set(DEGREES) <= set(p) and set(FIGURES) <= set(p)
        assert p["tp"] * p["pp"] * p["cp"] * p["dp"] == 64
        assert p["global_batch"] == 32 and p["exact"] is True and p["passes"] is True
        assert p["memory_per_gpu_bytes"] <= 80e9
    assert any(p["pareto"] for p in plans)


def test_best_plan_beats_the_seed_plan_as_the_recipe_api_times_it(client, seed_plans):
    seed = client.get("/api/recipe", params={
        "model": "gpt-3-175b", "gpu": "h100-sxm", "nodes": 8, "gpus_per_node": 8,
        "intra_link": "nvlink-4", "inter_link": "ib-ndr", "seq_len": 2048, "tp": 8, "pp": 4,
        "dp": 2, "zero": 1, "microbatches": 16}).json()
    assert seed["passes"] is True
    assert seed_plans["plans"][0]["tokens_per_s"] >= seed["tokens_per_s"]


def test_a_plans_link_loads_it_into_the_recipe_and_it_passes(client, seed_plans):
    best = seed_plans["plans"][0]
    url = urlsplit(best["link"])
    assert url.path == "/episodes/recipe-3d"
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert {k: query[k] for k in DEGREES} == {k: str(best[k]) for k in DEGREES}
    assert client.get(best["link"]).status_code == 200
    body = client.get("/api/recipe", params=query).json()
    assert body["passes"] is True
    assert body["tokens_per_s"] == pytest.approx(best["tokens_per_s"], rel=1e-9)
    assert body["memory_per_gpu_bytes"] == pytest.approx(best["memory_per_gpu_bytes"], rel=1e-9)


@pytest.mark.parametrize(("params", "field"), [
    ({"gpus": 65_537}, "gpus"),
    ({"gpus": 60}, "gpus"),  # not whole nodes of 8
    ({"gpus_per_node": 0}, "gpus_per_node"),
    ({"seq_len": 0}, "seq_len"),
    ({"global_batch": 0}, "global_batch"),
    ({"model": "gpt-5"}, "model"),
    ({"gpu": "tpu"}, "gpu"),
    ({"top": 1000}, "top"),
])
def test_bad_input_is_a_422_naming_the_field(client, params, field):
    response = client.get("/api/plan", params={**SEED_H100, **params})
    assert response.status_code == 422
    assert field in {d["loc"][-1] for d in response.json()["detail"]}


def test_the_plan_diagram_has_a_scatter_and_a_table_of_links(client):
    response = client.get("/episodes/recipe-3d/plan", params=SEED_H100)
    assert response.status_code == 200
    html = response.text
    assert 'id="recipe-plan-chart"' in html and "Pareto front" in html
    assert html.count('data-testid="plan-link"') == 20
    assert "/episodes/recipe-3d?model=gpt-3-175b" in html


def test_a_search_too_big_is_a_422_in_the_api_and_said_in_the_fragment(client):
    # A model code with 1,024 experts and 96 layers on 16,384 H100s: 138,708 candidate plans,
    # more than the planner searches (every preset, on any cluster the recipe takes, is
    # searched). htmx swaps in only a 2xx answer, so the lesson's fragment says the refusal
    # where the diagram would be.
    params = {**SEED_H100, "model": "L96.h8192.a64.k8.f28672.v128256.E1024.K8.F2048",
              "gpus": 16_384, "seq_len": 4096, "global_batch": 16_384}
    api = client.get("/api/plan", params=params)
    assert api.status_code == 422
    assert "candidate plans" in api.json()["detail"][0]["msg"]
    page = client.get("/episodes/recipe-3d/plan", params=params)
    assert page.status_code == 200
    assert 'data-testid="plan-refused"' in page.text and "candidate plans" in page.text


QWEN3_256 = {**SEED_H100, "model": "qwen3-235b-a22b", "gpus": 256, "seq_len": 4096,
             "global_batch": 2048}


def test_the_planner_times_every_plan_with_the_software_asked_and_its_links_keep_it(client):
    """Qwen3-235B-A22B on 256 H100s as NVIDIA's MoE zoo runs it (DeepEP's dispatch): planned,
    not refused; each plan's link opens the recipe with the same software, which times it
    as the planner did."""
    plain = client.get("/api/plan", params=QWEN3_256).json()
    deepep = client.get("/api/plan", params={**QWEN3_256, "ep_dispatch": "deepep"}).json()
    assert plain["complete"] and deepep["complete"] and plain["candidates"] > 40_000
    assert plain["plans"] != deepep["plans"]
    best = deepep["plans"][0]
    query = {k: v[0] for k, v in parse_qs(urlsplit(best["link"]).query).items()}
    assert query["ep_dispatch"] == "deepep" and "ep_overlap" not in query  # defaults left out
    body = client.get("/api/recipe", params=query).json()
    assert body["passes"] is True
    assert body["tokens_per_s"] == pytest.approx(best["tokens_per_s"], rel=1e-9)
    assert client.get("/api/plan", params={**QWEN3_256, "ep_dispatch": "nccl"}).status_code \
        == 422


def test_a_search_with_no_passing_plan_names_the_audits_that_failed(client):
    # GPT-3 175B on 64 H100s with 4 sequences a step: too few micro-batches to hide the
    # gradient traffic behind.
    params = {**SEED_H100, "global_batch": 4}
    api = client.get("/api/plan", params=params).json()
    assert api["plans"] == [] and api["evaluated"] > 0
    failed = {f["audit"]: f["plans"] for f in api["failed_audits"]}
    assert failed["DP traffic"] > 0
    page = client.get("/episodes/recipe-3d/plan", params=params).text
    assert 'data-testid="plan-none"' in page
    assert f"{failed['DP traffic']:,} fail DP traffic" in page and "larger global batch" in page
    assert "Auto-planner: no plan for GPT-3 175B" in page
    assert "every plan in reach was checked" in page and "the slowest one shown" not in page


def test_the_recipe_page_asks_the_planner_for_its_own_precision_and_software(client):
    page = client.get("/episodes/recipe-3d", params={
        "recipe": "fp8-delayed", "ep_overlap": "true", "tp_overlap": "all"}).text
    planner = page[page.index('id="plan-search"'):]
    query = planner[planner.index("/plan?"):planner.index('"', planner.index("/plan?"))]
    assert "recipe=fp8-delayed" in query and "ep_overlap=True" in query
    assert "tp_overlap=all" in query and "kernels" not in query  # defaults left out


def test_search_again_sends_the_recipe_form_as_it_is_now_to_the_planner(client):
    """The lesson's "Search again" button sends the recipe form: its model, cluster, global
    batch (micro-batch x micro-batches x DP), precision and software reach the planner."""
    form = {"model": "qwen3-235b-a22b", "gpu": "h100-sxm", "nodes": 32, "gpus_per_node": 8,
            "intra_link": "nvlink-4", "inter_link": "ib-ndr", "seq_len": 4096, "tp": 2,
            "pp": 8, "dp": 16, "ep": 32, "micro_batch": 1, "microbatches": 128,
            "ep_dispatch": "deepep", "recipe": "fp8-delayed"}
    moved = client.get("/episodes/recipe-3d/plan-controls", params=form, follow_redirects=False)
    assert moved.status_code == 303
    target = urlsplit(moved.headers["location"])
    assert target.path == "/episodes/recipe-3d/plan"
    query = {k: v[0] for k, v in parse_qs(target.query).items()}
    assert query == {"model": "qwen3-235b-a22b", "gpu": "h100-sxm", "gpus": "256",
                     "gpus_per_node": "8", "intra_link": "nvlink-4", "inter_link": "ib-ndr",
                     "seq_len": "4096", "global_batch": "2048", "recipe": "fp8-delayed",
                     "ep_dispatch": "deepep"}
    page = client.get("/episodes/recipe-3d/plan-controls", params=form).text
    assert 'data-testid="plan-table"' in page and "Qwen3-235B-A22B" in page
    bad = client.get("/episodes/recipe-3d/plan-controls", params={**form, "tp": "x"})
    assert bad.status_code == 200 and "A control is not valid" in bad.text
    recipe = client.get("/episodes/recipe-3d", params=form).text
    assert 'data-testid="plan-again"' in recipe and 'hx-include="#recipe-form"' in recipe
