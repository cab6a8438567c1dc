"""The charts read well: units scale, names not ids, no piled-up labels, valid plotly."""

import re

import pytest

from app.charts.memory import memory_figure
from app.charts.pipeline import (
    activations_figure,
    gantt_figure,
    kinds_present,
    stage_memory_figure,
)
from app.charts.units import axis_unit, fmt_bytes, fmt_count, fmt_pct, gb_axis, gb_bar
from app.routers.memory import MemoryQuery
from app.routers.memory import run as run_memory
from app.routers.pipeline import PipelineQuery
from app.routers.pipeline import run as run_pipeline
from labs.schedules.catalogue import SCHEDULES
from tests.conftest import valid_plotly


@pytest.mark.parametrize(("value", "text"), [
    (0, "0 GB"), (7e9, "7.00 GB"), (80e9, "80.0 GB"), (564.4e9, "564 GB"),
    (999.96e9, "1.00 TB"), (1.2201e12, "1.22 TB"), (14_168_336.2e9, "14.2 PB"), (5e8, "500 MB"),
])
def test_bytes_scale_their_unit(value, text):
    assert fmt_bytes(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (7e9, "7B"), (70_553_706_496, "70.6B"), (1.2e12, "1.2T"), (405e9, "405B"), (12.9e9, "12.9B"),
])
def test_counts_read_like_model_cards(value, text):
    assert fmt_count(value) == text


def test_percent_and_axis_unit():
    assert fmt_pct(7 / 39) == "17.9%"
    # Short of 1 never prints as 100.0% (EP12's compare drew an exposed DP sliver beside it).
    assert fmt_pct(1.0) == "100.0%"
    assert fmt_pct(0.99978) == "99.98%" and fmt_pct(0.99996) == "99.996%"
    assert fmt_pct(1 - 1e-9) == "99.999%"
    assert axis_unit(80e9) == (1e9, "GB")
    assert axis_unit(6.78e12) == (1e12, "TB")
    assert axis_unit(3e15) == (1e15, "PB")


def test_gb_bar_draws_bytes_in_gb_with_the_pages_bytes_in_its_hover():
    """EP03's and EP04's memory and traffic bars share one trace (``gb_bar``): the bar's
    height in GB to 3 places on a ``gb_axis``, its hover the bytes as fmt_bytes writes them,
    and the marker the caller's, in its order."""
    bar = gb_bar("Weights", ["1", "2"], [140e9, 1.2346e9], "%{customdata}<extra></extra>",
                 color="#4c78a8", opacity=[1.0, 0.35])
    assert bar == {"type": "bar", "name": "Weights", "x": ["1", "2"], "y": [140.0, 1.235],
                   "marker": {"color": "#4c78a8", "opacity": [1.0, 0.35]},
                   "customdata": ["140 GB", "1.23 GB"],
                   "hovertemplate": "%{customdata}<extra></extra>"}
    valid_plotly({"data": [bar], "layout": {"yaxis": gb_axis(200e9)}})


def test_memory_axis_follows_the_size_and_no_label_has_a_long_number():
    huge = valid_plotly(memory_figure(run_memory(MemoryQuery(params=1e14, seq_len=131072))))
    assert huge["layout"]["yaxis"]["title"]["text"] == "PB per GPU"
    small = valid_plotly(memory_figure(run_memory(MemoryQuery(params=7e9, mode="infer",
                                                              recipe="int8", gpu="rtx-4090"))))
    assert small["layout"]["yaxis"]["title"]["text"] == "GB per GPU"
    for fig in (huge, small):
        texts = [t for trace in fig["data"] for t in trace["text"]]
        texts += [a["text"] for a in fig["layout"]["annotations"]] + [fig["summary"]]
        for text in texts:
            assert not re.search(r"\d{5,}", text.replace(",", "")), text  # 7000000000.0


def test_memory_gpu_label_sits_beside_the_bar_not_on_it():
    fig = valid_plotly(memory_figure(run_memory(MemoryQuery())))
    (label,) = fig["layout"]["annotations"]
    x0, x1 = fig["layout"]["xaxis"]["range"]
    bar_right = (1 - fig["layout"]["bargap"]) / 2  # one category at x = 0
    # The label ends at the right edge; the bar ends well left of the middle.
    assert label["x"] == 1 and label["xanchor"] == "right"
    assert (bar_right - x0) / (x1 - x0) < 0.5
    assert "H100 SXM: 80.0 GB" in label["text"]
    assert "1.22 TB per GPU" in fig["summary"] and "does not fit" in fig["summary"]


@pytest.mark.parametrize("query", [
    {"schedule": "gpipe", "stages": 8, "microbatches": 32},
    {"schedule": "1f1b", "stages": 8, "microbatches": 32},
    {"schedule": "interleaved-1f1b", "stages": 8, "microbatches": 16, "virtual": 4},
    {"schedule": "zb-h1", "stages": 8, "microbatches": 32},
    {"schedule": "dualpipe-v", "stages": 8, "microbatches": 32, "virtual": 2},
    {"schedule": "1f1b", "stages": 32, "microbatches": 64, "model": "llama-3.1-405b"},
])
def test_pipeline_figures_use_display_names_and_units(query):
    state = run_pipeline(PipelineQuery(**query))
    gantt = valid_plotly(gantt_figure(state.result))
    name = SCHEDULES[query["schedule"]]
    assert gantt["summary"].startswith(name)
    assert query["schedule"] not in gantt["summary"] or name.lower() == query["schedule"]
    assert "%" in gantt["summary"]
    acts = valid_plotly(activations_figure(state.result))
    assert acts["summary"].startswith(name)
    # Peaks carry no text labels (GPipe's eight ranks all peak at once and would pile up).
    assert all("text" not in trace for trace in acts["data"])
    assert acts["layout"]["legend"]["y"] < 0  # the legend sits below the plot
    if state.memory is not None:
        mem = valid_plotly(stage_memory_figure(state.memory))
        assert mem["summary"].startswith("Peak memory per rank against 80.0 GB")
        assert mem["layout"].get("annotations") is None  # the line is named in the legend


def test_gantt_legend_lists_only_the_kinds_present(client):
    zb = run_pipeline(PipelineQuery(schedule="zb-h1", stages=4, microbatches=8)).result
    assert kinds_present(zb) == ["F", "I", "W"]
    page = client.get("/episodes/pipeline", params={
        "schedule": "1f1b", "stages": 4, "microbatches": 8}).text
    assert "F = Forward" in page and "B = Backward" in page
    assert "W = Backward: weight gradient" not in page
    page = client.get("/episodes/pipeline", params={
        "schedule": "zb-h1", "stages": 4, "microbatches": 8}).text
    assert "W = Backward: weight gradient" in page and "B = Backward<" not in page


@pytest.mark.parametrize(("page", "charts"), [
    ("/episodes/memory", ["memory-chart"]),
    ("/episodes/pipeline", ["pipeline-gantt", "pipeline-activations", "pipeline-memory"]),
])
def test_every_chart_has_a_summary_and_a_table_for_readers_without_javascript(
        client, page, charts):
    html = client.get(page).text
    for chart in charts:
        # (a summary that waits for a step's guess is also an answer-mask: 3aa147c)
        assert re.search(f'class="chart-summary[^"]*" data-chart="{chart}"', html), chart
        assert f'class="chart-table" data-chart="{chart}"' in html
    assert "zb-h1<" not in html and "1f1b<" not in html  # display names, not ids
