"""Predict, then see (issue 36): on EP05-EP08 every slider changes the chart it names, and that
chart is the one in view after the move, on a laptop (1280×800) and a phone (390×844).

The chart is the one the slider's group title names (data-diagrams, as lab.js's movedBy picks
it, a group inside "More controls" too); its drawn data must differ after the move, and at
least 90% (laptop) or 60% (phone) of it must be visible and uncovered (test_bench_view's
measure). EP08's nodes and PP sliders change the plan's GPUs: DP follows (nodes × GPUs per
node ÷ (TP·PP·CP), as Megatron sets it), so the step bar is redrawn for a plan that runs,
not left as the last one while a rule is broken."""

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import MOVED_BY, wait_drawn
from tests.browser.test_bench_view import shown, sized  # noqa: F401  (the sized-page fixture)

# (lesson path, slider, value, in "More controls").
MOVES = [
    ("/episodes/pipeline", "stages", "6", False),
    ("/episodes/pipeline", "microbatches", "16", False),
    ("/episodes/pipeline", "micro_batch", "2", True),
    ("/episodes/context-parallel", "tokens", "32", False),
    ("/episodes/experts", "skew", "0.5", False),
    ("/episodes/recipe-3d", "nodes", "16", False),
    ("/episodes/recipe-3d", "pp", "8", False),
    ("/episodes/recipe-3d", "micro_batch", "2", False),
    ("/episodes/recipe-3d", "microbatches", "32", False),
]

# No step is guessed first: EP05's memory chart, whose activations wait for step 3's guess
# (their peaks are what it asks), keeps each rank's state and one-unit tick drawn, so the
# micro-batch size moves it before then (stop 46's reading: it was grey, and moved nothing).
DATA = "id => JSON.stringify(document.getElementById(id).data.map(t => [t.x, t.y, t.z, t.base]))"


@pytest.mark.parametrize(("path", "name", "value", "more"), MOVES,
                         ids=[f"{p.rsplit('/', 1)[1]}-{n}" for p, n, _, _ in MOVES])
def test_a_slider_changes_the_chart_in_view(sized, path, name, value, more):  # noqa: F811
    page = sized
    page.goto(path)
    wait_drawn(page)
    if page.phone:
        page.locator(".drawer-toggle").click()
    if more:
        page.locator("#more-controls > summary").click()
    field = page.locator(f'#drawer [name="{name}"]')
    assert field.get_attribute("type") == "range", name
    target = field.evaluate(MOVED_BY)
    before = page.evaluate(DATA, target)
    field.fill(value)
    page.wait_for_url(f"**{name}={value}**")
    wait_drawn(page)
    assert page.evaluate(DATA, target) != before, f"{path} {name}={value}: #{target} unchanged"
    shown(page, target, f"{path} after {name}={value}")


def test_ep08s_dp_follows_the_nodes_and_pp_where_whole(sized):  # noqa: F811
    page = sized
    page.goto("/episodes/recipe-3d")
    wait_drawn(page)
    if page.phone:
        page.locator(".drawer-toggle").click()
    page.locator("#input-nodes").fill("16")  # 128 GPUs ÷ (TP8 · PP4) = DP 4
    page.wait_for_url("**nodes=16**dp=4**")
    page.locator("#input-pp").fill("5")  # 128 ÷ 40 is not whole: DP stays, the rule is named
    page.wait_for_url("**pp=5**")
    verdict = page.locator("[data-testid=recipe-verdict]")
    expect(verdict).to_contain_text("broken: the plan cannot run")
    assert page.locator("#input-dp").input_value() == "4"
