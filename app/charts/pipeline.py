"""EP05's diagrams, drawn from the simulated schedule: a Gantt per rank and activations held.

Both are read off ``PipelineResult.events`` and ``activation_timeline``; nothing here knows a
bubble formula. Up to ``MAX_BARS`` events the Gantt is one bar per action; beyond that the
schedule is rasterised into a rank x time heatmap (same colours), which stays fast in the
browser at tens of thousands of actions.
"""

from app.charts import base_layout, gpu_memory_line

KINDS = {  # kind -> (label, colour, heatmap code)
    "F": ("Forward", "#4c78a8", 1),
    "B": ("Backward", "#f58518", 2),
    "I": ("Backward: input gradient", "#e45756", 3),
    "W": ("Backward: weight gradient", "#54a24b", 4),
}
IDLE = "#f1f3f7"
MAX_BARS = 1500  # above this, a heatmap
LABEL_BARS = 400  # above this, no micro-batch labels (they would be unreadable)
RASTER_COLUMNS = 1000
MAX_MEMORY_LINES = 8
PALETTE = (
    "#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#9d755d",
)


def _rank_label(rank: int) -> str:
    return f"rank {rank}"


def gantt_figure(result) -> dict:
    events = result.events
    p = result.input.stages
    if len(events) > MAX_BARS:
        data = _raster(result)
    else:
        data = _bars(result, labels=len(events) <= LABEL_BARS)
    height = max(220, min(640, 60 + 30 * p))
    return {
        "data": data,
        "layout": base_layout(
            height=height,
            barmode="overlay",
            bargap=0.15,
            margin={"l": 64, "r": 16, "t": 8, "b": 44},
            xaxis={"title": {"text": "time (one stage's forward = f)"},
                   "range": [0, result.makespan], "gridcolor": "#e6e9ef", "zeroline": False},
            yaxis={"autorange": "reversed", "type": "category", "fixedrange": True,
                   "categoryorder": "array",
                   "categoryarray": [_rank_label(r) for r in range(p)]},
            uniformtext={"minsize": 8, "mode": "hide"},
            plot_bgcolor=IDLE,
            showlegend=False,  # the page names the colours under the chart
        ),
        "summary": (
            f"{result.input.schedule} with {p} stages and {result.input.microbatches} "
            f"micro-batches: bubble {100 * result.bubble_fraction:.1f}% measured"
        ),
    }


def _bars(result, labels: bool) -> list[dict]:
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
                "x": [], "base": [], "y": [], "text": [], "customdata": [],
                "textposition": "inside", "insidetextanchor": "middle",
                "textfont": {"color": "#ffffff"},
                "hovertemplate": (
                    f"{label}<br>%{{y}}, micro-batch %{{customdata[0]}}, chunk %{{customdata[1]}}"
                    "<br>%{base:.2f} → %{customdata[2]:.2f}<extra></extra>"
                ),
            }
        trace["x"].append(round(ev.end - ev.start, 6))
        trace["base"].append(round(ev.start, 6))
        trace["y"].append(_rank_label(ev.rank))
        trace["text"].append(str(ev.microbatch) if labels else "")
        trace["customdata"].append([ev.microbatch, ev.chunk, round(ev.end, 6)])
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


def memory_ranks(p: int) -> list[int]:
    """Which ranks get a line: all of them up to 8, else 8 spread from first to last."""
    if p <= MAX_MEMORY_LINES:
        return list(range(p))
    return sorted({round(i * (p - 1) / (MAX_MEMORY_LINES - 1)) for i in range(MAX_MEMORY_LINES)})


def activations_figure(result) -> dict:
    """Micro-batch activations held per rank over time (step lines), the peaks marked."""
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
            "name": f"rank {rank} (peak {peak})", "x": xs, "y": ys, "showlegend": False,
            "hovertemplate": f"rank {rank}: %{{y}} held<extra></extra>",
            "legendgroup": str(rank),
        })
        data.append({
            "type": "scatter", "mode": "markers+text", "x": [at], "y": [peak],
            "showlegend": False, "text": [f"r{rank}"], "textposition": "top right",
            "textfont": {"size": 10, "color": colour}, "cliponaxis": False,
            "marker": {"size": 9, "symbol": "diamond", "color": colour,
                       "line": {"width": 1, "color": "#1d2330"}},
            "hovertemplate": f"rank {rank} peak: {peak}<extra></extra>", "legendgroup": str(rank),
        })
    return {
        "data": data,
        "layout": base_layout(
            height=300,
            margin={"l": 56, "r": 16, "t": 16, "b": 40},
            xaxis={"title": {"text": "time (one stage's forward = f)"},
                   "range": [0, result.makespan],
                   "gridcolor": "#e6e9ef", "zeroline": False},
            yaxis={"title": {"text": "units held"}, "rangemode": "tozero",
                   "gridcolor": "#e6e9ef"},
        ),
        "summary": f"peak activations per rank: {', '.join(map(str, peaks))}",
    }


def stage_memory_figure(memory) -> dict:
    """Per-rank peak memory (state + measured activations) against the GPU's line, in GB."""
    p = len(memory.total_bytes)
    ranks = [_rank_label(r) for r in range(p)]
    gpu_gb = memory.gpu_memory_bytes / 1e9
    state_gb = [round(s / 1e9, 3) for s in memory.state_per_rank]
    acts_gb = [round(a / 1e9, 3) for a in memory.activation_bytes]
    over = ["#b42318" if not ok else "#e45756" for ok in memory.fits]
    top = max(gpu_gb, max(t / 1e9 for t in memory.total_bytes)) * 1.12
    return {
        "data": [
            {"type": "bar", "name": "Weights, grads, optimizer state", "x": ranks,
             "y": state_gb, "marker": {"color": "#4c78a8"},
             "hovertemplate": "%{x}: state %{y:,.1f} GB<extra></extra>"},
            {"type": "bar", "name": "Activations at the rank's peak", "x": ranks, "y": acts_gb,
             "marker": {"color": over},
             "hovertemplate": "%{x}: activations %{y:,.1f} GB<extra></extra>"},
        ],
        "layout": base_layout(
            barmode="stack", height=280,
            margin={"l": 56, "r": 16, "t": 16, "b": 56},
            yaxis={"title": {"text": "GB per GPU"}, "range": [0, top],
                   "gridcolor": "#e6e9ef"},
            xaxis={"fixedrange": True, "type": "category"},
            **gpu_memory_line(gpu_gb),
            legend={"orientation": "h", "y": -0.22, "x": 0, "yanchor": "top"},
        ),
        "summary": f"peak memory per rank, worst rank {memory.worst_rank}: "
                   f"{memory.total_bytes[memory.worst_rank] / 1e9:,.1f} GB",
    }
