"""EP04's charts: efficiency against TP degree on each link, the per-layer cost of the chosen
setup, and the EP01 ledger against TP degree."""

from app.charts import (
    LINE_COLOUR,
    base_layout,
    chosen_band,
    chosen_opacity,
    cut_label,
    gpu_memory_line,
    short_gpu_name,
    value_label,
)
from app.charts.crossover import ms, threshold_figure, tokens, verdict
from app.charts.memory import COMPONENTS
from app.charts.units import fmt_bytes, fmt_ms, fmt_pct, gb_axis
from labs.hardware.links import get_link
from labs.tensor_parallel.crossover import tp_crossover

CURRENT = "#1d2330"
# One colour per compared link (labs.tensor_parallel.lab.COMPARE_LINKS), fast to slow.
LINK_COLOURS = {
    "nvlink-3": "#4c78a8", "nvlink-4": "#4c78a8", "nvlink-4-h800": "#4c78a8",
    "nvlink-5": "#4c78a8", "infinity-fabric-mi300x": "#4c78a8", "nvl72": "#72b7b2",
    "pcie-4": "#eeca3b", "pcie-5": "#eeca3b", "ib-ndr": "#54a24b", "eth-100g": "#f58518",
    "eth-25g": "#e45756",
}
COMPUTE, COMM = "#4c78a8", "#e45756"

# The drill tp-predict-70b asks Llama 3.1 70B's efficiency per step at TP 8 in the NVLink node.
# At every state of that model the figures that give it by a division (the headline, the
# efficiency and cost charts, their tables, the step's readout) wait on the lesson until the
# drill is answered: lab.js masks what is keyed by the drill's form (round-12 cold reading of
# EP04, finding 2: switching the Model select drew "75.9% efficient" before the guess).
MODEL_70B, DRILL_70B = "llama-3.1-70b", "drill-tp-predict-70b"
# The steps whose answers the bench's own controls set (round-13 cold reading of EP04, findings
# 1 and 2): step 5 asks what sequence parallelism does to a layer's time, so at every state with
# SP on the time figures wait for its guess; step 4 asks one all-reduce's time where the group's
# slowest link is 25 Gb/s Ethernet, so at every such state they wait for step 4's.
STEP_4, STEP_5, SLOW_LINK = "step-4", "step-5", "eth-25g"
STEP_4_TP = 8  # the degree step 4 asks about over SLOW_LINK
WAITS = {DRILL_70B: "the drill in step 4 is answered", STEP_4: "step 4 is guessed",
         STEP_5: "step 5 is guessed"}
AFTER = {DRILL_70B: "step 4's drill", STEP_4: "step 4", STEP_5: "step 5"}  # a legend's words


def drill_key(result) -> str:
    """The drill whose answer this state's efficiency gives ('' for none)."""
    return DRILL_70B if result.input.model.id == MODEL_70B else ""


def step_keys(result) -> tuple[str, ...]:
    """The steps whose answer this state's time figures give: step 5 with SP on, step 4
    wherever the group's slowest link is 25 Gb/s Ethernet. At t = 8 that is step 4's answer;
    at another t (the bad case's 4) the figures lay out the method and land beside it (round-19
    cold reading X, finding 3: "0.43x one GPU" one click before step 4's 0.39x), so they wait
    too, as EP02's bad case does."""
    return ((STEP_5,) if result.input.sp else ()) + (
        (STEP_4,) if result.cost.bottleneck == SLOW_LINK and result.cost.tp > 1 else ())


def slow_point(result, c) -> bool:
    """Whether the sweep's entry ``c`` is step 4's answer at a state whose own t is another:
    t = 8 over 25 Gb/s Ethernet, drawn by the bad case's TP = 4 (round-16 cold reading of
    EP04, finding 2: the bad case veiled its whole state, t = 4 included, which answers no
    step, so its button drew grey bars and "?")."""
    return (c.tp == STEP_4_TP and c.bottleneck == SLOW_LINK
            and STEP_4 not in step_keys(result))


def row_keys(result, c) -> str:
    """What a sweep row's efficiency and times wait for: the state's (``held_keys``), and
    step 4's where the row is its answer (``slow_point``)."""
    return " ".join(filter(None, (held_keys(result), STEP_4 if slow_point(result, c) else "")))


def held_keys(result) -> str:
    """What this state's efficiency and times wait for on the lesson, as an .answer-mask's
    data-after-guess: the 70B drill, and the steps ``step_keys`` names."""
    return " ".join(filter(None, (drill_key(result), *step_keys(result))))


def waits(keys: str, word: str = "until") -> str:
    """What a mask says it waits for: "until step 5 is guessed" (or, ``word`` "once", when
    what it hides shows)."""
    return f"{word} " + " and ".join(WAITS[k] for k in keys.split())


def _held_meta(keys: str, tp: int, traces: int, label: int, part: str, mask: str,
               names: dict[int, str] | None = None) -> dict:
    """layout.meta that veils a chart whole until ``keys`` are guessed or answered (lab.js
    veilOf: one owner, keyed by them all), with its label masked and ``part`` of its summary
    read as ``mask``; {} where nothing waits."""
    if not keys:
        return {}
    return {"meta": {"masked": {str(label): f"t = {tp}: ?"},
                     **({"names": {str(i): n for i, n in names.items()}} if names else {}),
                     "owners": [{"step": keys, "traces": list(range(traces)),
                                 "annotations": [label], "summary": [part, mask]}]}}


T_TICKS = [1, 2, 4, 8, 16, 32, 64]


# Short legend names, so the legend stays two rows on a laptop and four on a phone.
SHORT_NAMES = {"nvlink-3": "NVLink 3", "nvlink-4": "NVLink 4", "nvlink-4-h800": "NVLink 4 (H800)",
               "nvlink-5": "NVLink 5", "infinity-fabric-mi300x": "Infinity Fabric",
               "nvl72": "NVL72 rack", "pcie-4": "PCIe 4.0", "pcie-5": "PCIe 5.0",
               "ib-ndr": "IB NDR 400G", "eth-100g": "Ethernet 100G", "eth-25g": "Ethernet 25G"}


def _x(t: int) -> int:
    """t on a doubling axis: the position is log2(t), the tick reads t."""
    return t.bit_length() - 1


def _t_axis(top: int) -> dict:
    ticks = [t for t in T_TICKS if t <= top]
    # No axis title: the legend sits under the axis, and the chart's heading names t.
    return {"tickmode": "array",
            "tickvals": [_x(t) for t in ticks], "ticktext": [str(t) for t in ticks],
            "range": [-0.2, _x(top) + 0.2], "fixedrange": True, "gridcolor": "#e6e9ef",
            "zeroline": False}


def _kv_shade(kv_heads: int, top: int) -> tuple[list[dict], list[dict]]:
    """Shapes and annotation for t beyond the KV heads (KV heads replicated)."""
    if kv_heads >= top:
        return [], []
    shape = {"type": "rect", "xref": "x", "yref": "paper", "x0": _x(kv_heads),
             "x1": _x(top) + 0.2,
             "y0": 0, "y1": 1, "fillcolor": "rgba(120,120,120,0.12)", "line": {"width": 0},
             "layer": "below"}
    note = {"xref": "x", "x": _x(kv_heads), "xanchor": "left", "yref": "paper", "y": 1,
            "yanchor": "top", "showarrow": False, "align": "left",
            "text": f"t > {kv_heads} KV heads:<br>K, V replicated", "font": {"size": 11},
            "bgcolor": "rgba(255,255,255,0.8)"}
    return [shape], [note]


def efficiency_figure(result) -> dict:
    """Per-step efficiency (speedup ÷ t) against t: the chosen setup and each compared link."""
    inp = result.input
    data = []
    for link_id, costs in result.by_link.items():
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": _link_name(result, link_id),
            "x": [_x(c.tp) for c in costs], "customdata": [c.tp for c in costs],
            "y": [round(100 * c.step_efficiency, 2) for c in costs],
            "line": {"color": LINK_COLOURS.get(link_id, "#888"), "width": 1.5},
            "marker": {"size": 5},
            "hovertemplate": "t = %{customdata}: %{y:.1f}%<extra>%{fullData.name}</extra>",
        })
    data.append({
        "type": "scatter", "mode": "lines+markers", "name": "This setup",
        "x": [_x(c.tp) for c in result.sweep], "customdata": [c.tp for c in result.sweep],
        "y": [round(100 * c.step_efficiency, 2) for c in result.sweep],
        "line": {"color": CURRENT, "width": 3}, "marker": {"size": 7},
        "fill": "tozeroy", "fillcolor": "rgba(29,35,48,0.08)",
        "hovertemplate": "t = %{customdata}: %{y:.1f}%<extra>this setup</extra>",
    })
    top = max(c.tp for c in result.sweep)
    # Below 1/t the group is slower than one GPU (speedup < 1).
    data.append({
        "type": "scatter", "mode": "lines", "name": "1/t: slower below",
        "x": [_x(c.tp) for c in result.sweep], "y": [round(100 / c.tp, 2) for c in result.sweep],
        "line": {"color": "#999", "dash": "dot", "width": 1.5}, "hoverinfo": "skip",
    })
    cost = result.cost
    data.append({
        "type": "scatter", "mode": "markers", "name": f"Now: t = {cost.tp}", "showlegend": False,
        "x": [_x(cost.tp)], "y": [round(100 * cost.step_efficiency, 2)],
        "marker": {"size": 14, "color": "rgba(0,0,0,0)", "line": {"color": CURRENT,
                                                                     "width": 2.5}},
        "hovertemplate": f"now: t = {cost.tp}, %{{y:.1f}}%<extra></extra>",
    })
    shapes, notes = _kv_shade(inp.model.kv_heads, top)
    shapes.append(chosen_band(_x(cost.tp) - 0.3, _x(cost.tp) + 0.3))
    # The chosen t's efficiency and speedup, the figures the prose quotes, by its circle
    # (under it, or over it near the axis, where the tick labels are).
    low = cost.step_efficiency < 0.3
    # Towards the middle of the axis: in the right half the label ends at the circle (at a
    # phone's width "t = 4: 11%, 0.43×" ran past the edge of an axis that stops at t = 8).
    right = _x(cost.tp) >= _x(top) / 2
    notes.append(value_label(
        _x(cost.tp), round(100 * cost.step_efficiency, 2),
        f"t = {cost.tp}: {fmt_pct(cost.step_efficiency)}, {cost.step_speedup:.2f}×",
        xanchor="right" if right else "left", yanchor="bottom" if low else "top",
        xshift=-10 if right else 10, yshift=8 if low else -8))
    runs = (f"runs at {fmt_pct(cost.step_efficiency)} efficiency "
            f"({cost.step_speedup:.2f}x one GPU)")
    keys = held_keys(result)
    mask = f"runs at ? efficiency {waits(keys)}"
    meta = (_sp_held(result, keys, len(notes) - 1, runs, mask) if STEP_5 in step_keys(result)
            else _held_meta(keys, cost.tp, len(data), len(notes) - 1, runs, mask))
    # Step 4 asks TP = 8's speed-up over 25 Gb/s Ethernet: the Ethernet 25G line, drawn at
    # every state, holds it (round-14 cold reading of EP04, finding 3), so it waits for step
    # 4's guess; the rest of the chart stays drawn where nothing else waits (meta.partly).
    slow = list(result.by_link).index(SLOW_LINK) if SLOW_LINK in result.by_link else None
    if slow is not None:
        meta = meta or {"meta": {"masked": {}, "owners": [], "partly": True}}
        meta["meta"]["owners"].append({"step": STEP_4, "traces": [slow], "points": [
            [len(result.by_link), j] for j, c in enumerate(result.sweep)
            if slow_point(result, c)]})  # this setup's t = 8 where its own t is another
    return {
        "data": data,
        "layout": base_layout(
            height=440,  # the legend lists every link; lab.js caps it to the view
            margin={"l": 52, "r": 8, "t": 8, "b": 40},
            xaxis=_t_axis(top),
            yaxis={"title": {"text": "Efficiency (%)"}, "range": [0, 105],
                   "fixedrange": True, "gridcolor": "#e6e9ef"},
            shapes=shapes, annotations=notes,
            # Eight entries: at 10 px a phone's legend fits without scrolling.
            legend={"orientation": "h", "y": -0.1, "x": 0, "yanchor": "top",
                    "font": {"size": 10}},
            **meta,
        ),
        "summary": (
            f"{inp.model.name} on {short_gpu_name(inp.gpu.name)}s: TP = {cost.tp} on "
            f"{inp.topology.name} {runs}; efficiency falls with t on every link, "
            "fastest on the slow ones"
        ),
    }


def _sp_held(result, keys: str, label: int, runs: str, mask: str) -> dict:
    """layout.meta that holds, until ``keys`` (step 5's, with step 4's or the 70B drill's where
    they wait too) are guessed, what answers step 5 (what SP does to a layer's time at t = 8 in
    an NVLink node): this setup's line and circle, its label, and the lines of the GPU's own
    fabrics (NVLink). The slower links' lines stay drawn, so turning SP on visibly lowers them
    (round-16: at SP on the chart was veiled whole, as the cost chart was before 98b872d)."""
    lines = list(result.by_link)
    fabric = [i for i, k in enumerate(lines) if get_link(k).gpus]
    held = [*fabric, len(lines), len(lines) + 2]  # + "This setup" and the "Now" circle
    after = " and ".join(AFTER[k] for k in keys.split())
    return {"meta": {"masked": {str(label): f"t = {result.cost.tp}: ?"}, "partly": True,
                     "names": {str(i): f"{_link_name(result, lines[i])} (after {after})"
                               for i in fabric} | {str(len(lines)): f"This setup (after {after})"},
                     "owners": [{"step": keys, "traces": held, "annotations": [label],
                                 "summary": [runs, mask]}]}}


def _link_name(result, link_id: str) -> str:
    costs = result.by_link[link_id]
    name = SHORT_NAMES.get(link_id) or get_link(link_id).name
    return name if len(costs) == len(result.sweep) else f"{name} (≤ {costs[-1].tp})"


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
    if step_keys(result):
        layout["meta"] = _collectives_held(result, keys, collectives, against, len(cut))
    elif keys:  # One GPU's time over t of the chosen bar is the 70B drill's efficiency a layer.
        layout.update(_held_meta(keys, cost.tp, len(data), 0, against,
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
        data.append({
            "type": "bar", "name": label, "x": x, "y": [round(v / 1e9, 3) for v in values],
            "marker": {"color": colour, "opacity": faint},
            "customdata": [fmt_bytes(v) for v in values],
            "hovertemplate": f"t = %{{x}}: {label} %{{customdata}}<extra></extra>",
        })
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


def figures(result) -> dict:
    return {"efficiency": efficiency_figure(result), "cost": cost_figure(result),
            "memory": memory_figure(result), "crossover": crossover_figure(result)}
