"""EP07's diagrams, drawn from ``labs.experts``' result: tokens per expert (coloured by the GPU
that holds it), each GPU's time in the layer (dispatch, experts, combine, waiting for the
slowest), parameters held against parameters used, and the balance loss and the layer's time
against routing skew. What expert parallelism costs (each group's bandwidth, the grouped GEMM's
rate, the crossover f*) is ``app.charts.moe_cost``'s."""

from app.charts import LINE_COLOUR, base_layout, owned
from app.charts.units import fmt_count, fmt_pct

GPU_SHADES = ("#4c78a8", "#9ecae9")  # alternate per GPU so its experts read as one block
HOT = "#e45756"
DROPPED = "#bab0ac"
PHASES = {  # key -> (label, colour)
    "dispatch": ("Dispatch all-to-all", "#f58518"),
    "compute": ("Expert compute", "#4c78a8"),
    "combine": ("Combine all-to-all", "#eeca3b"),
    "wait": ("Waiting for the slowest GPU", "#e6e9ef"),
}


# Legends above the plot: below it they would sit on the x-axis title.
LEGEND_TOP = {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"}
MARGIN = {"l": 56, "r": 8, "t": 40, "b": 44}


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 4)


def _after(keys) -> str:
    """What a mask waits for: "(after step 4's guess)"."""
    return "(after " + " and ".join(k.replace("-", " ") + "'s" for k in keys) + " guess)"


def _owner(keys, summary: str = "", **parts) -> dict:
    """A chart's part owned by ``keys`` (layout.meta.owners): its traces, points, labels and
    shapes, and the summary's text it masks."""
    return {"step": " ".join(keys), **parts,
            **({"summary": [summary, f"? {_after(keys)}"]} if summary else {})}


def experts_figure(result, keys: dict | None = None) -> dict:
    """Bars of token copies per expert: kept (in its GPU's shade, the busiest GPU's in red)
    and dropped over capacity (grey), with the mean and the capacity as lines; the dropped
    share, and the busiest expert's ratio with the busiest GPU's bars and their label,
    owned by the steps they answer (``keys``, app.routers.moe_state.answer_keys)."""
    keys = keys or {}
    r, inp = result.routing, result.input
    per = result.experts_per_gpu
    experts = list(range(len(r.routed_per_expert)))
    kept = [n - d for n, d in zip(r.routed_per_expert, r.dropped_per_expert, strict=True)]
    colours = [HOT if e // per == result.slowest_gpu and result.gpu_max_over_mean > 1.001
               else GPU_SHADES[(e // per) % 2] for e in experts]
    mean = sum(r.routed_per_expert) / len(experts)
    data = [{
        "type": "bar", "name": "Processed", "x": experts, "y": kept,
        "marker": {"color": colours},
        "customdata": [e // per for e in experts],
        "hovertemplate": "expert %{x} on GPU %{customdata}: %{y:,} tokens<extra></extra>",
    }]
    if any(r.dropped_per_expert):
        data.append({
            "type": "bar", "name": "Dropped (over capacity)", "x": experts,
            "y": list(r.dropped_per_expert), "marker": {"color": DROPPED},
            "hovertemplate": "expert %{x}: %{y:,} dropped<extra></extra>",
        })
    lines = [(mean, "mean", LINE_COLOUR, "dot")]
    if r.capacity is not None:
        lines.append((r.capacity, "capacity", HOT, "dash"))
    shapes, notes = [], []
    for value, label, colour, dash in lines:
        shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                       "y0": value, "y1": value, "line": {"color": colour, "dash": dash,
                                                          "width": 2}})
        notes.append({"xref": "paper", "x": 1, "xanchor": "right", "yref": "y", "y": value,
                      "yanchor": "bottom", "showarrow": False, "text": f"{label} {value:,.0f}",
                      "bgcolor": "rgba(255,255,255,0.85)", "font": {"color": colour}})
    top = max(max(r.routed_per_expert), r.capacity or 0)
    dropped = (f"; {fmt_pct(result.dropped_fraction)} dropped over a capacity of "
               f"{r.capacity:,}" if r.capacity is not None else "; no capacity limit")
    busiest = f"{result.max_over_mean:.2f}x the mean"
    # The busiest GPU's experts (and the busiest expert): their bars against the mean give
    # the busiest ratio, so the layer's time (round-14 cold reading, EP07 step 4: 2.5x the
    # balanced 4.76 ms, read off expert 0's bar), until the steps that ask it are guessed.
    top_expert = max(experts, key=lambda e: r.routed_per_expert[e])
    hot = [e for e in experts if e == top_expert or colours[e] == HOT]
    held = keys.get("busiest", ())
    if held:  # where its bar is held, a label says so; once guessed, it gives the ratio
        notes.append({"x": top_expert, "xanchor": "left", "y": r.routed_per_expert[top_expert],
                      "yanchor": "bottom", "showarrow": False,
                      "text": f"{r.routed_per_expert[top_expert]:,} ({busiest})",
                      "bgcolor": "rgba(255,255,255,0.85)", "font": {"color": HOT}})
    # The label counts what expert 0 is sent, dropped too: held for the dropped share also.
    label = [len(notes) - 1] if held else []
    owners = (_owner(keys.get("dropped", ()), dropped, traces=[1] if len(data) > 1 else [],
                     annotations=label),
              _owner(held, busiest, points=[[t, e] for t in range(len(data)) for e in hot],
                     annotations=label))
    waits = tuple(dict.fromkeys((*held, *keys.get("dropped", ()))))
    # While they are held, the tokens axis reaches only the bars drawn, and the capacity.
    drawn = [n for e, n in enumerate(r.routed_per_expert) if e not in hot]
    reach = max(*drawn, mean, r.capacity or 0) * 1.15
    return {
        "data": data,
        "layout": owned(base_layout(
            barmode="stack", bargap=0.1 if len(experts) <= 64 else 0, shapes=shapes,
            legend=LEGEND_TOP, margin=MARGIN,
            annotations=notes, showlegend=len(data) > 1,
            xaxis={"title": {"text": f"expert ({per} per GPU, GPU by GPU)"},
                   "fixedrange": True, "showgrid": False},
            yaxis={"title": {"text": "tokens"}, "range": [0, top * 1.15], "fixedrange": True,
                   "gridcolor": "#e6e9ef"},
        ), *owners, partly=True, axes={"yaxis": {
            "title": {"text": "tokens"}, "range": [0, reach], "fixedrange": True,
            "gridcolor": "#e6e9ef"}}, masked={len(notes) - 1: (
                f"expert {top_expert}'s tokens: ? {_after(waits)}")} if held else None),
        "summary": (
            f"{inp.model.name}, EP {inp.ep}: {len(experts)} experts, {per} per GPU; the "
            f"busiest expert gets {busiest} of {mean:,.0f} tokens"
            + dropped
        ),
    }


def gpus_figure(result, keys: dict | None = None) -> dict:
    """One stacked bar per GPU of the EP group: its dispatch, expert compute and combine, and
    the time it waits because each all-to-all ends with its slowest member; the all-to-alls,
    the experts and the layer (the wait and the balanced line) owned by the steps they answer
    (``keys``): the rest stays drawn."""
    keys = keys or {}
    r, inp = result.routing, result.input
    gpus = list(range(inp.ep))
    dispatch = [_ms(s) for s in r.dispatch_s]
    compute = [_ms(s) for s in r.compute_s]
    wait = [max(0.0, _ms(r.layer_s) - 2 * d - c) for d, c in zip(dispatch, compute, strict=True)]
    parts = {"dispatch": dispatch, "compute": compute, "combine": dispatch, "wait": wait}
    data = [{
        "type": "bar", "name": PHASES[key][0], "x": gpus, "y": values,
        "marker": {"color": PHASES[key][1]},
        "hovertemplate": f"GPU %{{x}}: {PHASES[key][0].lower()} %{{y:.3f}} ms<extra></extra>",
    } for key, values in parts.items()]
    balanced = _ms(result.balanced.layer_s)
    layer = (f"One MoE layer's forward takes {_ms(r.layer_s):.2f} ms, set by GPU "
             f"{result.slowest_gpu} ({result.slowdown:.2f}x the balanced {balanced:.2f} ms)")
    a2a, experts = keys.get("a2a", ()), keys.get("compute", ())
    owners = (_owner(a2a, f"dispatch {max(dispatch):.2f} ms", traces=[0, 2]),
              _owner(a2a, f"combine {max(dispatch):.2f} ms"),
              _owner(experts, f"experts {max(compute):.2f} ms", traces=[1]),
              _owner(keys.get("layer", ()), layer, traces=[3], annotations=[0], shapes=[0]))
    # While a part is hidden the ms axis reaches only what is drawn: its reach was the layer's.
    axes = {"yaxis": {"title": {"text": "ms per MoE layer (forward)"}, "fixedrange": True,
                      "gridcolor": "#e6e9ef"}}
    return {
        "data": data,
        "layout": owned(base_layout(
            barmode="stack", bargap=0.15 if inp.ep <= 64 else 0, legend=LEGEND_TOP,
            margin=MARGIN,
            shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                     "y0": balanced, "y1": balanced,
                     "line": {"color": LINE_COLOUR, "dash": "dot", "width": 2}}],
            annotations=[{"xref": "paper", "x": 1, "xanchor": "right", "yref": "y",
                          "y": balanced, "yanchor": "bottom", "showarrow": False,
                          "text": f"balanced {balanced:.2f} ms",
                          "bgcolor": "rgba(255,255,255,0.85)"}],
            xaxis={"title": {"text": "GPU of the EP group"}, "fixedrange": True,
                   "showgrid": False},
            yaxis={"title": {"text": "ms per MoE layer (forward)"}, "fixedrange": True,
                   "range": [0, max(_ms(r.layer_s), balanced) * 1.15], "gridcolor": "#e6e9ef"},
        ), *owners, partly=True, axes=axes),
        "summary": (
            f"{layer}: dispatch {max(dispatch):.2f} ms, experts {max(compute):.2f} ms, combine "
            f"{max(dispatch):.2f} ms"
        ),
    }


def params_figure(result, keys: dict | None = None) -> dict:
    """Three bars of parameters: what memory holds (total), what one token computes with
    (active) and what one GPU holds under this layout, each split into routed experts and the
    rest; the active and one GPU's bars owned by the steps they answer (``keys``)."""
    keys = keys or {}
    m = result.input.model
    routed_active = m.moe_layers * m.top_k * m.expert_size
    rows = ["total: memory holds", "active: one token uses", "one GPU holds"]
    rest = [result.params - result.expert_params, result.active_params - routed_active,
            result.params_per_gpu - result.experts_per_gpu_params]
    routed = [result.expert_params, routed_active, result.experts_per_gpu_params]
    data = []
    for name, values, colour in (("Attention, dense and shared layers, embeddings", rest,
                                  "#72b7b2"), ("Routed experts", routed, "#4c78a8")):
        data.append({
            "type": "bar", "orientation": "h", "name": name, "y": rows,
            "x": [round(v / 1e9, 3) for v in values], "marker": {"color": colour},
            "text": [fmt_count(v) for v in values], "textposition": "inside",
            "textangle": 0, "insidetextanchor": "middle",
            "hovertemplate": f"%{{y}}: {name.lower()} %{{x:.2f}}B<extra></extra>",
        })
    active = f"a token computes with {fmt_count(result.active_params)}"
    one = f"one GPU holds {fmt_count(result.params_per_gpu)}"
    owners = (_owner(keys.get("active", ()), active, points=[[0, 1], [1, 1]], annotations=[1]),
              _owner(keys.get("per_gpu", ()), one, points=[[0, 2], [1, 2]], annotations=[2]),
              _owner(keys.get("routed", ()), points=[[0, 0], [1, 0]]))
    return {
        "data": data,
        "layout": owned(base_layout(
            barmode="stack", margin={"l": 150, "r": 8, "t": 40, "b": 44}, legend=LEGEND_TOP,
            # Each bar's total at its end, so the one-GPU sliver still reads.
            annotations=[{"x": round((a + b) / 1e9, 3), "y": row, "xanchor": "left",
                          "text": f" {fmt_count(a + b)}", "showarrow": False}
                         for row, a, b in zip(rows, rest, routed, strict=True)],
            uniformtext={"minsize": 9, "mode": "hide"},
            # Room past the longest bar for its total, on a phone too.
            xaxis={"title": {"text": "parameters (billions)"}, "fixedrange": True,
                   "gridcolor": "#e6e9ef", "range": [0, result.params / 1e9 * 1.35]},
            yaxis={"autorange": "reversed", "fixedrange": True},
        ), *owners, partly=True),
        "summary": (
            f"{m.name}: memory holds {fmt_count(result.params)} parameters, {active}; {one} at "
            f"EP {result.input.ep}, PP {result.input.pp}"
        ),
    }


def balance_figure(result, curve) -> dict:
    """Against routing skew: the Switch balance loss over α (E·Σ f·P, 1 when balanced) and
    the layer's time over its balanced time, both from the lab's routing at skews 0 .. 1
    (``curve``: labs.experts.lab.balance_of), with this state marked on each."""
    skew = result.input.skew
    lines = (("balance loss ÷ balanced", 1, "#f58518", result.balance_loss),
             ("layer time ÷ balanced", 2, "#4c78a8", result.slowdown))
    data = []
    for name, col, colour, here in lines:
        data.append({
            "type": "scatter", "mode": "lines", "name": name,
            "x": [p[0] for p in curve], "y": [round(p[col], 4) for p in curve],
            "line": {"color": colour, "width": 2},
            "hovertemplate": f"skew %{{x}}: {name} %{{y:.2f}}<extra></extra>",
        })
        data.append({
            "type": "scatter", "mode": "markers", "name": f"here: {name}", "showlegend": False,
            "x": [skew], "y": [round(here, 4)], "marker": {"color": colour, "size": 11},
            "hovertemplate": f"this state: {name} %{{y:.2f}}<extra></extra>",
        })
    top = max(max(p[1], p[2]) for p in curve)
    # The skews up to this state's, shaded: the stretch of each curve the router has climbed.
    climbed = [{"type": "rect", "xref": "x", "yref": "paper", "x0": 0, "x1": skew, "y0": 0,
                "y1": 1, "fillcolor": "rgba(76,120,168,0.15)", "line": {"width": 0},
                "layer": "below"}] if skew > 0 else []
    return {
        "data": data,
        "layout": base_layout(
            legend=LEGEND_TOP, margin=MARGIN, shapes=climbed,
            xaxis={"title": {"text": "routing skew"}, "range": [-0.02, 1.02],
                   "fixedrange": True, "gridcolor": "#e6e9ef", "dtick": 0.2},
            yaxis={"title": {"text": "× balanced"}, "range": [0, top * 1.1],
                   "fixedrange": True, "gridcolor": "#e6e9ef"},
        ),
        "summary": (
            f"At skew {skew:g} the busiest expert gets {result.max_over_mean:.2f}x the mean: "
            f"the balance loss is {result.balance_loss:.3g}x its balanced value, the layer "
            f"takes {result.slowdown:.2f}x its balanced time"
        ),
    }
