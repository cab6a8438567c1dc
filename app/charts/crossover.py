"""Compute against communication by tokens per GPU per step, with the crossover T* marked:
EP02's all-reduce and EP03's ZeRO stages draw it from their labs' figures; nothing here knows
a collective's formula."""

import math

from app.charts import LINE_COLOUR, base_layout, chosen_band

_log10 = math.log10
COMPUTE, COMM = "#4c78a8", "#e45756"  # as EP02's step bars: compute, exposed communication


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"
COMPUTE_BOUND, COMM_BOUND = "rgba(84,162,75,0.10)", "rgba(228,87,86,0.10)"


def tokens(value: float) -> str:
    """Tokens as the page prints them: from the API's figure (one decimal, as /api/dp and
    /api/zero answer it), so a prose quote and this label round alike (820.5 is 820 in both,
    not 821 on the chart and 820 in the step)."""
    return f"{round(value, 1):,.0f}"


def crossover_figure(tokens_per_gpu: float, compute_s: float, comm_s: float, cross: float,
                     sweep, comm_name: str, gpus: int) -> dict:
    """Compute and communication against tokens per GPU per step (log-log): compute rises
    with the tokens, the communication does not, and they cross at the lab's T*. The state
    is marked on the compute line, the crossover by a dashed line, each side shaded."""
    xs = [t for t, _ in sweep]
    lo, hi = min(xs[0], tokens_per_gpu), max(xs[-1], tokens_per_gpu)
    data = [{"type": "scatter", "mode": "lines", "name": "Compute, 6·P·T ÷ rate",
             "x": xs, "y": [round(s, 9) for _, s in sweep],
             "line": {"color": COMPUTE, "width": 2.5},
             "hovertemplate": "%{x:,} tokens: %{y:.3s}s of compute<extra></extra>"}]
    shapes, annotations = [], []
    if comm_s:
        data.append({"type": "scatter", "mode": "lines", "name": comm_name,
                     "x": [lo, hi], "y": [round(comm_s, 9)] * 2,
                     "line": {"color": COMM, "width": 2.5},
                     "hovertemplate": f"{comm_name}: {ms(comm_s)}<extra></extra>"})
        shapes += [
            {"type": "rect", "xref": "x", "yref": "paper", "x0": lo, "x1": cross, "y0": 0,
             "y1": 1, "fillcolor": COMM_BOUND, "line": {"width": 0}, "layer": "below"},
            {"type": "rect", "xref": "x", "yref": "paper", "x0": cross, "x1": hi, "y0": 0,
             "y1": 1, "fillcolor": COMPUTE_BOUND, "line": {"width": 0}, "layer": "below"},
            {"type": "line", "xref": "x", "yref": "paper", "x0": cross, "x1": cross, "y0": 0,
             "y1": 1, "line": {"color": "#1d2330", "dash": "dash", "width": 1.5}}]
        annotations.append({"xref": "x", "yref": "paper", "x": _log10(cross), "y": 1,
                            "xanchor": "left", "yanchor": "top", "showarrow": False,
                            "xshift": 4, "bgcolor": "rgba(255,255,255,0.85)",
                            "text": f"T* = {tokens(cross)} tokens"})
        # The state: its compute on the line and the gap to the all-reduce drawn between them.
        shapes.append({"type": "line", "xref": "x", "yref": "y", "x0": tokens_per_gpu,
                       "x1": tokens_per_gpu, "y0": compute_s, "y1": comm_s,
                       "line": {"color": "#1d2330", "width": 3}})
    shapes.append(chosen_band(tokens_per_gpu / 1.25, tokens_per_gpu * 1.25))
    data.append({"type": "scatter", "mode": "markers", "name": "This state",
                 "x": [tokens_per_gpu], "y": [round(compute_s, 9)],
                 "marker": {"size": 14, "color": "#1d2330"}, "hoverinfo": "skip"})
    bound = ("no all-reduce on 1 GPU" if not comm_s else
             f"compute ÷ communication = {compute_s / comm_s:.3g}")
    # The state's figures sit above the plot, left-aligned: beside its point they ran off a
    # phone's chart wherever the point sat mid-axis (215 px of text, 126 px to either side).
    annotations.append({"xref": "paper", "yref": "paper", "x": 0, "y": 1, "xanchor": "left",
                        "yanchor": "bottom", "yshift": 2, "align": "left", "showarrow": False,
                        "font": {"color": LINE_COLOUR, "size": 12},
                        "text": f"This state, {tokens(tokens_per_gpu)} tokens/GPU:<br>{bound}"})
    ys = [s for _, s in sweep] + ([comm_s] if comm_s else []) + [compute_s]
    side = ("compute-bound" if comm_s and compute_s >= comm_s else
            "communication-bound" if comm_s else "compute only")
    return {
        "data": data,
        "layout": base_layout(
            margin={"l": 56, "r": 8, "t": 40, "b": 44},
            xaxis={"type": "log", "title": {"text": "tokens per GPU per step (log scale)",
                                            "standoff": 6},
                   "range": [_log10(lo) - 0.05, _log10(hi) + 0.05], "gridcolor": "#e6e9ef"},
            yaxis={"type": "log", "title": {"text": "seconds per step"},
                   "range": [_log10(min(ys)) - 0.1, _log10(max(ys)) + 0.1],
                   "gridcolor": "#e6e9ef"},
            legend={"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top",
                    "font": {"size": 11}},
            shapes=shapes, annotations=annotations),
        "summary": (
            f"{tokens(tokens_per_gpu)} tokens per GPU on {gpus:,} GPUs: "
            f"{ms(compute_s)} of compute"
            + (f" against {ms(comm_s)} of communication ({side}); the two are equal at "
               f"T* = {tokens(cross)} tokens per GPU" if comm_s else
               ", no communication")),
    }
