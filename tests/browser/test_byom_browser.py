"""Bring your own model in real Chromium: paste a config.json in a lesson, see the diagram
redraw for it with the code in the URL, reload and keep it; a bad paste names the field;
EP08's planner scatter loads the plan whose point is clicked."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import api_json, wait_drawn

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
MIXTRAL = "L32.h4096.a32.k8.f14336.v32000.E8.K2.F14336"


def ledger_total_gb(page) -> float:
    """The memory ledger's stacked total as drawn (GB)."""
    return page.evaluate("""() => document.getElementById('memory-chart').data
        .reduce((sum, trace) => sum + (trace.x || [0])[0], 0)""")


def paste(page, text: str) -> None:
    page.locator("#byom summary").click()
    page.locator("#byom-config").fill(text)
    page.locator("#byom-parse").click()


def test_pasting_a_config_redraws_the_lesson_and_survives_reload(page, live_server):
    page.goto("/episodes/memory")
    wait_drawn(page)
    before = page.evaluate("() => document.getElementById('memory-chart').dataset.drawn")
    paste(page, (FIXTURES / "mixtral-8x7b.json").read_text())
    expect(page.locator("#byom-result")).to_contain_text("46,702,792,704")
    page.wait_for_url(f"**model={MIXTRAL}**")
    wait_drawn(page)
    drawn = page.evaluate("() => document.getElementById('memory-chart').dataset.drawn")
    assert drawn != before and f"model={MIXTRAL}" in drawn
    expect(page.locator("#input-model")).to_have_value(MIXTRAL)
    api = api_json(live_server, "memory", f"model={MIXTRAL}")
    assert api["params"] == 46_702_792_704
    page.reload()
    wait_drawn(page)
    expect(page.locator("#input-model")).to_have_value(MIXTRAL)
    expect(page.locator("#input-model option:checked")).to_have_text(
        "Your model (46.7B, 12.9B active)")
    expect(page.locator("#byom")).to_have_attribute("open", "")
    expect(page.locator("#byom-result")).to_contain_text(MIXTRAL)


def test_a_bad_paste_names_the_field_and_keeps_the_state(page):
    page.goto("/episodes/tensor-parallel?tp=4")
    wait_drawn(page)
    paste(page, '{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 80}')
    expect(page.locator("#byom-result .byom-error")).to_contain_text(
        "hidden_size: missing")
    assert "model=" not in page.url and "tp=4" in page.url


def test_a_pasted_moe_model_drives_the_experts_lesson(page, live_server):
    page.goto("/episodes/experts")
    wait_drawn(page)
    paste(page, (FIXTURES / "deepseek-v3.json").read_text())
    page.wait_for_url("**model=L61.h7168**")
    wait_drawn(page)
    expect(page.locator("#input-model option:checked")).to_contain_text("Your model (671.0B")


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800},
                                      {"width": 390, "height": 844}], ids=["laptop", "phone"])
def test_the_disclosure_is_reachable(page, viewport):
    page.set_viewport_size(viewport)
    page.goto("/episodes/zero")
    wait_drawn(page)
    if viewport["width"] < 600:
        page.locator(".drawer-toggle").click()
    page.locator("#byom summary").click()
    expect(page.locator("#byom-config")).to_be_visible()
    expect(page.locator("#byom-parse")).to_be_visible()


def test_clicking_a_planner_point_loads_that_plan(page):
    page.goto("/episodes/recipe-3d")
    wait_drawn(page)
    page.locator("#plan-search").scroll_into_view_if_needed()
    chart = page.locator("#recipe-plan-chart")
    page.wait_for_function("""() => { const c = document.getElementById('recipe-plan-chart');
        return c && c.data && c.dataset.drawn !== undefined; }""", timeout=120_000)
    chart.scroll_into_view_if_needed()
    # The fastest Pareto plan's point, in page pixels (plotly's own axis mapping).
    target = page.evaluate("""() => {
        const gd = document.getElementById('recipe-plan-chart');
        const trace = gd.data.find(t => t.x.length) ;
        const i = 0, size = gd._fullLayout._size, box = gd.getBoundingClientRect();
        return {url: trace.customdata[i],
                x: box.left + size.l + gd._fullLayout.xaxis.l2p(trace.x[i]),
                y: box.top + size.t + gd._fullLayout.yaxis.l2p(trace.y[i])};
    }""")
    assert target["url"].startswith("/episodes/recipe-3d?")
    page.mouse.move(target["x"], target["y"])
    page.mouse.click(target["x"], target["y"])
    page.wait_for_url(f"**{target['url']}")
    wait_drawn(page)


def test_pasting_works_without_javascript(browser, live_server):
    context = browser.new_context(java_script_enabled=False, base_url=live_server,
                                  viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        page.goto("/episodes/zero?dp=8")
        page.locator("#byom summary").click()
        page.locator("#byom-config").fill((FIXTURES / "qwen2.5-7b.json").read_text())
        page.locator("#byom-parse").click()
        page.wait_for_url("**model=L28.h3584.a28.k4.f18944.v152064.qb**")
        assert "dp=8" in page.url
        expect(page.locator("#input-model option:checked")).to_have_text("Your model (7.6B)")
    finally:
        context.close()
