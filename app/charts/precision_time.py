"""EP10's diagrams in time: the activation offload's copy of one layer against the compute
that hides it, and a step by part, BF16 against the chosen recipe. EP10's memory diagrams (the
FP8 ledger, bytes per parameter, the fine-tuning bills) and the steps each state answers are
``app.charts.precision``.

Every line and bar is read off ``labs.precision.lab``.
"""

from app.charts import LINE_COLOUR, base_layout, chosen_band, short_gpu_name, value_label
from app.charts.precision import legend_below, short_recipe
from app.charts.precision_keys import OFFLOAD_STEP, speed_step, tokens_step
from app.charts.units import fmt_bytes, fmt_ms, fmt_pct
from labs.core.catalogue import RECIPES

COPY_COLOUR, COMPUTE_COLOUR, EXPOSED_FILL = "#e45756", "#4c78a8", "rgba(228,87,86,0.12)"


def offload_figure(result) -> dict:
    """One layer's copy to host memory against share offloaded, beside the forward and
    backward compute of that layer; the chosen share marked."""
    o = result.offload
    xs = [round(100 * p.share) for p in o.points]
    copy = [round(p.copy_s * 1e3, 4) for p in o.points]
    fwd, bwd = round(o.forward_s * 1e3, 4), round(o.backward_s * 1e3, 4)
    top = max(copy[-1], bwd) * 1.3 or 1
    data = [
        {"type": "scatter", "mode": "lines", "name": f"Copy over {o.link_name}", "x": xs,
         "y": copy, "line": {"color": COPY_COLOUR, "width": 3},
         "hovertemplate": "%{x}% offloaded: %{y:.3g} ms per layer<extra></extra>"},
        {"type": "scatter", "mode": "lines", "name": "Forward of the layer", "x": [0, 100],
         "y": [fwd, fwd], "line": {"color": COMPUTE_COLOUR, "width": 2},
         "hovertemplate": "forward: %{y:.3g} ms<extra></extra>"},
        {"type": "scatter", "mode": "lines", "name": "Backward of the layer", "x": [0, 100],
         "y": [bwd, bwd], "line": {"color": COMPUTE_COLOUR, "width": 2, "dash": "dash"},
         "hovertemplate": "backward: %{y:.3g} ms<extra></extra>"},
    ]
    shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": 100 * o.share,
               "x1": 100 * o.share, "y0": 0, "y1": 1,
               "line": {"color": LINE_COLOUR, "width": 2, "dash": "dot"}}]
    # The chosen share lit, and the copy time the prose weighs against the forward by it.
    shapes.append(chosen_band(100 * o.share - 4, 100 * o.share + 4))
    right = o.share > 0.5
    notes = [value_label(100 * o.share, round(o.copy_s * 1e3, 4),
                         f"{fmt_pct(o.share)} offloaded: {fmt_ms(o.copy_s)} copy,<br>"
                         f"{fmt_ms(o.forward_s)} forward", yanchor="bottom",
                         xanchor="right" if right else "left", xshift=-8 if right else 8,
                         align="right" if right else "left")]
    if o.hidden_share < 1:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "y0": 0, "y1": 1,
                       "x0": 100 * o.hidden_share, "x1": 100, "fillcolor": EXPOSED_FILL,
                       "line": {"width": 0}, "layer": "below"})
    # With activations offloaded, the copy against the forward is step 12's answer: the chart
    # waits for its guess, veiled whole (meta.after; round-13 cold reading of EP10-EP11,
    # finding 2). On a long FP8 sequence the copy is the layer's activations over the link,
    # which give step 4's saving against BF16's: it waits for step 4 too.
    after = " ".join(k for k in (OFFLOAD_STEP, tokens_step(result.input)) if k)
    veil = {"meta": {"masked": {}, "after": after}} if after else {}
    return {
        "data": data,
        "layout": base_layout(
            legend=legend_below(), shapes=shapes, annotations=notes, **veil,
            margin={"l": 52, "r": 8, "t": 8, "b": 40},
            # The tick labels a little lower: the two axes' "0" would touch at the origin.
            xaxis={"ticksuffix": "%", "range": [0, 100], "fixedrange": True,
                   "ticklabelstandoff": 6},
            yaxis={"title": {"text": "ms per layer"}, "range": [0, top], "fixedrange": True,
                   "rangemode": "tozero"}),
        "summary": (
            f"Offloading {fmt_pct(o.share)} of the saved activations frees "
            f"{fmt_bytes(o.freed_bytes)} per GPU and needs {fmt_bytes(o.host_bytes_per_node)} "
            f"of host RAM per node; one layer's copy takes {fmt_ms(o.copy_s)} against "
            f"{fmt_ms(o.forward_s)} of forward: "
            + ("hidden" if o.hidden else f"{fmt_ms(o.exposed_s)} exposed per step")
            + f" (the forward hides up to {fmt_pct(o.hidden_share)})"
        ),
    }


BF16_COLOUR, FP8_COLOUR = "#4c78a8", "#f58518"


def speed_figure(result) -> dict:
    """A step by part on the slowest GPU, BF16 against the chosen recipe (ms per step), from
    ``labs.precision.speed``; each step's total written beside the chart's title rows."""
    s, inp = result.speed, result.input
    name = short_recipe(inp.recipe)
    sixteen = RECIPES[inp.recipe].family != "fp8"  # its step is BF16's: one bar
    if not s.timed:
        return {"data": [], "layout": base_layout(
            margin={"l": 8, "r": 8, "t": 8, "b": 8}, xaxis={"visible": False},
            yaxis={"visible": False},
            annotations=[{"xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
                          "showarrow": False, "text": s.reason}]),
            "summary": f"Not timed: {s.reason}"}
    parts = [p for p in s.parts if p.bf16_s or p.fp8_s]
    rows = [p.label for p in reversed(parts)]
    # Seconds once a part passes 10 s (EP10's long QLoRA runs): "200,000 ms" ticks ran off a
    # phone's axis.
    longest = max(max(p.bf16_s, p.fp8_s) for p in parts)
    unit, scale = ("s", 1.0) if longest >= 10 else ("ms", 1e3)
    # The legend carries each step's total, so a change of state shows in it too.
    data = [
        {"type": "bar", "orientation": "h", "name": f"BF16: {fmt_ms(s.bf16_step_s)}",
         "y": rows, "x": [round(p.bf16_s * scale, 4) for p in reversed(parts)],
         "marker": {"color": BF16_COLOUR},
         "hovertemplate": f"BF16: %{{x:,.4~r}} {unit}<extra>%{{y}}</extra>"},
        {"type": "bar", "orientation": "h",
         "name": f"{name}: {fmt_ms(s.fp8_step_s)}" + ("" if s.reason else f", {s.speedup:.2f}×"),
         "y": rows,
         "x": [round(p.fp8_s * scale, 4) for p in reversed(parts)],
         "marker": {"color": FP8_COLOUR},
         "hovertemplate": f"{name}: %{{x:,.4~r}} {unit}<extra>%{{y}}</extra>"},
    ][:1 if sixteen else 2]
    top = longest * scale * 1.08
    unchanged = ", ".join(p.label for p in s.unchanged if p.bf16_s) or "none"
    # No ratio where there is nothing to compare (a 16-bit recipe, a GPU without FP8): its
    # 1.00× would read as EP10 step 9's answer before the guess (test_answers_hidden).
    verdict = ("no faster" if s.reason else f"{s.speedup:.2f}× as fast" if s.speedup >= 1
               else f"{1 / s.speedup:.2f}× slower")
    if sixteen:
        summary = (f"{inp.model.name} on {s.gpus:,} × {short_gpu_name(inp.gpu.name)}, "
                   f"{s.microbatches} micro-batch{'es' if s.microbatches != 1 else ''} per step: "
                   f"BF16 steps in {fmt_ms(s.bf16_step_s)} (MFU {fmt_pct(s.bf16_mfu)}); "
                   f"{name} is a 16-bit recipe and steps as BF16 does: pick an FP8 recipe to "
                   f"compare")
    # An FP8 step against BF16 answers EP10 step 8 (its opening state is step 8's 8B run), or
    # step 9 with fewer micro-batches (speed_step): on the lesson, until that step's guess,
    # drawn veiled (static/js/lab.js), the legend naming the two recipes without their steps.
    veil = {} if sixteen else {"meta": {"masked": {}, "owners": [{"step": speed_step(inp, s)}],
                                       "names": {"0": "BF16", "1": name}}}
    return {
        "data": data,
        "layout": base_layout(
            barmode="group", bargap=0.2, bargroupgap=0, legend=legend_below(), **veil,
            margin={"l": 8, "r": 16, "t": 8, "b": 24},
            # At most 4 ticks: 8 ("0 ms" .. "14000 ms") tilted into the legend on a phone.
            xaxis={"ticksuffix": f" {unit}", "range": [0, top], "fixedrange": True, "nticks": 4,
                   "tickformat": ",.0f"},
            yaxis={"fixedrange": True, "automargin": True}),
        "summary": summary if sixteen else (
            f"{inp.model.name} on {s.gpus:,} × {short_gpu_name(inp.gpu.name)}, "
            f"{s.microbatches} micro-batch{'es' if s.microbatches != 1 else ''} per step: "
            f"BF16 steps in "
            f"{fmt_ms(s.bf16_step_s)} (MFU {fmt_pct(s.bf16_mfu)}), {name} in "
            f"{fmt_ms(s.fp8_step_s)} (BF16-equivalent MFU {fmt_pct(s.fp8_mfu)}: model FLOPs over "
            f"the BF16 peak), {verdict}"
            + (f". {s.reason}" if s.reason else f"; not faster: {unchanged}")
        ),
    }
