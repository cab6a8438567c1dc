"""EP01 in real Chromium against the real server (uvicorn on a free port of 127.0.0.1)."""

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import answer_drill, api_json, commit_guess, follow, wait_drawn

CHART = "#memory-chart"


def open_lesson(page, query: str = "", guessed: bool = False):
    """The lesson at ``query``; ``guessed``: step 1 guessed, so a training bill is drawn (it
    waits for step 1's guess: its total over its weights is the ratio step 1 asks)."""
    page.goto("/episodes/memory" + (f"?{query}" if query else ""))
    wait_drawn(page)
    if guessed:
        commit_guess(page, 1)
        wait_drawn(page)


def shown_total(page) -> float:
    return float(page.locator("#memory-ledger").get_attribute("data-total-bytes"))


def chart_total_gb(page) -> float:
    """The sum of the stacked bars as plotly holds them, in GB."""
    return page.evaluate(
        "() => document.querySelector('#memory-chart').data.reduce((a, t) => a + t.y[0], 0)"
    )


def test_first_load_draws_the_bill(page, live_server):
    open_lesson(page, guessed=True)
    expected = api_json(live_server, "memory", "")
    assert chart_total_gb(page) == pytest.approx(expected["total_bytes"] / 1e9, rel=1e-3)
    expect(page.locator(".verdict")).to_contain_text("Does not fit")
    assert page.locator(f"{CHART} .main-svg").count() >= 1


def test_moving_a_slider_updates_chart_and_url_then_reload_and_back_restore(page, live_server):
    open_lesson(page, guessed=True)
    before = shown_total(page)
    page.locator("#input-micro_batch").fill("4")
    page.wait_for_url("**micro_batch=4**")
    wait_drawn(page)
    after = shown_total(page)
    assert after > before
    expected = api_json(live_server, "memory", "micro_batch=4")["total_bytes"]
    assert after == pytest.approx(expected, rel=1e-9)
    assert chart_total_gb(page) == pytest.approx(expected / 1e9, rel=1e-3)

    page.reload()
    wait_drawn(page)
    assert shown_total(page) == pytest.approx(after, rel=1e-9)
    assert page.locator("#input-micro_batch").input_value() == "4"

    # A choice pushes a history entry (a slider step only replaced the URL); back restores
    # the slider's state in place, the chart kept and redrawn.
    page.locator("#input-model").select_option("llama-3.1-8b")
    page.wait_for_url("**model=llama-3.1-8b**")
    wait_drawn(page)
    page.evaluate("window.__sameDocument = true")
    page.go_back()
    page.wait_for_url(lambda url: "llama-3.1-8b" not in url)
    page.wait_for_function(
        "() => !document.querySelector('#memory-ledger').dataset.state.includes('8b')")
    wait_drawn(page)
    assert page.evaluate("window.__sameDocument") is True  # swapped in place, no reload
    assert shown_total(page) == pytest.approx(after, rel=1e-9)
    assert page.locator("#input-micro_batch").input_value() == "4"
    assert page.locator(f"{CHART} .main-svg").count() >= 1


def test_select_swaps_fragment_without_reload(page):
    open_lesson(page)
    page.evaluate("window.__sameDocument = true")
    page.locator("#input-model").select_option("llama-3.1-8b")
    page.wait_for_url("**model=llama-3.1-8b**")
    wait_drawn(page)
    assert page.evaluate("window.__sameDocument") is True  # no full reload
    expect(page.locator("#memory-ledger")).to_contain_text("Llama 3.1 8B")


# The bench's lines (the verdict, the readout's figures) that its top edge cuts in half, and
# whether the bill's chart is whole in the view.
CUT_LINES = """() => { const view = document.getElementById('bench-view');
  const top = view.getBoundingClientRect().top, bottom = view.getBoundingClientRect().bottom;
  const chart = document.getElementById('memory-chart').getBoundingClientRect();
  const cut = Array.from(view.querySelectorAll('.verdict, dl.readout dt, dl.readout dd'))
    .map(el => el.getBoundingClientRect())
    .filter(box => box.top < top - 0.5 && box.bottom > top + 0.5).length;
  return [cut, chart.top >= top - 1 && chart.bottom <= bottom + 1]; }"""


def test_good_and_bad_case_buttons(page):
    # Round-19 cold reading X, finding 16: at 1280x800, after step 1's link had scrolled the
    # bench, the good case kept that scroll and left a line of the readout cut in half under
    # the case buttons. A case starts from the bench's top and cuts no line; its chart stays
    # whole in view.
    page.set_viewport_size({"width": 1280, "height": 800})
    open_lesson(page, guessed=True)
    link = page.locator("#step-1 a.try").first
    follow(link, "model=")
    follow(page.locator("[data-case=good]"), "mode=infer")
    expect(page.locator(".verdict")).to_contain_text("Fits")
    assert page.evaluate(CUT_LINES) == [0, True]
    assert page.locator("#input-model").input_value() == "llama-2-7b"
    assert page.locator("input[name=mode][value=infer]").is_checked()
    assert page.locator("#input-recipe").input_value() == "int8"

    follow(page.locator("[data-case=bad]"), "mode=train")
    expect(page.locator(".verdict")).to_contain_text("Does not fit")


def test_switching_mode_picks_a_recipe_of_that_mode(page):
    open_lesson(page)
    page.locator("input[name=mode][value=infer]").check()
    page.wait_for_url("**mode=infer**")
    wait_drawn(page)
    assert page.locator("#input-recipe").input_value() == "bf16"
    expect(page.locator(".verdict")).to_be_visible()
    assert page.locator("#error-recipe").inner_text() == ""


def test_bad_value_shows_message_and_keeps_the_chart(page):
    open_lesson(page)
    before = shown_total(page)
    url_before = page.url
    page.locator("#input-model").select_option("custom")
    page.locator("#input-params").fill("12")  # below the 1e6 floor
    expect(page.locator("#error-params")).not_to_be_empty()
    assert page.url == url_before or "params=12" not in page.url
    assert shown_total(page) == before
    assert page.locator(f"{CHART} .main-svg").count() >= 1

    page.locator("#input-params").fill("7e9")
    page.wait_for_url("**params=7e9**")
    wait_drawn(page)
    expect(page.locator("#error-params")).to_be_empty()
    expect(page.locator("#memory-ledger")).to_contain_text("Custom")


def test_drill_rejects_then_accepts(page, live_server):
    open_lesson(page)
    answer_drill(page, "16", "Hint")
    from app.routers.memory_lesson import DRILL_GPUS  # 18 B a parameter, cut over DRILL_GPUS

    state = api_json(live_server, "memory", "model=llama-3.1-8b&recipe=adam18")["state_bytes"]
    answer_drill(page, f"{state / DRILL_GPUS / 1e9:.1f}", "Right")


def test_drill_reveals_after_two_wrong_tries(page):
    open_lesson(page)
    for _ in range(2):
        page.locator("form.drill").first.locator("input[name=answer]").fill("1")
        page.locator("form.drill").first.locator("button").click()
        expect(page.locator(".drill-feedback").first).to_be_visible()
    expect(page.locator(".drill-feedback").first).to_contain_text("The answer is")


def test_embed_page_renders_its_chart(page):
    page.goto("/embed/memory?model=mixtral-8x7b&dp=8&zero=3")
    wait_drawn(page)
    assert page.locator(f"{CHART} .main-svg").count() >= 1
    assert page.locator("form.controls").count() == 0
    expect(page.locator("#memory-ledger")).to_contain_text("Mixtral")


def test_works_without_javascript(browser, live_server):
    context = browser.new_context(java_script_enabled=False, base_url=live_server)
    page = context.new_page()
    page.goto("/episodes/memory")
    assert not page.locator("#input-dp").is_visible()  # behind "more controls" (issue 36)
    page.locator("#more-controls summary").click()
    page.locator("#input-dp").fill("16")
    page.locator("form.controls button[type=submit]").click()
    page.wait_for_url("**dp=16**")
    assert "dp=16" in page.url
    assert page.locator("#input-dp").input_value() == "16"
    context.close()
