"""A masked chart (layout.meta.masked) shows no answer before its step's guess (issue 36).

The lab masked such a chart's labels until the guess (static/js/lab.js), but drew its bars and
lines at their real heights and kept its hover: EP06 step 2's last bar stood at 484 pairs on a
labelled axis and said so on hover, and EP06 step 6's hover gave the 6.04 GB its prediction
asks for. Before the guess the chart is drawn veiled: the plotted data (gd.data, gd.layout)
carries no value of the figure, the value axis has no ticks, and hovering shows nothing; after
the guess the real figure is drawn, its hover back."""

import json

import pytest

from tests.browser.helpers import api_json, look_at, wait_drawn

EP04, EP06 = "/episodes/tensor-parallel", "/episodes/context-parallel"

# (lesson, step, chart, the step's try link: the state its prediction is about)
MASKED = [
    (EP06, 2, "cp-pairs", "64 tokens, CP 8"),
    (EP06, 6, "cp-cost", "GPT-3, ring CP 16"),
    (EP06, 8, "cp-crossover", "Zigzag, CP 8, InfiniBand NDR"),
    (EP04, 6, "tp-crossover", "TP = 8 across InfiniBand NDR"),
]

# The chart as plotted (gd.data and gd.layout without its meta, the masked texts), and the
# figure the page holds for it (its script): what lab.js was given.
PLOTTED = """(id) => {
    const gd = document.getElementById(id);
    const layout = Object.assign({}, gd.layout); delete layout.meta;
    return JSON.stringify({data: gd.data, layout: layout});
}"""
FIGURE = """(id) => document.querySelector(`script.figure[data-target='${id}']`).textContent"""
HOVER = "(id) => document.getElementById(id).querySelectorAll('.hoverlayer .hovertext').length"


def numbers(value) -> list[float]:
    """Every number in a JSON value."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    items = value.values() if isinstance(value, dict) else value
    return [n for item in items for n in numbers(item)]


def hover_everywhere(page, chart: str) -> int:
    """Move the mouse across the plot area (a grid of points) and count the hover labels."""
    box = page.locator(f"#{chart}").bounding_box()
    assert box, chart
    seen = 0
    for fx in (0.2, 0.35, 0.5, 0.65, 0.8, 0.95):
        for fy in (0.2, 0.4, 0.5, 0.6, 0.8):
            page.mouse.move(box["x"] + fx * box["width"], box["y"] + fy * box["height"])
            seen += page.evaluate(HOVER, chart)
    return seen


@pytest.mark.parametrize("lesson, step, chart, link", MASKED,
                         ids=[f"{c}-step{s}" for _, s, c, _ in MASKED])
def test_a_masked_chart_shows_no_value_until_the_guess(page, lesson, step, chart, link):
    page.goto(lesson)
    href = page.locator(f"#step-{step} a.try", has_text=link).get_attribute("href")
    page.goto(href)  # the step's state, opened by its URL before the guess
    wait_drawn(page)
    look_at(page, chart)
    real = json.loads(page.evaluate(FIGURE, chart))
    plotted = json.loads(page.evaluate(PLOTTED, chart))
    assert real["layout"]["meta"]["masked"], chart
    # Every value the figure's traces carry (bar heights, line points, their positions), and
    # every coordinate the veiled chart plots: its traces', its labels' places, its axes'.
    values = {round(v, 6) for t in real["data"] for v in numbers([t.get("x"), t.get("y")])
              if abs(v) > 1}
    assert values, chart
    layout = plotted["layout"]
    shown = numbers([[t.get("x"), t.get("y")] for t in plotted["data"]]
                    + [[a.get("x"), a.get("y")] for a in layout.get("annotations", [])]
                    + [[v.get("range"), v.get("tickvals")] for k, v in layout.items()
                       if k.startswith(("xaxis", "yaxis"))])
    assert not values & {round(v, 6) for v in shown}, f"#{chart} plots a value before the guess"
    for trace in plotted["data"]:
        assert set(trace.get("y", [])) <= {0.5, None}, (chart, trace.get("name"))  # flat
        assert not {"customdata", "hovertemplate", "hovertext", "text"} & trace.keys(), chart
        assert trace.get("hoverinfo") == "skip", chart
    answer = page.locator(f"#step-{step} form.predict-form").get_attribute("data-answer")
    if answer:
        assert answer.replace(",", "") not in json.dumps(plotted).replace(",", ""), answer
    assert page.evaluate(f"() => document.getElementById('{chart}')._fullLayout.hovermode") \
        is False
    assert page.locator(f"#{chart} .ytick").count() == 0  # the value axis: no ticks
    assert hover_everywhere(page, chart) == 0, f"#{chart} hovers a value before the guess"
    assert page.locator(f"#{chart}").get_attribute("data-veiled") is not None

    form = page.locator(f"#step-{step} form.predict-form")
    if form.locator("input[type=radio]").count():
        form.locator("input[type=radio]").first.check()
    else:
        form.locator("input[name=guess]").fill("1")
    form.locator(".predict-commit").click()
    page.wait_for_function(f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    after = json.loads(page.evaluate(PLOTTED, chart))
    for drawn, given in zip(after["data"], real["data"], strict=True):
        assert drawn.get("y") == given.get("y") and drawn.get("x") == given.get("x"), chart
    assert page.evaluate(f"() => document.getElementById('{chart}')._fullLayout.hovermode") \
        is not False
    assert page.locator(f"#{chart} .ytick").count() > 0


def point(page) -> None:
    """The mouse on the last bar's middle (plotly's drag layer above it takes the events)."""
    box = page.locator("#cp-pairs .bars .point path").last.bounding_box()
    assert box
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def test_the_pairs_hover_comes_back_with_the_guess(page, live_server):
    """Hovering EP06's last bar at 64 tokens over CP 8: nothing before step 2's guess, its
    pairs after it."""
    last = api_json(live_server, "cp", "tokens=64&cp=8")["ranks"][7]["causal_pairs"]
    page.goto(f"{EP06}?tokens=64&cp=8")
    wait_drawn(page)
    look_at(page, "cp-pairs")
    assert page.evaluate(HOVER, "cp-pairs") == 0
    point(page)
    assert page.evaluate(HOVER, "cp-pairs") == 0
    page.locator("#step-2 .predict-beat > details.why > summary").click()  # "show me"
    page.wait_for_function("() => !document.getElementById('cp-pairs').hasAttribute('data-veiled')")
    page.mouse.move(0, 0)
    point(page)
    page.wait_for_function(f"() => ({HOVER})('cp-pairs') > 0")
    assert f"{last:,}" in page.locator("#cp-pairs .hoverlayer").text_content()
