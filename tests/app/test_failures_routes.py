"""The failures lab's routes in-process: GET /api/failures answers the engine's figures, bad
input is a 422 naming its control, each chart is drawn from the same answer, the page, its
cases and each diagram's embed."""

import json
import re
from urllib.parse import urlencode

import pytest

from app.schemas import FailuresAnswer
from tests.app.test_contracts import page_figures
from tests.app.test_parser import api_messages

LESSON = "/episodes/failures"


def api(client, **params):
    response = client.get("/api/failures", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_defaults_are_llama3s_job(client):
    body = api(client)
    FailuresAnswer.model_validate(body)
    assert body["gpus"] == 16_384 and body["save"] == "async"
    assert body["per_day"] == pytest.approx(419 / 54)
    assert body["mtbi_s"] == pytest.approx(54 * 86_400 / 419)
    assert body["checkpoint"]["total_bytes"] / 1e12 == pytest.approx(5.68, abs=0.005)
    assert body["best"]["goodput"] > 0.9  # Llama 3: effective training time above 90%
    assert [p["gpus"] for p in body["scale"]] == sorted(p["gpus"] for p in body["scale"])


@pytest.mark.parametrize(("params", "field"), [
    ({"gpus": 0}, "gpus"), ({"gpus": "many"}, "gpus"), ({"save": "later"}, "save"),
    ({"storage_bw": 0}, "storage_bw"), ({"interval": 0}, "interval"),
    ({"restart": -5}, "restart"), ({"host_link": "nvlink-4"}, "host_link"),
    ({"gpu_mtbi": 60}, "gpu_mtbi"), ({"step_s": 0}, "step_s"), ({"steps": 0}, "steps"),
    ({"step_gpus": 0}, "step_gpus"), ({"interval": "nan"}, "interval")])
def test_bad_input_is_a_422_naming_the_control(client, params, field):
    assert field in api_messages(client, "failures", params)


def test_charts_are_the_answers_numbers(client):
    params = {"save": "sync", "storage_bw": 20e9, "interval": 10_800}
    body = api(client, **params)
    figures = page_figures(client.get(LESSON, params=params,
                                      headers={"HX-Request": "true", "HX-Target": "x"}).text)
    rate = figures["failures-rate"]["data"]
    assert rate[2]["y"] == [pytest.approx(body["per_day"])]
    assert rate[0]["y"] == [pytest.approx(p["per_day"], rel=1e-4) for p in body["scale"]]
    interval = figures["failures-interval"]["data"]
    assert interval[2]["x"] == [body["interval"]]
    assert interval[2]["y"] == [pytest.approx(100 * body["chosen"]["goodput"])]
    assert interval[1]["x"] == [pytest.approx(body["best_s"])]
    young = figures["failures-interval"]["layout"]["shapes"][1]
    assert young["x0"] == pytest.approx(body["young_s"])
    scale = figures["failures-scale"]["data"]
    assert scale[0]["y"] == [pytest.approx(100 * p["sync"]["goodput"], abs=1e-3)
                             for p in body["scale"]]
    assert scale[3]["y"] == [None if p["async"]["finish_days"] is None else
                             pytest.approx(p["async"]["finish_days"], abs=1e-3)
                             for p in body["scale"]]
    time = figures["failures-time"]["data"]
    assert [t["x"][0] for t in time] == [
        pytest.approx(100 * body["chosen"][k], abs=1e-3)
        for k in ("goodput", "blocking", "rework", "restart")]


def test_page_cases_and_embeds(client):
    page = client.get(LESSON)
    assert page.status_code == 200
    assert "Good case" in page.text and "Bad case" in page.text
    assert "Where this comes from" in page.text
    for name in ("rate", "time", "interval", "scale"):
        embed = client.get(f"/embed/failures/{name}")
        assert embed.status_code == 200 and f'id="failures-{name}"' in embed.text
    bad = client.get(LESSON, params={"gpus": "-1"})
    assert bad.status_code == 422 and "GPUs must be a whole number" in bad.text


def test_the_bad_case_loses_a_quarter_of_its_best_and_the_good_is_above_ninety(client):
    from app.routers.failures import VIEW

    assert api(client, **VIEW.good.query)["chosen"]["goodput"] > 0.9
    bad = api(client, **VIEW.bad.query)
    # Counted as Daly does (a 3-hour cycle is not short against M): 54.0% against 75.0% at
    # its best interval.
    assert bad["chosen"]["goodput"] < 0.75 * bad["best"]["goodput"]


def test_ep08s_plan_links_here_with_its_model_gpus_and_step(client):
    """EP08's readout links to EP11 with the plan's model, GPUs and step time; EP11 then
    times the job's step as that plan's."""
    import html
    import re
    from urllib.parse import parse_qsl, urlsplit

    params = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "intra_link": "nvlink-4", "nodes": 4,
              "tp": 8, "pp": 2, "dp": 2, "microbatches": 16}
    page = client.get("/episodes/recipe-3d", params=params).text
    link = html.unescape(re.search(r'data-testid="failures-link".*?href="([^"]+)"', page,
                                   re.S).group(1))
    query = dict(parse_qsl(urlsplit(link).query))
    recipe = client.get("/api/recipe", params=params).json()
    assert query["model"] == "llama-3.1-70b" and int(query["gpus"]) == 32
    assert float(query["step_s"]) == pytest.approx(recipe["step_s"], rel=1e-3)
    body = api(client, **query)
    assert body["step_here_s"] == pytest.approx(recipe["step_s"], rel=1e-3)
    assert body["mtbi_s"] == pytest.approx(body["gpu_mtbi"] / 32)
    assert client.get(link).status_code == 200


def _outside_whys(html: str) -> str:
    """The page's text a student sees before any guess: every step's why is a closed
    <details class="why">, so drop those, and the tags (a prediction's data-answer is an
    attribute, not text on the screen)."""
    import re
    return re.sub(r"<[^>]+>", " ", re.sub(r'<details class="why".*?</details>', "", html,
                                          flags=re.S))


def test_second_cold_reading_no_answer_before_the_guess(client):
    """The case captions name the setup only (step 5's loss, step 6's 54.0% goodput), the bench
    no longer spells the checkpoint's bill (step 2: 14 bytes a parameter), step 3 asks for the
    stop on 1,024 GPUs, which only its why quotes, and the rate line has no hover (the MTBI
    drills would be one hover away)."""
    from app.charts.units import fmt_duration, fmt_pct
    from app.routers.failures import VIEW

    page = client.get(LESSON).text
    seen = _outside_whys(page)
    bad = api(client, **VIEW.bad.query)
    good = api(client, **VIEW.good.query)
    assert fmt_pct(bad["chosen"]["goodput"]) not in seen
    assert "restarts taking most" not in seen and "less return" not in seen
    assert "master weights +" not in seen
    small = fmt_duration(api(client, gpus=1024)["checkpoint"]["copy_s"])
    assert small not in seen and small in page  # 5.55 GB ÷ 64 GB/s = 86.7 ms, in the why
    assert fmt_pct(good["chosen"]["goodput"]) in page
    from app.charts.failures import rate_figure
    from app.routers.failures import FailuresQuery, run

    assert rate_figure(run(FailuresQuery()))["data"][0]["hoverinfo"] == "skip"


def test_chart_note_states_the_count_the_chart_draws(client):
    """The note's formula, (M + R + L)(e^(c/M) − 1) of wall clock per cycle of c = τ + b,
    gives the headline's goodput (87.4% at the default: 1,800 ÷ 2,060 s), where Young's first
    order would give 86.5%."""
    import math

    body = api(client)
    page = client.get(LESSON).text
    assert "(M + R + L)(e^(c/M) − 1)" in page and "Young's first order" in page
    tau, ck, m = body["interval"], body["checkpoint"], body["mtbi_s"]
    wall = (m + body["restart"] + ck["lag_s"]) * math.expm1((tau + ck["block_s"]) / m)
    assert tau / wall == pytest.approx(body["chosen"]["goodput"], rel=1e-9)
    assert tau / wall == pytest.approx(0.874, abs=5e-4)


def test_a_cycle_hundreds_of_mtbis_long_finishes_never_not_infinity(client):
    """gpu_mtbi=86400 x interval=3 x step_s=3600 (the pairwise explorer): at the scale chart's
    largest count a sync save's cycle is ~600 MTBIs, its goodput ~1e-260, and the job's days
    overflowed to inf, which JSON cannot carry (ValueError, a 500). They are None (never)."""
    got = client.get("/api/failures", params={"gpu_mtbi": 86400, "interval": 3, "step_s": 3600})
    assert got.status_code == 200
    assert any(p["sync"]["finish_days"] is None for p in got.json()["scale"])
    assert client.get("/episodes/failures", params={"gpu_mtbi": 86400, "interval": 3,
                                                    "step_s": 3600}).status_code == 200


def test_step_5_predicts_a_restart_share_the_bench_does_not_draw(client):
    """Step 5 asked what takes most of the lost time at the best interval (restarts), and the
    opening bench's 'where the wall clock goes' chart draws the best interval's bars with
    '5.1% restarts'. It now asks the share with 5-minute restarts, R / (M + R) =
    300 / (11,135 + 300) = 2.6%, a state only its first link draws."""
    import re

    from app.charts.units import fmt_pct

    five = api(client, restart=300, interval=11)
    share = 300 / (five["mtbi_s"] + 300)
    assert five["chosen"]["restart"] == pytest.approx(share, rel=1e-3)
    page = client.get(LESSON).text
    form = re.search(r'<form class="predict-form"[^>]*>', page.split('id="step-5"')[1])[0]
    assert f'data-answer="{fmt_pct(share)}"' in form
    assert fmt_pct(share) not in _outside_whys(page)


def test_more_gpus_or_faster_saves_times_the_doubled_step_on_ep08s_engine(client):
    """Round-5 cold reading, EP11 item 1: the decide drill took twice the GPUs to halve the
    step. On Llama 3's fixed 2,048-sequence batch, DP 256 gives each TP 8 x PP 16 pipeline 8
    micro-batches, not 16, and the bubble grows: GET /api/recipe times the step far less than
    2x faster, and peer memory finishes soonest. Round 6, item 2: the drill called Llama 3's
    schedule 1F1B, which the engine timed at 9.44 s against the 6.23 s the page quotes for
    the same run; Llama 3 ran interleaved 1F1B (Dubey et al. 2024 sec 3.3.2), which the drill
    now states and times (7 chunks a stage): 5.92 s at DP 128, its bubble 15/(7 x 16 + 15);
    at DP 256 the 8 micro-batches, fewer than the 16 stages, leave 53% of the step idle (as
    EP05's own pipeline lab has it), and the step gains 1.06x."""
    from app.labkit import DRILLS, check_drill
    from app.routers.failures_drills import SLOW_SYNC
    from app.routers.failures_state import LLAMA3_CHUNKS, LLAMA3_LAYOUT, STEP_S

    assert LLAMA3_LAYOUT["schedule"] == "interleaved-1f1b"
    timed = {}
    for dp in (128, 256):
        body = client.get("/api/recipe", params={**LLAMA3_LAYOUT, "nodes": dp * 16, "dp": dp,
                                                 "microbatches": 2048 // dp}).json()
        timed[dp] = body
    assert timed[128]["bubble_fraction"] == pytest.approx(15 / (LLAMA3_CHUNKS * 16 + 15))
    pipeline = client.get("/api/pipeline", params={
        "schedule": "interleaved-1f1b", "stages": 16, "microbatches": 8,
        "virtual": LLAMA3_CHUNKS}).json()
    assert timed[256]["bubble_fraction"] == pytest.approx(pipeline["bubble_fraction"])
    assert timed[256]["bubble_fraction"] > 0.5
    assert abs(timed[128]["step_s"] / STEP_S - 1) < 0.1  # the run the page quotes, within 10%
    speedup = timed[128]["step_s"] / timed[256]["step_s"]
    assert 1 < speedup < 1.2  # far from 2
    doubled = api(client, **SLOW_SYNC, gpus=32_768, step_s=round(STEP_S / speedup, 6),
                  step_gpus=32_768)
    peer = api(client, **{**SLOW_SYNC, "save": "peer"})
    assert peer["best"]["finish_days"] < doubled["best"]["finish_days"]

    drill = DRILLS["failures-decide-more-or-faster"][1]
    assert "16 micro-batches" in drill.question and "interleaved 1F1B" in drill.question
    assert "a 1F1B pipeline" not in drill.question
    assert check_drill(drill, "peer", attempt=1, hide_answers=True)["status"] == "right"
    wrong = check_drill(drill, "gpus", attempt=1, hide_answers=True)
    assert wrong["status"] == "hint"
    why = wrong["feedback"][0]["why"]
    assert f"{speedup:.2f}× faster, not twice as fast" in why and "fewer than its 16 stages" in why
    # Round-21 cold reading R, finding 13: the recipe's bubble is a share of the pipeline's
    # time (EP05's chunk slots), not of the step, which adds the DP sync and the optimizer.
    assert f"{timed[256]['bubble_fraction']:.0%} of the pipeline's time (EP05)" in why
    assert "of the step" not in why
    assert f"{doubled['best']['finish_days']:,.4g} days" in why


def test_step_6_asks_about_the_first_order_count_it_taught_and_step_1s_answer_is_off_screen(
        client):
    """Round-5 cold reading, EP11 items 2, 3 and 5: step 6 states what step 4's first-order
    count gives (43.6%, below half) and asks whether counting every failure agrees (54.0%:
    above); the bad case's caption no longer prints the 32,768-GPU interruption interval that
    step 1's drill asks for, and step 4's heading and the bench no longer name the root."""
    body = api(client, save="sync", storage_bw=20_000_000_000, interval=10_800)
    cycle = body["interval"] + body["checkpoint"]["block_s"]
    first = body["interval"] / cycle * (1 - (body["restart"] + cycle / 2) / body["mtbi_s"])
    assert first < 0.5 < body["chosen"]["goodput"]
    page = client.get(LESSON).text
    step6 = page[page.index('id="step-6"'):page.index('id="step-7"')]
    assert f"gives {100 * first:.1f}% here" in step6
    assert 'data-predict="failures-6" data-right="above"' in step6
    bad = api(client, save="sync", storage_bw=20_000_000_000, interval=10_800, gpus=32_768)
    hours = f"{bad['mtbi_s'] / 3600:.3g} h"
    assert hours not in page[:page.index('id="step-1"')]
    assert "square root" not in page[page.index('id="step-4"'):page.index("predict-failures-4")]
    assert "√(2δM)" not in page[page.index('id="failures-section"'):]


def test_round5_the_jobs_steps_are_derived_where_first_used(client):
    """Round-5 cold reading, EP11 item 9: 929,832 steps were quoted and never derived."""
    steps = api(client)["steps"]
    page = " ".join(client.get(LESSON).text.split())
    # Round-22 cold reading R, finding 6: the batch in full, 2,048 × 8,192 (step 4 gives it),
    # so the division redone gives the steps ("16M" gave 975,000).
    assert f"15.6T tokens ÷ {2**24:,} tokens a step = {steps:,} steps" in page
    assert steps == round(15.6e12 / 2**24)


# Step 2's masks, and step 3's (the copy, an async save's stop: round-10 finding 9).
MASKED = re.compile(r'<span class="answer-mask" data-after-guess="(?:failures-checkpoint|step-3)"'
                    r"[^>]*>[^<]*</span>")


def test_round5_step_2s_bytes_are_masked_until_its_guess_and_its_links_show_them(client):
    """Round-5 cold reading, EP11 items 4, 8 and 11. Step 2 asks which of EP01's 16 bytes a
    checkpoint leaves out; the bench's tile printed the checkpoint, 5.68 TB, for a 405.9B model
    (the Model control's label): 14 bytes a parameter, so the gradients, one division away.
    Every figure of the checkpoint's size on the bench (its total and shard, the write, the
    copy, the stop per save, δ, the write still in flight), at the opening state, the case
    buttons' and step 1's try links', is masked until step 2 is guessed (lab.js answer-mask,
    keyed to the readout steps 2 and 3 name). Steps 2 and 3's links scroll to that readout,
    which now holds the step's figures (was the interval chart, which drew none of them).
    Tectonic is named where first used outside a link (step 2's why), and the mean time
    between interruptions is marked for the glossary in step 1."""
    from app.charts.units import fmt_bytes, fmt_duration
    from app.routers.failures import VIEW
    from tests.app.test_answers_hidden import case_urls, steps, try_urls

    page = client.get(LESSON).text
    found = steps(page)
    diagrams = [re.search(r'data-diagram="([^"]+)"', page.split(f'id="{sid}"')[1])[1]
                for sid, _ in found]
    assert diagrams[1] == diagrams[2] == "failures-checkpoint"
    assert diagrams.index("failures-checkpoint") == 1 and "predict-form" in found[1][1]
    urls = [LESSON] + case_urls(page) + try_urls(found[0][1])
    queries = [{}, VIEW.good.query, VIEW.bad.query] + [
        dict(p.split("=") for p in u.split("?", 1)[1].split("&")) for u in try_urls(found[0][1])]
    assert len(urls) == len(queries)
    for url, query in zip(urls, queries, strict=True):
        body = client.get(url).text
        bench = body[body.index('id="failures-section"'):]
        bench = bench[:bench.index("</section>")]
        ck = api(client, **query)["checkpoint"]
        shown = [fmt_bytes(ck["total_bytes"]), fmt_bytes(ck["bytes_per_gpu"]),
                 fmt_duration(ck["write_s"]), fmt_duration(ck["copy_s"]),
                 fmt_duration(ck["block_s"])]
        assert all(f in bench for f in shown), url  # drawn, masked by lab.js
        text = re.sub(r"<[^>]+>", " ", MASKED.sub(" ", bench))  # the charts' labels too
        assert [f for f in shown if f in text] == [], url
        # Nor anywhere else on the screen before step 2's guess (the case buttons' captions).
        screen = re.sub(r"<[^>]+>", " ", MASKED.sub(" ", re.sub(
            r'<details class="why".*?</details>', " ", body, flags=re.S)))
        assert fmt_bytes(ck["total_bytes"]) not in screen, url
    sync = client.get(try_urls(found[1][1])[0]).text
    readout = sync[sync.index('id="failures-checkpoint"'):]
    readout = readout[:readout.index("</dl>")]
    ck = api(client, save="sync")["checkpoint"]
    for figure in (fmt_bytes(ck["total_bytes"]), fmt_bytes(ck["bytes_per_gpu"]),
                   fmt_duration(ck["write_s"]), fmt_duration(ck["block_s"])):
        assert figure in readout
    step1, step2 = found[0][1], found[1][1]
    assert 'data-term="mtbi"' in step1
    assert 'data-term="tectonic"' in step2


def test_round6_step_7_times_its_65536_gpu_step_on_ep08s_engine(client):
    """Round-6 cold reading, EP11 item 3, and round 10, finding 3: step 7 halved the step at
    each doubling and quoted the days that gives as the answer. The lab now takes EP08's
    engine's step wherever it can time Llama 3's layout: GET /api/recipe times TP 8 x PP 16 at
    DP 256 and 512 (32,768 and 65,536 GPUs, the 2,048 sequences fixed) against DP 128, that
    ratio applied to the 6.23 s step, and GET /api/failures at 32,768 and 65,536 GPUs runs
    the job at that step, with no step given. Step 7 asks about 16,384 -> 32,768 -> 65,536,
    its answer from those answers (more days), and quotes the ideal and the grown batch."""
    from app.routers.failures import LLAMA3_LAYOUT, STEP_S

    def timed(dp: int, sequences: int) -> dict:
        return client.get("/api/recipe", params={**LLAMA3_LAYOUT, "nodes": dp * 16, "dp": dp,
                                                 "microbatches": sequences // dp}).json()

    base, grown = timed(128, 2048), timed(512, 8192)
    slow = {"save": "sync", "storage_bw": 20_000_000_000}
    runs = {n: api(client, **slow, gpus=n) for n in (16_384, 32_768, 65_536)}
    for n, run in runs.items():
        assert run["step_timed"]
        assert run["step_here_s"] == pytest.approx(
            STEP_S * timed(n // 128, 2048)["step_s"] / base["step_s"])
    days = [runs[n]["best"]["finish_days"] for n in sorted(runs)]
    assert days[0] < days[1] < days[2]  # more GPUs, later
    page = client.get(LESSON).text
    form = page.split('data-predict="failures-7"')[1].split("</form>")[0]
    assert 'data-right="later"' in form
    assert f"{days[0]:.3g} days → {days[1]:.3g} days → {days[2]:.3g} days" in form
    step7 = page[page.index('id="step-7"'):page.index('id="step-8"')]
    step7 = re.sub(r'<span class="term-tip".*?</span>', "", step7, flags=re.S)  # glossary
    text = " ".join(re.sub(r"<[^>]+>", "", step7).split())
    fixed = timed(512, 2048)
    assert f"The engine measures a bubble of {100 * fixed['bubble_fraction']:.1f}%" in text
    assert (f"goodput, go {days[0]:.3g} → {days[1]:.3g} → {days[2]:.3g}: on a fixed batch "
            "and layout, more GPUs finish later") in text
    ideal = api(client, **slow, gpus=65_536, step_s=round(STEP_S / 4, 3), step_gpus=65_536)
    assert not ideal["step_timed"]
    assert (f"({ideal['step_here_s']:.2f} s on 65,536 GPUs), errs fast by "
            f"{runs[65_536]['step_here_s'] / ideal['step_here_s']:.1f}× and finishes in "
            f"{ideal['best']['finish_days']:.3g} days") in text
    assert f"the lab's step is {STEP_S * grown['step_s'] / base['step_s']:.3g} s" in text
    assert "McCandlish" in page[page.index('id="sources"'):]


def test_round10_the_goodput_decide_asks_a_state_no_link_draws(client):
    """Round-10 cold reading, EP11 finding 11: the goodput decide asked about the opening
    state (async, 16,384 GPUs), whose interval chart hovered each choice's goodput, and its
    storage choice's feedback said the write is "what no one waits for", where step 3 adds it
    to the work a failure loses. Its job is now one no try link or case draws (the interval
    chart draws every interval of a state's job), and the storage feedback names the window."""
    from urllib.parse import parse_qsl, urlsplit

    from app.lesson_drills.failures import GOODPUT_JOB
    from app.routers.failures import VIEW
    from app.routers.failures_state import FailuresQuery

    def job(params) -> dict:
        return {k: v for k, v in FailuresQuery(**params).model_dump().items() if k != "interval"}

    page = client.get(LESSON).text
    drawn = [dict(parse_qsl(urlsplit(href.replace("&amp;", "&")).query))
             for href in re.findall(r'<a class="try[^"]*" href="([^"]+)"', page)]
    drawn += [VIEW.good.query, VIEW.bad.query, {}]
    assert len(drawn) > 20
    decide = next(d for d in VIEW.drills if d.id == "failures-decide-goodput")
    asked = job(GOODPUT_JOB)
    assert all(job(params) != asked for params in drawn)
    assert f"{GOODPUT_JOB['gpus']:,} GPUs" in decide.question
    storage = next(o for o in decide.judge() if o.key == "storage")
    base = api(client, **GOODPUT_JOB)["checkpoint"]["lag_s"]
    assert "no one waits" not in storage.why
    assert f"({base:.3g} s → {base / 2:.3g} s)" in storage.why


def test_round10_steps_6_and_7_derive_their_forms_from_what_the_page_states(client):
    """Round-10 cold reading, EP11 findings 4, 10 and 14(c). Step 7 quoted the engine's 75.7%
    bubble and 1.10x as from EP05, whose interleaved form gives 34.9% here: it now names the
    schedule and derives both (4 micro-batches for 16 stages leave interleaving nothing to fill,
    so the bubble is near 1F1B's 15/19; the step gains 16/4 x (1 - 0.757)/(1 - 0.118)). Step 6
    cited "step 4's" goodput form, which step 5's drill alone gave, and garbled the reason the
    first order errs; step 5's why now states the form, step 6 cites it and derives the gap
    (1 - x against 1/(1 + x)). "First order" and "renewal count" are defined where used."""
    from html import unescape

    from app.routers.failures import LLAMA3_LAYOUT

    def timed(dp: int) -> dict:
        return client.get("/api/recipe", params={**LLAMA3_LAYOUT, "nodes": dp * 16, "dp": dp,
                                                 "microbatches": 2048 // dp}).json()

    def text_of(html: str) -> str:
        html = re.sub(r'<span class="term-tip".*?</span>', "", html, flags=re.S)
        return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())

    page = client.get(LESSON).text
    step = {n: text_of(page[page.index(f'id="step-{n}"'):page.index(f'id="step-{n + 1}"')])
            for n in (4, 5, 6, 7)}
    base, four = timed(128), timed(512)
    b, e = base["bubble_fraction"], four["bubble_fraction"]
    assert "interleaved 1F1B schedule" in step[7]
    assert f"(p − 1)/(m + p − 1) = 15/19 = {100 * 15 / 19:.1f}%" in step[7]
    assert (f"16/4 × (1 − {e:.3f})/(1 − {b:.3f}) = {4 * (1 - e) / (1 - b):.2f}×"
            in step[7])
    assert f"against {100 * b:.1f}% with 16 micro-batches" in step[7]
    assert "τ/c × (1 − (R + c/2)/M)" in step[5]
    assert "Step 5's first-order count" in step[6] and "Step 4's first" not in step[6]
    assert "not M per cycle" not in step[6]
    slow = api(client, save="sync", storage_bw=20_000_000_000, interval=10_800)
    cycle = slow["interval"] + slow["checkpoint"]["block_s"]
    x = (slow["restart"] + cycle / 2) / slow["mtbi_s"]
    assert (f"x = (R + c/2)/M = {x:.2f}, 1 − x = {100 * (1 - x):.1f}% but 1/(1 + x) = "
            f"{100 / (1 + x):.1f}%") in step[6]
    lab = slow["chosen"]["goodput"] * cycle / slow["interval"]
    assert 1 - x < lab < 1 / (1 + x) and f"{100 * lab:.1f}%" in step[6]
    assert "renewal count" in step[6] and "first order: it keeps only the terms" in step[4]


def test_round10_step_8_quotes_the_charts_point_and_bounds_it_by_the_engines_step(client):
    """Round-10 cold reading, EP11 findings 2 and 3: step 8 concluded 'the same job finishes in
    12 days' on 131,072 GPUs from the ideal 0.779 s step (1/N from 16,384). On 131,072 GPUs the
    engine cannot time Llama 3's layout, so the lab takes the step ideally from its
    65,536-GPU step (the chart's open point); step 8 quotes that point, from the same answer
    as the chart, and bounds it with the 65,536-GPU step held (GET /api/failures)."""
    from html import unescape

    slow64 = api(client, save="sync", storage_bw=20_000_000_000, gpus=65_536)
    peer = {"save": "peer", "storage_bw": 20_000_000_000, "gpus": 131_072}
    here = api(client, **peer)
    assert not here["step_timed"]
    assert here["step_here_s"] == pytest.approx(slow64["step_here_s"] / 2)
    bound = api(client, **peer, step_s=round(slow64["step_here_s"], 3), step_gpus=131_072)
    assert bound["best"]["finish_days"] > here["best"]["finish_days"]
    page = client.get(LESSON).text
    step8 = page[page.index('id="step-8"'):page.index('id="sources"')]
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", step8)).split())
    assert (f"{slow64['step_here_s']:.3g} s ÷ 2 = {here['step_here_s']:.3g} s, an open point. "
            f"There the job keeps {100 * here['best']['goodput']:.1f}% and finishes in "
            f"{here['best']['finish_days']:.3g} days") in text
    assert (f"the same peer saves take {bound['best']['finish_days']:.3g} days") in text
    assert "if its step scaled ideally" not in text
    # The chart's own point at 131,072 GPUs is the figure quoted.
    url = re.search(r'href="([^"]*gpus=131072[^"]*save=peer[^"]*)"|'
                    r'href="([^"]*save=peer[^"]*gpus=131072[^"]*)"', step8)
    assert url
    scale = page_figures(client.get(unescape(next(g for g in url.groups() if g))).text)[
        "failures-scale"]
    trace = next(t for t in scale["data"] if t.get("yaxis") == "y2" and t["name"] == "peer saves")
    assert trace["y"][trace["x"].index(131_072)] == pytest.approx(
        here["best"]["finish_days"], rel=1e-3)


def test_round10_the_scale_chart_draws_the_engines_step_and_ideal_only_past_it(client):
    """Round-10 cold reading, EP11 finding 3: the scale chart took every size's step as 1/GPUs
    from 16,384 (labelled ideal). For Llama 3's job it now draws EP08's engine's step wherever
    the engine can time the layout (GET /api/recipe at DP = GPUs / 128, the batch fixed, its
    ratio to DP 128 applied to the 6.23 s step: 1,024 to 65,536 GPUs), filled points; past
    that, ideal from the last timed size, open points, and says so on the chart (its note, its
    hovers, its summary). Another job's step is ideal everywhere, and the chart says that."""
    from app.routers.failures import LLAMA3_LAYOUT, STEP_S

    def recipe(dp: int):
        r = client.get("/api/recipe", params={**LLAMA3_LAYOUT, "nodes": dp * 16, "dp": dp,
                                              "microbatches": 2048 // dp})
        return r.json()["step_s"] if r.status_code == 200 else None

    body = api(client)
    base = recipe(128)
    last = None
    for p in body["scale"]:
        engine = recipe(p["gpus"] // 128)
        if engine is not None:
            assert p["step_timed"] and p["step_s"] == pytest.approx(STEP_S * engine / base)
            last = p
        else:
            assert not p["step_timed"]
            assert p["step_s"] == pytest.approx(last["step_s"] * last["gpus"] / p["gpus"])
    timed = [p["gpus"] for p in body["scale"] if p["step_timed"]]
    assert (min(timed), max(timed)) == (1_024, 65_536)
    scale = page_figures(client.get(LESSON).text)["failures-scale"]
    for trace in scale["data"][:6]:  # each save's two panels (then the days' ranges)
        assert trace["marker"]["symbol"] == [
            "circle" if p["step_timed"] else "circle-open" for p in body["scale"]]
        assert "%{customdata}" in trace["hovertemplate"]
        # The step on the days panel only (traces 1, 3, 5), which waits for step 7.
        days = trace.get("yaxis") == "y2"
        for p, said in zip(body["scale"], trace["customdata"], strict=True):
            assert said == (f"step {p['step_s']:.4g} s, " if days else "") + (
                "timed by EP08's engine" if p["step_timed"] else "ideal: 1/GPUs")
    notes = [a["text"] for a in scale["layout"]["annotations"]]
    assert "● EP08's engine  ○ ideal (1/GPUs) past 64K<br>shaded: up to no speed-up" in notes
    assert "Filled points: the step EP08's engine times on Llama 3's layout and batch, 1,024 " \
           "to 65,536 GPUs; open points: ideal" in scale["summary"]
    assert "finish soonest" not in scale["summary"]
    # Another job: ideal everywhere, said so.
    other = page_figures(client.get(LESSON, params={"model": "llama-3.1-70b"}).text)[
        "failures-scale"]
    assert all(s == "circle-open" for s in other["data"][0]["marker"]["symbol"])
    assert "ideal steps: 1/GPUs<br>shaded: up to no speed-up" in [
        a["text"] for a in other["layout"]["annotations"]]
    assert ("ideal away from 16,384 GPUs: the lab times other sizes on EP08's engine only for "
            "Llama 3's job") in other["summary"]


def test_round10_the_more_or_faster_decide_is_the_charts_own_figure_at_a_state_no_link_draws(
        client):
    """Round-10 cold reading, EP11 finding 3: the bench scaled the step ideally where the
    more-or-faster decide timed it on EP08's engine, and step 6's and 7's 20 GB/s links drew
    the decide's async and peer days at 16,384 GPUs. Each choice's state is now drawn by no
    try link or case (the decide asks about a 10 GB/s file system), and the scale chart at
    that state draws, at the choice's GPUs and save, the decide's own figure."""
    from urllib.parse import parse_qsl, urlsplit

    from app.routers.failures import VIEW
    from app.routers.failures_state import FailuresQuery

    def job(params) -> dict:  # what the scale chart draws: every save, each at its best
        return {k: v for k, v in FailuresQuery(**params).model_dump().items()
                if k not in ("interval", "save")}

    page = client.get(LESSON).text
    drawn = [dict(parse_qsl(urlsplit(href.replace("&amp;", "&")).query))
             for href in re.findall(r'<a class="try[^"]*" href="([^"]+)"', page)]
    drawn = [job(p) for p in drawn + [VIEW.good.query, VIEW.bad.query, {}]]
    decide = next(d for d in VIEW.drills if d.id == "failures-decide-more-or-faster")
    from app.routers.failures_drills import SLOW_SYNC

    # Twice the GPUs: the lab times 32,768 GPUs' step on EP08's engine itself.
    states = {"gpus": {**SLOW_SYNC, "gpus": 32_768},
              "async": {**SLOW_SYNC, "save": "async"}, "peer": {**SLOW_SYNC, "save": "peer"},
              "storage": {**SLOW_SYNC, "storage_bw": 10 * SLOW_SYNC["storage_bw"]}}
    figures = {o.key: o.figure for o in decide.judge()}
    assert set(figures) == set(states)
    for key, params in states.items():
        assert job(params) not in drawn, key
        html = client.get(LESSON, params=params).text
        scale = page_figures(html)["failures-scale"]
        here = api(client, **params)
        save = params["save"]
        trace = next(t for t in scale["data"]
                     if t.get("yaxis") == "y2" and t["name"].startswith(save))
        at = trace["y"][trace["x"].index(here["gpus"])]
        assert f"{at:,.4g} days" == figures[key], key


def _before_guess(client, url: str, step: str) -> str:
    """The page at `url` as lab.js shows it before `step`'s guess (the steps before it
    guessed): tests/app/test_answers_hidden.py's model of the masks."""
    from tests.app.test_answers_hidden import masked, masked_keys

    lesson = client.get(LESSON).text
    return masked(client.get(url).text, masked_keys(lesson, step))


def test_round13_the_scale_chart_hovers_no_step_before_step_7s_guess(client):
    """Round-13 cold reading of EP10-EP11, finding 5: the goodput traces hovered each size's
    step (5.675 s on 65,536 GPUs), so at step 6's states step 7's days were steps x step /
    goodput off two hovered figures. The step is only on the days panel, which waits for
    step 7; after its guess the days hover it."""
    from app.routers.failures import facts

    f = facts()
    steps = {f"step {f[k]['api']['step_here_s']:.4g} s" for k in ("slow_32k", "slow_64k")}
    for name in ("slow_naive", "slow_best", "llama"):
        url = f"{LESSON}?" + "&".join(f"{k}={v}" for k, v in f[name]["params"].items())
        before = page_figures(_before_guess(client, url, "step-7"))["failures-scale"]
        assert not {s for s in steps if s in json.dumps(before)}, name
        after = page_figures(_before_guess(client, url, "step-8"))["failures-scale"]
        assert steps <= {s for s in steps if s in json.dumps(after)}, name


def test_round13_each_step_keys_the_figures_its_own_links_print(client):
    """Round-13 cold reading of EP10-EP11, finding 4: at step 1's, 5's, 6's and 7's links the
    headline and the wall-clock and interval charts printed their answers (2.06 days, 2.6%,
    54.0%, 97.9 days) with no guess made. Each is masked until its step's guess, and shown
    after it; Llama 3's opening state masks none of them."""
    from app.routers.failures import facts

    f = facts()
    cases = {"small": ("step-1", f["small"]["api"]["mtbi_s"], "mtbi"),
             "restart_5": ("step-5", f["restart_5"]["api"]["chosen"]["restart"], "pct"),
             "slow_naive": ("step-6", f["slow_naive"]["api"]["chosen"]["goodput"], "pct"),
             "slow_32k": ("step-7", f["slow_32k"]["api"]["chosen"]["finish_days"], "days")}
    from app.charts.units import fmt_duration, fmt_pct

    steps = ["step-1", "step-5", "step-6", "step-7", "step-8"]
    for name, (step, value, kind) in cases.items():
        shown = (fmt_duration(value) if kind == "mtbi" else fmt_pct(value) if kind == "pct"
                 else f"{value:,.3g} days")
        url = f"{LESSON}?" + "&".join(f"{k}={v}" for k, v in f[name]["params"].items())
        before = _before_guess(client, url, step)
        after = _before_guess(client, url, steps[steps.index(step) + 1])
        # the headline and the charts' summaries, as printed
        outside = re.sub(r'<script type="application/json".*?</script>', "", before, flags=re.S)
        assert shown not in _outside_whys(outside), (name, shown)
        assert shown in _outside_whys(after), (name, shown)
    opening = client.get(LESSON).text
    figures = page_figures(opening)
    # Llama 3's opening keys none of these steps' figures: only (round 14, findings 4 and 11)
    # the shares a failure costs, step 5's at every state, the best interval and the saves'
    # share, step 3's, (round 16, finding 4) the rate line and its rule, step 1's, and
    # (round 19, cold reading Z, finding 4) the best interval's goodput, step 5's: the
    # training bars and the interval chart whole.
    assert {k: [o["step"] for o in figures[k]["layout"]["meta"]["owners"]]
            for k in ("failures-time", "failures-interval", "failures-rate")} == {
        "failures-time": ["step-5", "step-3", "step-3", "step-5"],
        "failures-interval": ["step-5", "step-3"], "failures-rate": ["step-1"]}
    assert 'data-after-guess="step-1" data-mask="?' not in opening.split(
        'id="failures-section"')[1]


def test_round13_steps_2_5_and_7_derive_their_figures_from_one_computation(client):
    """Round-13 cold reading of EP10-EP11, findings 9-11: step 5's storage load used the
    11 s interval the step had just said is not used (26%, not 2.84 s of every 12.5 s, 23%);
    step 2's 5.68 TB did not come from 405B x 14 B (the model has 405.9B); step 7's 75.7%
    bubble, below 1F1B's 15/19, was not derived: with m < p each of the v chunk rounds waits
    for the loop round all p stages, 1 - v·m/(v·p + m - 1), what the engine measures."""
    from html import unescape

    from app.routers.failures import facts
    from app.routers.failures_state import LLAMA3_LAYOUT

    f = facts()
    page = client.get(LESSON).text
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", page)).split())
    a = f["async_best"]["api"]
    used = -(-a["interval"] // a["step_s"]) * a["step_s"]  # whole steps
    ck = a["checkpoint"]
    assert (f"Each {ck['total_bytes'] / 1e12:.3g} TB write takes {ck['write_s']:.3g} s of every "
            f"{used:.3g} s, keeping a 2 TB/s file system {100 * ck['write_s'] / used:.0f}% busy"
            ) in text
    sync = f["sync"]["api"]["checkpoint"]
    assert (f"{sync['weights_bytes'] / 2e9:.1f}B parameters × 14 B = "
            f"{sync['total_bytes'] / 1e12:.3g} TB") in text
    e, v, p = f["engine_64k"], LLAMA3_LAYOUT["virtual"], LLAMA3_LAYOUT["pp"]
    assert 1 - v * e["m"] / (v * p + e["m"] - 1) == pytest.approx(e["bubble"], abs=5e-4)
    assert (f"1 − {v * e['m']}/{v * p + e['m'] - 1} = {100 * e['bubble']:.1f}%") in text


def test_round_14_step_7_states_its_fixed_layout_and_what_a_replanned_one_does(client):
    """Round-14 cold reading of EP11, finding 2: step 7 concluded 'on a fixed batch, more
    GPUs finish later', true only while DP alone grows (TP 8 × PP 16 kept). The question now
    states that layout, the why says it, and a note times EP08's engine on 65,536 GPUs
    re-planned as CP 4 × DP 128 (16 micro-batches a pipeline again): its step and days, the
    lab's own, fewer days than on 16,384 GPUs."""
    from html import unescape

    from app.routers.failures import facts
    from app.routers.failures_state import replanned_step

    page = client.get("/episodes/failures").text
    page = re.sub(r'<span class="term-tip".*?</span>', "", page, flags=re.S)
    step = page[page.index('id="step-7"'):page.index('id="step-8"')]
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", step)))
    question = text[text.index("Question."):text.index("Predict.")]
    assert "growing only DP" in question and "the layout stays TP 8 × PP 16" in question
    assert "on a fixed batch and layout, more GPUs finish later" in text
    # Round 21 (issue 36, standard 4): the re-plan is step 8's, the fix its "peer memory
    # fixes the saves, not the step" leaves open; step 7 keeps its own four links' working.
    assert "CP 4" not in text
    eight = page[page.index('id="step-8"'):page.index('id="sources"')]
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", eight)))
    assert text.index("fixes the saves, not the step") < text.index("The step needs a re-plan")
    cp = replanned_step(65_536, 4)
    f = facts()
    job, base = f["slow_64k_cp"]["api"], f["slow_best"]["api"]
    assert (cp["gpus"], cp["dp"], cp["m"]) == (65_536, 128, 16)
    assert job["step_here_s"] == pytest.approx(cp["lab_step_s"], abs=1e-3)
    assert ("TP 8 × PP 16 × CP 4 × DP 128 (context parallelism, EP06, splits each sequence "
            "over 4 GPUs") in text
    assert (f"keeps 16 micro-batches a pipeline, a bubble of {cp['bubble']:.1%}, and times the "
            f"step {cp['speedup']:.2f}× as fast as on 16,384 GPUs: "
            f"{job['step_here_s']:.3g} s") in text
    days = job["best"]["finish_days"]
    assert f"the job takes {days:.3g} days, fewer than on 16,384 GPUs" in text
    assert days < base["best"]["finish_days"]


def test_round14_step_5s_restart_share_and_step_3s_interval_wait_for_their_guesses(client):
    """Round-14 cold reading of EP11, finding 4: the opening's wall-clock chart printed "5.1%
    restarts" (10-minute restarts), and R/(M + R) is near linear in R, so step 5's answer at 5
    minutes (2.6%) was half a figure on screen; finding 11: the best interval (11 s) and M
    gave the copy back by Young's rule, δ = τ²/2M, 16 of it step 3's answer. At the opening
    and step 5's first link the restarts' and the redone steps' shares (which the goodput and
    the saves' share leave) wait for step 5, the training and the saves drawn; the best
    interval waits for step 3 wherever the stop is the copy (async, peer), as δ does."""
    from app.charts.units import fmt_duration, fmt_pct
    from app.routers.failures import facts
    from tests.app.test_answers_hidden import masked, masked_keys, visible

    lesson = client.get(LESSON).text
    ids = re.findall(r'<section class="step" id="(step-\d+)"', lesson)
    f = facts()
    link = f"{LESSON}?{urlencode(f['async_best']['params'])}"  # interval=best
    for url, a in ((LESSON, api(client)), (link, f["async_best"]["api"])):
        html = client.get(url).text
        # (at step 5's link the interval is the best one: the state's own, in its controls)
        best = [("step-3", [fmt_duration(a["best_s"])])] if url == LESSON else []
        for step, hidden in (("step-5", [fmt_pct(a["chosen"]["restart"]),
                                         fmt_pct(a["chosen"]["rework"])]), *best):
            before = visible(masked(html, masked_keys(lesson, step)), ids, step)
            after = visible(masked(html, masked_keys(lesson, ids[ids.index(step) + 1])), ids,
                            ids[ids.index(step) + 1])
            for figure in hidden:
                assert not re.search(rf"(?<![\d.,]){re.escape(figure)}", before), (url, figure)
                assert re.search(rf"(?<![\d.,]){re.escape(figure)}", after), (url, figure)
        figure = page_figures(html)["failures-time"]
        lost = [o["traces"] for o in figure["layout"]["meta"]["owners"] if o["step"] == "step-5"]
        assert [2, 3] in lost and figure["layout"]["meta"]["partly"]
        assert [t["name"] for t in figure["data"][:2]] == ["training that counts",
                                                           "stopped for saves"]
    # Sync saves stop for the write, which step 2's mask holds: no step-3 key there, and the
    # best interval waits for step 2 (round-16 cold reading of EP11, finding 6).
    sync = page_figures(client.get(LESSON, params={"save": "sync"}).text)["failures-interval"]
    assert [o["step"] for o in sync["layout"]["meta"]["owners"]] == ["step-2"]


def test_round14_the_best_interval_says_what_it_is_and_is_not(client):
    """Round-14 cold reading of EP11, finding 6: the good case's card ("it saves every 11 s")
    and the bench's best-interval row taught the 11 s interval as the plan, while δ is the
    copy alone and the frameworks' staging adds tens to hundreds of ms a save. The card says
    it is the lab's optimum, not a practice, and prints no interval (with M it gives the
    copy back: finding 11); the row says the same; step 5's note prices staging with Young's
    rule from the lab's own M."""
    from html import unescape

    from app.charts.units import fmt_duration
    from app.routers.failures import VIEW, facts
    from labs.failures.lab import young

    good = VIEW.good.why
    assert "not a practice" in good and "tens of minutes" in good
    assert fmt_duration(api(client, **VIEW.good.query)["best_s"]) not in good
    assert not re.search(r"\d+ s\b", good)
    page = unescape(client.get(LESSON).text)
    row = page[page.index("Best interval (step 4)"):]
    row = re.sub(r"<[^>]+>", " ", row[:row.index("</tr>")])
    assert "not a plan" in row and "staging" in row
    a = facts()["async_best"]["api"]
    # Round 21 (issue 36, standard 4): the pricing sits in step 4, which asks how often to
    # save, after the best async interval it qualifies; step 5 keeps the storage's load.
    page = re.sub(r'<span class="term-tip".*?</span>', "", page, flags=re.S)
    four = " ".join(re.sub(r"<[^>]+>", " ", page[page.index('id="step-4"'):
                                                 page.index('id="step-5"')]).split())
    for d in (0.1, 0.5):
        assert fmt_duration(young(d, a["mtbi_s"])) in four
    assert (f"An async save stops only for the copy (step 3), δ = "
            f"{fmt_duration(a['checkpoint']['block_s'])}, so τ = {fmt_duration(a['young_s'])}: "
            "an optimum for the copy alone, not a plan") in four
    assert (f"at 100 ms a save Young gives √(2 × 0.1 s × {a['mtbi_s']:,.0f} s) = "
            f"{fmt_duration(young(0.1, a['mtbi_s']))}") in four
    assert "Real runs save every tens of minutes" in four


def test_round14_a_whole_numbers_bounds_read_as_whole_numbers(client):
    """Round-14 cold reading of EP11, finding 12a: storage_bw=4e12 was refused as "must be a
    whole number from 1e+08 to 1e+14", its bounds in the notation it refuses. Round 16, 11c:
    it is still refused; a whole number's control now takes one written with an exponent,
    as a number control does (EP01's params=7e9), its bounds kept."""
    assert api(client, storage_bw="4e12")["storage_bw"] == 4_000_000_000_000
    assert api(client, gpus="1.6384e4")["gpus"] == 16_384
    assert client.get(LESSON, params={"storage_bw": "4E12"}).status_code == 200
    for bad in ("4e14", "4.5e0", "1e-3", "1e999999999", "-2e9"):
        response = client.get("/api/failures", params={"storage_bw": bad})
        assert response.status_code == 422, bad
        message = response.json()["detail"][0]["msg"]
        assert "from 100,000,000 to 100,000,000,000,000" in message and "e+" not in message


def test_round14_the_days_past_the_timed_sizes_are_a_range(client):
    """Round-14 cold reading of EP11, finding 12d: past 65,536 GPUs the days panel took the
    step ideally, so sync days turned down (121 -> 89.3 -> 82.3) the moment the engine
    stopped timing it, right after step 7 taught that 4x the GPUs buy 1.10x. Each save's
    days there are a shaded range, from the ideal points up to the days with the step no
    faster than on 65,536 GPUs (the API's scale[].held); step 8's bound on 131,072 GPUs
    is that edge; the range waits for step 7 with the rest of the days panel."""
    from app.routers.failures import facts

    f = facts()
    body = api(client, **f["slow_best"]["params"])
    points = {p["gpus"]: p for p in body["scale"]}
    assert [n for n, p in points.items() if p["held"]] == [131_072, 262_144]
    for n in (131_072, 262_144):
        for save in ("sync", "async", "peer"):
            assert points[n]["held"][save]["finish_days"] > points[n][save]["finish_days"]
    assert points[131_072]["held"]["peer"]["finish_days"] == pytest.approx(
        f["peer_128k_bound"]["api"]["best"]["finish_days"], rel=1e-3)
    assert points[131_072]["held"]["sync"]["finish_days"] > points[65_536]["sync"]["finish_days"]
    html = client.get(LESSON, params=f["slow_best"]["params"]).text
    figure = page_figures(html)["failures-scale"]
    bands = figure["data"][6:]
    assert len(bands) == 6
    for save, (area, edge) in zip(("sync", "async", "peer"), zip(bands[::2], bands[1::2],
                                                                   strict=True), strict=True):
        assert area["fill"] == "toself" and edge["x"] == [65_536, 131_072, 262_144]
        assert edge["y"] == [round(points[65_536][save]["finish_days"], 4),
                             *(round(points[n]["held"][save]["finish_days"], 4)
                               for n in (131_072, 262_144))]
        assert area["y"][3:] == [round(points[n][save]["finish_days"], 4)
                                 for n in (262_144, 131_072, 65_536)]
    days = next(o for o in figure["layout"]["meta"]["owners"] if 1 in o["traces"])
    assert "step-7" in days["step"].split() and set(range(6, 12)) <= set(days["traces"])
    assert "shaded range runs up to the days with the step no faster than on 65,536" \
        in figure["summary"]
    # A job whose step is timed everywhere it is drawn has no range.
    assert not [p for p in api(client, gpus=1024)["scale"] if p["held"] and p["gpus"] <= 65_536]


def _seen(html: str) -> str:
    """What a student reads of a page as masked: no why, no tag, no figure's JSON."""
    return _outside_whys(re.sub(r'<script type="application/json".*?</script>', "", html,
                                flags=re.S))


def test_round16_step_1s_rate_line_and_the_per_gpu_rate_wait_for_its_guess(client):
    """Round-16 cold reading of EP11, finding 4: at the opening and both step-1 links the rate
    chart drew every size's rate (1,024 GPUs: 0.485 a day, a stop every 2 days, step 1's
    answer) and the bench printed "M = 3.09 h (5.78 years ÷ 16,384 GPUs)": 5.78 years ÷
    1,024. Until step 1's guess the line and the rule wait, and the per-GPU rate is printed
    nowhere; Llama 3's published point stays drawn. After the guess both show."""
    from app.charts.units import fmt_duration
    from app.routers.failures import facts
    from app.routers.failures_state import GPU_MTBI

    f = facts()
    years = fmt_duration(GPU_MTBI)
    for url in (LESSON, *(f"{LESSON}?" + "&".join(f"{k}={v}" for k, v in f[n]["params"].items())
                          for n in ("small", "llama"))):
        before, after = _before_guess(client, url, "step-1"), _before_guess(client, url, "step-2")
        rate = page_figures(before)["failures-rate"]
        rule = "grow in proportion to the GPUs"
        assert "y" not in rate["data"][0] and rule not in rate["summary"], url
        assert rate["data"][1]["y"], url  # the published point
        assert years not in _seen(before), url
        assert rule not in _seen(before), url
        line = page_figures(after)["failures-rate"]["data"][0]
        scale = api(client, **dict(re.findall(r"(\w+)=(\w+)", url.partition("?")[2])))["scale"]
        assert line["y"] == [pytest.approx(p["per_day"], rel=1e-4) for p in scale], url
        assert f"({years} ÷ " in _seen(after) and rule in _seen(after), url


def test_round16_at_sync_saves_the_best_interval_waits_for_step_2(client):
    """Round-16 cold reading of EP11, finding 6: at step 2's link (?save=sync) the row printed
    Young's 4.19 min beside M = 3.09 h, so δ = τ²/2M = 2.84 s, × 2 TB/s = 5.68 TB, ÷ 405.9B
    = 14 bytes a parameter, step 2's answer. At sync states the best interval (the row, the
    wall-clock chart's label, the interval chart's star and Young's line) and the saves' share
    (δ over the interval) wait for step 2."""
    from app.charts.units import fmt_duration, fmt_pct
    from app.routers.failures import facts

    url = f"{LESSON}?save=sync"
    a = facts()["sync"]["api"]
    before, after = _before_guess(client, url, "step-2"), _before_guess(client, url, "step-3")
    hidden = [fmt_duration(a["young_s"]), fmt_duration(a["daly_s"]),
              f"{fmt_pct(a['chosen']['blocking'])} waits for saves"]
    for figure in hidden:
        assert figure not in _seen(before), figure
        assert figure in _seen(after), figure
    charts = page_figures(before)
    assert "y" not in charts["failures-interval"]["data"][1]  # the star
    assert all(s["x0"] != a["young_s"] for s in charts["failures-interval"]["layout"]["shapes"])
    assert "x" not in charts["failures-time"]["data"][1]  # the saves' share
    assert page_figures(after)["failures-time"]["data"][1]["x"][0] == pytest.approx(
        100 * a["chosen"]["blocking"], rel=1e-3)


def test_round16_step_5s_first_link_waits_with_its_goodput(client):
    """Round-16 cold reading of EP11, finding 7: at step 5's first link (the 11 s best
    interval) the headline printed "Goodput 94.8%" and the saves' share showed, with the
    restarts' and redone steps' veiled: 100 − 94.8 − 0.05 = 5.2%, nearly all restarts, and
    half of it at R = 5 min step 5's 2.6%. Where redone steps are a tenth of the restarts or
    less, the goodput waits for step 5: the headline and every chart that draws it."""
    from app.charts.units import fmt_pct
    from app.routers.failures import facts

    a = facts()["async_best"]["api"]
    assert a["chosen"]["rework"] < a["chosen"]["restart"] / 10
    url = f"{LESSON}?interval={a['interval']}"
    before, after = _before_guess(client, url, "step-5"), _before_guess(client, url, "step-6")
    shown = fmt_pct(a["chosen"]["goodput"])
    assert shown not in _seen(before) and shown in _seen(after)
    charts = page_figures(before)
    assert "y" not in charts["failures-interval"]["data"][2]  # this interval's point
    assert all("x" not in t for t in charts["failures-time"]["data"][:1])


def test_round16_the_goodput_derive_tells_the_right_counts_from_its_named_mistakes():
    """Round-16 cold reading of EP11, finding 5: the checker accepted 85.0-86.2% on a job
    where the mistake its own solution names (half of the work, not of the cycle, lost)
    gave 86.15% and the renewal count 86.0%. On a job whose cycle is a quarter of M (a
    15-minute save every hour, R 10 min, M 5 h) the first order (67.3%) and the renewal
    count (68.1%) are right, and half of τ (69.3%) and 1 − δ/τ − (R + τ/2)/M (61.7%) are
    named mistakes, each told why."""
    from app.labkit import DRILLS
    from app.labkit.drills import check_drill
    from labs.failures.lab import goodput

    _view, drill = DRILLS["failures-goodput"]
    tau, delta, restart, mtbi = 60.0, 15.0, 10.0, 300.0  # minutes, as the question states
    assert "stops it for 15 minutes" in drill.question and "every 5 hours" in drill.question
    cycle = tau + delta
    first = 100 * tau / cycle * (1 - (restart + cycle / 2) / mtbi)
    renewal = 100 * goodput(tau, delta, 0.0, restart, mtbi, 1.0).goodput
    half_work = 100 * tau / cycle * (1 - (restart + tau / 2) / mtbi)
    subtracted = 100 * (1 - delta / tau - (restart + tau / 2) / mtbi)
    assert [round(v, 1) for v in (first, renewal, half_work, subtracted)] == [
        67.3, 68.1, 69.3, 61.7]

    def grade(value: float) -> dict:
        return check_drill(drill, f"{value:.1f}", attempt=1, hide_answers=True)

    assert grade(first)["status"] == grade(renewal)["status"] == "right"
    assert grade(half_work)["mistake"] == "half-work"
    assert grade(subtracted)["mistake"] == "shares-subtracted"
    low, high = drill.band()
    assert high < half_work - 0.5 and low > subtracted + 0.5
    solution = check_drill(drill, f"{first:.1f}", attempt=1, hide_answers=True)["message"]
    assert "(60 ÷ 75) × (1 − (10 + 37.5) ÷ 300)" in solution and "renewal count" in solution
    assert f"{renewal:.1f}%" not in solution  # round-20 audit N4: it told step 6 the answer


def test_round16_step_5_says_its_step_leaves_out_attention_and_which_way_it_errs(client):
    """Round-16 cold reading of EP11, finding 8: step 5's 6.23 s step is 6 FLOPs a parameter
    a token, and the why did not say it leaves out attention: 12·L·d·s = 12 × 126 × 16,384 ×
    8,192 = 203 GFLOP a token against 6N = 2,435, 4.2% (causal) to 8.3% more, so the step
    and the days err low if Llama 3's 400 TFLOP/s counts them."""
    from html import unescape

    from labs.model.presets import get_model

    m = get_model("llama-3.1-405b")
    attn, six_n = 12 * m.layers * m.heads * m.head_dim * 8192, 6 * m.params
    page = re.sub(r'<span class="term-tip".*?</span>', "", client.get(LESSON).text, flags=re.S)
    step = page[page.index('id="step-5"'):page.index('id="step-6"')]
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", step)).split())
    assert (f"12 × 126 layers × 16,384 wide × 8,192 tokens = {attn / 1e9:,.0f} GFLOP a token "
            f"against 6N = {six_n / 1e9:,.0f} GFLOP, {attn / 2 / six_n:.1%} to "
            f"{attn / six_n:.1%} more") in text
    assert "so it errs fast" in text and "400 TFLOP/s counts them, the lab's days err low" in text


def test_round17_each_case_says_what_its_headline_waits_for(client):
    """Round 17: the good case (async saves at the 11 s best interval) printed "Goodput ?"
    and a grey interval chart until step 5's guess, with nothing saying why, and read as a
    button held until step 5. Its goodput gives step 5's answer (test_round16_step_5s_first_
    link_waits_with_its_goodput), so it still waits; the button works from the first screen,
    its line says what waits and for which guess while it waits, and the headline's mask
    names the guess. The steps come from the case's own state (answer_keys)."""
    from html import unescape

    from app.routers.failures import VIEW
    from app.routers.failures_state import FailuresQuery, answer_keys, run

    # Round-20 cold reading R, finding 6: the bad case's goodput (32,768 GPUs, slow sync
    # saves) is half of step 7's days, and waits with them.
    notes = {"good": "Its goodput and days show after step 5's guess.",
             "bad": "Its goodput and days show after step 7's guess."}
    for kind, note in notes.items():
        case = getattr(VIEW, kind)
        keys = answer_keys(run(FailuresQuery(**case.query)))
        (step,) = dict.fromkeys((*keys["goodput"], *keys["days"]))
        later = f"step-{int(step.removeprefix('step-')) + 1}"
        line = re.compile(rf'id="case-{kind}-why"[^>]*>(.*?)</span>', re.S)
        waiting, guessed = (unescape(re.sub(r"<[^>]+>", "", line.search(
            _before_guess(client, LESSON, k))[1])) for k in (step, later))
        assert waiting.startswith(note) and waiting == note + " " + case.text, waiting
        assert guessed == case.text  # after the guess, the line as before
        url = f"{LESSON}?" + case.query_string
        verdict = re.search(r'<div class="verdict[^>]*>(.*?)</div>',
                            _before_guess(client, url, step), re.S)[1]
        masks = {"good": "Goodput ? (guess step 5): ", "bad": "Goodput ? (guess step 7): "}
        assert masks[kind] in " ".join(re.sub(r"<[^>]+>", "", verdict).split()), verdict


def test_round17_step_5_says_its_step_count_leaves_out_llama_3s_batch_ramp(client):
    """Round-17 cold reading of EP11, finding 17: "15.6T tokens ÷ 16M tokens a step = 929,832
    steps" counts every step at the final batch; Llama 3 ramped 4M -> 8M (at 252M tokens) ->
    16M (at 2.87T), sec. 3.4.1. The page says so, with the ramp's own count (computed, 2^20
    tokens a "M" as the lab's 16M = 2,048 x 8,192), and which way the days err."""
    from html import unescape

    from labs.failures.lab import llama3_ramp_steps, llama3_steps

    ramp = 252e6 / 4_194_304 + (2.87e12 - 252e6) / 8_388_608 + (15.6e12 - 2.87e12) / 16_777_216
    assert llama3_ramp_steps() == round(ramp) and llama3_steps() == 929_832
    page = re.sub(r'<span class="term-tip".*?</span>', "", client.get(LESSON).text, flags=re.S)
    step = page[page.index('id="step-5"'):page.index('id="step-6"')]
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", step)).split())
    assert ("4M tokens a step for the first 252M tokens, 8M up to 2.87T, then 16M, "
            f"{round(ramp):,} steps in all, {ramp / 929_832 - 1:.1%} more") in text
    assert "the days here err low" in text


def test_round17_step_7_says_stock_megatron_refuses_fewer_micro_batches_than_stages(client):
    """Round-17 cold reading of EP11, finding 18: step 7's interleaved schedule with 4
    micro-batches for 16 stages is one stock Megatron-LM refuses (Megatron-Core's
    schedules.py: 'The number of contiguous micro-batches in a virtual pipeline stage should
    range in [PP, M]'; before it, M % PP == 0). The note says so, and that the bubble is the
    lab's schedule; Llama 3 (sec. 3.3.2) modified its own for this reason."""
    from html import unescape

    page = client.get(LESSON).text
    step = page[page.index('id="step-7"'):page.index('id="step-8"')]
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", step)).split())
    assert ("Stock Megatron-LM would refuse this state: its interleaved schedule asks for at "
            "least p micro-batches") in text
    assert "is the lab's schedule, not stock Megatron's" in text


def test_round17_a_drill_predicts_youngs_interval_at_four_times_the_gpus(client):
    """Round-17 cold reading of EP11, finding 19: failures-mtbi (M = M_GPU ÷ N with another
    N) and failures-young (√(2δM) with new inputs) were substitutions. failures-mtbi gives way
    to a prediction that needs both of Young's inputs: at 4 times the GPUs with asynchronous
    saves, M falls to a quarter and so does δ (each rank's copy of a shard a quarter as big),
    so τ = √(2δM) falls to a quarter; with synchronous saves (δ the whole write) to half. The
    engine's τ at both sizes, for both kinds of save, decides it; no label holds a figure."""
    from app.charts.units import fmt_duration
    from app.labkit.drills import check_drill
    from app.lesson_drills import LESSON_DRILLS
    from app.lesson_drills.failures import INTERVAL_GPUS
    from app.routers.failures import VIEW

    drills = {d.id: d for d in LESSON_DRILLS["failures"]}
    assert "failures-mtbi" not in {d.id for d in VIEW.drills}
    drill = drills["failures-interval-4x"]
    html = client.get("/episodes/failures").text
    step = html[html.index('id="step-4"'):html.index('id="step-5"')]
    assert 'id="drill-failures-interval-4x"' in step
    small, large = INTERVAL_GPUS
    assert large == 4 * small

    def tau(save: str, gpus: int) -> float:
        return client.get("/api/failures", params={"save": save, "gpus": gpus}).json()[
            "young_s"]

    assert tau("async", large) / tau("async", small) == pytest.approx(0.25, rel=0.01)
    assert tau("sync", large) / tau("sync", small) == pytest.approx(0.5, rel=0.01)
    options = {o.key: o for o in drill.judge()}
    assert [k for k, o in options.items() if o.right] == ["quarter"]
    assert options["quarter"].figure == fmt_duration(tau("async", large))
    assert options["same"].figure == fmt_duration(tau("async", small))
    for _, label in drill.choices:
        assert not re.search(r"\d", label), label
    assert check_drill(drill, "half", 1, hide_answers=True)["status"] == "hint"
def _round18_step(client, n: int) -> str:
    import html as markup

    page = client.get("/episodes/failures").text
    part = page[page.index(f'id="step-{n}"'):page.index(f'id="step-{n + 1}"')]
    return " ".join(re.sub(r"<[^>]+>", " ", markup.unescape(part)).split())


def test_round18_step_6_says_where_the_labs_renewal_count_leaves_daly(client):
    """Round-18 cold reading E, finding 3: step 6 said 'The lab counts as Daly does' with
    (M + R)(e^{c/M} − 1), where Daly (2006) lets a failure strike the restart too and has
    M·e^{R/M}: the page now says the lab leaves those failures out, and what Daly has."""
    text = _round18_step(client, 6)
    assert "The lab counts as Daly does," not in text
    assert ("The lab counts as Daly (2006) does, a renewal count , but without failures during "
            "a restart") in text
    assert "Daly lets a failure strike the restart too and has M·e R/M where the lab has M + R" \
        in text


def test_round18_step_5s_limit_reads_llama_3s_figure_as_a_lower_bound(client):
    """Round-18 cold reading E, finding 10: step 5's limit said the lab 'errs high against
    Llama 3's figure', which is 'above 90%', a lower bound; now each left-out item lowers the
    lab's goodput."""
    text = _round18_step(client, 5)
    assert "errs high" not in text
    assert "Llama 3's “above 90%” is a lower bound" in text
    assert "failures during a restart: each would lower the lab's goodput" in text


def test_round_19_one_name_for_the_405b_job(client):
    """Round-19 cold reading Z, finding 13: step 1's inner predict, step 4's drill and the
    first decide called the job Llama 3.1 405B, the rest of the page Llama 3 405B, the name
    its report (Dubey et al. 2024) gives the run. The lesson's prose and drills use that one
    name; only the model control lists its preset's name."""
    page = client.get("/episodes/failures").text
    before, after = page.split('id="input-model"')
    lesson = before + after.split("</select>", 1)[1]
    assert "Llama 3.1" not in lesson
    assert lesson.count("Llama 3 405B") >= 4


def test_round_19_the_openings_best_interval_goodput_waits_for_step_5(client):
    """Round-19 cold reading Z, finding 4: at the opening, before any guess, the wall-clock
    chart's best-interval bar read 94.8%, the GPUs chart '16,384: 94.8%' and its caption 'keep
    94.8% of the wall clock', and the interval curve peaked at 94.77%: 100% less it is nearly
    all restarts at R = 10 min, and half of that is step 5's 2.6% at 5 min. Each now waits for
    step 5's guess: the training bars, the GPUs chart's goodput panel, label and caption, and
    the interval chart whole; the captions carry the figure in a step-5 mask."""
    from app.charts.units import fmt_pct
    from app.routers.failures import FailuresQuery, run
    from app.routers.failures_state import figures

    result = run(FailuresQuery())
    best = fmt_pct(result.best.goodput)
    assert result.best.rework < result.best.restart / 10  # the goodput gives the restarts
    figs = figures(result)

    def owners(name):
        return figs[name]["layout"]["meta"]["owners"]

    time = [o for o in owners("time") if 0 in o["traces"]]
    assert time and all("step-5" in o["step"].split() for o in time)
    assert any(o["summary"][0] == f"{best} trains there" for o in time)
    scale = next(o for o in owners("scale") if o.get("annotations") == [0])
    assert "step-5" in scale["step"].split() and scale["traces"] == [0, 2, 4]
    assert scale["summary"][0] == f"keep {best} of the wall clock"
    days = next(o for o in owners("scale") if 1 in o["traces"])
    assert "step-5" in days["step"].split()
    interval = owners("interval")[0]
    assert "step-5" in interval["step"].split()
    assert interval["traces"] == list(range(len(figs["interval"]["data"])))
    page = client.get(LESSON).text
    for caption in (f"{best} trains there", f"keep {best} of the wall clock"):
        assert re.search(r'data-after-guess="[^"]*step-5[^"]*" data-mask="[^"]*">'
                         + re.escape(caption), page), caption


# ---- Round-20 cold reading R (issue 36) ----


def _step_text(html: str, n: int) -> str:
    import html as markup

    end = html.index(f'id="step-{n + 1}"') if f'id="step-{n + 1}"' in html else None
    part = html[html.index(f'id="step-{n}"'):end]
    return " ".join(re.sub(r"<[^>]+>", " ", markup.unescape(part)).split())


def test_round20_step_4_prints_no_form_of_youngs_rule_before_its_guess(client):
    """Round-20 cold reading R, finding 3: beside step 4's 'if a save cost four times as much,
    the best interval would be…' its inner predict read 'Young's interval τ = √(2·δ·M)
    becomes…', and the derive's hint after a wrong answer printed τ = √(2·δ·M): √4 = 2 gave
    the answer. Before step 4's guess no √ form shows in the step, and the hint says where
    the rule comes from (the saves' share against half an interval lost), not its form."""
    import html as markup

    from app.labkit import DRILLS
    from app.labkit.drills import check_drill

    before = _before_guess(client, LESSON, "step-4")
    seen = markup.unescape(_seen(before))
    step = seen[seen.index("4. How often to save"):seen.index("5. Goodput")]
    assert "√" not in step
    _view, young = DRILLS["failures-young"]
    hint = check_drill(young, "50", attempt=1, hide_answers=True)["message"]
    assert "√" not in hint and "δ/τ" in hint and "τ/(2M)" in hint
    _view, inner = DRILLS["failures-interval-4x"]
    assert "√" not in inner.question and inner.question.endswith("Young's interval becomes…")


def test_round20_best_interval_links_ask_for_the_policy_not_its_seconds(client):
    """Round-20 cold reading R, finding 4: step 4's links were ?save=sync&interval=250 and
    ?save=sync&storage_bw=500000000000&interval=496, so the status bar gave 496/250 ≈ 2, step
    4's answer, before the guess. A link to a best interval asks for interval=best, which
    the server resolves (GET /api/failures answers the rounded best, OpenAPI documents the
    value, the page's interval control selects it): no lesson link carries a best
    interval's seconds."""
    from app.routers.failures import facts

    html = client.get(LESSON).text
    step4 = html[html.index('id="step-4"'):html.index('id="step-5"')]
    hrefs = re.findall(r'class="try" href="([^"]+)"', step4)
    assert len(hrefs) == 3
    intervals = [dict(re.findall(r"(\w+)=(\w+)", h.partition("?")[2])).get("interval")
                 for h in hrefs]
    assert intervals == ["best", "best", None]  # the third: every 30 min, the default
    f = facts()
    # every lesson link to a state at its best interval asks for "best"
    for href in re.findall(r'class="try" href="([^"]+)"', html):
        query = dict(re.findall(r"(\w+)=(\w+)", href.partition("?")[2]))
        if "interval" in query and query["interval"] != "best":
            answer = api(client, **query)
            assert int(query["interval"]) != round(answer["best_s"]), href
    for name in ("sync_best", "sync_4x"):
        params = f[name]["params"]
        assert params["interval"] == "best"
        answer = api(client, **params)
        assert answer["interval"] == answer["best_s"]  # whole steps (round 21, finding 15)
        assert answer == f[name]["api"]
    page = client.get(LESSON, params=f["sync_4x"]["params"]).text
    assert re.search(r'<option value="best"\s+selected>', page)
    assert "interval=best" in page.split('id="failures-section"')[1]  # the state, shared
    assert api_messages(client, "failures", {"interval": "longest"})["interval"].endswith(
        "must be a whole number from 1 to 1,000,000, or best")
    spec = client.get("/openapi.json").json()["paths"]["/api/failures"]["get"]["parameters"]
    interval = next(p for p in spec if p["name"] == "interval")
    assert "or best" in interval["description"]
    assert {"const": "best", "type": "string"} in interval["schema"]["anyOf"] or any(
        s.get("enum") == ["best"] for s in interval["schema"]["anyOf"])


def test_round20_step_7s_goodput_panel_waits_with_its_days(client):
    """Round-20 cold reading R, finding 6: at step 7's first link (32,768 GPUs, sync saves to
    20 GB/s) the GPUs chart drew '32,768: 64.4%' and the sync goodput falling to 50.5% at
    65,536, the goodputs step 7's why turns into its days. At step 7's slow saves the
    goodput panel waits for step 7's guess, as the days do, and shows after it; on another
    size than 16,384 (whose goodput step 6 asks) so does the headline's goodput."""
    from app.charts.units import fmt_pct
    from app.routers.failures import facts

    f = facts()
    for name in ("slow_32k", "slow_64k", "slow_best"):
        url = f"{LESSON}?" + "&".join(f"{k}={v}" for k, v in f[name]["params"].items())
        a = f[name]["api"]
        label = f"{a['gpus']:,}: {fmt_pct(a['best']['goodput'])}"
        before = page_figures(_before_guess(client, url, "step-7"))["failures-scale"]
        after = page_figures(_before_guess(client, url, "step-8"))["failures-scale"]
        for trace in (0, 2, 4):  # the goodput panel's three saves
            assert "y" not in before["data"][trace], (name, trace)
        assert label not in json.dumps(before, ensure_ascii=False), name
        if a["gpus"] != 16_384:  # on 16,384 GPUs the goodput is step 6's, shown after it
            verdict = re.search(r'<div class="verdict[^>]*>(.*?)</div>',
                                _before_guess(client, url, "step-7"), re.S)[1]
            assert fmt_pct(a["best"]["goodput"]) not in verdict, name
        assert after["data"][0]["y"] == [pytest.approx(100 * p["sync"]["goodput"], abs=1e-3)
                                         for p in a["scale"]], name
        assert label in json.dumps(after, ensure_ascii=False), name
        goodput = next(o for o in after["layout"]["meta"]["owners"] if 0 in o["traces"])
        assert "step-7" in goodput["step"].split(), name


def test_round20_step_5s_derive_leaves_step_6s_answer_to_step_6(client):
    """Round-20 cold reading R, finding 7: step 5's derive said on a right answer 'the first
    order counts a little too much loss', and step 6's right option was the one with that
    phrase. The derive ends at the renewal count, 'also right'; step 6's why says which way
    the first order errs, after its own guess (no drill figure: the drill's answer is on no
    page before it is answered)."""
    from app.labkit import DRILLS
    from app.labkit.drills import check_drill
    from app.routers.failures_drills import goodput_drill_exact, goodput_drill_first

    _view, drill = DRILLS["failures-goodput"]
    right = check_drill(drill, f"{goodput_drill_first():.1f}", attempt=1,
                        hide_answers=True)["message"]
    assert "is also right." in right
    assert "too much loss" not in right and "too little" not in right
    # Round-20 audit, N4: nor the renewal count's figure, above the first order's
    assert f"{goodput_drill_exact():.1f}%" not in right
    html = client.get(LESSON).text
    assert "the first order counts too much loss, a little on step 5's drill's short cycle, " \
        "far more here." in _step_text(html, 6)


def test_round20_the_stop_per_save_is_delta_and_l_is_named(client):
    """Round-20 cold reading R, findings 11 and 13: the bench's note called the stop per
    save b where steps 4-6 and the best-interval row say δ, and added L to M + R where step
    6's why did not name it; step 2 said 'Both answers are right' of two byte counts."""
    html = client.get(LESSON).text
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "A cycle of c = τ + δ seconds" in text and "δ the stop per save" in text
    assert "b the stop per save" not in text and "τ + b" not in text
    assert "so a cycle takes (M + R + L)(e c/M − 1) , L the async write or peer send not yet " \
        "done (0 for sync saves)." in _step_text(html, 6)
    step2 = _step_text(html, 2)
    assert "Both counts are right; the lab uses 14 B." in step2
    assert "Both answers are right" not in step2


def test_round20_step_1s_limit_says_m_is_a_wall_clock_rate(client):
    """Round-20 cold reading R, finding 17: 419 stops in 54 days is a wall-clock rate, where
    the lab lets failures strike only while a cycle runs; with Llama 3's above-90% effective
    time, per training hour M is up to 10% shorter. Step 1's limit says so, and which way
    the lab errs."""
    assert ("M is Llama 3's wall-clock rate, restarts and saves included; failures strike "
            "only while the job trains, above 90% of Llama 3's time, so per hour of training "
            "M is up to 10% shorter and the lab's losses err low.") in _step_text(
                client.get(LESSON).text, 1)


def test_round_21_the_best_interval_is_whole_steps_and_step_5_times_what_it_says(client):
    """Round-21 cold reading R, finding 15: step 5 said the best async interval was 11 s and,
    a save coming between steps, every second step (12.5 s), and the note's storage load
    followed the 12.5 s, while the engine timed goodput at 10.98 s. A save starts only
    between steps: the engine rounds Daly's interval (floored) up to whole steps, the
    interval control's best is that, and the prose and the note quote the interval timed."""
    from app.charts.units import fmt_duration
    from app.routers.failures import facts

    for params in ({"interval": "best"}, {"interval": "best", "save": "sync"},
                   {"interval": "best", "save": "sync", "storage_bw": 20_000_000_000}):
        a = api(client, **params)
        step, least = a["step_here_s"], max(a["daly_s"], a["floor_s"])
        k = round(a["best_s"] / step)
        assert a["best_s"] == pytest.approx(k * step) and (k - 1) * step < least <= k * step
        assert a["interval"] == a["best_s"] == a["best"]["interval_s"]
        assert a["chosen"] == a["best"]
    a = facts()["async_best"]["api"]
    k = round(a["interval"] / a["step_here_s"])
    assert k == 2 and a["daly_s"] < a["interval"]
    five = re.sub(r" ([.,:])", r"\1", _step_text(client.get(LESSON).text, 5))
    assert (f"Daly's async interval is {fmt_duration(a['daly_s'])}: a save starts between "
            f"steps, so the best is every second step, {fmt_duration(a['interval'])}.") in five
    load = 100 * a["checkpoint"]["write_s"] / a["interval"]
    assert (f"{fmt_duration(a['checkpoint']['write_s'])} of every "
            f"{fmt_duration(a['interval'])}, keeping a 2 TB/s file system {load:.0f}% busy") in five
