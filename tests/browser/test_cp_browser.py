"""EP06 in real Chromium against the real server: the mask changes with the layout, the
controls and URL move together, cases, drills and each diagram's embed."""

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (
    api_json,
    commit_guess,
    follow,
    look_at,
    show_me,
    sized_page,
    try_href,
    wait_drawn,
)

LESSON = "/episodes/context-parallel"


def mask_owners(page) -> list:
    """The first column of the drawn mask: the rank computing each query row."""
    look_at(page, "cp-mask")  # a chart out of sight is drawn when it scrolls into view
    return page.evaluate(
        "() => document.querySelector('#cp-mask').data[0].z.map(row => row[0])")


def bars(page) -> list:
    """The pairs per rank as drawn. They answer step 2's prediction (a zigzag state's, step
    3's): before its guess the chart is drawn veiled (static/js/lab.js), so the whys are
    opened first ("show me")."""
    look_at(page, "cp-pairs")
    page.evaluate("() => ['#step-2', '#step-3'].forEach(s => { document.querySelector("
                  "s + ' .predict-beat > details.why').open = true; })")
    page.wait_for_function("() => !document.getElementById('cp-pairs').hasAttribute('data-veiled')")
    return page.evaluate("() => document.querySelector('#cp-pairs').data[0].y")


def imbalance(page) -> float:
    return float(page.locator("#cp-mask-section").get_attribute("data-imbalance"))


def test_the_mask_changes_with_the_layout(page, live_server):
    page.goto(f"{LESSON}?tokens=8&cp=2&layout=contiguous")
    wait_drawn(page)
    assert mask_owners(page) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert bars(page) == [10, 26]
    page.locator("#input-layout").select_option("zigzag")
    page.wait_for_url("**layout=zigzag**")
    wait_drawn(page)
    assert mask_owners(page) == [0, 0, 1, 1, 1, 1, 0, 0]
    assert bars(page) == [18, 18]
    assert imbalance(page) == 1.0
    page.locator("#input-layout").select_option("ulysses")
    page.wait_for_url("**layout=ulysses**")
    wait_drawn(page)
    look_at(page, "cp-mask")
    panels = page.evaluate("() => document.querySelector('#cp-mask').data.length")
    assert panels == 2  # one full triangle per rank, for its heads
    expect(page.locator("#cp-mask-section .chart-note").first).to_contain_text("heads 0–31")


def test_slider_changes_mask_and_url_and_reload_keeps_it(page, live_server):
    page.goto(f"{LESSON}?tokens=16&cp=4&layout=zigzag")
    wait_drawn(page)
    page.locator("#input-tokens").fill("32")
    page.wait_for_url("**tokens=32**")
    wait_drawn(page)
    assert len(mask_owners(page)) == 32
    expected = api_json(live_server, "cp", "tokens=32&cp=4&layout=zigzag")
    assert bars(page) == [r["causal_pairs"] for r in expected["ranks"]]
    page.reload()
    wait_drawn(page)
    assert len(mask_owners(page)) == 32
    assert page.locator("#input-tokens").input_value() == "32"


def test_a_refused_layout_shows_why_and_keeps_the_mask(page):
    page.goto(f"{LESSON}?tokens=12&cp=4&layout=contiguous")
    wait_drawn(page)
    before = mask_owners(page)
    page.locator("#input-layout").select_option("zigzag")  # 12 does not divide by 8
    expect(page.locator("#error-tokens")).to_contain_text("divide by 8")
    assert mask_owners(page) == before
    assert "zigzag" not in page.url
    page.locator("#input-tokens").fill("16")
    page.wait_for_url("**layout=zigzag**")
    wait_drawn(page)
    expect(page.locator("#error-tokens")).to_be_empty()
    assert imbalance(page) == 1.0


def test_good_and_bad_cases(page):
    page.goto(LESSON)
    wait_drawn(page)
    # Round-18 cold reading of EP06, finding 13: the zigzag mask answers step 3's choice, so
    # the good case is held until that guess (follow releases it with the guess).
    expect(page.locator("[data-case=good]")).to_have_attribute("aria-disabled", "true")
    follow(page.locator("[data-case=bad]"), "layout=contiguous")
    assert bars(page)[-1] == 36 + 37 + 38 + 39 + 40  # 40 tokens: the last rank's 5 rows
    follow(page.locator("[data-case=good]"), "layout=zigzag")
    assert bars(page) == [260] * 8
    assert page.locator("#input-cp").input_value() == "8"


def test_cost_chart_follows_the_link(page, live_server):
    page.goto(f"{LESSON}?tokens=16&cp=4&link=ib-ndr")
    wait_drawn(page)
    page.locator("#input-link").select_option("nvlink-4")
    page.wait_for_url("**link=nvlink-4**")
    wait_drawn(page)
    look_at(page, "cp-cost")
    ring = page.evaluate("() => document.querySelector('#cp-cost').data[0].y")
    assert ring[3:] == [None, None, None]  # NVLink 4 reaches 8 GPUs
    show_me(page, "why-cp-4")  # Llama's bytes wait for step 4 (GPT-3's for step 6)
    shown = page.locator("[data-testid=comm-bytes]").inner_text()
    expected = api_json(live_server, "cp", "tokens=16&cp=4&link=nvlink-4")
    assert shown == f"{expected['comm_bytes_per_gpu'] / 1e6:.0f} MB"


def test_drill_and_embeds(page, live_server):
    page.goto(LESSON)
    wait_drawn(page)
    # The derive drill at the end (step 6 holds the decide drill on the layouts' bytes).
    for guess, feedback in (("40", "Hint"), ("129", "Right")):
        drill = page.locator("form#drill-cp-busiest-contiguous")
        drill.locator("input[name=answer]").fill(guess)
        drill.locator("button").click()
        expect(page.locator("#drill-cp-busiest-contiguous .drill-feedback")).to_contain_text(
            feedback)

    for name in ("mask", "pairs", "cost"):
        page.goto(f"/embed/cp/{name}?tokens=8&cp=2&layout=zigzag")
        wait_drawn(page)
        assert page.locator("form.controls").count() == 0
        assert page.locator(f"#cp-{name} .main-svg").count() >= 1
        assert page.locator(".chart").count() == 1


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_the_mask_is_in_view_with_its_layout_control(browser, live_server, width, height):
    with sized_page(browser, live_server, width, height) as page:
        page.goto(f"{LESSON}?tokens=16&cp=4")
        wait_drawn(page)
        page.locator("#cp-mask").scroll_into_view_if_needed()
        box = page.locator("#cp-mask").bounding_box()
        assert box and box["width"] > 0.5 * min(width, 700)
        assert 0 <= box["y"] < height
        # Round-17 cold reading of EP06, finding 3: the crossover's plot was 98 px tall at
        # 390x844 under a five-row legend. Drawn whole (every why opened), its plot is a
        # real height at both sizes and both axis titles are drawn inside the chart.
        page.evaluate("() => document.querySelectorAll('.predict-beat > details.why')"
                      ".forEach(d => { d.open = true; })")
        look_at(page, "cp-crossover")
        page.wait_for_function("() => !document.getElementById('cp-crossover')"
                               ".hasAttribute('data-veiled')")
        plot = page.evaluate("() => document.getElementById('cp-crossover')._fullLayout._size")
        assert plot["h"] >= 150, plot
        chart = page.locator("#cp-crossover").bounding_box()
        for title in (".g-xtitle", ".g-ytitle"):
            text = page.locator(f"#cp-crossover {title}")
            assert (text.text_content() or "").strip()
            at = text.bounding_box()
            assert at and chart["x"] <= at["x"] and at["x"] + at["width"] <= chart["x"] + chart[
                "width"] and chart["y"] <= at["y"] and at["y"] + at["height"] <= chart["y"] + \
                chart["height"], (title, at, chart)


def bench_and_labels(page, chart: str) -> str:
    """The bench's text and its charts' labels, the step's chart drawn."""
    look_at(page, chart)
    labels = page.evaluate("""() => [...document.querySelectorAll('#bench-view .js-plotly-plot')]
        .flatMap(el => (el.layout.annotations || []).map(a => a.text)).join(' | ')""")
    return page.locator("#bench-view").inner_text() + " | " + labels


@pytest.mark.parametrize("step, chart, link, query, figure", [
    (2, "cp-pairs", "64 tokens, CP 8", "tokens=64&cp=8",
     lambda api: f"{api['ranks'][7]['causal_pairs']:,}"),
    (4, "cp-cost", "All-gather, 131,072 tokens, CP 8",
     "tokens=64&cp=8&seq_len=131072&layout=allgather&link=nvlink-4",
     lambda api: f"{api['kv_held_bytes'] / 1e6:.0f} MB"),
    (6, "cp-cost", "GPT-3, ring CP 16",
     "tokens=64&cp=16&seq_len=131072&layout=zigzag&link=ib-ndr&model=gpt-3-175b",
     lambda api: f"{api['comm_bytes_per_gpu'] / 1e9:.3g} GB"),
    (7, "cp-cost", "4k tokens on 25 Gb/s Ethernet",
     "tokens=64&cp=8&seq_len=4096&layout=zigzag&link=eth-25g",
     lambda api: f"{api['exposed_s'] * 1e3:.3g} ms")])
def test_a_steps_state_before_the_guess_shows_the_move_not_the_answer(
        page, client, live_server, step, chart, link, query, figure):
    """Round-6 cold reading of EP06, item 1: each step's try link, followed before the guess,
    put the figure its prediction asks for on the bench (484 pairs on the last bar and in the
    caption; the all-gather's 537 MB held; GPT-3's 6.04 GB; the 4.94 ms exposed). The link is
    held until the guess now (lab.js holdMove), but its state can still be reached before it
    (its URL shared, the controls): there the figure stays masked until that step's guess (an
    earlier step's guess on the same diagram does not lift it), and shows after."""
    answer = figure(api_json(live_server, "cp", query))
    href = try_href(client, LESSON, step, link)
    assert query.split("&")[-1] in href
    page.goto(href)  # the step's state, opened by its URL before the guess
    wait_drawn(page)
    # The step before, guessed: its diagram may be this one.
    show_me(page, f"why-cp-{step - 1}")
    assert answer not in bench_and_labels(page, chart)
    commit_guess(page, step)
    assert answer in bench_and_labels(page, chart)
