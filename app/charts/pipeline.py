"""EP05's diagrams, drawn from the simulated schedule: a Gantt per rank and activations held.

Both are read off ``PipelineResult.events`` and ``activation_timeline``; nothing here knows a
bubble formula. Up to ``MAX_BARS`` events the Gantt is one bar per action; beyond that the
schedule is rasterised into a rank x time heatmap (same colours), which stays fast in the
browser at tens of thousands of actions.
"""

from app.charts import base_layout, gpu_line_legend, gpu_memory_line
from app.charts.units import fmt_bytes, fmt_pct, gb_axis
from labs.schedules.catalogue import SCHEDULES

KINDS = {  # kind -> (label, colour, heatmap code)
    "F": ("Forward", "#4c78a8", 1),
    "B": ("Backward", "#f58518", 2),
    "I": ("Backward: input gradient", "#e45756", 3),
    "W": ("Backward: weight gradient", "#54a24b", 4),
}
TIME_AXIS = "time (f = one forward)"
IDLE = "#f1f3f7"
MAX_BARS = 1500  # above this, a heatmap
# Above this, no micro-batch labels (they would be unreadable). Labels are one text-only
# scatter trace at the bars' centres: plotly fitting text "inside" each bar cost ~75 ms of a
# 107 ms redraw in Chromium (tests/benchmarks/browser_bench.py), a text trace a few ms. The
# note under the chart reads both thresholds (app/templating.py passes them to the template).
LABEL_BARS = 200
RASTER_COLUMNS = 1000
MAX_MEMORY_LINES = 8
PALETTE = (
    "#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#9d755d",
)


def _rank_label(rank: int) -> str:
    return f"rank {rank}"


def schedule_name(schedule: str) -> str:
    """The name papers and frameworks use (the schedule's record, labs.schedules.catalogue)."""
    return SCHEDULES.get(schedule, schedule)


def kinds_present(result) -> list[str]:
    """The action kinds this schedule uses, in legend order (ZB-H1 has no unsplit B)."""
    present = {ev.kind for ev in result.events}
    return [k for k in KINDS if k in present]


def gantt_figure(result) -> dict:
    events = result.events
    inp = result.input
    p = inp.stages
    data = _raster(result) if len(events) > MAX_BARS else _bars(result, len(events) <= LABEL_BARS)
    height = max(200, min(640, 70 + 26 * p))
    chunks = f" × {inp.chunks} chunks" if inp.chunks > 1 else ""
    return {
        "data": data,
        "layout": base_layout(
            height=height,
            barmode="overlay",
            bargap=0.15,
            # A micro-batch number too wide for its bar is left out, not drawn over the next.
            uniformtext={"minsize": 10, "mode": "hide"},
            margin={"l": 52, "r": 8, "t": 8, "b": 40},
            xaxis={"title": {"text": TIME_AXIS, "standoff": 4},
                   "range": [0, result.makespan], "gridcolor": "#e6e9ef", "zeroline": False},
            yaxis={"autorange": "reversed", "type": "category", "fixedrange": True,
                   "categoryorder": "array",
                   "categoryarray": [_rank_label(r) for r in range(p)]},
            plot_bgcolor=IDLE,
            showlegend=False,  # the page names the colours of the kinds present
        ),
        # The colour key (the page writes it under the chart; an embed shows this one).
        "key": [[KINDS[k][0], KINDS[k][1]] for k in kinds_present(result)] + [["idle", IDLE]],
        "summary": (
            f"{schedule_name(inp.schedule)}, {p} stages × {inp.microbatches} micro-batch"
            f"{'' if inp.microbatches == 1 else 'es'}"
            f"{chunks}: {fmt_pct(result.bubble_fraction)} of rank time idle, measured "
            f"(textbook {fmt_pct(result.textbook_bubble)}); the step takes "
            f"{result.makespan:,.1f} f (f: one stage's forward of one micro-batch)"
        ),
    }


def rank_points(result, rank: int) -> list[list[int]]:
    """One rank's bars in the Gantt as [trace, point] pairs, in ``_bars``' order (a trace a
    kind, in KINDS' order, its points in the events' order): what an owner holds to keep the
    rank's row until its step is guessed (layout.meta.owners[].points). None where the
    Gantt is a heatmap."""
    if len(result.events) > MAX_BARS:
        return []
    kinds = kinds_present(result)
    seen = dict.fromkeys(kinds, 0)
    out = []
    for ev in result.events:
        if ev.rank == rank:
            out.append([kinds.index(ev.kind), seen[ev.kind]])
        seen[ev.kind] += 1
    return out


def _bars(result, labelled: bool) -> list[dict]:
    """One bar per action, by kind; ``labelled``: each carries its micro-batch number, written
    at its centre where it fits."""
    traces: dict[str, dict] = {}
    chunks = result.input.chunks
    for ev in result.events:
        trace = traces.get(ev.kind)
        if trace is None:
            label, colour, _ = KINDS[ev.kind]
            trace = traces[ev.kind] = {
                "type": "bar", "orientation": "h", "name": label,
                "marker": {"color": colour, "line": {"color": "#ffffff", "width": 0.5},
                           "opacity": []},
                "x": [], "base": [], "y": [], "customdata": [],
                **({"text": [], "textposition": "inside", "insidetextanchor": "middle",
                    "textangle": 0, "textfont": {"color": "#ffffff", "size": 10}}
                   if labelled else {}),
                "hovertemplate": (
                    f"{label}<br>%{{y}}, micro-batch %{{customdata[0]}}, chunk %{{customdata[1]}}"
                    "<br>%{base:.2f} → %{customdata[2]:.2f}<extra></extra>"
                ),
            }
        trace["x"].append(round(ev.end - ev.start, 6))
        trace["base"].append(round(ev.start, 6))
        trace["y"].append(_rank_label(ev.rank))
        trace["customdata"].append([ev.microbatch, ev.chunk, round(ev.end, 6)])
        if labelled:
            trace["text"].append(str(ev.microbatch))
        # Later model chunks (interleaved, V-shape) are drawn lighter.
        shade = 1.0 - 0.45 * ev.chunk / (chunks - 1) if chunks > 1 else 1.0
        trace["marker"]["opacity"].append(shade)
    return [traces[k] for k in KINDS if k in traces]


def _raster(result) -> list[dict]:
    """Rank x time heatmap: each cell coloured by what its rank is doing at that time."""
    p, span = result.input.stages, result.makespan
    cols = RASTER_COLUMNS
    step = span / cols
    z = [[0] * cols for _ in range(p)]
    for ev in result.events:
        code = KINDS[ev.kind][2]
        row = z[ev.rank]
        first = int(ev.start / step)
        last = min(cols - 1, int(ev.end / step - 1e-9))
        for c in range(first, last + 1):
            row[c] = code
    colours = [IDLE] + [KINDS[k][1] for k in KINDS]
    n = len(colours)
    scale = []
    for i, colour in enumerate(colours):
        scale += [[i / n, colour], [(i + 1) / n, colour]]
    data = [{
        "type": "heatmap", "z": z, "x0": step / 2, "dx": step,
        "y": [_rank_label(r) for r in range(p)],
        "zmin": -0.5, "zmax": n - 0.5, "colorscale": scale, "showscale": False,
        "hoverinfo": "skip",
    }]
    return data


def event_kinds(events) -> list[str]:
    """The kinds of event a schedule has, in order of first appearance (Jinja's ``unique``
    filter would do it, case-folding each of thousands of events in the template)."""
    return list(dict.fromkeys(e.kind for e in events))


def memory_ranks(p: int) -> list[int]:
    """Which ranks get a line: all of them up to 8, else 8 spread from first to last."""
    if p <= MAX_MEMORY_LINES:
        return list(range(p))
    return sorted({round(i * (p - 1) / (MAX_MEMORY_LINES - 1)) for i in range(MAX_MEMORY_LINES)})


def activations_figure(result) -> dict:
    """Micro-batch activations held per rank over time (step lines), each rank's peak marked.

    The peaks carry no text: ranks that peak together (GPipe: all of them, at once) would pile
    their labels up. The legend below names the lines and the table under the chart lists the
    peaks."""
    data = []
    peaks = result.peak_activations
    for i, rank in enumerate(memory_ranks(result.input.stages)):
        colour = PALETTE[i % len(PALETTE)]
        points = result.activation_timeline[rank]
        xs = [t for t, _ in points] + [result.makespan]
        ys = [n for _, n in points] + [points[-1][1] if points else 0]
        peak = peaks[rank]
        at = next(t for t, n in points if n == peak) if points else 0
        data.append({
            "type": "scatter", "mode": "lines",
            "line": {"shape": "hv", "width": 2, "color": colour},
            "name": f"r{rank}", "x": xs, "y": ys,
            "hovertemplate": f"rank {rank}: %{{y}} held<extra></extra>",
            "legendgroup": str(rank),
        })
        data.append({
            "type": "scatter", "mode": "markers", "x": [at], "y": [peak],
            "showlegend": False, "cliponaxis": False,
            "marker": {"size": 9, "symbol": "diamond", "color": colour,
                       "line": {"width": 1, "color": "#1d2330"}},
            "hovertemplate": f"rank {rank} peak: {peak}<extra></extra>", "legendgroup": str(rank),
        })
    worst = max(range(len(peaks)), key=lambda r: peaks[r])
    return {
        "data": data,
        "layout": base_layout(
            # No height: the chart fills its box (.chart.short), legend included.
            margin={"l": 44, "r": 8, "t": 8, "b": 8},
            # The tick labels a little lower: the two axes' "0" would touch at the origin.
            xaxis={"title": {"text": TIME_AXIS, "standoff": 4}, "ticklabelstandoff": 6,
                   "range": [0, result.makespan],
                   "gridcolor": "#e6e9ef", "zeroline": False},
            yaxis={"title": {"text": "units held"}, "rangemode": "tozero",
                   "gridcolor": "#e6e9ef", "fixedrange": True},
            legend={"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top",
                    "font": {"size": 11}, "itemwidth": 30},
        ),
        "summary": (
            f"{schedule_name(result.input.schedule)}: peak activations held per rank, in "
            f"micro-batch × chunk units: rank 0 {peaks[0]}, rank {len(peaks) - 1} {peaks[-1]}; "
            f"most on rank {worst} ({peaks[worst]})"
        ),
    }


# The memory chart's traces: the stacked state and activations, the GPU line's legend entry
# and a tick one unit of activations above each rank's state.
MEMORY_STATE, MEMORY_ACTIVATIONS, MEMORY_GPU, MEMORY_UNIT = range(4)


def stage_memory_figure(memory) -> dict:
    """Per-rank peak memory (state + measured activations) against the GPU's line, and a tick
    one unit above each rank's state: one micro-batch through one of its chunks, what each
    micro-batch held adds. The tick needs no schedule, so it stays drawn while the
    activations, which give each rank's peak held, wait for step 3's guess (the micro-batch
    size and the sequence length move it: stop 46's reading, issue 36)."""
    p = len(memory.total_bytes)
    # "r0".."r7": short enough to stay level under narrow bars on a phone.
    ranks = [f"r{r}" for r in range(p)]
    gpu = memory.gpu_memory_bytes
    over = ["#b42318" if not ok else "#e45756" for ok in memory.fits]
    gpu_label = f"GPU: {fmt_bytes(gpu)}"
    worst = memory.worst_rank
    overflowing = sum(1 for ok in memory.fits if not ok)
    return {
        "data": [
            {"type": "bar", "name": "State", "x": ranks,
             "y": [round(s / 1e9, 3) for s in memory.state_per_rank],
             "marker": {"color": "#4c78a8"},
             "customdata": [fmt_bytes(s) for s in memory.state_per_rank],
             "hovertemplate": "%{x}: state %{customdata}<extra></extra>"},
            {"type": "bar", "name": "Activations", "x": ranks,
             "y": [round(a / 1e9, 3) for a in memory.activation_bytes],
             "marker": {"color": over},
             "customdata": [fmt_bytes(a) for a in memory.activation_bytes],
             "hovertemplate": "%{x}: activations %{customdata}<extra></extra>"},
            gpu_line_legend(gpu / 1e9, gpu_label, ranks),
            {"type": "scatter", "mode": "markers", "name": "One unit", "x": ranks,
             "y": [round((s + u) / 1e9, 3)
                   for s, u in zip(memory.state_per_rank, memory.unit_bytes_per_rank,
                                   strict=True)],
             "marker": {"symbol": "line-ew-open", "size": 18, "color": "#1d2433",
                        "line": {"width": 3, "color": "#1d2433"}},
             "customdata": [fmt_bytes(u) for u in memory.unit_bytes_per_rank],
             "hovertemplate": "%{x}: one unit of activations above the state, "
                              "%{customdata}<extra></extra>"},
        ],
        "layout": base_layout(
            barmode="stack",  # no height: it fills its box, legend included
            margin={"l": 52, "r": 8, "t": 8, "b": 8},
            yaxis=gb_axis(max(gpu, *memory.total_bytes) * 1.12),
            xaxis={"fixedrange": True, "type": "category", "tickangle": 0},
            shapes=gpu_memory_line(gpu / 1e9, gpu_label)["shapes"],
            # Three short entries fit one row at 390 px; state (bottom of the stack) first.
            legend={"orientation": "h", "y": -0.12, "x": 0, "yanchor": "top",
                    "traceorder": "normal", "font": {"size": 11}},
        ),
        "summary": (
            f"Peak memory per rank against {fmt_bytes(gpu)}: worst rank {worst} at "
            f"{fmt_bytes(memory.total_bytes[worst])}, rank {p - 1} at "
            f"{fmt_bytes(memory.total_bytes[-1])}; "
            + ("every rank fits" if not overflowing else f"{overflowing} of {p} overflow")
        ),
    }
