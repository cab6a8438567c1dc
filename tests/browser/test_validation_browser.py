"""EP08's "Checked against real runs" in real Chromium: the scatter is drawn with every run,
the table fits a phone by scrolling inside its box, and a run's link opens EP08 at its plan."""

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import api_json, follow, wait_drawn

PAGE = "/episodes/recipe-3d/validation"


def drawn_points(page) -> int:
    """Markers drawn in the scatter (the bands and the equality line are lines)."""
    return page.evaluate("""() => document.querySelector('#validation-chart').data
        .filter(t => t.mode === 'markers').reduce((n, t) => n + t.x.length, 0)""")


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800},
                                      {"width": 390, "height": 844}])
def test_scatter_and_table_show_every_run(page, live_server, viewport):
    page.set_viewport_size(viewport)
    body = api_json(live_server, "validation")
    page.goto(PAGE)
    wait_drawn(page)
    expect(page.locator("#validation-chart .main-svg").first).to_be_visible()
    # The calibration runs and the validation runs (torchtitan's, open diamonds).
    assert drawn_points(page) == len(body["runs"]) + len(body["validation_runs"]) == 19 + 32
    expect(page.locator("[data-testid=validation-table] tbody tr")).to_have_count(19)
    expect(page.locator("[data-testid=validation-runs-table] tbody tr")).to_have_count(32)
    # Nothing wider than the screen: the table scrolls inside its own box.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"]
    # Every entry of the key is drawn above the plot, none under it (on a phone the key
    # takes a line an entry).
    keyed = page.evaluate("""() => {
        const plot = document.querySelector('#validation-chart .nsewdrag')
            .getBoundingClientRect();
        return [...document.querySelectorAll('#validation-chart .legendtext')]
            .map(t => [t.textContent, t.getBoundingClientRect().bottom <= plot.top]);
    }""")
    assert len(keyed) == 10 and all(above for _, above in keyed), keyed


def test_a_runs_link_opens_ep08_at_its_plan(page, live_server):
    body = api_json(live_server, "validation")
    row = next(r for r in body["runs"] if r["id"] == "korthikanti-175b-present")
    page.goto(PAGE)
    follow(page.locator("[data-testid=open-korthikanti-175b-present]"), "/episodes/recipe-3d?")
    expect(page.locator("#input-pp")).to_have_value("8")
    expect(page.locator("#input-recompute")).to_have_value("selective")
    expect(page.locator("#input-attention")).to_have_value("unfused")
    step = page.evaluate("() => document.querySelector('#recipe-step').data"
                         ".reduce((s, t) => s + t.x[0], 0)")
    assert step == pytest.approx(row["lab_step_s"] * 1e3, rel=1e-3)


def test_a_torchtitan_runs_link_opens_ep08_with_pytorch_eager_kernels(page, live_server):
    body = api_json(live_server, "validation")
    row = next(r for r in body["validation_runs"]
               if r["id"] == "torchtitan-llama3-70b-a100-full")
    page.goto(PAGE)
    follow(page.locator("[data-testid=open-torchtitan-llama3-70b-a100-full]"),
           "/episodes/recipe-3d?")
    expect(page.locator("#input-kernels")).to_have_value("eager")
    expect(page.locator("input[name=zero][value=\"3\"]")).to_be_checked()
    step = page.evaluate("() => document.querySelector('#recipe-step').data"
                         ".reduce((s, t) => s + t.x[0], 0)")
    assert step == pytest.approx(row["lab_step_s"] * 1e3, rel=1e-3)


def test_a_deepep_runs_link_opens_ep08_with_its_dispatch_and_the_control_moves_the_chart(
        page, live_server):
    body = api_json(live_server, "validation")
    row = next(r for r in body["validation_runs"] if r["id"] == "mcore-qwen3-235b-ep32-deepep")
    page.goto(PAGE)
    follow(page.locator("[data-testid=open-mcore-qwen3-235b-ep32-deepep]"),
           "/episodes/recipe-3d?")
    expect(page.locator("#input-ep_dispatch")).to_have_value("deepep")
    step = ("() => document.querySelector('#recipe-step').data"
            ".reduce((s, t) => s + t.x[0], 0)")
    assert page.evaluate(step) == pytest.approx(row["lab_step_s"] * 1e3, rel=1e-3)
    # NCCL's all-to-all sends a copy per expert over IB: the step chart grows in place.
    page.locator("#input-ep_dispatch").select_option("alltoall")
    page.wait_for_url("**ep_dispatch=alltoall**")
    page.wait_for_function(f"() => ({step})() > {row['lab_step_s'] * 1e3 * 1.2}")
