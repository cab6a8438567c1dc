"""EP04's cost charts: one layer's time on a GPU of the group against t (compute ÷ t, then the
collectives), the EP01 ledger per GPU against t, and step 6's crossover of compute and
collectives by h/t; what of them waits for which guess from ``tensor_parallel.py``'s keys."""

from app.charts import (
    LINE_COLOUR,
    base_layout,
    chosen_opacity,
    cut_label,
    gpu_memory_line,
    short_gpu_name,
    value_label,
)
from app.charts.crossover import ms, threshold_figure, tokens, verdict
from app.charts.memory import COMPONENTS
from app.charts.tensor_parallel import (
    STEP_4,
    crossing_key,
    drill_key,
    held_keys,
    held_meta,
    slow_point,
    step_keys,
    waits,
)
from app.charts.units import fmt_bytes, fmt_ms, gb_axis, gb_bar
from labs.tensor_parallel.crossover import tp_crossover

COMPUTE, COMM = "#4c78a8", "#e45756"


def cost_figure(result) -> dict:
    """Per-layer time on one GPU of the group against t: compute ÷ t, then the collectives."""
    sweep = result.sweep
    x = [str(c.tp) for c in sweep]
    one = sweep[0].single_gpu_s * 1e3
    cost = result.cost
    faint = chosen_opacity([c.tp == cost.tp for c in sweep])
    data = [
        {"type": "bar", "name": "Compute (÷ t)", "x": x,
         "y": [round(c.compute_s * 1e3, 4) for c in sweep],
         "marker": {"color": COMPUTE, "opacity": faint},
         "hovertemplate": "t = %{x}: compute %{y:.2f} ms<extra></extra>"},
        # Exposed: the forward pair blocks, the backward pair counts only past its GEMM.
        # With sequence parallelism each all-reduce is a reduce-scatter and an all-gather
        # (step 5): hatched, and named so.
        {"type": "bar", "name": ("SP collectives: reduce-scatter + all-gather (exposed)"
                                 if result.input.sp else "TP collectives (exposed)"), "x": x,
         "y": [round(c.comm_s * 1e3, 4) for c in sweep],
         "marker": {"color": COMM, "opacity": faint,
                    **({"pattern": {"shape": "/", "fgcolor": "#ffffff", "fillmode": "overlay"}}
                       if result.input.sp else {})},
         "hovertemplate": "t = %{x}: collectives %{y:.2f} ms<extra></extra>"},
        {"type": "scatter", "mode": "lines", "name": f"One GPU: {one:.1f} ms", "x": x,
         "y": [round(one, 4)] * len(x), "line": {"color": LINE_COLOUR, "dash": "dash",
                                                 "width": 2}, "hoverinfo": "skip"},
    ]
    # Ranged to what a step compares, as the memory chart is: the chosen t's bar 5/8 of
    # the axis, so a millisecond moved between its compute and its collectives shows (step 5:
    # SP moves 1 ms each way, on an axis one GPU's 127 ms would set). A taller bar is cut at
    # the top with its total read up it; one GPU's line, above, is named in the legend.
    top = min(1.1 * max(one, *(c.layer_s * 1e3 for c in sweep)), 1.6 * cost.layer_s * 1e3)
    at = x.index(str(cost.tp))
    # With one all-reduce's time where the group leaves its node (step 4's states: round-13
    # cold reading, finding 6), and room above the chosen bar for its two lines. Inside a node
    # the second line ran into the taller bars' cut labels at 390 px (test_text_fits).
    second = (cost.tp > 1 and not result.input.sp
              and cost.tp > result.input.topology.cluster_for(result.input.gpu,
                                                              cost.tp).gpus_per_node)
    if second:
        top = max(top, 1.25 * cost.layer_s * 1e3)
    label = value_label(at, (cost.compute_s + cost.comm_s) * 1e3,
                        f"t = {cost.tp}: {cost.compute_s * 1e3:.2f} + {cost.comm_s * 1e3:.2f} ms"
                        + (f"<br>one all-reduce: {fmt_ms(cost.collective_s)}" if second else ""),
                        xanchor="left" if at < len(x) / 2 else "right", yshift=4)
    keys = held_keys(result)
    collectives = f"and {cost.comm_s * 1e3:.2f} ms of collectives"
    times = (f"One layer at t = {cost.tp}, per GPU: {cost.compute_s * 1e3:.2f} ms of compute "
             f"{collectives}")
    against = f"against {one:.1f} ms on one GPU"
    tall = [i for i, c in enumerate(sweep) if c.layer_s * 1e3 > top]
    cut = [cut_label(i, top, f"{sweep[i].layer_s * 1e3:.1f} ms ↑") for i in tall]
    layout = base_layout(
        barmode="stack",
        margin={"l": 52, "r": 8, "t": 8, "b": 40},
        xaxis={"type": "category", "fixedrange": True},
        yaxis=_ms_axis(top),
        annotations=[label, *cut],
        legend={"orientation": "h", "y": -0.1, "x": 0, "yanchor": "top",
                "traceorder": "normal", "font": {"size": 11}},
    )
    # Where the group crosses step 6's link its collectives give that step's (h/t)* by one
    # division: they wait for its guess too (round-29 reading A, finding 3).
    if step_keys(result) or crossing_key(result):
        held = " ".join(filter(None, (keys, crossing_key(result))))
        layout["meta"] = _collectives_held(result, held, collectives, against, len(cut))
    elif keys:  # One GPU's time over t of the chosen bar is the 70B drill's efficiency a layer.
        layout.update(held_meta(keys, cost.tp, len(data), 0, against,
                                 f"against one GPU's time {waits(keys)}", names={2: "One GPU"}))
    elif slow := [j for j, c in enumerate(sweep) if slow_point(result, c)]:
        # The bad case (TP = 4 over 25 Gb/s Ethernet): only t = 8's collectives, and its cut
        # bar's total, wait for step 4's guess; the rest is drawn.
        # The axis reaches from the other bars meanwhile (t = 8's layer set it).
        reach = min(1.1 * max(one, *(c.layer_s * 1e3 for j, c in enumerate(sweep)
                                     if j not in slow)), 1.6 * cost.layer_s * 1e3)
        if second:  # room for the chosen bar's two-line label, as ``top`` leaves
            reach = max(reach, 1.25 * cost.layer_s * 1e3)
        layout["meta"] = {"masked": {}, "partly": True, "axes": {"yaxis": _ms_axis(reach)},
                          "owners": [{"step": STEP_4, "points": [[1, j] for j in slow],
                                      "annotations": [1 + tall.index(j) for j in slow
                                                      if j in tall]}]}
    return {
        "data": data,
        "layout": layout,
        # No bytes: step 3 asks them (the table's Sent column waits for its guess).
        "summary": f"{times}, {against}",
    }


# While a step's collectives wait, the cost chart's axis reaches this many times the chosen
# bar's compute: a little above where 1.6 times the whole layer puts it, so the bar keeps
# about its height and turning SP on draws it a little lower, as it is.
HELD_REACH = 1.75


def _ms_axis(top: float) -> dict:
    return {"title": {"text": "ms per layer (fwd + bwd)"}, "range": [0, top],
            "fixedrange": True, "gridcolor": "#e6e9ef"}


def _collectives_held(result, keys: str, collectives: str, against: str, cuts: int) -> dict:
    """layout.meta that holds, until ``keys`` (step 4's or 5's, with the 70B drill where it
    waits too) are guessed, what answers those steps: the collectives of every t > 1, the
    chosen bar's label and the cut bars' totals; the compute bars stay drawn, so the step's
    try link moves the chart it names (round-14 cold reading of EP04, finding 10a: at SP on
    the chart was veiled whole). The axis reaches from the compute alone meanwhile."""
    cost = result.cost
    owners = [{"step": keys,
               "points": [[1, i] for i, c in enumerate(result.sweep) if c.tp > 1],
               "annotations": list(range(1 + cuts)),
               "summary": [collectives, f"and its collectives, which show {waits(keys, 'once')}"]}]
    drill = drill_key(result)
    if drill:  # one GPU's time gives the 70B drill's efficiency from the layer's
        owners.append({"step": drill, "traces": [2],
                       "summary": [against, f"against one GPU's time {waits(drill)}"]})
    return {"masked": {"0": f"t = {cost.tp}: {cost.compute_s * 1e3:.2f} + ? ms"},
            "partly": True, "owners": owners, **({"names": {"2": "One GPU"}} if drill else {}),
            "axes": {"yaxis": _ms_axis(HELD_REACH * cost.compute_s * 1e3)}}


def memory_figure(result) -> dict:
    """The EP01 ledger per GPU against t; t the ledger refuses (KV heads) is left empty."""
    rows = list(result.memory_sweep)
    x = [str(m.tp) for m in rows]
    gpu = result.memory.gpu_memory_bytes
    faint = chosen_opacity([m.tp == result.input.tp for m in rows])
    data = []
    for key, (label, colour) in COMPONENTS.items():
        values = [m.memory.breakdown.get(key, 0) if m.memory else 0 for m in rows]
        if not any(values):
            continue
        data.append(gb_bar(label, x, values, f"t = %{{x}}: {label} %{{customdata}}<extra></extra>",
                           color=colour, opacity=faint))
    totals = [m.memory.total_bytes for m in rows if m.memory]
    refused = [m.tp for m in rows if m.memory is None]
    notes = []
    if refused:
        # A category axis places annotations by index, not by the category's text.
        first = x.index(str(refused[0]))
        notes.append({"xref": "x", "x": first - 0.45, "xanchor": "left", "yref": "paper",
                      "y": 0.5, "showarrow": False, "align": "left", "font": {"size": 11},
                      "text": f"t ≥ {refused[0]}: more GPUs<br>than {result.input.model.kv_heads}"
                              " KV heads;<br>Megatron refuses"})
    current = result.memory
    # Ranged to what a step compares: the chosen t against the GPU, not t = 1's terabytes.
    # A bar above the range is cut at the top and its total printed there.
    top = max(gpu, current.total_bytes) * 1.3
    at = x.index(str(result.input.tp))
    notes.append(value_label(at, current.total_bytes / 1e9,
                             f"t = {result.input.tp}: {fmt_bytes(current.total_bytes)}",
                             xanchor="left" if at < len(x) / 2 else "right", yshift=2))
    for i, m in enumerate(rows):
        if m.memory and m.memory.total_bytes > top:
            notes.append(cut_label(i, top / 1e9, f"{fmt_bytes(m.memory.total_bytes)} ↑"))
    gpu_name = short_gpu_name(result.input.gpu.name)
    line = gpu_memory_line(gpu / 1e9, f"{gpu_name}: {fmt_bytes(gpu)}")
    return {
        "data": data,
        "layout": base_layout(
            barmode="stack",
            margin={"l": 52, "r": 8, "t": 8, "b": 40},
            xaxis={"type": "category", "fixedrange": True, "categoryorder": "array",
                   "categoryarray": x},
            yaxis=gb_axis(top),
            shapes=line["shapes"], annotations=line["annotations"] + notes,
            legend={"orientation": "h", "y": -0.1, "x": 0, "yanchor": "top",
                    "traceorder": "normal", "font": {"size": 11}},
        ),
        "summary": (
            f"Training memory per GPU (EP01 ledger) at t = {result.input.tp}: "
            f"{fmt_bytes(current.total_bytes)} against {fmt_bytes(gpu)}, "
            + ("fits" if current.fits else "does not fit")
            + f"; at t = 1: {fmt_bytes(totals[0])}"
            + (f"; t above {result.input.model.kv_heads} refused (KV heads)" if refused else "")
        ),
    }


def _doublings(lo: float, hi: float, most: int = 5) -> list[int]:
    """Powers of two from ``lo`` to ``hi``, every other one (or wider) past ``most``, so a
    phone's axis has room for each label."""
    values = [2 ** e for e in range(40) if lo <= 2 ** e <= hi]
    step = -(-len(values) // most)
    return values[::step]


def crossover_figure(result) -> dict:
    """EP04 step 6: one layer's compute against its collectives by h/t, this model split t
    ways (labs.tensor_parallel.crossover): the lines at this state's rate and bus bandwidth,
    the markers the lab's own layer at each timed t."""
    c = tp_crossover(result)
    inp = result.input
    bound, side = verdict(c.compute_s, c.comm_s, "compute", "no collectives at t = 1")
    return threshold_figure(
        x_state=c.per_gpu, compute_s=c.compute_s, comm_s=c.comm_s, cross=c.crossover,
        compute_line=c.sweep, comm_line=None,
        compute_name="Compute, 6·k·h·(h/t)·s·b ÷ rate", comm_name="Collectives, none hidden",
        compute_hover="h/t = %{x:,.0f}: %{y:.3s}s of compute<extra></extra>",
        x_title="hidden size per GPU, h/t (log scale)", y_title="time per layer",
        cross_text=f"(h/t)* = {tokens(c.crossover)}",
        state_text=f"This state, h/t = {c.per_gpu:,.0f}:<br>{bound}",
        points=[(x, cs, cm) for _, x, cs, cm in c.points], point_name="The lab at each t",
        x_ticks=_doublings(c.sweep[0][0], c.sweep[-1][0]), legend_y=-0.3,
        cross_masked="(h/t)* = ?",
        state_masked=f"This state, h/t = {c.per_gpu:,.0f}:<br>compute ÷ communication = ?",
        summary=(f"{inp.model.name} at t = {c.tp}, h/t = {c.per_gpu:,.0f}: {ms(c.compute_s)} "
                 "of compute a layer"
                 + (f" against {ms(c.comm_s)} to move its collectives' bytes ({side}); the two "
                    f"are equal at h/t = {tokens(c.crossover)}" if c.comm_s else
                    ", no collectives")))
