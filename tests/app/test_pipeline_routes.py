"""EP05 routes in-process: the measured figures through the API, 422s, page and fragment."""

import re
from html import unescape

import pytest

from app.charts.pipeline import (
    KINDS,
    MAX_BARS,
    activations_figure,
    gantt_figure,
    stage_memory_figure,
)
from app.charts.units import fmt_bytes, fmt_pct
from app.routers.pipeline import PEAK_RANK, PipelineQuery, facts, run
from labs.schedules.catalogue import SCHEDULES
from tests.app.test_parser import api_messages


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("stages", "microbatches", "bubble"), [
    (8, 1, 0.875), (8, 32, 0.179), (4, 8, 0.273),  # CURRICULUM EP05 seed figures
])
def test_api_bubble_matches_published_figures(client, schedule, stages, microbatches, bubble):
    body = client.get("/api/pipeline", params={
        "schedule": schedule, "stages": stages, "microbatches": microbatches}).json()
    assert body["bubble_fraction"] == pytest.approx(bubble, abs=0.0005)
    assert len(body["events"]) == 2 * stages * microbatches
    assert set(body["events"][0]) == {"rank", "kind", "microbatch", "chunk", "start", "end"}


def test_api_bubble_is_measured_from_its_own_events(client):
    body = client.get("/api/pipeline", params={
        "schedule": "interleaved-1f1b", "stages": 4, "microbatches": 8, "virtual": 2,
        "p2p": 0.05}).json()
    busy = sum(e["end"] - e["start"] for e in body["events"])
    assert body["bubble_fraction"] == pytest.approx(1 - busy / (4 * body["makespan"]))
    assert body["makespan"] == pytest.approx(max(e["end"] for e in body["events"]))


def test_api_peak_activations_1f1b_and_gpipe(client):
    one = client.get("/api/pipeline", params={"stages": 8, "microbatches": 32}).json()
    assert one["peak_activations"] == [8 - r for r in range(8)]
    gp = client.get("/api/pipeline", params={
        "schedule": "gpipe", "stages": 8, "microbatches": 32}).json()
    assert gp["peak_activations"] == [32] * 8


def test_break_it_first_stage_overflows_without_recomputation(client):
    """Round-12 cold reading, EP05 finding 4: Llama trains without dropout, so unfused
    attention keeps its softmax output alone (2·a·s²·b, not 5): at 4,096 tokens rank 0 needs
    about 52 GB and fits; at 8,192 it does not. GPT-3, trained with dropout, keeps 5·a·s²·b
    and overflows at 4,096 tokens already."""
    params = {"stages": 8, "microbatches": 32, "tp": 8, "model": "llama-3.1-70b",
              "seq_len": 4096}
    ok = client.get("/api/pipeline", params={**params, "recompute": "selective"}).json()
    assert all(ok["memory"]["fits"])
    unfused = client.get("/api/pipeline", params={**params, "recompute": "none"}).json()
    assert all(unfused["memory"]["fits"])
    assert unfused["memory"]["per_rank_bytes"][0] == pytest.approx(52.1e9, rel=2e-3)
    # One micro-batch on rank 0: 10 layers of 34·s·h/t + 2·a·s²/t.
    s, h, a, t = 4096, 8192, 64, 8
    assert unfused["memory"]["activation_unit_bytes"] == \
        pytest.approx(10 * (34 * s * h + 2 * a * s * s) / t, rel=1e-9)
    broken = client.get("/api/pipeline", params={**params, "recompute": "none",
                                                 "seq_len": 8192}).json()
    assert broken["memory"]["fits"][0] is False
    per_rank = broken["memory"]["per_rank_bytes"]
    assert per_rank[0] == max(per_rank)
    gpt = client.get("/api/pipeline", params={**params, "recompute": "none",
                                              "model": "gpt-3-175b"}).json()
    assert gpt["memory"]["fits"][0] is False


def test_step_6_teaches_the_unfused_bill_that_fits(client):
    """Step 6's why said the unfused bill 'does not fit' at 4,096 tokens (84.3 GB, charging
    Llama dropout masks it does not keep); it now derives 2·a·s²/t a layer from the engine,
    says it fits, and breaks it at 8,192 tokens, each figure the linked state's."""
    import re

    from app.charts.units import fmt_bytes
    from app.routers.pipeline import facts

    f = facts()
    html = client.get("/episodes/pipeline").text
    step = html[html.index('id="step-6"'):]
    step = " ".join(re.sub(r"<[^>]+>", "", step[:step.index("</section>")]).split())
    un, un8 = f["unfused"]["api"]["memory"], f["unfused_8k"]["api"]["memory"]
    assert all(un["fits"]) and not un8["fits"][0]
    layer = f["unfused_layer"]
    assert layer["scores"] == 2 * 64 * 4096 ** 2 / 8
    assert (f"2 × 64 × 4,096² ÷ 8 B = {fmt_bytes(layer['scores'])} a layer" in step)
    assert f"{fmt_bytes(un['per_rank_bytes'][0])} at 4,096 tokens: it still fits" in step
    assert f"at 8,192 tokens rank 0 needs {fmt_bytes(un8['per_rank_bytes'][0])}" in step
    assert "84.3 GB" not in step


def test_memory_panel_is_skipped_when_the_model_cannot_fill_the_stages(client):
    body = client.get("/api/pipeline", params={
        "schedule": "interleaved-1f1b", "stages": 32, "microbatches": 64, "virtual": 4}).json()
    assert body["memory"] is None
    assert "80 layers" in body["memory_note"]


@pytest.mark.parametrize(("params", "field"), [
    ({"schedule": "pipedream"}, "schedule"),
    ({"stages": 0}, "stages"),
    ({"stages": 65}, "stages"),
    ({"microbatches": 2000}, "microbatches"),
    ({"schedule": "interleaved-1f1b", "virtual": 1}, "virtual"),
    ({"schedule": "interleaved-1f1b", "virtual": 2, "stages": 4, "microbatches": 11},
     "microbatches"),
    ({"stages": 64, "microbatches": 1024}, "microbatches"),
    ({"f": 0}, "f"),
    ({"p2p": -1}, "p2p"),
    ({"tp": 3}, "tp"),
    ({"model": "nope"}, "model"),
])
def test_api_bad_input_is_a_422_naming_the_field(client, params, field):
    assert set(api_messages(client, "pipeline", params)) == {field}


def test_page_and_fragment(client):
    html = client.get("/episodes/pipeline", params={"stages": 8, "microbatches": 32}).text
    assert 'data-target="pipeline-gantt"' in html and 'data-target="pipeline-memory"' in html
    assert "17.9%" in html
    frag = client.get("/episodes/pipeline", params={"schedule": "gpipe"},
                      headers={"HX-Request": "true"})
    assert frag.text.lstrip().startswith('<section id="pipeline-schedule"')
    bad = client.get("/episodes/pipeline", params={"stages": 99},
                     headers={"HX-Request": "true"})
    assert bad.status_code == 422 and bad.headers["hx-reswap"] == "none"
    assert 'id="error-stages" hx-swap-oob="true"' in bad.text


@pytest.mark.parametrize("query", [
    {"stages": 4, "microbatches": 8},
    {"schedule": "zb-h1", "stages": 8, "microbatches": 32},
    # v = 5: 5 chunks of a 16-stage rank's 5 layers (4 would be refused, round 18).
    {"schedule": "interleaved-1f1b", "stages": 16, "microbatches": 128, "virtual": 5},
])
def test_pipeline_figures_are_valid_plotly_and_drawn_from_events(query):
    from tests.conftest import valid_plotly

    state = run(PipelineQuery(**query))
    gantt = gantt_figure(state.result)
    for fig in (gantt, activations_figure(state.result), stage_memory_figure(state.memory)):
        valid_plotly(fig)
    if len(state.result.events) <= MAX_BARS:
        bars = [t for t in gantt["data"] if t["type"] == "bar"]
        assert sum(len(t["x"]) for t in bars) == len(state.result.events)
        for trace in bars:  # where labelled, one micro-batch number per action, in its bar
            if trace.get("text"):
                assert trace["text"] == [str(e.microbatch) for e in state.result.events
                                         if KINDS[e.kind][0] == trace["name"]]
    else:
        assert gantt["data"][0]["type"] == "heatmap"


def test_the_link_sizes_each_send_and_the_page_says_so(client):
    api = client.get("/api/pipeline", params={"stages": 8, "microbatches": 16,
                                              "link": "ib-ndr", "events": "none"}).json()
    free = client.get("/api/pipeline", params={"stages": 8, "microbatches": 16,
                                               "events": "none"}).json()
    assert api["send_seconds"] > 0 and api["send_time"] > 0
    assert free["send_seconds"] is None and free["send_time"] == 0
    assert api["bubble_fraction"] > free["bubble_fraction"]
    page = client.get("/episodes/pipeline", params={"link": "ib-ndr"})
    assert page.status_code == 200
    assert f"{api['send_seconds'] * 1e3:.3f} ms" in page.text.split('data-testid="send"')[1]
    bad = client.get("/api/pipeline", params={"link": "carrier-pigeon"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "link"


@pytest.mark.parametrize("schedule", tuple(SCHEDULES))
def test_every_schedule_is_named_not_shown_by_its_id(client, schedule):
    """The charts and the page's readout name every schedule of the catalogue (looped-bfs,
    interleaved-zb and zb-v once showed their ids), with the name the option list gives it."""
    name = SCHEDULES[schedule]
    state = run(PipelineQuery(schedule=schedule, virtual=2))
    assert gantt_figure(state.result)["summary"].startswith(f"{name}, ")
    assert activations_figure(state.result)["summary"].startswith(f"{name}: ")
    page = client.get("/episodes/pipeline", params={"schedule": schedule, "virtual": 2}).text
    assert f"<dt>Schedule</dt><dd>{name}</dd>" in page


@pytest.mark.parametrize(("stages", "microbatches"), [(4, 25), (4, 26), (8, 16), (8, 25)])
def test_the_page_says_labels_are_drawn_exactly_when_the_chart_draws_them(client, stages,
                                                                          microbatches):
    """1F1B: 2·p·m events. 200 (4 x 25) are labelled; 208, 256 (8 x 16, a lesson state) and 400
    are not, and the note under the chart says so (it once read "numbers are micro-batches"
    up to 400 while the chart stopped labelling at 200)."""
    params = {"schedule": "1f1b", "stages": stages, "microbatches": microbatches}
    gantt = gantt_figure(run(PipelineQuery(**params)).result)
    labelled = any(t.get("text") for t in gantt["data"])
    assert labelled == (2 * stages * microbatches <= 200)
    page = client.get("/episodes/pipeline", params=params).text
    assert ("numbers are micro-batches" in page) == labelled
    assert ("labels hidden at this size" in page) == (not labelled)


def test_break_it_breaks_as_current_stacks_do_with_a_long_sequence(client):
    """Issue 36: step 6 broke memory by switching recomputation off so 'the attention scores
    come back' (84.3 GB); with fused attention no s x s score matrix is stored. It now breaks
    with fused attention on a long sequence, and names the scores as what the unfused kernels
    of 2021-22 kept."""
    params = {"stages": 8, "microbatches": 32, "tp": 8, "model": "llama-3.1-70b",
              "recompute": "flash"}
    short = client.get("/api/pipeline", params={**params, "seq_len": 4096}).json()["memory"]
    long = client.get("/api/pipeline", params={**params, "seq_len": 32768}).json()["memory"]
    assert all(short["fits"]) and long["fits"][0] is False and long["fits"][7] is True
    html = re.sub(r"\s+", " ", client.get("/episodes/pipeline").text)
    step = html[html.index('id="step-6"'):]
    assert "scores come back" not in step
    assert "unfused attention kernels of 2021–22" in step
    assert fmt_bytes(long["per_rank_bytes"][0]) in step


def test_step_predictions_are_not_on_the_opening_page(client):
    """Round-2 cold reading of EP05: step 2 asked the page's default state (4 x 8, 27.3% on the
    bench at load); it now asks 6 x 10 (5/15), which its try link moves to. The case captions
    name the setup, not the idle shares steps 1 and 2 ask for. Step 4 gives plain 1F1B's
    8 x 16 baseline (7/23) that its prediction (the idle time halves) is judged against."""
    api = client.get("/api/pipeline", params={"stages": 6, "microbatches": 10}).json()
    assert api["bubble_fraction"] == pytest.approx(5 / 15, abs=1e-9)
    plain = client.get("/api/pipeline", params={"stages": 8, "microbatches": 16}).json()
    assert plain["bubble_fraction"] == pytest.approx(7 / 23, abs=1e-9)
    html = re.sub(r"\s+", " ", client.get("/episodes/pipeline").text)
    html = re.sub(r"<(?!section)[^>]+>", "", html)  # the text, each step's section kept
    step2 = html[html.index('id="step-2"'):html.index('id="step-3"')]
    assert "6 stages and 10 micro-batches" in step2 and "5/15 = 33.3%" in step2
    assert "7 of every 8" not in html and "under a fifth" not in html
    step4 = html[html.index('id="step-4"'):html.index('id="step-5"')]
    assert "7/23 = 30.4%" in step4 and "drill below" not in step4
    step3 = html[html.index('id="step-3"'):html.index('id="step-4"')]
    assert "(step 6)" not in step3


def test_gpipe_memory_drill_names_every_last_stage_term():
    """The drill's 136.5 GB: 127.6 GB + 32 x (263 MB of logits + 16.8 MB of final-norm
    output); the solution named only the logits (round-2 cold reading, first-round item 2)."""
    from app.lesson_drills import LESSON_DRILLS
    drill = next(d for d in LESSON_DRILLS["pipeline"] if d.id == "pipeline-predict-gpipe-memory")
    assert "263 MB" in drill.explanation and "16.8 MB" in drill.explanation


def test_tp_past_the_heads_beside_a_link_is_a_422_naming_both(client):
    """model=deepseek-r1 x tp=4096 x link=pcie-5 (the pairwise explorer): timing the stages for
    the link's sends split the layer by TP past its 128 heads, and layer_time's next() over the
    attention kernels found none (StopIteration, a 500). It is a 422 naming tp and link."""
    got = client.get("/api/pipeline", params={"model": "deepseek-r1", "tp": 4096,
                                              "link": "pcie-5", "schedule": "zb-v",
                                              "virtual": 2, "stages": 2})
    assert got.status_code == 422
    fields = {d["loc"][-1] for d in got.json()["detail"]}
    assert fields == {"tp", "link"} and "128 heads" in got.text


def test_round_5_step_6_and_the_gpipe_drill_state_their_inputs(client):
    """EP05's round-5 cold reading, items 1-4: step 6's heading said 'overflows the first
    stage' above a predict asking which rank overflows; it now asks rank 0's GB, which the
    why sums from the state and 8 units. The GPipe drill states the logits (the vocabulary
    was only in its solution) and its tolerance refuses rank 0's figure, the first stage
    that 1F1B makes heaviest. The memory table's columns add up to its total."""
    html = client.get("/episodes/pipeline").text
    six = html.split('id="step-6"')[1]
    assert "overflows the first stage" not in six.split("</h2>")[0]
    mem = facts()["long"]["api"]["memory"]
    assert f'data-answer="{fmt_bytes(mem["per_rank_bytes"][0])}"' in six
    three = html.split('id="step-3"')[1].split('id="step-4"')[0]
    assert 'data-answer="3 micro-batches"' in three  # rank 5 (rank 2's 6 until round 16)
    assert facts()["good"]["api"]["peak_activations"][2] == 6  # p - r, p = 8, r = 2
    answer = client.get("/api/pipeline", params={"schedule": "gpipe", "stages": 4,
                                                 "microbatches": 32}).json()["memory"]
    last, first = answer["per_rank_bytes"][-1] / 1e9, answer["per_rank_bytes"][0] / 1e9
    assert last > first * 1.05

    def grade(value: float) -> str:
        return client.get("/api/drills/pipeline-predict-gpipe-memory",
                          params={"answer": f"{value:.1f}"}).json()["status"]

    assert grade(last) == "right" and grade(first) != "right"
    assert "128,256-token vocabulary" in three and "= 263 MB" in three  # the drill, in step 3
    table = re.search(r'<table class="chart-table" data-chart="pipeline-memory">.*?</table>',
                      client.get("/episodes/pipeline?stages=8&microbatches=32").text,
                      re.S)[0]
    assert "Embedding, logits" in table


def test_round_5_step_4_sets_its_assumed_send_against_a_real_one(client):
    """EP05's round-5 cold reading, item 7: 'each send 0.1 forward times' had no source.
    Step 4 now calls it an assumption and sizes the real send for the memory panel's plan on
    InfiniBand NDR (s·b·h·2/t bytes over the link plus its latency), from the engine."""
    ndr = facts()["v5_ndr"]
    inp = ndr["result"].result.input
    assert inp.boundary_bytes == 4096 * 8192 * 2 / 8
    assert ndr["api"]["send_seconds"] == pytest.approx(
        inp.boundary_bytes / inp.link_bandwidth + inp.link_latency)
    assert ndr["api"]["send_time"] < 0.1 / 5  # the assumption is several times the real send
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", client.get("/episodes/pipeline").text))
    us = f"{ndr['api']['send_seconds'] * 1e6:.0f} µs"
    assert f"= {us}." in text and f"= {ndr['api']['send_time']:.4f} f" in text
    assert f"= {fmt_pct(ndr['api']['bubble_fraction'])} , near the free" in text


def test_round_5_item_8_the_lesson_teaches_every_schedule_its_menu_offers(client):
    """EP05's round-5 cold reading, item 8: the schedule menu offered Looped BFS, interleaved
    zero bubble and ZB-V, which no step named. Each schedule of the menu is now named in the
    steps, the three with their source (the paper, and PyTorch's class the lab follows); the
    claims about Looped BFS are the engine's: interleaving's bubble at the same v, and every
    micro-batch of every chunk held, as GPipe holds all m."""
    page = client.get("/episodes/pipeline").text
    steps = re.sub(r"\s+", " ", page[page.index('<article class="steps">'):])
    for name in SCHEDULES.values():
        assert name in steps, name
    for source in ("Lamy-Poirier 2022", "ScheduleLoopedBFS", "ScheduleInterleavedZeroBubble",
                   "ScheduleZBVZeroBubble", "the arXiv version's §6"):
        assert source in steps, source
    state = {"stages": 8, "microbatches": 16, "virtual": 2}
    bfs = run(PipelineQuery(schedule="looped-bfs", **state)).result
    interleaved = run(PipelineQuery(schedule="interleaved-1f1b", **state)).result
    assert bfs.bubble_fraction == pytest.approx(interleaved.bubble_fraction)
    assert set(bfs.peak_activations) == {16 * 2}


def test_round_12_step_4_states_what_f_is_and_step_6s_limit_its_state(client):
    """Round-12 cold reading of EP04-EP05, finding 9: step 4 gave a send as '0.007 of a
    4-chunk stage's forward', and the page never said what f is in ms (23.8 ms: the whole
    forward at TP 8 over 8 stages, collectives and head in). It now states f from the
    engine's stage time and divides the send by it. Finding 10: step 6's limit said more
    stages 'do not help the heaviest rank'; its state does fall with p (36.3 GB at 4 stages,
    19.2 at 8), its activations do not."""
    ndr = facts()["v5_ndr"]
    inp, memory = ndr["result"].result.input, ndr["result"].memory
    page = unescape(client.get("/episodes/pipeline").text)
    # Round 29 (reading B, #11): "step model" is now a glossary term tipped in this note.
    page = re.sub(r'<span class="term-tip".*?</span></span>', "", page, flags=re.S)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    step4 = text[text.index("4. Interleaving"):text.index("5. Zero bubble")]
    f_ms = f"{inp.forward_seconds * 1e3:.1f} ms"
    # Round-22 cold reading Q, finding 11: "Here f is 23.8 ms: the 80 layers' forward at TP 8
    # over 8 stages" gave no working, and step 5's F (1.582 ms a layer, 15.8 ms a stage) read
    # as a second f. f is now summed from its parts, one computation with the f the send is
    # divided by (labs.pipeline.lab.forward_parts): each layer's kernels (step 5's F) and the
    # TP collectives it waits for, then the embedding, output layer and loss.
    parts = facts()["v5_forward"]
    (n, kernels, comms), = parts.layers
    head = parts.embedding + parts.output
    assert parts.seconds / inp.stages == inp.forward_seconds
    assert n == memory.ledger.input.model.layers == 80
    assert f"{kernels * 1e3:.3f}" == f"{facts()['passes'].forward_s * 1e3:.3f}"  # step 5's F
    k, c, h = f"{kernels * 1e3:.3f}", f"{comms * 1e3:.3f}", f"{head * 1e3:.2f}"
    assert (f"EP08's step model gives f = ({n} × ({k} ms of kernels + {c} ms of TP "
            f"collectives) + {h} ms of embedding, output layer and loss) ÷ {inp.stages} = "
            f"{f_ms}.") in step4
    assert f"{(n * (float(k) + float(c)) + float(h)) / inp.stages:.1f} ms" == f_ms
    sent = f"{ndr['api']['send_seconds'] * 1e6:.0f} µs ÷ {f_ms} = {ndr['api']['send_time']:.4f} f"
    assert sent in step4 and "4-chunk stage's forward" not in step4
    assert ndr["api"]["send_seconds"] / inp.forward_seconds == pytest.approx(
        ndr["api"]["send_time"])
    limit = text[text.index("6. Break it"):]
    assert "do not help the heaviest rank" not in limit
    assert "shrink the heaviest rank's state, not its activations" in limit
    state = [client.get("/api/pipeline", params={"stages": p, "microbatches": 32,
                                                 "seq_len": 32768, "recompute": "flash"})
             .json()["memory"]["state_per_rank_bytes"][0] for p in (4, 8)]
    assert state[1] < state[0] * 0.6


def test_round_12_step_1_says_what_a_rank_is_where_it_first_uses_it(client):
    """Round-12 cold reading of EP04-EP05, finding 11: step 1 said 'each of p ranks' and the
    page never said what a rank is (the glossary has no entry)."""
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", client.get("/episodes/pipeline").text))
    steps = text[text.index("1. The assembly line"):]
    first = re.search(r"\branks?\b", steps)
    assert steps[first.start():].startswith("ranks (a rank is one GPU's process in the job")


def _text(html: str) -> str:
    """A page's text, tags and glossary tips dropped, whitespace collapsed."""
    html = re.sub(r'<span class="term-tip"[^>]*>.*?</span>', "", html, flags=re.S)
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))
    return re.sub(r" ([,.;:)])", r"\1", text)  # a tag's space before punctuation


def test_round_13_step_6_says_its_34_needs_sequence_parallelism_and_is_gpts(client):
    """Round-13 cold reading of EP05, finding 2: step 6 taught 34·s·b·h/t without saying that
    dividing all 34 by t needs sequence parallelism (Korthikanti et al. 2022, eq. 4 against
    eq. 2's s·b·h·(10 + 24/t)), nor that 34 is GPT's count, Llama 3.1 70B's own 33.5
    (EP01 step 3, labs.model.activations.own_layer_coefficient) making it about 1.5% high.
    The Dropout entry says the same. Finding 9: the why printed 110 GB twice, the second
    'with the embedding's token ids'; it now says what the ids add, from the engine."""
    from app.charts.units import fmt_pct
    from app.glossary_terms import GLOSSARY
    from labs.model.activations import GPT_COEFFICIENT, own_layer_coefficient
    from labs.model.presets import get_model

    coefficient = own_layer_coefficient(get_model("llama-3.1-70b"))
    high = fmt_pct(GPT_COEFFICIENT / coefficient - 1)
    assert (f"{coefficient:g}", high) == ("33.5", "1.5%")
    text = _text(client.get("/episodes/pipeline").text)
    step6 = text[text.index("6. Break it"):]
    assert "and sequence parallelism (EP04), a layer keeps 34·s·b·h/t bytes" in step6
    assert "s·b·h·(10 + 24/t) (Korthikanti et al. 2022, eq. 2 against eq. 4)" in step6
    assert (f"The 34 is GPT's count (EP01 step 3); Llama 3.1 70B's own is {coefficient:g}, "
            f"so the lab errs about {high} high.") in step6
    dropout = next(t.definition for t in GLOSSARY if t.slug == "dropout")
    assert "still holds two masks" not in dropout
    assert f"own count is {coefficient:g}, so the lab errs about {high} high" in dropout
    long = facts()["long"]["result"].memory
    assert "and with the embedding's token ids" not in step6
    # Round-21 cold reading Q, finding 11: "add 262 kB" beside 8 micro-batches of 32,768
    # tokens read as one micro-batch's ids. They are the 8 in flight, 8 B a token. Round-22
    # cold reading Q, finding 2: whole on every TP rank, not split by sequence parallelism
    # (Megatron-LM broadcasts a micro-batch's tokens over the TP group and scatters only the
    # embedding's output; labs.model.activations.embedding_activation_bytes): 2.10 MB, was
    # "÷ TP 8, add 262 kB".
    params = facts()["long"]["params"]
    held = facts()["long"]["api"]["peak_activations"][0]
    assert params["tp"] == 8
    assert held * params["seq_len"] * 8 == long.embedding_and_logits[0]
    assert (f"= {fmt_bytes(long.total_bytes[0])} (token ids, {held} × "
            f"{params['seq_len']:,} × 8 B, whole on each TP rank, add "
            f"{fmt_bytes(long.embedding_and_logits[0])})") in step6
    assert "÷ TP" not in step6


def test_round_13_the_gpipe_drill_names_its_inputs_and_sums_them(client):
    """Round-13 cold reading of EP05, finding 3: the GPipe drill never stated the last
    stage's state (the memory table's State for rank 3) or the unit under the table; both
    are named, from the engine, and the opening bench prints them. The worked solution
    prints its one-line sum, and the checker takes a sum from those inputs, rounded as
    printed, but not 133 GB (2.6% off, 'Right' at 3%); the first stage keeps its diagnosis."""
    from app.lesson_drills import LESSON_DRILLS

    drill = next(d for d in LESSON_DRILLS["pipeline"] if d.id == "pipeline-predict-gpipe-memory")
    mem = client.get("/api/pipeline", params=drill.see).json()["memory"]
    state, unit = fmt_bytes(mem["state_per_rank_bytes"][3]), fmt_bytes(mem["activation_unit_bytes"])
    assert (state, unit) == ("36.3 GB", "2.85 GB")
    assert f"rank 3, {state} of State, and the unit under it is {unit} a micro-batch" \
        in drill.question
    bench = _text(client.get("/episodes/pipeline", params={"stages": 4}).text)
    assert f"3 {mem['state_per_rank_bytes'][3] / 1e9:.1f} GB" in bench  # the State cell
    assert f"One unit = one micro-batch through 20 layers = {unit}" in bench

    def check(value: float) -> dict:
        return client.get("/api/drills/pipeline-predict-gpipe-memory",
                          params={"answer": f"{value}"}).json()

    stated = 36.3 + 32 * (2.85 + 0.263 + 0.017)
    right = check(stated)
    assert right["status"] == "right"
    assert "36.3 + 32 × (2.85 + 0.263 + 0.017) = 136.5 GB" in right["message"]
    assert check(133)["status"] != "right" and check(135.9)["status"] == "right"
    first = check(127.5)
    assert first["mistake"] == "first-stage" and "that is the first stage" in first["message"]


def test_round_13_step_3_asks_one_rank_and_zb_h1_is_cited_one_way(client):
    """Round-13 cold reading of EP05, finding 6: step 3's question asked rank 0 and its
    predict rank 2. Finding 7: ZB-H1 was 'Qi et al., 2023' in step 5, '2024' in the
    glossary and 'ICLR 2024' two paragraphs on; one form now, 'Qi et al. 2024 (ICLR;
    arXiv 2023)', in the lesson, the glossary and the cheat sheet."""
    from app.glossary_terms import GLOSSARY

    html = client.get("/episodes/pipeline").text
    step3 = html[html.index('id="step-3"'):html.index('id="step-4"')]
    question = re.search(r'<p class="question">(.*?)</p>', step3, re.S)[1]
    asked = re.search(r'<p class="predict">(.*?)</p>', step3, re.S)[1]
    assert "rank 5" in question and "rank 0" not in question  # rank 2 until round 16
    assert "rank 5" in asked and "rank 0" not in asked
    text = _text(html)
    step5 = text[text.index("5. Zero bubble"):text.index("6. Break it")]
    # Round-29 reading B, #14: the arXiv paper is 2401.10241 (January 2024), whose §6 adds
    # ZB-V; it was "(ICLR; arXiv 2023)".
    assert "ZB-H1, from Qi et al. 2024 (ICLR 2024; arXiv:2401.10241), runs I at once" in step5
    assert "Qi et al., 2023" not in step5 and "arXiv 2023" not in step5
    assert "ZB-V (the arXiv version's §6;" in step5
    zb = next(t.definition for t in GLOSSARY if t.slug == "zero-bubble")
    assert "Qi et al. 2024 (ICLR 2024; arXiv:2401.10241, whose §6 adds ZB-V)" in zb
    sheet = client.get("/api/cheatsheet").text
    assert "Qi et al. 2024 (ICLR 2024; arXiv:2401.10241)" in sheet
    assert "Qi et al. 2023" not in sheet and "arXiv 2023" not in sheet


def test_round_14_step_4_prices_a_send_with_ep02s_busbw_and_network_hop(client):
    """Round-14 cold reading of EP02-EP05, finding 8: step 4 priced a send at the datasheet's
    50 GB/s and a 5 µs latency no page states, where EP02 teaches that NCCL reaches 48 GB/s and
    its network hop is 9.6 µs. Round-20 cold reading Q, finding 3: the send also pays NCCL's
    8.4 µs start-up, as EP06-EP08's sends do, from the one send model
    (labs.hardware.nccl.send_latency), and the note calls 48 GB/s NCCL's rate on the port,
    not a collective's busBW."""
    from labs.hardware.links import get_link
    from labs.hardware.nccl_constants import BASE_LATENCY, HOP_LATENCY

    ndr = get_link("ib-ndr")
    inp = facts()["v5_ndr"]["result"].result.input
    assert inp.link_bandwidth == ndr.send_bandwidth
    start, hop = BASE_LATENCY["ring"]["Simple"], HOP_LATENCY["net"]["ring"]["Simple"]
    assert inp.link_latency == pytest.approx((start + hop) * 1e-6, rel=1e-12)
    send = inp.boundary_bytes / ndr.send_bandwidth + inp.link_latency
    assert abs(facts()["v5_ndr"]["api"]["send_seconds"] - send) < 1e-12
    html = client.get("/episodes/pipeline").text
    html = re.sub(r'<span class="term-tip".*?</span>', "", html, flags=re.S)  # glossary tips
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html)))
    assert (f"÷ {ndr.send_bandwidth / 1e9:g} GB/s (NCCL's rate on the {ndr.bandwidth / 1e9:g} "
            f"GB/s port, EP02) + {start:g} + {hop:g} µs (start-up and network hop, "
            f"EP02 step 4) = {round(send * 1e6)} µs") in text
    assert "busBW, EP02) +" not in text


def test_round_20_a_pipeline_send_is_priced_as_ep07_and_ep08_price_it():
    """Round-20 cold reading Q, finding 3: /api/pipeline priced an NDR send without NCCL's
    start-up (184 µs) while EP07/EP08's PP send (labs.recipe.stage_time, nccl_time's p2p)
    paid it: one send, two models. EP05's send is now the recipe's p2p of the same bytes
    across nodes (fails on the old engine: 184 against 193 µs)."""
    from labs.hardware.links import get_cluster
    from labs.hardware.nccl import nccl_time

    inp = facts()["v5_ndr"]["result"].result.input
    cluster = get_cluster("dgx-h100")
    assert cluster.inter.id == "ib-ndr"
    recipe_send = nccl_time("p2p", inp.boundary_bytes, 2, cluster, 1).seconds
    assert facts()["v5_ndr"]["api"]["send_seconds"] == pytest.approx(recipe_send, rel=1e-12)
    assert facts()["v5_ndr"]["api"]["send_seconds"] > 190e-6


def test_round_14_step_4_teaches_interleavings_activation_memory(client):
    """Round-14 cold reading of EP02-EP05, finding 6: step 4 said "the price is more sends"
    while its own memory chart showed rank 0 grow from 30.6 to 35.6 GB at v = 2. The why now
    derives it: Megatron-LM's warm-up, (p − 1)·2 + (v − 1)·p chunk passes, plus the one in
    flight is rank 0's measured peak, in chunks of 1/v of a stage; the state plus that many
    chunk units is the memory panel's rank 0. The limit names the cost too. Round 21: the
    derivation is step 6's (the memory step), in a note beside links to the states it prices,
    and step 4's limit sends the student there (step 4's why was 534 words with it)."""
    from tests.app.test_zero_routes import visible_text

    page = client.get("/episodes/pipeline").text
    why = visible_text(page[page.index('id="why-pipeline-6"'):])
    why = why[:why.index("Limit.")]
    six = page[page.index('id="step-6"'):]
    for key in ("plain16", "v2", "v5"):  # step 6 links the states its note prices
        query = "&amp;".join(f"{k}={v}" for k, v in facts()[key]["params"].items())
        assert f'href="/episodes/pipeline?{query}"' in six, key
    plain = facts()["plain16"]["api"]
    p = plain["stages"]
    for key in ("v2", "v5"):
        api = facts()[key]["api"]
        v, memory = api["virtual"], api["memory"]
        peak = api["peak_activations"][0]
        assert peak == (p - 1) * 2 + (v - 1) * p + 1  # Megatron-LM's warm-up, plus one
        total = memory["state_per_rank_bytes"][0] + peak * memory["activation_unit_bytes"]
        assert total == pytest.approx(memory["per_rank_bytes"][0], rel=1e-3)
        assert fmt_bytes(memory["per_rank_bytes"][0]) in why
        assert total > plain["memory"]["per_rank_bytes"][0]
    v2 = facts()["v2"]["api"]
    said = (f"rank 0 holds {v2['peak_activations'][0]} chunks of half a stage, "
            f"{v2['peak_activations'][0] / 2} micro-batches' worth where 1F1B holds "
            f"{plain['peak_activations'][0]}")
    assert said in why, said
    assert "(p − 1)·2 + (v − 1)·p" in why and "7 × 2 + 8 = 22" in why
    said = (f"{fmt_bytes(v2['memory']['state_per_rank_bytes'][0])} of state + "
            f"{v2['peak_activations'][0]} × {fmt_bytes(v2['memory']['activation_unit_bytes'])} "
            f"(half of 1F1B's {fmt_bytes(plain['memory']['activation_unit_bytes'])}) "
            f"= {fmt_bytes(v2['memory']['per_rank_bytes'][0])} against "
            f"{fmt_bytes(plain['memory']['per_rank_bytes'][0])}")
    assert said in why, said
    step = visible_text(page[page.index('id="step-4"'):page.index('id="step-5"')])
    assert "the first rank holds more activations (step 6)" in step.split("Limit.")[1]


def test_round_14_a_slot_is_one_micro_batchs_forward_and_backward(client):
    """Round-14 cold reading of EP02-EP05, finding 7: "slot" meant one micro-batch's forward
    and backward on a stage in steps 1-2 (3 f with equal costs), one forward in step 4 ("7
    slots of one forward become 7 of half") and was counted in f in the decide's feedback
    ("3 idle slots over 3m + 3 = 27"). Step 1 defines it once; step 4 counts 7 slots of 3 f
    becoming 7 of 1.5 f (the measured idle time: 21 f and 10.5 f a rank); the decide counts
    ZB-H1's idle time in f; what ZB-H1 fills is a gap, not a slot."""
    from app.labkit.drills import lab_value
    from app.lesson_drills import LESSON_DRILLS
    from tests.app.test_zero_routes import visible_text

    text = visible_text(client.get("/episodes/pipeline").text)
    assert "1 slot of work (a slot : one micro-batch" in text  # a glossary tip follows
    assert "'s forward F and backward B on one stage, F + B = 3 f" in text  # round 18
    assert "slots of one forward" not in text and "7 slots of 3 f become 7 of 1.5 f" in text
    for key, slot in (("plain16", 3.0), ("v2", 1.5)):
        api = facts()[key]["api"]
        idle = api["makespan"] - api["busy"][0]
        assert idle == pytest.approx((api["stages"] - 1) * slot)
    drill = next(d for d in LESSON_DRILLS["pipeline"] if d.id == "pipeline-decide-bubble")
    judged = {o.key: o for o in drill.judge()}
    zb = lab_value("pipeline", {"schedule": "zb-h1", "stages": 4, "microbatches": 8},
                   lambda a: a)
    assert zb["makespan"] == pytest.approx(27) and zb["makespan"] - zb["busy"][0] == 3
    assert "3 f idle in a step of 3m + 3 = 27 f" in judged["zb"].why
    assert "idle slots over 3m" not in judged["zb"].why


def test_round_14_step_3s_rank_waits_at_step_2s_link(client):
    """Round-14 cold reading of EP02-EP05, finding 9: step 2's "8 × 32" link sets step 3's
    state (1F1B, 8 x 32), and its Gantt showed rank 2's six forwards before its first
    backward, step 3's answer, counted before the guess. At that state rank 2's row now
    waits for step 3's guess (lab.js withoutPoints: no length, no hover), its label says
    so, and the other ranks are drawn as the engine places them, so the link still moves
    the chart from the opening 4 x 8. Once guessed, rank 2's bars are the engine's."""
    from tests.app.test_answers_hidden import partly_veiled
    from tests.app.test_contracts import page_figures

    good = facts()["good"]
    query = "&".join(f"{k}={v}" for k, v in good["params"].items())
    figure = page_figures(client.get(f"/episodes/pipeline?{query}").text)["pipeline-gantt"]
    owners = figure["layout"]["meta"]["owners"]
    assert [g["step"] for g in owners] == ["step-3"]
    shown = partly_veiled(figure, owners)
    events = good["api"]["events"]
    rank = PEAK_RANK  # 2 until round 16
    rank2 = [e for e in events if e["rank"] == rank]
    assert len(rank2) == 2 * good["api"]["microbatches"]
    held = [(t["y"][j], x) for t in shown["data"] for j, x in enumerate(t["x"]) if x is None]
    assert sorted(r for r, _ in held) == [f"rank {rank}"] * len(rank2)
    drawn = sorted((t["y"][j], b, x) for t in shown["data"]
                   for j, (b, x) in enumerate(zip(t["base"], t["x"], strict=True))
                   if x is not None)
    assert drawn == sorted((f"rank {e['rank']}", round(e["start"], 6),
                            round(e["end"] - e["start"], 6)) for e in events if e["rank"] != rank)
    labels = [a["text"] for a in shown["layout"]["annotations"]]
    assert f"rank {rank}'s bars: ? (after step 3's guess)" in labels
    assert not any(f"{8 - rank} micro-batches" in t for t in labels)
    # Guessed: rank 2's bars as the engine places them, and the peak on its row.
    every = sorted((t["y"][j], b) for t in figure["data"] for j, b in enumerate(t["base"]))
    assert every == sorted((f"rank {e['rank']}", round(e["start"], 6)) for e in events)
    peak = good["api"]["peak_activations"][rank]
    assert f"rank {rank} holds {peak} micro-batches at its peak" in [
        a["text"] for a in figure["layout"]["annotations"]]
    # Step 2's link still moves the chart: its bars are not the opening state's.
    opening = page_figures(client.get("/episodes/pipeline").text)["pipeline-gantt"]
    assert len(opening["data"][0]["x"]) != len(shown["data"][0]["x"])
    # Elsewhere (1F1B at 8 x 16) nothing is held.
    plain = facts()["plain16"]["params"]
    query = "&".join(f"{k}={v}" for k, v in plain.items())
    other = page_figures(client.get(f"/episodes/pipeline?{query}").text)["pipeline-gantt"]
    assert "owners" not in (other["layout"].get("meta") or {})


def test_round_16_the_bubble_decide_names_each_option_by_what_it_does(client):
    """Round-16 cold reading of EP05, finding 3: pipeline-decide-bubble's right option was
    "Zero bubble (ZB-H1): ... (F = I = W)", answered by its name and the only one qualified.
    Each option now says what it does, none by a schedule's name or a parenthesis, the equal
    passes are in the stem, and the right one is still deferring W (step 5's reasoning).
    Finding 11d: memory-decide-cut's PP option is qualified as its TP option is."""
    from app.labkit.drills import lab_value
    from app.lesson_drills import LESSON_DRILLS

    drills = {d.id: d for d in LESSON_DRILLS["pipeline"]}
    drill = drills["pipeline-decide-bubble"]
    labels = dict(drill.choices)
    for label in labels.values():
        assert not re.search(r"zero|bubble|ZB|GPipe|interleav|\(", label, re.I), label
    assert "every pass (forward F, input gradient I, weight gradient W) equally long" in (
        drill.question)
    right = next(o.key for o in drill.judge() if o.right)
    # Round-20 cold reading Q, finding 12: the right option is no longer step 5's own title
    # (deferring W); 4 chunks a rank beats it, each option's bubble the engine's.
    assert labels[right] == "Give each rank 4 chunks of a quarter stage each, not one whole stage"
    four = {"stages": 4, "microbatches": 8}
    values = {key: lab_value("pipeline", {**four, **params}, lambda a: a["bubble_fraction"])
              for key, params in (("interleaved", {"schedule": "interleaved-1f1b",
                                                   "virtual": 4}),
                                  ("zb", {"schedule": "zb-h1"}), ("gpipe", {"schedule": "gpipe"}),
                                  ("m16", {"schedule": "1f1b", "microbatches": 16}))}
    assert f"{values['interleaved'] * 100:.1f}%" in next(
        o.why for o in drill.judge() if o.key == "interleaved")
    assert values["interleaved"] == pytest.approx(3 / 35) and values["zb"] == pytest.approx(3 / 27)
    assert sorted(values, key=values.get)[:2] == ["interleaved", "zb"]
    pp8 = dict(drills["memory-decide-cut"].choices)["pp8"]
    assert "under 1F1B" in pp8 and "micro-batches" in pp8


def test_round_16_step_4s_drill_asks_step_4s_formula():
    """Round-16 cold reading of EP05, finding 10: step 4's derive drill asked plain 1F1B's
    (p − 1)/(m + p − 1) again, step 2's. It asks the interleaved bubble, 5/29, measured, with
    the papers' 5/24 and plain 1F1B's 5/17 as known wrong derivations."""
    from app.labkit import VIEWS
    from app.labkit.drills import check_drill

    drill = next(d for d in VIEWS["pipeline"].drills if d.id == "pipeline-bubble")
    assert "interleaved with v = 2 chunks per rank" in drill.question
    assert drill.answer() == pytest.approx(100 * 5 / 29)
    for value, mistake in ((100 * 5 / 24, "papers"), (100 * 5 / 17, "plain")):
        result = check_drill(drill, f"{value:.1f}", attempt=1, hide_answers=True)
        assert result["status"] == "hint" and result.get("mistake") == mistake, result


@pytest.mark.parametrize("seq_len", [8192, 16384])
def test_round_16_step_6_asks_the_idea_and_longer_sequences_wait_for_it(client, seq_len):
    """Round-16 cold reading of EP05, finding 7: step 6's predict handed its inputs and formula
    (a plug-in), and at 16,384 tokens rank 0's 45.6 GB of activations, doubled, gave its
    answer. The prompt gives the 4,096-token unit and state, not the formula nor rank 0's
    count (finding 8: "8 micro-batches in flight" gave step 3's p − r); at every longer
    sequence the memory panel's bytes and which ranks overflow wait for step 6's guess."""
    from tests.app.test_answers_hidden import flat, masked

    html = client.get("/episodes/pipeline").text
    step6 = html[html.index('id="step-6"'):]
    asked = flat(re.search(r'<p class="predict">(.*?)</p>', step6, re.S)[1]).replace("&#39;", "'")
    assert "34·s" not in asked and "micro-batches in flight" not in asked, asked
    assert "At 4,096 tokens one micro-batch's activations on rank 0 take 1.43 GB" in asked
    query = {"stages": 8, "microbatches": 32, "tp": 8, "recompute": "flash", "seq_len": seq_len}
    bench = client.get("/episodes/pipeline", params=query).text
    shown = masked(bench, {"step-6"})
    verdict = flat(re.search(r'data-testid="memory-verdict">(.*?)</p>', shown, re.S)[1])
    assert not re.search(r"overflow|fits|\d+(\.\d+)? GB against|\d GB of 80", verdict), verdict
    table = shown.split('<caption>Peak memory per rank')[1].split("</table>")[0]
    cells = [flat(c) for c in re.findall(r"<td>(.*?)</td>", table, re.S)]
    assert cells and all(c == "?" for i, c in enumerate(cells) if i % 4), cells


def test_round_16_the_bad_case_is_held_until_step_1s_guess(client):
    """Round-16 cold reading of EP04-EP05, finding 2: EP05's bad case (8 x 1) drew an all-grey
    Gantt when clicked on arrival, since its whole state is step 1's answer. Its button
    carries the step it waits for and what it says when pressed before the guess (lab.js
    holds it as that step's try links are held); the good case and embeds are not held."""
    html = client.get("/episodes/pipeline").text
    bad = re.search(r'<a class="case bad"[^>]*>', html)[0]
    good = re.search(r'<a class="case good"[^>]*>', html)[0]
    assert 'data-held-until="step-1"' in bad and "draws step 1&#39;s answer" in bad
    assert "data-held-until" not in good


def test_round_17_step_5_teaches_why_w_is_shorter_than_i(client):
    """Round-17 cold reading of EP05, finding 5: the decide's feedback said "With W shorter
    than I the gain shrinks", which nothing taught. Step 5's why now derives it from the GEMMs
    each pass runs on the memory panel's plan (labs.pipeline.lab.backward_split: the same
    FLOPs in dX and dW, attention's backward in I alone), gives ZB-H1's idle time
    (p − 1)(F + I − W) against 1F1B's (p − 1)(F + I + W), and links ZB-H1 at those I and W,
    whose measured bubble is that formula's; the glossary's zero-bubble entry says it too."""
    from app.glossary import GLOSSARY

    lesson = facts()
    ps = lesson["passes"]
    assert ps.dgrad_flops == ps.wgrad_flops == ps.forward_gemm_flops > 0
    assert ps.attention_backward_s > 0 and ps.input_grad_s > ps.weight_grad_s
    zq = lesson["zb_passes"]["params"]
    assert (zq["b"], zq["w"]) == (round(ps.input_grad_s / ps.forward_s, 3),
                                  round(ps.weight_grad_s / ps.forward_s, 3))
    p, m, f = zq["stages"], zq["microbatches"], 1.0
    idle = (p - 1) * (f + zq["b"] - zq["w"])
    assert lesson["zb_passes"]["api"]["bubble_fraction"] == pytest.approx(
        idle / (idle + m * (f + zq["b"] + zq["w"])))
    assert lesson["zb_passes"]["api"]["bubble_fraction"] > lesson["zb"]["api"]["bubble_fraction"]
    html = client.get("/episodes/pipeline").text
    step = html.split('id="step-5"')[1].split("</section>")[0]
    why = re.sub(r"\s+", " ", unescape(re.sub(r"<span class=\"term-tip\".*?</span></span>", "",
                                              step.split('id="why-pipeline-5"')[1], flags=re.S)))
    why = re.sub(r"<[^>]+>", "", why)
    assert step.index("W is shorter than I") < step.index("drill-pipeline-decide-bubble")
    assert f"{ps.dgrad_flops / 1e9:.0f} GFLOP each a layer" in why
    assert (f"I takes {ps.input_grad_s * 1e3:.3f} ms, W {ps.weight_grad_s * 1e3:.3f} ms, "
            f"F {ps.forward_s * 1e3:.3f} ms") in why
    assert "(p − 1)(F + I − W) idle where 1F1B leaves (p − 1)(F + I + W)" in why
    assert f"ZB-H1 idles {fmt_pct(lesson['zb_passes']['api']['bubble_fraction'])}" in why
    assert f"of a step of {lesson['zb_passes']['api']['makespan']:g} F" in why
    assert f"b={zq['b']}" in step and f"w={zq['w']}" in step  # its try link
    zero = next(t for t in GLOSSARY if t.slug == "zero-bubble")
    # Round-29 reading B, #3: the entry's (p − 1)(F + I − W) against (p − 1)(F + I + W), "a
    # third with equal passes", answered step 5's predict from the tip above it: the why has it.
    assert "W is the shorter" in zero.definition and "(p − 1)(F + I − W)" not in zero.definition


def test_round_18_interleaving_is_taught_on_a_split_megatron_runs(client):
    """Round-18 cold reading of EP05, finding 7: step 4 priced v = 4 on Llama 3.1 70B's 10
    layers a rank, chunks of 2.5 layers that Megatron-LM refuses (a rank's layers must divide
    by v), and the bench said "3 layers" beside 357 MB = 2.5 layers' worth. The memory panel
    now refuses such a split and says why; every lesson state it prices splits each rank's
    layers evenly, and step 4 teaches v = 5 (5 chunks of 2)."""
    refused = client.get("/api/pipeline", params={
        "schedule": "interleaved-1f1b", "stages": 8, "microbatches": 16, "virtual": 4}).json()
    assert refused["memory"] is None
    assert "10 layers do not divide by 4" in refused["memory_note"]
    page = client.get("/episodes/pipeline", params={
        "schedule": "interleaved-1f1b", "stages": 8, "microbatches": 16, "virtual": 4}).text
    assert "10 layers do not divide by 4" in page
    for name, fact in facts().items():
        api = fact.get("api") if isinstance(fact, dict) else None
        if not api or not api.get("memory") or api["virtual"] < 2:
            continue
        memory = api["memory"]
        assert all(memory["layers_per_chunk"] * api["virtual"] == layers
                   for layers in memory["layers_per_rank"]), name
    v5 = facts()["v5"]["api"]
    assert v5["virtual"] == 5 and v5["memory"]["layers_per_chunk"] == 2
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", client.get(
        "/episodes/pipeline").text)))
    step4 = text[text.index("4. Interleaving"):text.index("5. Zero bubble")]
    assert "v = 4" not in step4 and "quarter stages" not in step4
    assert "a rank holds 10: 2 chunks of 5 or 5 of 2" in step4
    # Finding 11: the question no longer answers its predict ("v times shorter" is the why's).
    question = step4[:step4.index("Predict.")]
    assert "times shorter" not in question and "two chunks of half a stage" in question


def test_round_18_step_4_counts_the_sends_on_the_critical_path(client):
    """Round-18 cold reading of EP05, finding 8: "give each send 0.1 forward times and the line
    idles 19.3%" and "with real sends 10.7%" came with no count. 2(v·p − 1) sends lie on the
    line's critical path, down and back: the engine's makespan grows by exactly that many
    sends, and step 4 writes the sum and the division."""
    free, slow, ndr = (facts()[k]["api"] for k in ("v5", "v5_p2p", "v5_ndr"))
    sends = 2 * (free["virtual"] * free["stages"] - 1)
    assert slow["makespan"] == pytest.approx(free["makespan"] + sends * 0.1)
    assert ndr["makespan"] == pytest.approx(free["makespan"] + sends * ndr["send_time"])
    work = free["busy"][0]
    assert 1 - work / slow["makespan"] == pytest.approx(slow["bubble_fraction"])
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", client.get(
        "/episodes/pipeline").text)))
    step4 = text[text.index("4. Interleaving"):text.index("5. Zero bubble")]
    assert (f"{round(free['makespan'], 2):g} + {sends} × 0.1 = "  # the note's sum
            f"{round(slow['makespan'], 2):g} f, idle 1 − {work:g}/"
            f"{round(slow['makespan'], 2):g} = {fmt_pct(slow['bubble_fraction'])}") in step4
    assert (f"{round(free['makespan'], 2):g} + {sends} × {ndr['send_time']:.4f} = "
            f"{ndr['makespan']:.2f} f, idle 1 − {work:g}/{ndr['makespan']:.2f} = "
            f"{fmt_pct(ndr['bubble_fraction'])}") in step4


def test_round_18_step_5_counts_dualpipes_idle_and_the_passes_have_one_notation(client):
    """Round-18 cold reading of EP05, findings 9 and 10: "DualPipeV idles 3.5% here" came with
    no count; step 1 wrote "f + b" (b the backward) where step 6 writes b for the micro-batch.
    Step 5 gives each rank's busy and idle F off the engine's schedule; step 1 names the
    passes F and B, and step 6 says what b is."""
    dp = facts()["dualpipe"]["api"]
    assert set(dp["busy"]) == {dp["busy"][0]}
    idle = dp["makespan"] - dp["busy"][0]
    assert idle / dp["makespan"] == pytest.approx(dp["bubble_fraction"])
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", client.get(
        "/episodes/pipeline").text)))
    assert (f"× {3 / dp['virtual']:g} F (half-stage F + I + W) = {dp['busy'][0]:g} F") in text
    assert f"= {dp['makespan']:g} F, the chart's last bar" in text  # fixR #2: worked
    assert f"{idle:g}/{dp['makespan']:g} = {fmt_pct(dp['bubble_fraction'])}" in text
    assert "f + b" not in text and "F + B = 3 f" in text
    assert "micro-batch of b sequences" in text


def _step(page: str, n: int) -> str:
    part = page[page.index(f'id="step-{n}"'):]
    return _text(part[:part.index("</section>")])


def test_round_19_zb_h1s_last_rank_holds_one_micro_batchs_logits_and_step_5_says_why(client):
    """Round-19 cold reading Y, finding 3: ZB-H1's last rank held p micro-batches'
    activations but one micro-batch's logits, where GPipe's holds each, and the page never said
    why. The lab runs the output head's W at once (labs.memory.lab), so one micro-batch's
    logit gradient is alive at a time; /api/pipeline pins that charge on the 8 x 32 plan step 5
    quotes, and step 5 says the head's W runs at once and what deferring it would add."""
    zb = facts()["zb"]["params"]

    def edge(schedule: str) -> tuple[float, float]:
        """Rank 7's bytes beyond its state and measured activations, and its total."""
        api = client.get("/api/pipeline", params={**zb, "schedule": schedule}).json()
        mem = api["memory"]
        rest = (mem["per_rank_bytes"][7] - mem["state_per_rank_bytes"][7]
                - api["peak_activations"][7] * mem["activation_unit_bytes"])
        return rest, mem["per_rank_bytes"][7]

    logits, total = edge("zb-h1")
    assert logits == pytest.approx(run(PipelineQuery(**zb)).memory.embedding_and_logits[7])
    assert logits > 1e8 and logits == pytest.approx(edge("1f1b")[0])  # one micro-batch's
    assert edge("gpipe")[0] == pytest.approx(zb["microbatches"] * logits)  # each one's
    step = _step(client.get("/episodes/pipeline").text, 5)
    assert "runs the output head's W at once" in step
    assert (f"one micro-batch's logits, {fmt_bytes(logits)} = "
            f"{fmt_bytes(total)}") in step
    assert f"up to 7 × {fmt_bytes(logits)} more" in step


def test_round_19_step_5_prints_digits_that_give_its_i_and_w(client):
    """Round-19 cold reading Y, finding 11: "W 1.38 ms, F 1.58 ms" gave 0.87, the page's W =
    0.88 F (W/F is 0.87505). The plan takes W to three places, 0.875; the note prints the
    milliseconds to three and each ratio, and they reproduce I and W."""
    step = _step(client.get("/episodes/pipeline").text, 5)
    for name in ("I", "W"):
        num, den, ratio = re.search(rf"{name} = ([\d.]+)/([\d.]+) = ([\d.]+) F", step).groups()
        places = len(ratio.split(".")[1])
        assert round(float(num) / float(den), places) == float(ratio), (name, num, den, ratio)
    zq = facts()["zb_passes"]["params"]
    assert f"I = {zq['b']} F" in step and f"W = {zq['w']} F" in step


def test_round_19_ep05_prose_says_what_a_is_all_three_and_the_cut_decides_inputs(client):
    """Round-19 cold reading Y, findings 12, 14 and 16: step 6 named `a` matrices without
    saying a is the heads; step 2 said "both measured" of three figures; the memory-cut decide
    priced 4,096-token sequences, micro-batch 1, selective recomputation and 16 B a parameter
    in its feedback only."""
    page = client.get("/episodes/pipeline").text
    assert "all three measured" in _step(page, 2)
    heads = facts()["unfused_layer"]["heads"]
    assert f"one s×s matrix per head, a = {heads} of them" in _step(page, 6)
    from app.lesson_drills.pipeline import DRILLS

    cut = next(d for d in DRILLS if d.id == "memory-decide-cut")
    for given in ("4,096-token sequences", "micro-batch 1", "selective recomputation",
                  "16 B a parameter"):
        assert given in cut.question, given


def test_round20_step_2s_links_draw_gpipe_so_1f1bs_warm_up_waits_for_step_3(client):
    """Round-20 cold reading Q, finding 5: step 2's "8 × 32" drew 1F1B, whose Gantt shows
    rank 4 running 4 forwards and rank 6 running 2 before a backward, so step 3's rank 5
    (3) read off by interpolation. Step 2's links are GPipe (the same bubble, measured),
    and step 3's first link is 1F1B's, after its guess."""
    import re
    from html import unescape

    from app.routers.pipeline import facts

    page = client.get("/episodes/pipeline").text

    def links(n):
        step = page[page.index(f'id="step-{n}"'):page.index(f'id="step-{n + 1}"')]
        return [unescape(h) for h in re.findall(r'<a class="try" href="([^"]+)"', step)]

    two = links(2)
    assert len(two) == 4, two
    assert all("schedule=gpipe" in h for h in two), two
    assert "schedule=1f1b" in links(3)[0]
    f = facts()
    for key in ("six10", "mid", "gpipe32"):  # step 2's bubbles: GPipe's equal 1F1B's
        p, m = f[key]["params"]["stages"], f[key]["params"]["microbatches"]
        assert f[key]["api"]["bubble_fraction"] == pytest.approx((p - 1) / (m + p - 1), rel=1e-3)


def test_round21_the_bare_page_opens_on_gpipe_and_every_query_draws_what_it_drew(client):
    """Round-20 cold reading Q #5 (residue): the bare page opened on 1F1B 4 × 8, so before
    steps 2-3 asked about GPipe and 1F1B's warm-up the bench showed rank r holding p − r. It
    opens on GPipe at the same 4 × 8 (step 2's "4 × 8"); a query naming any control, the API
    and the embeds keep 1F1B, OpenAPI's default, and the page's own URL of 1F1B's default
    state names its schedule, so it never reads as the bare page."""
    from tests.app.test_contracts import page_figures

    def drawn(url: str) -> tuple[str, str, dict]:
        html = client.get(url).text
        state = re.search(r'id="pipeline-schedule"[^>]*data-state="([^"]*)"', html)[1]
        selected = re.search(r'id="input-schedule".*?<option value="([^"]+)" selected', html,
                             re.S)[1]
        return unescape(state), selected, page_figures(html)

    bare, named = drawn("/episodes/pipeline"), drawn("/episodes/pipeline?schedule=gpipe")
    assert bare[:2] == ("schedule=gpipe", "gpipe") and bare == named
    assert drawn("/episodes/pipeline?colour=blue") == bare  # a key that is no control
    mid = facts()["mid"]["params"]  # step 2's "4 × 8": the opening's counts
    assert (mid["stages"], mid["microbatches"]) == (PipelineQuery().stages,
                                                    PipelineQuery().microbatches)
    # Every query naming a control fills the rest from OpenAPI's defaults, as it always did.
    for query, state in (("stages=4", "schedule=1f1b"), ("schedule=1f1b", "schedule=1f1b"),
                         ("stages=8&microbatches=32", "stages=8&microbatches=32")):
        assert drawn(f"/episodes/pipeline?{query}")[:2] == (state, "1f1b"), query
    assert client.get("/api/pipeline").json()["schedule"] == "1f1b"
    schema = client.get("/openapi.json").json()["paths"]["/api/pipeline"]["get"]
    assert {p["name"]: p["schema"].get("default") for p in schema["parameters"]}[
        "schedule"] == "1f1b"
    embed = client.get("/embed/pipeline/gantt").text
    assert 'data-state="schedule=1f1b"' in embed
    assert 'href="/episodes/pipeline?schedule=1f1b"' in embed  # its lesson at its state
    # No try link or case button is the bare URL (it would now draw GPipe).
    page = client.get("/episodes/pipeline").text
    hrefs = re.findall(r'<a class="(?:try|case [a-z]+)"[^>]*href="([^"]*)"', page)
    assert hrefs and all("?" in h and h.split("?")[1] for h in hrefs), hrefs


def test_round_22_step_2s_intro_gives_neither_step_1s_answer_nor_its_own(client):
    """Round-22 cold reading Q, finding 4 (its last item): step 2's intro, on screen under
    step 1's predict before its guess, said "the line takes m + p − 1 slots … for m slots of
    work per rank": at m = 1, p = 8 one busy slot of 8, step 1's 7/8, and step 2's own
    (p − 1)/(m + p − 1) one step from it. The intro now says only that the warm-up and the
    cool-down cost the same however many micro-batches follow; the count of slots is the
    why's, which derives the idle share from it."""
    page = client.get("/episodes/pipeline").text
    part = page[page.index('id="step-2"'):]
    section = part[:part.index("</section>")]
    intro = _text(section[:section.index('<details class="why"')])
    why = _text(section[section.index('<details class="why"'):])
    assert "however many micro-batches follow" in intro
    for told in ("m + p − 1", "p − 1", "slots of work", "makespan"):
        assert told not in intro, told
    assert ("With equal stages the line takes m + p − 1 slots, the step's length or makespan: "
            "p − 1 to fill and empty it and m of work per rank. The idle share of the step is "
            "(p − 1)/(m + p − 1): 5/15") in why


def test_round_23_step_4s_send_share_is_the_one_it_multiplies(client):
    """Round-23 cold reading Q, finding 8: step 4's why printed "193 µs ÷ 23.8 ms = 0.008 f"
    and then multiplied by 0.0081 f. The quotient is printed as the factor it becomes."""
    from tests.app.test_zero_routes import visible_text

    text = re.sub(r"\s+", " ", visible_text(client.get("/episodes/pipeline").text))
    share, used = re.search(r"µs ÷ [\d.]+ ms = ([\d.]+) f, not 0\.1 f: [\d.]+ \+ \d+ × ([\d.]+)",
                            text).groups()
    assert share == used


def test_round31_the_bubble_decides_16_micro_batches_split_the_same_batch():
    """Round-31 reading A, finding 7: the option "Split the batch into 16 micro-batches, not
    8" said its 3/19 came "only with twice the global batch"; it splits the same batch, in
    micro-batches half the size (step 2's limit trades m against MBS and DP). Its bubble is
    the engine's, (p - 1)/(m + p - 1) = 3/19."""
    from app.labkit.drills import lab_value
    from app.lesson_drills import LESSON_DRILLS

    drill = next(d for d in LESSON_DRILLS["pipeline"] if d.id == "pipeline-decide-bubble")
    why = {o.key: o for o in drill.judge()}["m16"].why
    assert "twice the global batch" not in why, why
    assert "the same batch in half-size micro-batches" in why, why
    bubble = lab_value("pipeline", {"schedule": "1f1b", "stages": 4, "microbatches": 16},
                       lambda a: a["bubble_fraction"])
    assert bubble == pytest.approx(3 / 19) and "3/19" in why
