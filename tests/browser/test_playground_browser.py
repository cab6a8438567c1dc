"""EP12 in Chromium: one control redraws several labs' diagrams, the state survives a reload,
the cheat sheet recomputes, the A/B page draws both sides; and EP09's embed keeps a new
recipe's fields."""

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import commit_guess_by_script, look_at, sized_page, wait_drawn

# Every chart that depends on the model (the Gantt chart does not: it is the schedule alone).
CHARTS = ("memory-chart", "recipe-step", "recipe-memory", "zero-memory", "tp-efficiency",
          "dp-scaling")
SUMMARIES = "ids => ids.map(id => document.getElementById(id).dataset.summary)"


def test_one_control_redraws_every_labs_diagram(page):
    # Data parallelism alone: EP02's and EP03's labs draw it too (a plan with TP or PP is
    # outside them, and their panels say so).
    page.goto("/episodes/playground?tp=1&pp=1&dp=32&microbatches=1")
    wait_drawn(page)
    before = page.evaluate(SUMMARIES, list(CHARTS))
    assert all(before)
    page.locator("#input-model").select_option("llama-3.1-8b")
    page.wait_for_url("**model=llama-3.1-8b**")
    assert "=&" not in page.url and not page.url.endswith("=")  # empty controls left out
    wait_drawn(page)
    for chart in CHARTS:  # those out of sight are drawn as they scroll into view
        look_at(page, chart)
        assert "llama-3.1-8b" in page.evaluate(f"document.getElementById('{chart}').dataset.drawn")
    after = page.evaluate(SUMMARIES, list(CHARTS))
    changed = [chart for chart, a, b in zip(CHARTS, before, after, strict=True) if a != b]
    # All redrawn (above); all changed but EP02's speed-ups: since 25f7cbc its compute is
    # 6·P·T ÷ rate and its all-reduce moves bytes in proportion to P too, so a dense model's
    # size cancels out of them (its crossover T* is P-free) and 70B and 8B scale alike.
    assert changed == [chart for chart in CHARTS if chart != "dp-scaling"], (before, after)


def test_the_state_survives_a_reload(page):
    page.goto("/episodes/playground")
    wait_drawn(page)
    page.locator("#input-schedule").select_option("gpipe")
    page.wait_for_url("**schedule=gpipe**")
    page.locator("#input-microbatches").fill("4")
    page.wait_for_url("**microbatches=4**")
    look_at(page, "pipeline-gantt")
    drawn = page.evaluate("document.getElementById('pipeline-gantt').dataset.drawn")
    assert "microbatches=4" in drawn
    url, summary = page.url, page.evaluate(SUMMARIES, ["pipeline-gantt"])
    page.reload()
    wait_drawn(page)
    assert page.url == url
    assert page.locator("#input-schedule").input_value() == "gpipe"
    assert page.locator("#input-microbatches").input_value() == "4"
    assert page.evaluate(SUMMARIES, ["pipeline-gantt"]) == summary


def test_an_inconsistent_control_keeps_the_charts_and_says_why(page):
    page.goto("/episodes/playground")
    wait_drawn(page)
    drawn = page.evaluate("() => document.getElementById('tp-efficiency').dataset.summary")
    page.locator("#input-tp").fill("16")
    page.wait_for_url("**tp=16**")
    expect(page.locator('[data-testid="panel-error-tp"]')).to_contain_text("KV heads")
    assert page.evaluate("() => document.getElementById('tp-efficiency').dataset.summary") == drawn


def test_cheat_sheet_recomputes_for_a_new_model(page):
    page.goto("/episodes/playground/cheatsheet")
    first = page.locator('[data-testid="result-state16"]').inner_text()
    assert first == "1.13 TB"
    page.locator("#input-model").select_option("llama-3.1-405b")
    page.wait_for_url("**model=llama-3.1-405b**")
    expect(page.locator('[data-testid="result-state16"]')).to_have_text("6.49 TB")
    link = page.locator("#line-bubble a.step-link")
    assert link.get_attribute("href").endswith("#step-2")


def test_compare_page_draws_both_sides_and_opens_each(page):
    page.goto("/episodes/playground/compare?a=tp%3D1%26pp%3D1%26dp%3D32%26microbatches%3D1")
    wait_drawn(page)
    for side in ("a", "b"):
        assert page.locator(f"#{side}-recipe-memory .main-svg").count() >= 1
    assert page.locator("tr.differs").count() >= 4
    page.locator('[data-testid="open-a"]').click()
    page.wait_for_url("**/episodes/playground?tp=1&pp=1&dp=32&microbatches=1")
    wait_drawn(page)
    assert page.locator("#input-dp").input_value() == "32"


def test_placement_embed_takes_a_new_recipes_fields(page):
    page.goto("/embed/placement?controls=1")
    wait_drawn(page)
    assert page.locator("#input-train_gpus").input_value() == "8"
    page.locator("#input-preset").select_option("glm-4.7")
    page.wait_for_url("**preset=glm-4.7**")
    wait_drawn(page)
    assert "controls=1" in page.url
    assert page.locator("#input-train_gpus").input_value() == "64"
    assert page.locator("input[type=hidden][name=preset]").input_value() == "glm-4.7"
    url = page.url
    page.locator("#more-controls summary").click()  # the KV dtype sits behind it (EP09)
    page.locator("#input-kv_dtype").select_option("fp8")
    page.wait_for_function(
        "() => document.querySelector('#embed-body [data-state]').dataset.state.includes('fp8')")
    assert page.url == url  # an embed's form never touches the iframe's history
    expect(page.locator("#embed-body")).to_contain_text("GLM-4.7")


# Whether a text shows on screen, uncovered: some text node holding it whose box's centre is
# inside the window and hits the node's own element (not a sticky bench or bar over it).
TEXT_SHOWN = """([root, text]) => {
    const walk = document.createTreeWalker(document.querySelector(root), NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
        const at = node.textContent.indexOf(text);
        if (at < 0) continue;
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + text.length);
        const r = range.getBoundingClientRect();
        const x = r.left + r.width / 2, y = r.top + r.height / 2;
        if (!r.width || x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) continue;
        const hit = document.elementFromPoint(x, y);
        if (hit && (hit === node.parentElement || node.parentElement.contains(hit))) return true;
    }
    return false;
}"""


# Whether a chart's centre is on screen and not covered (tests/browser/test_lesson_view.py).
CHART_SEEN = """(id) => {
    const el = document.getElementById(id), r = el.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return r.top >= 0 && r.bottom <= innerHeight && !!hit && el.contains(hit);
}"""


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["laptop", "phone"])
def test_steps_1_and_5s_moves_draw_what_they_ask_in_view(browser, live_server, size):
    """Round-16 cold reading of EP12, findings 1 and 4: step 1 asks the bytes on the heaviest
    GPU at 16,384 tokens, and step 5 the forward's wait per layer over Ethernet, where its move
    drew only efficiencies. Once guessed, each step's link draws, on its chart in view, what it
    asks: EP01's ledger at the new total, and EP04's time per layer, its one all-reduce's time
    (half the forward's wait) on its label and the exposed collectives as a bar, with the
    panel's "Forward's wait per layer" tile above it in view too (round 18: the chart's title
    was brought to the view's top and the tile scrolled out above it). (Round-15, 13e: step
    1's two audits were never in view together; it no longer compares them.)"""
    from app.charts.units import fmt_bytes, fmt_ms
    from app.routers.playground import facts

    f = facts()
    e = f["tp_eth"]["api"]["panels"]["tp"]["answer"]
    asked = {1: ("memory-chart",
                 fmt_bytes(f["long"]["api"]["panels"]["memory"]["answer"]["total_bytes"])),
             5: ("tp-cost", f"{1e3 * e['comm_s']:.2f} ms of collectives")}
    wait = fmt_ms(e["forward_comm_s"])  # the TP panel's "Forward's wait per layer" tile
    with sized_page(browser, live_server, *size, touch=True) as page:
        page.goto("/episodes/playground")
        wait_drawn(page)
        for step, (chart, figure) in asked.items():
            commit_guess_by_script(page, step)
            link = page.locator(f"#step-{step} a.try").first
            href = link.get_attribute("href")
            link.click()
            page.wait_for_url("**" + href.split("?", 1)[1] + "**")
            wait_drawn(page)
            assert page.evaluate(CHART_SEEN, chart), (step, chart)
            if step == 5:  # the tile of the figure it asks, above the chart, in view with it
                assert page.evaluate(TEXT_SHOWN, ["#panel-tp dl.readout", wait]), wait
            summary = page.evaluate(f"document.getElementById('{chart}').dataset.summary")
            assert figure in summary, (step, summary)
        label = page.evaluate("""() => [...document.querySelectorAll('#tp-cost .annotation-text')]
            .map(t => t.textContent).join(' ')""")
        assert f"one all-reduce: {1e3 * e['collective_s']:.2f} ms" in label, label
