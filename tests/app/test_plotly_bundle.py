"""The partial plotly.js bundle (static/vendor/build.mjs) holds what every figure needs.

The bundle registers only the trace types and components of static/vendor/plotly-bundle.json;
plotly.js draws a trace of another type as nothing and ignores a layout feature it lacks,
silently. So every figure the registry produces, in every state a lesson links to (its
default, its case buttons and each "try it" link) and in the cheat sheet's and planner's
pages, is checked here against that list."""

import html as html_lib
import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS, parse

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = json.loads((ROOT / "static/vendor/plotly-bundle.json").read_text())
# Layout keys (and axis / trace keys) drawn by a component the bundle may leave out.
LAYOUT_COMPONENT = {"annotations": "annotations", "shapes": "shapes", "images": "images",
                    "updatemenus": "updatemenus", "sliders": "sliders", "grid": "grid",
                    "selections": "selections", "legend": "legend", "coloraxis": "colorscale"}
AXIS_COMPONENT = {"rangeslider": "rangeslider", "rangeselector": "rangeselector"}
TRACE_COMPONENT = {"error_x": "errorbars", "error_y": "errorbars", "colorbar": "colorbar"}


def lesson_queries(client, name: str) -> list[dict]:
    """The default state and every state the lesson page links to (cases, try links)."""
    view = VIEWS[name]
    page = client.get(view.episode.url).text
    hrefs = re.findall(r'href="([^"]+)"', page)
    queries = [{}]
    for href in hrefs:
        url = urlsplit(html_lib.unescape(href))
        if url.path == view.episode.url and url.query:
            queries.append(dict(parse_qsl(url.query)))
    return queries


def problems(fig: dict) -> list[str]:
    found = []
    for trace in fig["data"]:
        kind = trace.get("type", "scatter")
        if kind not in BUNDLE["traces"]:
            found.append(f"trace type {kind}")
        found += [f"trace.{key}" for key, comp in TRACE_COMPONENT.items()
                  if key in trace and comp not in BUNDLE["components"]]
    layout = fig.get("layout", {})
    for key, value in layout.items():
        if key in LAYOUT_COMPONENT and value and LAYOUT_COMPONENT[key] not in BUNDLE["components"]:
            found.append(f"layout.{key}")
        if re.fullmatch(r"[xy]axis\d*", key):
            found += [f"layout.{key}.{k}" for k, comp in AXIS_COMPONENT.items()
                      if value.get(k) and comp not in BUNDLE["components"]]
    return found


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_every_figure_a_lesson_draws_is_in_the_bundle(client, name):
    view = VIEWS[name]
    queries = lesson_queries(client, name)
    assert len(queries) > 1 or not view.good, "the lesson's links were found"
    for query in queries:
        state, errors, _ = parse(view, list(query.items()))
        assert state is not None, (query, errors)
        for diagram, fig in view.figures(state.result).items():
            assert not problems(fig), f"{name}/{diagram} at {query}: {problems(fig)}"


@pytest.mark.parametrize("path", ["/episodes/recipe-3d/plan", "/episodes/playground/compare"])
def test_the_other_pages_figures_are_in_the_bundle(client, path):
    html = client.get(path).text
    figures = re.findall(r'<script type="application/json" class="figure"[^>]*>(.*?)</script>',
                         html, re.S)
    assert figures
    for body in figures:
        fig = json.loads(html_lib.unescape(body))
        assert not problems(fig), f"{path}: {problems(fig)}"


def test_a_figure_outside_the_bundle_is_caught():
    assert problems({"data": [{"type": "pie"}], "layout": {}}) == ["trace type pie"]
    assert problems({"data": [{"y": [1]}], "layout": {"updatemenus": [{}]}}) == [
        "layout.updatemenus"]
    assert problems({"data": [{"type": "bar", "error_y": {}}],
                     "layout": {"xaxis": {"rangeslider": {"visible": True}}}}) == [
        "trace.error_y", "layout.xaxis.rangeslider"]
