"""EP12 routes: the playground (one state, every lab's own answer), the cheat sheet (lines equal
the API's, links land on real steps) and the A/B compare."""

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from markupsafe import escape

from app.episodes import EPISODES
from app.routers.playground_panels import PANELS, PlaygroundQuery

ROOT = Path(__file__).resolve().parents[2]


def page_template(slug: str) -> Path:
    """The lesson template of an episode, as its lab view names it."""
    from app.labkit import VIEWS

    view = next(v for v in VIEWS.values() if v.episode.slug == slug)
    return ROOT / "templates" / view.page_template


def step_ids(slug: str) -> set[str]:
    text = page_template(slug).read_text()
    return set(re.findall(r'<section class="step" id="(step-\d+)"', text))


# ---- Playground ----

def test_the_recap_comes_last_and_counts_the_episodes_before_it(client):
    """The recap closes the course (issue 36, item 6): its lede counts the episodes before it
    and the ones its playground runs from the registry, so an inserted episode is counted."""
    from app.templating import spelled

    assert EPISODES[-1].slug == "playground"
    assert [e.slug for e in EPISODES].index("low-precision") < len(EPISODES) - 1
    text = " ".join(client.get("/episodes/playground").text.split())
    assert f"The {spelled(len(EPISODES) - 1)} episodes before this one" in text
    assert f"The labs of {spelled(len({p.view.episode for p in PANELS}))} of them" in text
    for episode in EPISODES:  # every URL is a slug, so renumbering keeps each one
        assert client.get(episode.path).status_code == 200, episode.slug


def test_api_gives_each_shown_labs_own_answer(client):
    body = client.get("/api/playground").json()
    panels = body["panels"]
    assert {"memory", "pipeline", "recipe", "zero", "tp", "cp", "dp", "moe"} <= set(panels)
    assert "placement" not in panels  # off by default: not run
    for lab, panel in panels.items():
        assert panel["errors"] == {}
        if lab in ("dp", "zero"):  # data parallelism alone: the worked plan has TP and PP
            assert panel["answer"] is None and "TP 8 × PP 2" in panel["note"]
            continue
        if lab == "moe":  # Llama 3.1 70B is dense: no experts to place
            assert panel["answer"] is None and "is dense" in panel["note"]
            continue
        assert panel["note"] == ""
        own = client.get(f"/api/{lab}?{panel['query']}").json()
        if lab == "recipe":  # EP08's panel runs without step 13's 2-D against 3-D sweep
            assert panel["answer"].pop("two_d") is None and own.pop("two_d") is not None
        assert panel["answer"] == own, lab


def test_one_state_shows_one_bill_per_gpu(client):
    """Issue 36: the worked plan (TP 8 × PP 2 × DP 2) showed 893 GB per GPU in EP03's panel
    against 66.9 GB in EP01's and EP08's: EP03's lab, data parallelism alone, was fed the DP
    degree and the whole model. It now says the plan is outside it instead, and where it does
    draw (no model parallelism) its bill is EP01's and EP08's, at every ZeRO stage."""
    seed = client.get("/api/playground").json()["panels"]
    assert seed["zero"]["answer"] is None and seed["dp"]["answer"] is None
    assert seed["memory"]["answer"]["total_bytes"] == pytest.approx(
        seed["recipe"]["answer"]["memory_per_gpu_bytes"], rel=1e-9)
    html = client.get("/episodes/playground").text
    assert 'data-testid="panel-note-zero"' in html and 'data-testid="panel-note-dp"' in html
    for zero in (0, 1, 2, 3):
        panels = client.get("/api/playground", params={
            "tp": 1, "pp": 1, "dp": 32, "microbatches": 1, "zero": zero}).json()["panels"]
        bill = panels["memory"]["answer"]["total_bytes"]
        step = panels["dp"]["answer"]  # EP02 times the state's batch, not its own default
        assert (step["seq_len"], step["micro_batch"], step["microbatches"]) == (8192, 1, 1)
        assert panels["zero"]["answer"]["total_bytes"] == bill, zero
        assert panels["recipe"]["answer"]["memory_per_gpu_bytes"] == pytest.approx(
            bill, rel=1e-9), zero


def test_shared_controls_reach_every_lab(client):
    body = client.get("/api/playground", params={"model": "llama-3.1-8b", "pp": 4,
                                                  "dp": 1, "seq_len": 4096}).json()["panels"]
    assert body["memory"]["answer"]["model"] == "llama-3.1-8b"
    assert body["recipe"]["answer"]["plan"]["model"] == "llama-3.1-8b"
    assert body["pipeline"]["answer"]["stages"] == 4
    assert body["recipe"]["answer"]["plan"]["pp"] == 4
    assert dict(parse_qsl(body["cp"]["query"]))["seq_len"] == "4096"


def test_a_labs_own_control_rides_under_its_prefix(client):
    body = client.get("/api/playground", params={"pipeline_f": 2, "cp_layout": "zigzag",
                                                  "cp": 2, "dp": 1}).json()["panels"]
    assert dict(parse_qsl(body["pipeline"]["query"]))["f"] == "2.0"
    assert body["cp"]["answer"]["layout"] == "zigzag"


def test_every_labs_control_is_a_playground_control():
    fields = PlaygroundQuery.model_fields
    for panel in PANELS:
        for name in panel.view.query_model.model_fields:
            if name in panel.skip:
                continue
            assert name in panel.shared or panel.prefixed(name) in fields, (panel.lab, name)


def test_a_labs_run_and_figures_are_shared_by_states_that_differ_elsewhere():
    # Issue 31: a slider of one lab re-ran, re-validated and re-drew the other eight. CP's
    # panel reads neither TP's own controls nor the micro-batch count: the same run, the same
    # figure objects; TP's own control and the pipeline's micro-batches change theirs.
    from app.routers import playground

    first = playground.run(PlaygroundQuery(cp=2, dp=1))
    second = playground.run(PlaygroundQuery(cp=2, dp=1, tp_sp=True, microbatches=8))
    assert second.panel("cp").result is first.panel("cp").result
    figures = playground.figures(first), playground.figures(second)
    assert figures[1]["cp-mask"] is figures[0]["cp-mask"]
    assert second.panel("tp").result is not first.panel("tp").result
    assert figures[1]["pipeline-gantt"] != figures[0]["pipeline-gantt"]


def test_the_playgrounds_lab_runs_stay_bounded():
    from app.labkit.parsing import HEAVY_KEPT
    from app.routers import playground
    from app.routers.playground_panels import PANEL_RUNS, RUNS

    for tokens in range(1, PANEL_RUNS + 2):  # CP's own controls: more queries than it keeps
        for layout in ("contiguous", "zigzag"):
            playground.run(PlaygroundQuery(cp=2, dp=1, cp_tokens=tokens, cp_layout=layout))
    assert 0 < len(RUNS["cp"].data) <= PANEL_RUNS
    assert all(len(runs.data) <= PANEL_RUNS and len(runs.heavy) <= HEAVY_KEPT
               for runs in RUNS.values())


def test_a_shown_diagram_choice_runs_only_what_is_shown(client):
    body = client.get("/api/playground", params={
        **{p.show_field: "off" for p in PANELS}, "show_pipeline": "all"}).json()
    assert list(body["panels"]) == ["pipeline"]
    assert body["panels"]["pipeline"]["diagrams"] == ["gantt", "activations", "memory"]


@pytest.mark.parametrize(("params", "field"), [({"tp": 0}, "tp"), ({"show_cp": "pie"}, "show_cp"),
                                                ({"pipeline_f": -1}, "pipeline_f"),
                                                ({"model": "gpt-5"}, "model")])
def test_bad_control_is_a_422_naming_it(client, params, field):
    response = client.get("/api/playground", params=params)
    assert response.status_code == 422
    assert [d["loc"][1] for d in response.json()["detail"]] == [field]


def test_inconsistent_state_names_the_control_and_keeps_the_other_labs(client):
    # Llama 3.1 70B has 8 KV heads: TP16 breaks EP01, EP04, EP05 and EP08's layout rules.
    params = {"tp": 16, "pp": 1, "dp": 2, "nodes": 4}
    api = client.get("/api/playground", params=params)
    assert api.status_code == 422
    detail = {d["loc"][1]: d["msg"] for d in api.json()["detail"]}
    assert "KV heads" in detail["tp"] and "EP04" in detail["tp"]
    page = client.get("/episodes/playground", params=params, headers={"HX-Request": "true"})
    assert page.status_code == 200
    assert 'data-testid="panel-error-tp"' in page.text
    assert 'id="tp-efficiency" class="chart short" hx-preserve="true"' in page.text  # kept
    assert 'data-target="cp-mask"' in page.text  # EP06 still draws
    assert 'data-testid="panel-note-dp"' in page.text  # EP02: TP 16 is outside its lab


def test_page_fragment_and_panel_links(client):
    page = client.get("/episodes/playground", params={"microbatches": 2})
    assert page.status_code == 200
    assert 'id="playground-form"' in page.text and 'id="input-pipeline_f"' in page.text
    # Each panel's title opens its lesson at the lab's own query for this state.
    link = re.search(r'<a href="(/episodes/pipeline\?[^"]+)"', page.text).group(1)
    assert dict(parse_qsl(urlsplit(link.replace("&amp;", "&")).query))["microbatches"] == "2"
    fragment = client.get("/episodes/playground", params={"microbatches": 2},
                          headers={"HX-Request": "true"})
    assert fragment.text.lstrip().startswith("<section id=\"playground-panels\"") or \
        'id="playground-panels"' in fragment.text
    assert 'id="playground-form"' not in fragment.text


# ---- Cheat sheet ----

@pytest.mark.parametrize("model", ["llama-3.1-70b", "mixtral-8x7b"])
def test_cheat_sheet_page_shows_the_apis_lines(client, model):
    api = client.get("/api/cheatsheet", params={"model": model}).json()
    assert len(api["lines"]) >= 25
    page = client.get("/episodes/playground/cheatsheet", params={"model": model}).text
    assert 'data-term="mfu"' in page and 'data-term="goodput"' in page  # glossary marks
    # A glossary term's first use carries its tip (round-18 cold reading C, finding 20): the
    # line's words are read without the tips and the marks around the word.
    page = re.sub(r'<span class="term-tip".*?</a></span>', "", page, flags=re.S)
    page = re.sub(r'<span class="term" id="term-[^"]+" tabindex="0"><dfn data-term="[^"]+">'
                  r"(.*?)</dfn></span>", r"\1", page, flags=re.S)
    from app.routers.cheatsheet import fmt_term
    for line in api["lines"]:
        if line["result"] is None:
            assert line["note"] and line["note"].split(": ", 1)[1][:30] in page
            continue
        shown = re.search(rf'data-testid="result-{line["key"]}">([^<]+)<', page).group(1)
        assert shown == fmt_term(line["result"]["value"], line["result"]["unit"])
        for term in line["terms"]:  # each term says what it is (cold reading, issue 36)
            assert f'{term["symbol"]} = {fmt_term(term["value"], term["unit"])} ' \
                   f'<small class="meaning">{escape(term["meaning"])}</small>' in page, term


def test_every_cheat_line_links_to_a_real_step_at_a_good_state(client):
    lines = client.get("/api/cheatsheet").json()["lines"]
    by_path = {ep.url: ep.slug for ep in EPISODES}
    for line in lines:
        url = urlsplit(line["link"])
        slug = by_path[url.path]
        assert url.fragment in step_ids(slug), line["link"]
        response = client.get(f"{url.path}?{url.query}")
        assert response.status_code == 200, line["link"]  # the lab accepts the example


# What the heading of the step a line links to must name (round-5 cold reading, cheat sheet
# items 1-3: EP10 gained a step and three lines kept pointing one step early; 8·N·D pointed
# at EP08 step 1, where HFU is not taught). The FP8 line times EP10's 70B layout, whose g, r,
# c and e step 9's why works by step 8's formula (fix E, finding 3: step 8's why works the 8B).
TAUGHT_IN = {"lora_params": "LoRA:", "qlora_base": "QLoRA", "offload": "offload",
             "fp8_speedup": "One micro-batch per step", "flops_8nd": "HFU", "hfu": "HFU",
             "state_mxfp8": "MXFP8", "young": "How often to save"}


def test_each_cheat_line_links_to_the_step_that_teaches_it(client):
    import re

    lines = {line["key"]: line for line in client.get("/api/cheatsheet").json()["lines"]}
    for key, phrase in TAUGHT_IN.items():
        url = urlsplit(lines[key]["link"])
        page = client.get(url.path).text
        heading = re.search(rf'id="{url.fragment}"[^>]*>\s*<h2>(.*?)</h2>', page, re.S)
        assert heading and phrase in heading.group(1), (key, url.fragment, heading)
    titles = {key: lines[key]["title"] for key in ("flops_8nd", "hfu")}
    assert "for HFU, not MFU" in titles["flops_8nd"] and "HFU" in titles["hfu"]
    hfu = lines["hfu"]["result"]
    same_run_mfu = float(re.search(r"the same run's MFU is ([\d.]+)%", hfu["meaning"]).group(1))
    assert same_run_mfu / 100 == pytest.approx(0.75 * hfu["value"], rel=0.05)  # 6/8 + attention


def test_cheat_sheet_bad_input(client):
    response = client.get("/api/cheatsheet", params={"seq_len": 0})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "seq_len"]
    page = client.get("/episodes/playground/cheatsheet", params={"tp": "x"})
    assert page.status_code == 422 and "TP degree t must be" in page.text
    assert 'id="cheatsheet-lines"' in page.text  # the defaults still drawn
    swap = client.get("/episodes/playground/cheatsheet", params={"tp": 4},
                      headers={"HX-Request": "true"})
    assert swap.text.lstrip().startswith('<section id="cheatsheet-lines"')


# ---- A/B compare ----

def test_compare_shows_both_sides_and_marks_differences(client):
    a = "tp=1&pp=1&dp=32&microbatches=1"
    page = client.get("/episodes/playground/compare", params={"a": a})
    assert page.status_code == 200
    assert f'href="/episodes/playground?{a.replace("&", "&amp;")}"' in page.text
    assert 'data-testid="open-b" href' not in page.text  # attributes in order: href first
    assert re.search(r'<a href="/episodes/playground" data-testid="open-b">', page.text)
    assert 'data-metric="memory_per_gpu_bytes" class="differs"' in page.text
    assert 'data-target="a-recipe-step"' in page.text and 'data-target="b-recipe-step"' in page.text
    api = client.get("/api/playground/compare", params={"a": a}).json()
    assert {"memory_per_gpu_bytes", "fits", "step_s", "mfu"} <= set(api["differs"])
    assert api["a"]["metrics"]["fits"] is False and api["b"]["metrics"]["fits"] is True


def test_compare_takes_whole_links_and_refuses_bad_sides(client):
    link = "http://lab.example/episodes/playground?microbatches=2"
    api = client.get("/api/playground/compare", params={"a": link, "b": "microbatches=16"}).json()
    assert api["a"]["query"] == "microbatches=2" and api["differs"]
    bad = client.get("/api/playground/compare", params={"b": "tp=3"})
    assert bad.status_code == 422
    assert {d["loc"][1] for d in bad.json()["detail"]} >= {"b.tp"}


@pytest.mark.parametrize("params", [{}, {"memory_recipe": "adam18", "recompute": "full",
                                         "tp_sp": "false", "show_placement": "all"}])
def test_every_select_shows_the_states_value(client, params):
    html = client.get("/episodes/playground", params=params).text
    form = re.search(r'<form class="controls" id="playground-form".*?</form>', html, re.S).group(0)
    selects = re.findall(r'<select name="([a-z_0-9]+)".*?</select>', form, re.S)
    assert len(selects) >= 20
    for name, body in re.findall(r'<select name="([a-z_0-9]+)"(.*?)</select>', form, re.S):
        chosen = re.findall(r'<option value="([^"]*)" selected>', body)
        assert len(chosen) == 1, name
        if name in params:
            assert chosen == [params[name]], name


def test_cheat_sheet_takes_a_pasted_models_code(client):
    """Bring your own model reaches the cheat sheet: a code computes the same lines as its
    preset; a bad code or an unknown id is a 422 naming the model control, on API and page."""
    from labs.model.code import encode
    from labs.model.presets import get_model

    code = encode(get_model("llama-3.1-8b"))
    preset = client.get("/api/cheatsheet", params={"model": "llama-3.1-8b"}).json()
    coded = client.get("/api/cheatsheet", params={"model": code}).json()
    assert [ln["result"] for ln in coded["lines"]] == [ln["result"] for ln in preset["lines"]]
    page = client.get("/episodes/playground/cheatsheet", params={"model": code}).text
    assert f'<option value="{code}" selected>' in page
    for bad, words in ((code.replace(".k8.", ".k7."), "KV heads"), ("zzz", "unknown model")):
        api = client.get("/api/cheatsheet", params={"model": bad})
        assert api.status_code == 422 and api.json()["detail"][0]["loc"][-1] == "model"
        assert words in api.json()["detail"][0]["msg"]
        assert words in client.get("/episodes/playground/cheatsheet", params={"model": bad}).text


def test_round_1_cold_reading_ep12(client):
    """EP12's cold reading: the EP05 panel printed 'makespan 51.0 f', neither word defined
    on the page (item 8); the experts panel drew Mixtral under a Llama plan (item 9); step 5
    gave its efficiencies without one GPU's time, so they could not be derived (item 6)."""
    import re
    from html import unescape

    from app.glossary import GLOSSARY

    assert any(t.slug == "makespan" for t in GLOSSARY)
    body = client.get("/api/playground").json()
    page = client.get("/episodes/playground").text
    summary = re.search(r'data-chart="pipeline-gantt"[^>]*>([^<]*)<', page)
    gantt = summary.group(1) if summary else page
    assert "makespan" not in gantt
    assert "f (f: one stage's forward of one micro-batch)" in unescape(gantt)
    assert "is dense" in body["panels"]["moe"]["note"]
    from app.routers.playground import facts

    mixtral = client.get("/api/playground", params=facts()["mixtral"]["params"]).json()
    assert mixtral["panels"]["moe"]["note"] == "" and mixtral["panels"]["moe"]["answer"]
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", re.sub(
        r'<span class="term-tip".*?</span>', "", page))))
    five = text[text.index("5. Stretch TP"):text.index("6. Split the tokens")]
    tp = body["panels"]["tp"]["answer"]
    worked = tp["single_gpu_s"] / (8 * (tp["compute_s"] + tp["comm_s"]))
    assert worked == pytest.approx(tp["efficiency"], rel=1e-9)
    assert (f"{1e3 * tp['single_gpu_s']:.2f} ÷ (8 × ({1e3 * tp['compute_s']:.2f} + "
            f"{1e3 * tp['comm_s']:.3f})) = {100 * tp['efficiency']:.1f}%") in five


def test_ep12_cold_reading_items_1_2_and_10(client):
    """EP12 cold reading. Item 2: moving Nodes 4 -> 5 left DP at 2, and EP08's panel drew
    "Efficiency 0.0%" for a plan of 32 GPUs on 40 with nothing beside the slider. DP now
    follows the nodes and the degrees (EP08's fills-rest), and a plan EP08 refuses is its
    panel's error, in the Nodes and DP error slots, the panel greyed; /api/playground is a 422
    naming DP, as /api/recipe is. Item 1: step 5 quotes EP08's TP factor beside EP04's
    efficiency and splits EP04's into its two losses, which multiply back to it. Item 10: the
    recap's predict combines EP02's global batch with EP05's bubble (1/9), where it was EP05's
    formula again (1/33)."""
    from app.labkit import VIEWS
    from app.routers.playground import facts

    api = client.get("/api/playground", params={"nodes": 5})
    assert api.status_code == 422
    (detail,) = api.json()["detail"]
    assert detail["loc"][1] == "dp" and "EP08" in detail["msg"] and "5 x 8 = 40" in detail["msg"]
    assert client.get("/api/playground", params={"nodes": 6, "dp": 3}).status_code == 200
    page = client.get("/episodes/playground", params={"nodes": 5},
                      headers={"HX-Request": "true"}).text
    for slot in ("nodes", "dp"):
        found = re.search(rf'<small class="field-error" id="error-{slot}"[^>]*>([^<]*)<', page)
        assert "5 x 8 = 40" in found.group(1), slot
    assert 'class="panel stale" id="panel-recipe"' in page
    assert 'class="panel" id="panel-memory"' in page  # EP01 still draws
    full = client.get("/episodes/playground").text
    assert 'data-fills-rest="nodes gpus_per_node / tp pp cp"' in full

    f = facts()
    n = f["seed"]["api"]["panels"]["tp"]["answer"]
    gemms, waits = n["single_gpu_s"] / (8 * n["compute_s"]), n["compute_s"] / (
        n["compute_s"] + n["comm_s"])
    assert gemms * waits == pytest.approx(n["efficiency"])
    five = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", full.split('id="step-5"')[1]
                                      .split("</section>")[0]))
    factor = f["seed"]["api"]["panels"]["recipe"]["answer"]["parts"]["tp"]
    for shown in (factor, gemms, waits):
        assert f"{100 * shown:.1f}%" in five
    assert factor < waits  # EP08's sequence-parallel collectives expose more than EP04's

    drill = next(d for d in VIEWS["playground"].drills if d.id == "playground-predict-bubble")
    assert drill.answer() == pytest.approx(100 / 9)
    assert "DP is 4" in drill.question and "32 sequences" in drill.question


def test_round_4_cold_reading_ep12_step_5(client):
    """Round-4 cold reading of EP12. Item 1: step 5 asked 'above or below 50%', which the
    chart's per-link curves settled before the guess; it asks the number (32.6%), which no
    curve prints. Item 2: '4 collectives take 1.32 ms' was the exposed time: the why gives
    4 x 0.545 = 2.18 ms, of which the forward's 1.09 and the backward's 0.23 are exposed.
    Item 4: it says why the flat-ring Ethernet curve (10.7%) is 3x below the plan's figure."""
    from app.routers.playground import facts

    f = facts()
    n = f["seed"]["api"]["panels"]["tp"]["answer"]
    e = client.get("/api/playground", params=f["tp_eth"]["params"]).json()["panels"]["tp"][
        "answer"]
    # Round-4 item 3: one collective, one time. NCCL's ring (not a hierarchical reading)
    # crosses the Ethernet between the two nodes only, 4 rings over the node's 4 ports.
    assert e["algorithm"] == "ring"
    assert e["forward_comm_s"] == pytest.approx(2 * e["collective_s"])
    page = client.get("/episodes/playground").text
    five = page.split('id="step-5"')[1].split("</section>")[0]
    form = re.search(r'<form class="predict-form"[^>]*>', five).group(0)
    # Round-6 item 5: the prediction is the forward's wait, from the inputs its prompt states.
    assert f'data-answer="{1e3 * e["forward_comm_s"]:.1f} ms"' in form and "data-right" not in form
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(
        r'<span class="term-tip".*?</span>', "", five)))
    assert n["forward_comm_s"] + n["backward_comm_s"] == pytest.approx(n["comm_s"])
    assert n["collectives_per_layer"] * n["collective_s"] > n["comm_s"]
    assert (f"{n['collectives_per_layer']} × {1e3 * n['collective_s']:.3f} = "
            f"{1e3 * n['collectives_per_layer'] * n['collective_s']:.2f} ms") in text
    assert (f"{1e3 * n['forward_comm_s']:.2f} + {1e3 * n['backward_comm_s']:.2f} = "
            f"{1e3 * n['comm_s']:.2f} ms is exposed") in text
    # The curve as the chart draws it, the whole step's (round 16, finding 3).
    flat = next(p for p in e["links"]["eth-100g"] if p["tp"] == 8)["step_efficiency"]
    assert flat < e["step_efficiency"] / 2
    assert f"Ethernet curve reads {100 * flat:.1f}% at TP8" in text
    assert "hierarchical" not in text and "a quarter of each tensor" not in text
    assert f"{1e3 * e['collective_s']:.2f} ms" in text  # the derivation: round 15 below
    assert "4 × 12 = 48 GB/s" in text
    assert "above 50%" not in text


def test_round_4_item_7_the_bubble_drill_names_its_measure(client):
    """Round-4 cold reading of EP12, item 7: the glossary's (p − 1)/m = 12.5% (idle over
    busy, with the right 8 micro-batches) met the hint 'how many micro-batches', which sent a
    student who had them right the wrong way. The question says the bubble is a share of the
    step, and the hint names the papers' form as the other measure; 12.5 stays wrong."""
    from app.labkit import VIEWS
    from app.labkit.drills import check_drill

    drill = next(d for d in VIEWS["playground"].drills if d.id == "playground-predict-bubble")
    assert "share of the pipeline's time" in drill.question
    assert "(p − 1)/m" in drill.hint
    assert check_drill(drill, "12.5", attempt=1, hide_answers=True)["status"] != "right"
    assert check_drill(drill, f"{100 / 9:.1f}", attempt=1, hide_answers=True)["status"] == "right"


def test_round_5b_item_1_the_memory_decide_quotes_the_worked_plans_ledger(client):
    """Round-5b cold reading of EP12, item 1: playground-decide-memory's hint asked for 'the
    largest item of the ledger' and its right choice said the activations were it, where the
    worked plan's heaviest GPU holds optimizer state 26.5 GB against activations 22.8 GB. The
    feedback now quotes the engine's ledger (weights + gradients, master weights + moments,
    activations of the heaviest stage) and names its largest item as the engine has it. A wrong
    try is told its own option's reason (no hint shared by every option): ZeRO-3's quotes the
    ledger."""
    from app.labkit import VIEWS
    from app.labkit.drills import check_drill, lab_value
    from app.lesson_drills.units import gb

    drill = next(d for d in VIEWS["playground"].drills if d.id == "playground-decide-memory")
    answer = lab_value("playground", {}, lambda a: a)["panels"]["recipe"]["answer"]
    stage = max(answer["stages"], key=lambda s: s["total_bytes"])
    assert stage["total_bytes"] == answer["memory_per_gpu_bytes"]
    b = stage["breakdown"]
    items = {"weights and gradients": b["weights"] + b["gradients"],
             "optimizer state": b["master_weights"] + b["optimizer_moments"],
             "saved activations": b["activations"]}
    hint = check_drill(drill, "zero3", attempt=1, hide_answers=True)["message"]
    for item, value in items.items():
        assert f"{item} {gb(value)}" in hint
    assert "largest" not in hint
    why = next(f["why"] for f in check_drill(drill, "full", attempt=1)["feedback"]
               if f["key"] == "full")
    assert max(items, key=items.__getitem__) == "optimizer state"  # grouped: not the activations
    assert f"the optimizer state, {gb(items['optimizer state'])}, is two parts" in why
    assert gb(items["saved activations"]) in why


def test_round_6_item_8_the_memory_decide_names_the_largest_part_as_ep01s_panel(client):
    """Round-6 cold reading of EP12, item 8: on the worked plan EP01's panel says 'largest
    part: Activations, 22.8 GB' (it lists FP32 master weights and Adam moments apart), while
    the decide's right-answer feedback said the activations were 'not the largest item (the
    optimizer state, 26.5 GB, is)'. One grouping now: the feedback names the activations the
    ledger's largest single part, as the panel does, and the optimizer state two parts."""
    from app.labkit import VIEWS
    from app.labkit.drills import check_drill, lab_value
    from app.lesson_drills.units import gb

    drill = next(d for d in VIEWS["playground"].drills if d.id == "playground-decide-memory")
    answer = lab_value("playground", {}, lambda a: a)["panels"]["recipe"]["answer"]
    b = max(answer["stages"], key=lambda s: s["total_bytes"])["breakdown"]
    parts = {k: b[k] for k in ("weights", "gradients", "master_weights", "optimizer_moments",
                               "activations")}
    assert max(parts, key=parts.__getitem__) == "activations"
    page = client.get("/episodes/playground").text
    assert f"largest part: Activations, {gb(b['activations'])}" in page  # EP01's panel
    why = next(f["why"] for f in check_drill(drill, "full", attempt=1)["feedback"]
               if f["key"] == "full")
    assert "not the largest" not in why
    assert (f"are the ledger's largest single part, as EP01's panel says (the optimizer "
            f"state, {gb(parts['master_weights'] + parts['optimizer_moments'])}, is two parts: "
            f"FP32 master weights {gb(parts['master_weights'])} and Adam moments "
            f"{gb(parts['optimizer_moments'])})") in why
    hint = check_drill(drill, "zero3", attempt=1, hide_answers=True)["message"]
    assert f"Adam moments {gb(parts['optimizer_moments'])}" in hint


def test_round_24_the_tp4_pp4_option_derives_its_activations_and_its_total():
    """Round-24 cold reading B, finding 14: "TP 4 splits each layer's activations 4 ways, not
    8, and the first stage now keeps 4 micro-batches in flight, not 2" gave ×4 for a ×2 (it
    left out the half as many layers), and its parts (the worked plan's state, 17.6 + 26.5 GB,
    and 45.6 GB) summed to 89.7 GB under the 91.0 GB it printed. The factors it prints now
    multiply to the activations' growth, and the sum it prints checks."""
    from app.labkit import VIEWS
    from app.labkit.drills import lab_value

    drill = next(d for d in VIEWS["playground"].drills if d.id == "playground-decide-memory")
    why = next(o.why for o in drill.judge() if o.key == "tp4pp4")
    factors = [(int(a), int(b)) for a, b in re.findall(r"\(×(\d+)/(\d+)\)", why)]
    assert len(factors) == 3, why
    product = 1.0
    for a, b in factors:
        product *= a / b

    def act(params: dict) -> float:
        stages = lab_value("playground", params, "panels.recipe.answer.stages")
        return max(stages, key=lambda s: s["total_bytes"])["breakdown"]["activations"]

    assert act({"tp": 4, "pp": 4}) / act({}) == pytest.approx(product, rel=0.01)
    # The parts: the worked plan's state, what the first stage's embedding adds, the new
    # activations (the new state's own total is the right option's figure, never told here).
    a, more, b, c = (float(x) for x in re.search(
        r"([\d.]+) GB \+ ([\d.]+) GB \+ ([\d.]+) GB = ([\d.]+) GB", why).groups())
    assert round(a + more + b, 1) == c, why
    assert c == round(lab_value("playground", {"tp": 4, "pp": 4},
                                "panels.recipe.answer.memory_per_gpu_bytes") / 1e9, 1)


def _step(page: str, n: int) -> str:
    return page.split(f'id="step-{n}"')[1].split("</section>")[0]


def _flat(html: str) -> str:
    from html import unescape

    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", re.sub(
        r'<span class="term-tip".*?</span>', "", html, flags=re.S))))


def _form(step: str) -> str:
    return re.search(r'<form class="predict-form"[^>]*>', step).group(0)


def test_round_6_items_2_to_7_each_prediction_asks_what_the_screen_does_not_give(client):
    """Round-6 cold reading of EP12 (open since round 5b). Item 4: step 6 repeated EP06 step
    3 (CP 2 on 8 tokens, 18 of 36) with 'the same number' on screen; it asks the pairs of
    each rank for CP 4 on 16 tokens, a count the student derives, s(s + 1)/2 ÷ c. Item 2:
    step 7's share a token runs was one division of the model list's '46.7B, 12.9B active';
    it asks what one GPU holds under EP8 × TP2, which no label gives. Item 3: step 8's DP32
    was step 2's answer again and 'the bad case' named two states; it combines steps 2 and 4
    with full recomputation. Items 5 and 7: step 5 asked an efficiency whose inputs were only
    in its why; it asks the forward's wait from the bytes and busBW its prompt states, and
    the curve's and EP08's comparisons sit in a 'where this comes from' note."""
    from app.routers.playground import facts

    f = facts()
    page = client.get("/episodes/playground").text
    # Item 4.
    six = _step(page, 6)
    cp = f["cp4"]["api"]["panels"]["cp"]["answer"]
    s = f["cp4"]["params"]["cp_tokens"]
    assert cp["cp"] == 4 and cp["total_pairs"] == s * (s + 1) // 2
    # Round 15, finding 7: zigzag's every rank was the panel's total ÷ 4; the busiest rank of
    # contiguous slices is no quotient of what the panel prints.
    assert cp["busiest_pairs"] * cp["cp"] > cp["total_pairs"]
    assert f'data-answer="{cp["busiest_pairs"]:,} pairs"' in _form(six)
    question = _flat(re.search(r'<p class="question">(.*?)</p>', six, re.S)[1])
    assert "zigzag" not in question.lower() and "same number" not in six
    assert "balanced" not in question.lower() and "contiguous" in question
    assert f"{s} × {s + 1} ÷ 2 = {cp['total_pairs']}" in _flat(six)
    # Item 2.
    seven = _step(page, 7)
    moe = f["mixtral"]["api"]["panels"]["moe"]["answer"]
    from app.charts.units import fmt_count

    held = fmt_count(moe["params_per_gpu"])
    assert f'data-answer="{held}"' in _form(seven) and "quarter" not in seven
    labels = " ".join(re.findall(r"<option[^>]*>([^<]*)</option>", page))
    assert "Mixtral" in labels and held not in labels
    assert f"{held} per GPU" in _flat(seven)
    # Item 3.
    eight = _step(page, 8)
    fsdp = f["fsdp"]["api"]["panels"]
    fits = fsdp["recipe"]["answer"]["memory_per_gpu_bytes"]
    assert fits <= 80e9 < f["dp32"]["api"]["panels"]["recipe"]["answer"]["memory_per_gpu_bytes"]
    # Round 16, finding 3: 'Does it now fit?' under 'Combine the fixes' was answered by its
    # wording; the step asks the GB, a number the student adds up.
    assert "data-right" not in _form(eight) and "bad case" not in eight
    assert "fit" not in _flat(re.search(r'<p class="question">(.*?)</p>', eight, re.S)[1])
    assert re.search(r"<h2>(.*?)</h2>", eight)[1] == "8. Shard and recompute"
    from app.charts.units import fmt_bytes

    assert f'data-answer="{fmt_bytes(fits)}"' in _form(eight)
    assert fmt_bytes(fits) not in _flat(_step(page, 2) + _step(page, 4))
    # Items 5 and 7.
    five = _step(page, 5)
    e = f["tp_eth"]["api"]["panels"]["tp"]["answer"]
    prompt = _flat(re.search(r'<p class="predict">(.*?)</p>', five, re.S)[1])
    assert f"{e['collective_sent_bytes'] / 1e6:.1f} MB" in prompt and "= 48 GB/s" in prompt
    assert f'data-answer="{1e3 * e["forward_comm_s"]:.1f} ms"' in _form(five)
    note = five.split("<p class=\"chart-note\">The ring's latency")[1]
    assert "Ethernet curve reads" in note and "EP08" in note
    why = five.split('<p class="chart-note">')[0]
    assert "Ethernet curve" not in why


def test_round_6_item_6_step_5s_backward_exposure_is_derived_from_its_gemms(client):
    """Round-6 cold reading of EP12, item 6: step 5 said 'only 0.23 ms outlasts' the
    weight-gradient GEMMs in the node and '8.24 ms' across, with the GEMMs' times on no screen.
    EP04's answer now names the GEMM beside each backward exchange with its seconds
    (backward_beside), each exchange is exposed by what it takes beyond its GEMM, and the
    step writes both sums."""
    from app.routers.playground import facts

    f = facts()
    page = client.get("/episodes/playground").text
    text = _flat(_step(page, 5))
    for key in ("seed", "tp_eth"):
        tp = f[key]["api"]["panels"]["tp"]["answer"]
        gemms = tp["backward_beside"]
        assert [g["gemm"] for g in gemms] == ["qkv.wgrad", "fc1.wgrad"]
        c = tp["collective_s"]
        assert tp["backward_comm_s"] == pytest.approx(
            sum(max(0.0, c - g["seconds"]) for g in gemms), rel=1e-9)
        # Round-27 reading B, finding 8: at 3 places, as the sum that follows them.
        terms = " + ".join(f"({1e3 * c:.3f} − {1e3 * g['seconds']:.3f})"
                           if c > g["seconds"] else "0" for g in gemms)
        assert f"{terms} = {1e3 * tp['backward_comm_s']:.3f} ms" in text, key
        for g in gemms:
            assert f"({1e3 * g['seconds']:.3f} ms)" in text


def test_the_playground_draws_no_labs_lesson_veil(client):
    """A lab's figure carries what it waits for on its own lesson page: that lesson's step ids
    and charts (layout.meta, static/js/lab.js). On the playground those ids are the
    playground's own steps: EP05's Gantt at one micro-batch waited for the playground's step 1
    (round-14 review). The playground asks none of a lab's questions: a figure waits only for
    the playground's own predictions (its beat ids, ``waits``)."""
    query = {"pp": 4, "microbatches": 1, "tp": 8, "dp": 1, "nodes": 4, "show_pipeline": "gantt"}
    lesson = client.get("/episodes/pipeline", params={"stages": 4, "microbatches": 1}).text
    assert '"after":"step-1"' in lesson  # the lesson keeps it for its own step 1
    page = client.get("/episodes/playground", params=query).text
    keys = {k for after in re.findall(r'"after":"([^"]*)"', page) for k in after.split()}
    # (None waits here since step 1 holds EP01's ledger at its own state only: round 16.)
    assert all(re.fullmatch(r"predict-playground-\d", k) for k in keys), keys
    assert '"after":"step-' not in page
    assert '"owners":' not in page and '"partly":' not in page
    assert 'data-chart="pipeline-gantt"' in page
    gantt = re.search(r'data-target="pipeline-gantt"[^>]*>(.*?)</script>', page, re.S)[1]
    assert '"after"' not in gantt  # one micro-batch over 4 stages is no playground step's


def test_each_steps_state_waits_for_its_guess_and_no_other_state_does(client):
    """Round-15 cold reading of EP06 and EP12, findings 5 and 6: each try link's URL, opened in
    a new tab, printed its step's answer; step 2's DP32 drew EP03's ZeRO-3 bar at D = 32, step
    4's answer. The panels a step asks about wait for its guess at its state, keyed by its
    prediction's beat id; at the opening state EP05's panel waits for nothing."""
    from app.routers.playground import facts, run, waits
    from app.routers.playground_keys import ASKED

    for key, (fact, labs) in ASKED.items():
        held = waits(facts()[fact]["result"])
        for lab in labs:
            assert any(key in keys.split() for (at, _), keys in held.items() if at == lab), (
                key, lab)
    assert "predict-playground-4" in waits(facts()["dp32"]["result"])[("zero", "memory")]
    opening = waits(run(PlaygroundQuery()))
    assert not [part for part in opening if part[0] == "pipeline"]


def test_each_case_captions_fit_claim_is_its_states(client):
    """Round-15 cold reading of EP12, finding 1: the bad case said "every ledger overflows
    at once" of a state that fits (76.0 GB with ZeRO-1). Each caption's verdict is EP01's
    panel's at the state its button sets."""
    from app.routers.playground import VIEW

    for case in (VIEW.good, VIEW.bad):
        api = client.get(f"/api/playground?{case.query_string}").json()
        fits = api["panels"]["memory"]["answer"]["fits"]
        says_over = bool(re.search(r"(?i)\bover\b|overflow|does not fit", case.text))
        assert says_over != fits and ("fits" in case.text) == fits, (case.label, fits)
    assert not client.get(f"/api/playground?{VIEW.bad.query_string}").json()[
        "panels"]["memory"]["answer"]["fits"]  # the bad case is bad


def test_round_15_finding_11_step_2_derives_its_activations_and_step_8_says_it_errs_low(client):
    """Round-15 cold reading of EP12, finding 11: step 2 gave 183 GB of activations and 4.47 GB
    of embedding and logits with no formula, and step 8 left out what full recomputation and
    ZeRO-3 hold at their peak. Each term is the engine's (34·s·h·L; 4·s·v FP32 logits with
    the norm's 4·s·h and 8·s token ids), and step 8 adds the recomputed layer and two
    gathered layers' weights to its total."""
    from app.charts.units import fmt_bytes
    from app.routers.playground import facts
    from labs.model.presets import get_model

    f, m = facts(), get_model(PlaygroundQuery().model)
    s = PlaygroundQuery().seq_len
    b = f["dp32"]["api"]["panels"]["memory"]["answer"]["breakdown"]
    assert b["activations"] == 34 * s * m.hidden * m.layers
    assert b["embedding_and_logits"] == 4 * s * m.vocab + 4 * s * m.hidden + 8 * s
    page = client.get("/episodes/playground").text
    two, eight = _flat(_step(page, 2)), _flat(_step(page, 8))
    assert (f"34 × {s:,} × {m.hidden:,} × {m.layers} layers = {fmt_bytes(b['activations'])}"
            in two)
    assert f"4 B × {s:,} × {m.vocab:,} (the vocabulary) = {fmt_bytes(4 * s * m.vocab)}" in two
    fsdp = f["fsdp"]["api"]["panels"]["memory"]["answer"]
    layer = b["activations"] / m.layers
    gathered = 2 * (m.params - m.embedding_params) / m.layers  # a layer's own (round 18)
    assert "The ledger errs low" in eight
    assert f"about {fmt_bytes(fsdp['total_bytes'] + layer + 2 * gathered)}, which still fits" \
        in eight


def test_round_15_step_5s_why_derives_its_wait_from_the_rate_it_states(client):
    """Round-15 cold reading of EP12, finding 10: step 5's why was an audit trail (three
    paragraphs, ~30 figures) that timed the all-reduce at "47 GB/s (the 48 GB/s less each ring
    step's start-up latency)", a latency the page never stated. It now derives the 5.02 ms
    from the question's 48 GB/s and NCCL's ring latency, term by term (EP02 step 4), the sum
    the engine's own: one all-reduce, then the forward's two against the compute."""
    from app.routers.playground import facts, tp_ring
    from labs.hardware.links import links

    f = facts()
    e = f["tp_eth"]["api"]["panels"]["tp"]["answer"]
    ring = tp_ring("tp_eth")
    port = links()[f["tp_eth"]["params"]["inter_link"]]
    rate = f["tp_eth"]["params"]["gpus_per_node"] * port.ring_busbw  # the question's 4 x 12
    assert ring.busbw == pytest.approx(rate) and ring.seconds == pytest.approx(e["collective_s"])
    five = _step(client.get("/episodes/playground").text, 5)
    why = _flat(five.split('<details class="why"')[1].split('<p class="chart-note">')[0])
    assert f"{e['bus_bandwidth'] / 1e9:.0f} GB/s" not in _flat(five)  # 47: bytes over the time
    moving = e["collective_sent_bytes"] / rate
    assert (f"{e['collective_sent_bytes'] / 1e6:.1f} MB ÷ {rate / 1e9:g} GB/s = "
            f"{1e3 * moving:.2f} ms") in why
    # The latency's terms in the note under the why (round 16, finding 2: the why is short).
    note = _flat(five.split('<p class="chart-note">')[1])
    found = re.search(r"\(([\d.]+) \+ (\d+) × ([\d.]+) \+ (\d+) × ([\d.]+) µs\) × ([\d.]+) "
                      r"[^=]*= ([\d.]+) ms", note)
    assert found, note
    assert f"NCCL's ring latency adds {found[7]} ms:" in why
    base, intra, hop, inter, net, factor, latency = map(float, found.groups())
    assert intra + inter == 2 * (e["tp"] - 1) and inter == 2  # a ring over two nodes
    assert (base + intra * hop + inter * net) * factor * 1e-3 == pytest.approx(latency, abs=5e-3)
    assert f"{1e3 * moving + latency:.2f}" == f"{1e3 * e['collective_s']:.2f}"
    assert (f"one all-reduce takes {1e3 * e['collective_s']:.2f} ms" in why
            and f"2 × {1e3 * e['collective_s']:.2f} = {1e3 * e['forward_comm_s']:.1f} ms" in why)
    assert len(why.split()) < 160, len(why.split())  # a derivation, not an audit trail


def test_step_6_waits_with_the_pairs_only(client):
    """Round-15 cold reading of EP06 and EP12, finding 12's crossover part: in the playground
    EP06's crossover chart waited, whole, for the playground's step 6, which asks the busiest
    rank's pairs on the mask's 16 tokens. The playground asks none of EP06's own crossover
    questions (its steps 7 and 8: their lesson veil is stripped here), so at step 6's state
    only the mask, the pair counts and their chart wait; the cost and crossover are drawn."""
    from app.routers.playground import facts, run, waits

    state = PlaygroundQuery(**{**facts()["cp4"]["params"], "show_cp": "all"})
    held = {part for (lab, part), keys in waits(run(state)).items()
            if lab == "cp" and "predict-playground-6" in keys.split()}
    assert held == {"busiest_pairs", "total_pairs", "mask", "pairs"}, held
    page = client.get("/episodes/playground", params={**facts()["cp4"]["params"],
                                                      "show_cp": "all"}).text
    for chart in ("cost", "crossover"):
        figure = re.search(rf'data-target="cp-{chart}"[^>]*>(.*?)</script>', page, re.S)[1]
        assert '"after"' not in figure, chart
    mask = re.search(r'data-target="cp-mask"[^>]*>(.*?)</script>', page, re.S)[1]
    assert '"after":"predict-playground-6"' in mask


def test_round_16_finding_2_step_7_halves_the_rest_it_prints(client):
    """Round-16 cold reading of EP12, finding 2: step 7's why printed the rest as '1.61B' and
    its half as '803M (the norms and the router are copied whole)'; half of 1.61B is 805M, and
    copies add to a GPU's share, never take from it. The why prints the rest to 4 figures,
    its half, and what the copies add, each from the engine's answer, and they sum to the
    share per GPU."""
    from app.charts.units import fmt_count
    from app.routers.playground import facts

    mixtral = facts()["mixtral"]
    m = mixtral["api"]["panels"]["moe"]["answer"]
    r = mixtral["result"].panel("moe").result
    rest = m["params"] - r.expert_params
    copied = m["params_per_gpu"] - r.experts_per_gpu_params - rest / m["tp"]
    assert 0 < copied < 1e6
    why = _flat(_step(client.get("/episodes/playground").text, 7))
    assert f"the rest, {fmt_count(rest, 4)}, is" in why
    assert f"{fmt_count(rest, 4)} ÷ {m['tp']} = {fmt_count(rest / m['tp'])}" in why
    assert f"copied whole, add {fmt_count(copied)} more" in why
    assert "are copied whole)" not in why


def _why(step: str) -> str:
    """A step's why: its <details>, up to its first 'where this comes from' note."""
    return _flat(re.split(r'<p class="chart-note">|<details class="sources chart-note">',
                          step.split('<details class="why"')[1].split("</summary>", 1)[1])[0])


def test_round_16_finding_1_step_1_asks_the_bytes_at_twice_the_tokens(client):
    """Round-16 cold reading of EP12, finding 1: step 1 asked whether EP01's ledger agreed
    with EP08's audit's 66.9 GB, under '1. One state, every lab' and 'each panel is that
    episode's own lab run on this state': its wording answered it. It quotes the worked plan's
    total and activations, both drawn, and asks the heaviest GPU's bytes at the state its link
    opens, 16,384 tokens, a number the student adds up; there EP01's ledger and EP08's audit
    wait for the guess, and the why's sum is the engine's."""
    from app.charts.units import fmt_bytes
    from app.routers.playground import facts, waits

    f = facts()
    seed, long = (f[k]["api"]["panels"]["memory"]["answer"] for k in ("seed", "long"))
    act, act2 = seed["breakdown"]["activations"], long["breakdown"]["activations"]
    assert act2 == pytest.approx(2 * act)
    assert seed["total_bytes"] - act + act2 == pytest.approx(long["total_bytes"], abs=1e6)
    one = _step(client.get("/episodes/playground").text, 1)
    answer = fmt_bytes(long["total_bytes"])
    assert f'data-answer="{answer}"' in _form(one) and "data-right" not in _form(one)
    question = _flat(re.search(r'<p class="question">(.*?)</p>', one, re.S)[1])
    prompt = _flat(re.search(r'<p class="predict">(.*?)</p>', one, re.S)[1])
    for text in (question, prompt):
        assert answer not in text and "agree" not in text
    assert fmt_bytes(seed["total_bytes"]) in question and fmt_bytes(act) in question
    assert f"{f['long']['params']['seq_len']:,} tokens" in question
    state = fmt_bytes(seed["total_bytes"] - act)
    why = _why(one)
    assert f"{fmt_bytes(seed['total_bytes'])} − {fmt_bytes(act)} = {state}" in why
    assert f"2 × {fmt_bytes(act)} = {fmt_bytes(act2)}" in why
    assert f"{state} + {fmt_bytes(act2)} = {answer}" in why
    held = waits(f["long"]["result"])
    for part in (("memory", "total_bytes"), ("recipe", "memory_per_gpu_bytes"),
                 ("recipe", "memory")):
        assert "predict-playground-1" in held[part].split(), part
    assert not [p for p, keys in waits(f["seed"]["result"]).items()
                if "predict-playground-1" in keys.split()]


def test_round_16_finding_2_step_5s_why_is_three_sentences(client):
    """Round-16 cold reading of EP12, finding 2: step 5's why was still two paragraphs (the
    ring's latency term by term, then EP04's layer efficiency). It derives the forward's wait
    in three sentences from the prompt's 235 MB and 48 GB/s; the latency's terms and the
    efficiencies sit in the notes under it."""
    from app.routers.playground import facts

    e = facts()["tp_eth"]["api"]["panels"]["tp"]["answer"]
    why = _why(_step(client.get("/episodes/playground").text, 5))
    sentences = [s for s in re.split(r"(?<=[.:;])\s+(?=[A-Z])", why) if s]
    assert len(sentences) <= 3 and len(why.split()) < 80, (len(sentences), why)
    assert f"{e['collective_sent_bytes'] / 1e6:.1f} MB ÷ 48 GB/s" in why
    assert f"2 × {1e3 * e['collective_s']:.2f} = {1e3 * e['forward_comm_s']:.1f} ms" in why
    assert "%" not in why and "µs" not in why


def test_round_16_findings_3_and_4_the_tp_panel_shows_the_wait_and_one_efficiency(client):
    """Round-16 cold reading of EP12, findings 3 and 4: EP04's panel printed a layer's
    efficiency in its tile (32.6%) above its chart's, the whole step's (32.8%), and step 5's
    move, asked about the forward's wait, showed only efficiencies. The tile is the forward's
    wait, step 5's answer at its state (held for its guess) and 1.09 ms in the node; the
    panel's one efficiency is the chart's, and the note says which each quoted one is."""
    from app.charts.units import fmt_ms
    from app.routers.playground import facts
    from app.routers.playground_keys import HEADLINES

    assert [unit for _, _, unit in HEADLINES["tp"]] == ["ms", "bytes"]
    f = facts()
    for key, held in (("tp_eth", True), ("seed", False)):
        page = client.get("/episodes/playground", params=f[key]["params"]).text
        panel = re.search(r'<article class="panel" id="panel-tp".*?</article>', page, re.S)[0]
        tile = re.search(r"<dl class=\"readout\">(.*?)</dl>", panel, re.S)[1]
        assert "%" not in tile and "fficiency" not in tile
        wait = fmt_ms(f[key]["api"]["panels"]["tp"]["answer"]["forward_comm_s"])
        shown = re.search(r'<dd data-testid="tp-1">(.*?)</dd>', tile, re.S)[1]
        assert wait in shown and ("predict-playground-5" in shown) == held, (key, shown)
    five = _step(client.get("/episodes/playground").text, 5)
    e = f["tp_eth"]["api"]["panels"]["tp"]["answer"]
    assert f'data-answer="{fmt_ms(e["forward_comm_s"])}"' in _form(five)
    # Its links draw EP04's time per layer (compute and exposed collectives), in both states.
    assert five.startswith(' data-diagram="tp-cost"')
    links = re.findall(r'<a class="try" href="([^"]+)"', five)
    assert len(links) == 2 and all("show_tp=cost" in h for h in links), links
    for key in ("tp_eth", "tp_node"):
        assert f[key]["result"].panel("tp").diagrams == ("cost",), key
    note = _flat(five.split('<p class="chart-note">', 2)[2])
    assert "the whole step's: one GPU's time for the step ÷ (8 × the group's)" in note
    assert f"reads {100 * e['step_efficiency']:.1f}% across the nodes" in note
    assert "One layer's, the same ratio without the embedding and the logits" in note


def test_round_16_finding_5_step_2_adds_up_the_loss_tensors(client):
    """Round-16 cold reading of EP12, finding 5: step 2's 4.47 GB of embedding and logits
    named the final norm's output and the token ids without their bytes, so it could not be
    added up. The why prints each term (4·s·v, 4·s·h, 8·s), which sum to the engine's, and a
    note says where the FP32 norm output comes from (Megatron-LM's count)."""
    from app.charts.units import fmt_bytes
    from app.routers.playground import facts
    from labs.model.presets import get_model

    m, s = get_model(PlaygroundQuery().model), PlaygroundQuery().seq_len
    b = facts()["dp32"]["api"]["panels"]["memory"]["answer"]["breakdown"]
    terms = (4 * s * m.vocab, 4 * s * m.hidden, 8 * s)
    assert sum(terms) == b["embedding_and_logits"]
    two = _step(client.get("/episodes/playground").text, 2)
    why = _flat(two)
    assert f"4 B × {s:,} × {m.vocab:,} (the vocabulary) = {fmt_bytes(terms[0])}" in why
    assert f"2 × 2 B × {s:,} × {m.hidden:,} = {fmt_bytes(terms[1])}" in why  # round 21, #18
    assert f"8 B × {s:,} = {fmt_bytes(terms[2])}: {fmt_bytes(b['embedding_and_logits'])}" in why
    note = _flat(two.split('<p class="chart-note">')[1])
    assert "theoretical_memory_usage.py" in note and "FP32" in note


def test_round_18_step_8_gathers_a_layers_own_weights(client):
    """Round-18 cold reading B, finding 15: step 8 gave ZeRO-3's gathered layer as 1.76 GB,
    the model's 70.6B / 80 layers with the embedding and head spread over them; a Llama 3.1
    70B layer is 855.6M parameters, 1.71 GB in bf16. The note counts the layer's own."""
    from app.charts.units import fmt_bytes
    from labs.model.presets import get_model

    m = get_model(PlaygroundQuery().model)
    layer = m.attention_params + m.dense_mlp_params + 2 * m.hidden  # two RMSNorm weights
    assert layer == pytest.approx((m.params - m.embedding_params) / m.layers, abs=m.hidden)
    html = client.get("/episodes/playground").text
    step = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ",
                                      html.split('id="step-8"')[1].split("</section>")[0]))
    assert f"A layer is {layer / 1e6:.1f}M parameters" in step
    assert f"2 × {fmt_bytes(2 * layer)}" in step
    assert f"2 × {fmt_bytes(2 * m.params / m.layers)}" not in step


def test_round_18_ep04s_panel_says_why_its_tp_figure_differs_from_ep08s(client):
    """Round-18 cold reading B, finding 17: the opening screen showed EP04's "t = 8: 79.0%"
    and EP08's "TP 82.1%" for one state; why they differ (EP04 counts the split GEMMs'
    slowdown too, EP08 only the wait) was in step 5's why, after its guess. A line under
    EP04's panel says so, without either figure."""
    html = client.get("/episodes/playground").text
    panel = html.split('id="panel-tp"')[1].split("</article>")[0]
    note = re.sub(r"\s+", " ", panel.split('data-testid="tp-against-recipe">')[1]
                  .split("</p>")[0])
    assert "smaller GEMMs" in note and "only the wait" in note
    assert not re.search(r"\d+(\.\d)?%", note)  # no figure: the panels give them
    alone = client.get("/episodes/playground", params={"show_recipe": "off"}).text
    assert 'data-testid="tp-against-recipe"' not in alone


@pytest.mark.parametrize(("field", "choice", "words"), [
    ("memory_recipe", "adam16", "Mixed-precision Adam, 16 B/param (bf16 grads)"),
    ("recipe_recipe", "fp8-blockwise", "FP8, fine-grained blocks (DeepSeek-V3), 15 B/param"),
    ("moe_ep_dispatch", "deepep", "DeepEP"),
    ("placement_placement", "separate-pd",
     "separate, rollout split into prefill and decode engines"),
    ("placement_preset", "glm-4.7", "GLM-4.7 (355B)"),
    ("moe_group", "edp", "expert-DP (expert data parallel)"),
    ("recompute", "every-2nd", "full, every 2nd layer"),
])
def test_round_18_more_controls_name_each_choice_in_words(client, field, choice, words):
    """Round-18 cold reading B, finding 18: EP12's "more controls" showed raw ids as labels
    ("adam16", "separate-pd", "every-2nd", rank-map colours "tp cp dp pp ep edp"), where EP01,
    EP07, EP08 and EP09 name the same choices in words. Each is now its episode's words, from
    the same records; the value the URL carries is unchanged."""
    from html import unescape

    html = client.get("/episodes/playground").text
    select = html.split(f'name="{field}"')[1].split("</select>")[0]
    shown = unescape(re.search(rf'<option value="{re.escape(choice)}"[^>]*>(.*?)</option>',
                               select).group(1))
    assert shown == words


def test_round_18_ep12s_notes_say_one_idea_a_paragraph_in_short_sentences(client):
    """Round 18 (issue 36): EP12's notes were long, step 5's two of 132 and 232 words with
    sentences of 47 to 58 words, steps 2, 3 and 8 had sentences of 41 to 61. Each note is a
    paragraph an idea now: no paragraph of any step over 100 words, no sentence over 40, every
    figure still worked (test_prose follows each; the tests above pin the derivations)."""
    from tests.app.test_recipe_routes import _sentences

    page = client.get("/episodes/playground").text
    for n in range(1, 9):
        paras, sentences = _sentences(page, n)
        assert max(len(p.split()) for p in paras) <= 100, (n, max(paras, key=len))
        long = [s for s in sentences if len(s.split()) > 40]
        assert not long, (n, long)


def test_round_18_step_5s_predict_names_the_ring_latency_its_answer_adds(client):
    """Round-18 cold reading B, finding 14: step 5's predict stated 2 x 235 MB / 48 GB/s, which
    gives 9.8 ms, while the answer, 10.0 ms, adds NCCL's ring latency the prompt never named.
    It now says "plus NCCL's ring latency (EP02 step 4)"; the bytes over the rate alone miss
    the engine's answer, the bytes plus the latency (tp_ring) give it."""
    from app.routers.playground import facts, tp_ring

    f = facts()
    e = f["tp_eth"]["api"]["panels"]["tp"]["answer"]
    ring = tp_ring("tp_eth")
    five = _step(client.get("/episodes/playground").text, 5)
    prompt = _flat(five.split('class="predict"')[1].split("</p>")[0])
    assert "plus NCCL's ring latency (EP02 step 4)" in prompt
    bytes_only = 2 * e["collective_sent_bytes"] / ring.busbw
    assert f"{1e3 * bytes_only:.1f}" != f"{1e3 * e['forward_comm_s']:.1f}"
    assert 2 * (e["collective_sent_bytes"] / ring.busbw + ring.latency) == pytest.approx(
        e["forward_comm_s"], rel=1e-6)


def test_round_19_step_5_says_the_ring_plateau_is_nccl_2_8s_and_which_way_the_lab_errs(client):
    """Round-19 cold reading Z, finding 11: step 5's note multiplied the ring latency by x1.9
    and never said it is NCCL 2.8's factor. Round-27 reading B, finding 2: the x1.4 alone
    said the lab errs slow; with current NCCL's other two changes (EP02 step 4: 2 x nodes
    crossing steps at 14 µs plus the fabric's) it errs fast here. Both from
    labs.hardware.nccl's own constants."""
    from app.routers.playground import facts, tp_ring
    from labs.hardware.nccl import current_ring_latency
    from labs.hardware.nccl_constants import RING_PLATEAU

    ring = tp_ring("tp_eth")
    assert ring.terms.factor == RING_PLATEAU
    now = current_ring_latency(8, 2).micros
    lab = 1e6 * ring.latency
    assert now > lab
    e = facts()["tp_eth"]["api"]["panels"]["tp"]["answer"]
    five = _flat(_step(client.get("/episodes/playground").text, 5))
    assert f"× {RING_PLATEAU} = {lab / 1e3:.2f} ms" in five
    fast = (now - lab) / 1e3
    assert f"≥ {now / 1e3:.3f} ms; the lab errs ≥ {fast:.3f} ms fast, {2 * fast:.3f} ms" in five
    assert f"({100 * 2e-3 * fast / e['forward_comm_s']:.1f}%) of the forward's wait" in five


def test_round_20_the_forward_wait_meets_the_forward_and_the_bubble_names_its_whole(client):
    """Round-20 cold reading R, findings 1 and 2: step 5 set the forward's 10.0 ms wait
    against the layer's forward and backward compute (10.6 ms); step 3 called the pipeline's
    idle share (33.3%) the step's, where the step bar's grey part is 32.4%."""
    page = client.get("/episodes/playground").text
    tp = client.get("/api/playground", params={"nodes": 8, "gpus_per_node": 4,
                                               "inter_link": "eth-100g"}).json()
    five = _flat(_step(page, 5))
    forward = tp["panels"]["tp"]["answer"]["forward_compute_s"]
    assert f"against {1e3 * forward:.2f} ms of forward compute" in five
    m2 = client.get("/api/playground", params={"microbatches": 2}).json()
    recipe = m2["panels"]["recipe"]["answer"]
    share = recipe["segments_s"]["bubble"] / recipe["step_s"]
    three = _flat(_step(page, 3))
    assert "of the pipeline's time" in three and f"= {100 * share:.1f}% of the step" in three
    assert "How much of the step do the two stages idle" not in three
    assert tp["panels"]["tp"]["answer"]["forward_compute_s"] < tp["panels"]["tp"][
        "answer"]["compute_s"] / 2


def test_a_panels_headlines_read_off_part_of_its_answer_are_its_answers_figures(client):
    """Issue 31 read EP05's and EP08's headlines off part of their answers (their whole JSON
    is dearer than the fields read); issue 36's last stop review made that a table,
    ``HEADLINE_ANSWERS``, where ``_headlines`` tested the lab's name. Each part gives every
    headline the figure the lab's own JSON answer gives, and the page prints it."""
    from app.routers.playground import run
    from app.routers.playground_keys import FORMAT, HEADLINE_ANSWERS, HEADLINES
    from app.routers.playground_lesson import ALL

    state = run(PlaygroundQuery(**ALL))
    panels = {p.lab: p for p in state.panels}
    assert set(HEADLINE_ANSWERS) == {"pipeline", "recipe"}
    page = client.get("/episodes/playground", params=ALL).text
    for lab, part in HEADLINE_ANSWERS.items():
        p = panels[lab]
        whole, read = p.view.to_api(p.result), part(p.result)
        for _, key, unit in HEADLINES[lab]:
            assert read[key] == whole[key], (lab, key)
            panel = re.search(rf'<article class="panel" id="panel-{lab}".*?</article>', page,
                              re.S)[0]
            assert FORMAT[unit](whole[key]) in panel, (lab, key)


def test_round21_ep02s_panel_times_the_plans_gpu_and_refuses_what_ep04_refuses(client):
    """Round-21 cold reading P, finding 1: EP02's panel timed an H100 SXM whatever GPU the
    plan named, and on a node joined by PCIe 4.0, where EP04's panel refuses the H100 SXM. It
    takes the plan's GPU now: the same refusal, on the node's link, and an A100 node timed as
    A100s on their own NVLink 3."""
    pure = {"tp": 1, "pp": 1, "dp": 8, "nodes": 1}
    r = client.get("/api/playground", params={**pure, "intra_link": "pcie-4"})
    assert r.status_code == 422
    msgs = {d["loc"][-1]: d["msg"] for d in r.json()["detail"]}
    assert msgs["intra_link"].startswith("EP02, EP04: GPU and link do not match: the NVIDIA "
                                         "H100 SXM 80GB is a module")
    a100 = client.get("/api/playground", params={**pure, "gpu": "a100-80gb"}).json()
    dp = a100["panels"]["dp"]["answer"]
    assert dp["gpu"] == "a100-80gb" and dp["link"] == "nvlink-3"
    assert dp["ratio"]["peak_flops"] == 312e12


def test_round_21_panels_and_sheet_head_each_episode_by_its_topic(client):
    """Round-21 cold reading R, finding 10: the EP01 panel was headed "EP01 · The memory
    ledger: it does not fit" over a caption saying the state fits: the episode's subtitle
    read as the panel's verdict. The bench's panels, its control groups and the cheat sheet
    head each episode by its topic, the title without its subtitle."""
    pages = {url: client.get(url).text
             for url in ("/episodes/playground", "/episodes/playground/cheatsheet")}
    subtitled = [e for e in EPISODES if ": " in e.title]
    assert subtitled and all(e.topic == e.title.split(": ")[0] for e in subtitled)
    for url, html in pages.items():
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
        for e in subtitled:
            assert f"{e.code} · {e.title}" not in text, (url, e.code)
    memory = EPISODES[0]  # EP01, "The memory ledger: it does not fit"
    bench = pages["/episodes/playground"]
    assert f">{memory.code} · {memory.topic}</a></h3>" in bench  # the panel's heading
    assert f"{memory.code} · {memory.topic}" in re.sub(r"<[^>]+>", "",
                                                       pages["/episodes/playground/cheatsheet"])


def test_round_21_step_3s_share_is_its_printed_parts_and_step_2_names_the_engines_tensors(
        client):
    """Round-21 cold reading R, findings 11 and 18. Step 3 printed "0.498 s ÷ 1.540 s =
    32.4%", 32.3% by hand: the parts are printed to four places, and their quotient is the
    share printed. Step 2 called the loss's 4 B × h a token "the final norm's FP32 output",
    where the engine (output_activation_bytes) and EP10 step 7 count the final norm's bf16
    input and output, 2 × 2 B × h: the why and its note name those."""
    from labs.model.activations import output_activation_bytes
    from labs.model.presets import get_model

    page = client.get("/episodes/playground").text
    three = _flat(_step(page, 3))
    bubble, step, share = re.search(r"(\d\.\d+) s ÷ (\d\.\d+) s = (\d+\.\d)% of the step",
                                    three).groups()
    assert f"{100 * float(bubble) / float(step):.1f}" == share, (bubble, step, share)
    m, s = get_model(PlaygroundQuery().model), PlaygroundQuery().seq_len
    assert output_activation_bytes(m, s) == 4 * s * m.vocab + 2 * 2 * s * m.hidden
    two = _step(page, 2)
    why = _flat(two)
    assert f"The final norm's bf16 input and output take 2 × 2 B × {s:,} × {m.hidden:,}" in why
    assert "FP32 output" not in why
    note = _flat(two.split('<p class="chart-note">')[1])
    assert "the final norm's bf16 input, which it saves, and its output" in note
    assert "both in FP32" not in note


def test_round_24_step_5s_exposed_sum_adds_as_printed(client):
    """Round-24 cold reading B, finding 13: "Exposed across the nodes: 10.0 + 8.24 = 18.3 ms"
    beside the chart's 18.28 ms (10.0 + 8.24 = 18.24). The sum is printed to the digits its
    parts need, and adds as printed."""
    import re as _re

    from tests.app.test_zero_routes import visible_text

    text = " ".join(visible_text(client.get("/episodes/playground").text).split())
    a, b, total = _re.search(r"Exposed across the nodes: ([\d.]+) \+ ([\d.]+) = ([\d.]+) ms",
                             text).groups()
    assert abs(float(a) + float(b) - float(total)) < 0.0015
    assert len(total.partition(".")[2]) >= 2
