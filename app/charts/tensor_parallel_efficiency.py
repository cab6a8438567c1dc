"""EP04's efficiency chart: per-step efficiency against TP degree, the chosen setup and each
compared link, what of it waits for which guess from ``tensor_parallel.py``'s keys."""

from app.charts import base_layout, chosen_band, short_gpu_name, value_label
from app.charts.tensor_parallel import (
    AFTER,
    SLOW_LINK,
    STEP_4,
    STEP_5,
    held_keys,
    held_meta,
    slow_point,
    step_keys,
    waits,
)
from app.charts.units import fmt_pct
from labs.hardware.links import get_link

CURRENT = "#1d2330"
# One colour per compared link (labs.tensor_parallel.lab.COMPARE_LINKS), fast to slow.
LINK_COLOURS = {
    "nvlink-3": "#4c78a8", "nvlink-4": "#4c78a8", "nvlink-4-h800": "#4c78a8",
    "nvlink-5": "#4c78a8", "infinity-fabric-mi300x": "#4c78a8", "nvl72": "#72b7b2",
    "pcie-4": "#eeca3b", "pcie-5": "#eeca3b", "ib-ndr": "#54a24b", "eth-100g": "#f58518",
    "eth-25g": "#e45756",
}


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
            else held_meta(keys, cost.tp, len(data), len(notes) - 1, runs, mask))
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
