"""EP08's diagrams: the step as one bar (compute, exposed communication, bubble), its causes,
each pipeline stage's memory against the GPU, and the 2-D against 3-D sweep. The overlap
diagrams (the micro-batch's timeline, one layer op by op) are recipe_overlap.py."""

import math

from app.charts import (
    base_layout,
    chosen_band,
    gpu_line_legend,
    gpu_memory_line,
    short_gpu_name,
)
from app.charts.units import fmt_bytes, fmt_ms, fmt_pct, gb_axis
from labs.recipe.inputs import SEGMENT_LABELS

# Step segment -> (label, colour), in the order the bar stacks them (left first).
COLOURS = {"compute": "#4c78a8", "stages": "#9d755d", "tp": "#f58518", "cp": "#72b7b2",
           "ep": "#b279a2", "sends": "#54a24b", "bubble": "#bab0ac", "dp": "#e45756",
           "optimizer": "#eeca3b"}
SEGMENTS = {k: (label, COLOURS[k]) for k, label in SEGMENT_LABELS.items()}


def _plan_name(r) -> str:
    p = r.plan
    return f"TP{p.tp}×PP{p.pp}×DP{p.dp}"


def step_figure(result, replan=None) -> dict:
    """One horizontal bar, in ms, whose pieces add up to the step time; with a re-plan that
    found a plan, a second bar for it (on the new cluster) under the running one."""
    step = result.step_s
    rows = [result]
    names = ["step"]
    if replan is not None and replan.after is not None:
        rows = [result, replan.after]
        names = [f"now: {_plan_name(result)}, {result.gpus} GPUs",
                 f"re-plan: {_plan_name(replan.after)}, {replan.after.gpus} GPUs"]
    data = []
    for key, (label, colour) in SEGMENTS.items():
        seconds = [r.segments[key] for r in rows]
        if not any(s > 0 for s in seconds):
            continue
        shares = [s / r.step_s for s, r in zip(seconds, rows, strict=True)]
        # Two plans: the compute segment carries each plan's label (its share is the plan's
        # efficiency, printed in the label) instead of its share alone.
        hide = key == "compute" and len(rows) > 1
        data.append({
            "type": "bar", "orientation": "h", "name": label, "y": names,
            "x": [round(s * 1e3, 3) for s in seconds], "marker": {"color": colour},
            "text": [f"{fmt_pct(share)}" if share >= 0.06 and not hide else ""
                     for share in shares],
            "textposition": "inside", "insidetextanchor": "middle",
            "textfont": {"color": "#ffffff"}, "textangle": 0,
            "customdata": [fmt_pct(share) for share in shares],
            "hovertemplate": f"{label}: %{{x:,.0f}} ms (%{{customdata}})<extra></extra>",
        })
    notes = []
    if len(rows) > 1:
        # Each plan's efficiency, the figure the prose quotes, at its bar's end.
        for name, r in zip(names, rows, strict=True):
            head, _, gpus = name.partition(", ")
            notes.append({"xref": "x", "yref": "y", "x": 0, "y": name, "xanchor": "left",
                          "xshift": 6, "showarrow": False, "align": "left",
                          "font": {"size": 11, "color": "#ffffff"},
                          "text": f"<b>{head}</b><br>{gpus}: {fmt_pct(r.efficiency)} efficient"})
        step = max(r.step_s for r in rows)
    said = [(f"{name.split(',')[0]}: " if len(rows) > 1 else "") + _step_summary(r)
            for name, r in zip(names, rows, strict=True)]
    summary = ". ".join(text[:1].upper() + text[1:] for text in said)
    return {
        "data": data,
        "layout": base_layout(
            barmode="stack", bargap=0.35, showlegend=True,
            margin={"l": 8, "r": 8, "t": 8, "b": 40},
            uniformtext={"minsize": 9, "mode": "hide"},
            xaxis={"range": [0, step * 1e3 * 1.02],
                   "gridcolor": "#e6e9ef", "fixedrange": True},
            yaxis={"showticklabels": False, "fixedrange": True, "autorange": "reversed"},
            annotations=notes,
            # Up to nine entries, one a row on a phone: at 10 px, with up to 60% of the
            # chart's height (plotly's default: half), the legend shows whole, unscrolled.
            legend={"orientation": "h", "y": -0.2, "x": 0, "yanchor": "top",
                    "traceorder": "normal", "font": {"size": 10}, "maxheight": 0.6},
        ),
        "summary": summary,
    }


def _step_summary(r) -> str:
    """One plan's step in words, every figure that plan's own (with a re-plan the chart draws
    two plans, and each is said apart: round-6 reading, EP08 step 9). The readout's names and
    rounding (partials/_recipe.html), so the product reads alike."""
    parts = " × ".join(f"{label} {fmt_pct(r.parts[name])}"
                       for name, label in PART_LABELS.items() if r.parts[name] < 0.9995)
    return (f"one step takes {r.step_s * 1e3:,.0f} ms, "
            f"{fmt_pct(r.segments['compute'] / r.step_s)} of it compute"
            f": efficiency {fmt_pct(r.efficiency)}" + (f" = {parts}" if parts else "")
            + f"; MFU {fmt_pct(r.mfu)}")


# The efficiency's factors, in the readout's order and words.
PART_LABELS = {"stages": "uneven stages", "tp": "TP", "cp": "CP", "ep": "EP", "sends": "sends",
               "pp": "pipeline", "dp": "DP", "optimizer": "optimizer"}


# Cause -> colour (labs.recipe.step_time.Timing.causes names them); hidden time is drawn lighter.
CAUSE_COLOURS = {
    "gemm": "#4c78a8", "attention": "#72b7b2", "memory": "#9d755d", "tp": "#f58518",
    "cp": "#54a24b", "ep": "#b279a2", "pp": "#88d27a", "dp": "#e45756", "bubble": "#bab0ac",
    "optimizer": "#eeca3b",
}


def causes_figure(result, micro: dict) -> dict:
    """One micro-batch's share of the step on the slowest stage, a bar per cause (ms): time
    on the critical path solid, time hidden behind other work lighter beside it. Causes that
    take no time on this plan are left out."""
    rows = [c for c in micro["micro_causes"] if c["exposed_s"] + c["hidden_s"] > 0]
    rows.reverse()  # plotly draws the first category at the bottom
    labels = [c["label"] for c in rows]
    colours = [CAUSE_COLOURS.get(c["name"], "#8a94a6") for c in rows]
    data = [
        {"type": "bar", "orientation": "h", "name": "On the critical path", "y": labels,
         "x": [round(c["exposed_s"] * 1e3, 3) for c in rows], "marker": {"color": colours},
         "hovertemplate": "%{y}: %{x:,.1f} ms on the critical path<extra></extra>"},
        {"type": "bar", "orientation": "h", "name": "Hidden behind compute", "y": labels,
         "x": [round(c["hidden_s"] * 1e3, 3) for c in rows],
         "marker": {"color": colours, "opacity": 0.35, "line": {"color": colours, "width": 1}},
         "hovertemplate": "%{y}: %{x:,.1f} ms hidden<extra></extra>"},
    ]
    total, peak = micro["micro_step_s"], micro["micro_at_peak_s"]
    gemm = next(c["exposed_s"] for c in micro["micro_causes"] if c["name"] == "gemm")
    return {
        "data": data,
        "layout": base_layout(
            barmode="stack", bargap=0.3, showlegend=False,
            margin={"l": 8, "r": 8, "t": 8, "b": 44},
            xaxis={"title": {"text": "ms per micro-batch"},
                   "gridcolor": "#e6e9ef", "fixedrange": True, "rangemode": "tozero"},
            yaxis={"automargin": True, "fixedrange": True},
        ),
        "summary": (
            f"One micro-batch's share of the step: {total * 1e3:,.0f} ms on the slowest stage, "
            f"of which GEMMs {fmt_pct(gemm / total)}; its model FLOPs at the GPU's peak would "
            f"take {peak * 1e3:,.0f} ms: MFU {fmt_pct(result.mfu)}"
        ),
    }


def memory_figure(result) -> dict:
    """Each pipeline stage's bytes per GPU (state and activations) against the GPU line."""
    mem = result.memory
    gpu = mem.gpu_memory_bytes
    # The stage's number on the axis, titled once: "stage 0" .. "stage 7" overlapped at a
    # phone's width.
    ranks = [str(b.rank) for b in mem.stages]
    state_keys = ("weights", "gradients", "master_weights", "optimizer_moments")
    state = [sum(b.breakdown[k] for k in state_keys) for b in mem.stages]
    acts = [b.total_bytes - s for b, s in zip(mem.stages, state, strict=True)]
    top = max(max(b.total_bytes for b in mem.stages), gpu)
    gpu_label = f"{short_gpu_name(result.cluster.gpu.name)}: {fmt_bytes(gpu)}"
    data = [
        {"type": "bar", "name": "State (weights, grads, optimizer)", "x": ranks,
         "y": [round(v / 1e9, 3) for v in state], "marker": {"color": "#4c78a8"},
         "hovertemplate": "stage %{x}: state %{y:,.1f} GB<extra></extra>"},
        {"type": "bar", "name": "Activations in flight", "x": ranks,
         "y": [round(v / 1e9, 3) for v in acts], "marker": {"color": "#e45756"},
         "hovertemplate": "stage %{x}: activations %{y:,.1f} GB<extra></extra>"},
        gpu_line_legend(gpu / 1e9, gpu_label, ranks),
    ]
    heavy = mem.stages[mem.heaviest_stage]
    line = gpu_memory_line(gpu / 1e9, gpu_label)
    line.pop("annotations")
    return {
        "data": data,
        "layout": base_layout(barmode="stack", bargap=0.3, yaxis=gb_axis(top * 1.12),
                              xaxis={"fixedrange": True, "type": "category",
                                     "title": {"text": "Pipeline stage", "standoff": 4}},
                              margin={"l": 52, "r": 8, "t": 8, "b": 40},
                              legend={"orientation": "h", "y": -0.22, "x": 0,
                                      "yanchor": "top"}, **line),
        "summary": (
            f"Stage {heavy.rank} is the heaviest: {fmt_bytes(heavy.total_bytes)} per GPU "
            f"against {fmt_bytes(gpu)}, "
            + ("fits" if mem.fits else f"over by {fmt_bytes(-mem.headroom_bytes)}")
        ),
    }


TWO_D = {"2d": ("FSDP + TP (2-D)", "#f58518", "circle"),
         "3d": ("TP + PP + DP (3-D)", "#4c78a8", "square")}


BAND = {"2d": "rgba(245,133,24,0.18)", "3d": "rgba(76,120,168,0.18)"}


def two_d_figure(two: dict | None) -> dict | None:
    """``two``: the answer's ``two_d`` (app.recipe_answer.two_d_api). Tokens per second per GPU
    of each family's best plan against the GPUs (log axis, the page's global batch); a cross
    on the axis where a family has no plan that passes; the page's GPUs banded and its own
    plan marked."""
    if two is None:
        return None
    points = two["points"]
    xs = [p["gpus"] for p in points]
    data = []
    for key, (name, colour, symbol) in TWO_D.items():
        best = [p["best"][key] for p in points]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": name,
            "x": xs, "y": [round(b["tokens_per_s_per_gpu"], 1) if b else None for b in best],
            # The page's own plan's family drawn bold, the other faded (a link between the
            # two families' plans then redraws both lines, not only the circle).
            "line": {"color": colour, "width": 4 if two["family"] == key else 2},
            "opacity": 0.45 if two["family"] not in (None, key) else 1.0,
            "connectgaps": False,
            "marker": {"color": colour, "size": 9, "symbol": symbol},
            "customdata": [[b["label"], fmt_ms(b["step_s"]), fmt_bytes(b["memory_per_gpu_bytes"])]
                           if b else ["", "", ""] for b in best],
            "hovertemplate": "%{x:,} GPUs: %{customdata[0]}, %{y:,.0f} tokens/s per GPU, "
                             "%{customdata[1]} a step, %{customdata[2]} per GPU"
                             f"<extra>{name}</extra>"})
        missing = [p for p in points if p["best"][key] is None]
        if missing:
            data.append({
                "type": "scatter", "mode": "markers", "name": f"no {name} plan passes",
                "showlegend": False, "x": [p["gpus"] for p in missing], "y": [0] * len(missing),
                "marker": {"color": colour, "size": 10, "symbol": "x-thin",
                           "line": {"color": colour, "width": 2}},
                "customdata": [p["failed"][key] for p in missing],
                "hovertemplate": f"%{{x:,}} GPUs: no {name} plan passes (%{{customdata}})"
                                 "<extra></extra>"})
    here = two["gpus"]
    if two["passes"]:
        data.append({"type": "scatter", "mode": "markers", "name": "This plan",
                     "x": [here], "y": [round(two["tokens_per_s_per_gpu"], 1)],
                     "marker": {"size": 15, "color": "rgba(0,0,0,0)",
                                "line": {"color": "#1d2330", "width": 3}},
                     "hovertemplate": f"This plan, {two['label']}: %{{y:,.0f}} tokens/s per "
                                      "GPU<extra></extra>"})
    ys = [b["tokens_per_s_per_gpu"] for p in points for b in p["best"].values() if b]
    top = max(ys + [two["tokens_per_s_per_gpu"], 1.0]) * 1.12
    kind = {"2d": "2-D", "3d": "3-D"}.get(two["family"], "neither family")
    # Short enough for a phone's 390 px (the plan's name is in its hover and the summary).
    state = (f"This plan ({kind}): "
             + (f"{two['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU" if two["passes"]
                else "fails an audit"))
    return {
        "data": data,
        "layout": base_layout(
            margin={"l": 56, "r": 8, "t": 40, "b": 44},
            xaxis={"type": "log", "tickvals": xs, "ticktext": [f"{x:,}" for x in xs],
                   "title": {"text": f"GPUs ({two['global_batch']:,} sequences a step)",
                             "standoff": 6},
                   "range": [math.log10(xs[0]) - 0.08, math.log10(xs[-1]) + 0.08],
                   "gridcolor": "#e6e9ef", "fixedrange": True},
            yaxis={"title": {"text": "tokens/s per GPU"}, "range": [0, top],
                   "gridcolor": "#e6e9ef", "fixedrange": True, "rangemode": "tozero"},
            # The page's GPUs, tinted by its plan's family.
            shapes=[{**chosen_band(here / 1.25, here * 1.25),
                     "fillcolor": BAND.get(two["family"], chosen_band(0, 0)["fillcolor"])}],
            annotations=[{"xref": "paper", "yref": "paper", "x": 0, "y": 1, "xanchor": "left",
                          "yanchor": "bottom", "yshift": 2, "align": "left",
                          "showarrow": False, "font": {"size": 12}, "text": state}],
            legend={"orientation": "h", "y": -0.2, "x": 0, "yanchor": "top"},
        ),
        "summary": two["summary"],
        # The chart's table: each size, each family's best plan (or why none), the faster.
        "rows": [{"gpus": p["gpus"], "here": p["gpus"] == here,
                  "winner": TWO_D[p["winner"]][0] if p["winner"] else "neither",
                  **{key: (f"{b['label']}: {fmt_ms(b['step_s'])}, "
                           f"{b['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, "
                           f"{fmt_bytes(b['memory_per_gpu_bytes'])}" if b else "none passes")
                     for key, b in p["best"].items()}} for p in points],
    }
