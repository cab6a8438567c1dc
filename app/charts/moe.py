"""EP07's diagrams, drawn from ``labs.experts``' result: tokens per expert (coloured by the GPU
that holds it), each GPU's time in the layer (dispatch, experts, combine, waiting for the
slowest), and parameters held against parameters used."""

from app.charts import LINE_COLOUR, base_layout, owned
from app.charts.crossover import ms, threshold_figure, time_axis, tokens, verdict
from app.charts.units import fmt_count, fmt_pct
from labs.experts.crossover import ep_crossover

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


TIER_COLOURS = {"nvlink": "#54a24b", "leaf": "#4c78a8", "spine": "#e45756"}
GHOST = "rgba(154,163,178,0.55)"  # a group's bandwidth on a 1:1 spine, behind its bar
COLLECTIVE_NAMES = {"all_reduce": "all-reduce", "all_to_all": "all-to-all", "p2p": "send"}


def network_figure(result, keys: dict | None = None) -> dict:
    """One bar per kind of group: the bandwidth its collective gets per GPU (bytes each GPU
    sends / its time, labs.parallel.rank_map.GroupLink), coloured by where it runs: inside a
    node, under one leaf switch, or across the spine."""
    from labs.parallel.rank_map import GROUP_SHORT, TIERS

    links = result.network
    cl = result.input.cluster
    rows = [f"{GROUP_SHORT[g.kind]}<br>{COLLECTIVE_NAMES[g.collective]}" for g in links]
    data = []
    # Round-17 cold reading of EP07, finding 13: at an oversubscribed spine every bar that
    # crosses it was drawn red alike, DP's too, which did not slow. Each group's bandwidth on
    # a 1:1 spine is drawn as a grey bar behind its own: where the grey shows, the spine
    # slowed that group.
    full = result.network_nonblocking
    squeezed = cl.oversubscription != 1 and bool(full)
    if squeezed:
        data.append({
            "type": "bar", "orientation": "h", "name": "On a 1:1 spine", "y": rows,
            "x": [round(g.bandwidth / 1e9, 2) for g in full],
            "marker": {"color": GHOST},
            "customdata": [[_ms(g.seconds), _slower(g, now)] for g, now in
                           zip(full, links, strict=True)],
            "hovertemplate": "%{y}: %{x:.1f} GB/s on a 1:1 spine, %{customdata[0]:,.2f} ms; "
                             "%{customdata[1]}<extra></extra>",
        })
    for tier, colour in TIER_COLOURS.items():
        mine = [i for i, g in enumerate(links) if g.tier == tier]
        data.append({
            "type": "bar", "orientation": "h", "name": TIERS[tier],
            "y": [rows[i] for i in mine],
            "x": [round(links[i].bandwidth / 1e9, 2) for i in mine],
            "marker": {"color": colour},
            "text": [f"{links[i].bandwidth / 1e9:,.0f} GB/s · {_ms(links[i].seconds):,.2f} ms"
                     for i in mine],
            "textposition": "auto", "insidetextanchor": "start", "textangle": 0,
            "customdata": [[links[i].what, links[i].nodes, links[i].leaves] for i in mine],
            "hovertemplate": "%{y}: %{customdata[0]}<br>%{x:.1f} GB/s per GPU over "
                             "%{customdata[1]} node(s), %{customdata[2]} leaf switch(es)"
                             "<extra></extra>",
        })
    top = max((g.bandwidth for g in (*links, *full)), default=0) / 1e9
    spine = [g for g in links if g.tier == "spine"]
    # The EP group's all-to-all answers step 3 at DeepSeek-V3's states (``keys``): its bar.
    ep_row = [[t + squeezed, mine.index(i)] for t, tier in enumerate(TIER_COLOURS)
              for mine in [[i for i, g in enumerate(links) if g.tier == tier]]
              for i in mine if links[i].kind == "ep"]
    each = ("; ".join(f"{r.replace('<br>', ' ')} {g.bandwidth / 1e9:,.0f} GB/s"
                      for r, g in zip(rows, links, strict=True))
            if links else "one GPU, no traffic")
    if squeezed:  # what the spine slowed, beside each group's bandwidth (and veiled with it)
        each += "; against a 1:1 spine, " + ", ".join(
            f"{r.replace('<br>', ' ')} {_slower(f, g)}"
            for r, g, f in zip(rows, links, full, strict=True))
    # Another leaf or spine than the opening's answers step 7 (``keys``): veiled whole.
    owner = _owner((keys or {}).get("network", ()), each, traces=list(range(len(data))))
    # ... and its rate in the summary: the group table's bytes over it is the dispatch's time
    # (round-16 cold reading of EP07 and EP08, finding 3: 462 MB / 54 GB/s = 8.56 ms).
    ep_rate = [f"{r.replace('<br>', ' ')} {g.bandwidth / 1e9:,.0f} GB/s"
               for r, g in zip(rows, links, strict=True) if g.kind == "ep"]
    ep_owner = _owner((keys or {}).get("a2a", ()), points=ep_row)
    if ep_rate and ep_owner["step"]:
        ep_owner["summary"] = [ep_rate[0], ep_rate[0].rsplit(" ", 2)[0]
                               + f" ? {_after(keys['a2a'])}"]
    return {
        "data": data,
        "layout": owned(base_layout(
            barmode="overlay", margin={"l": 84, "r": 8, "t": 40, "b": 44},
            legend=LEGEND_TOP, uniformtext={"minsize": 9, "mode": "hide"},
            xaxis={"title": {"text": "GB/s each GPU moves"}, "fixedrange": True,
                   "gridcolor": "#e6e9ef", "range": [0, max(top, 1) * 1.1]},
            yaxis={"autorange": "reversed", "fixedrange": True, "categoryorder": "array",
                   "categoryarray": rows},
        ), owner, ep_owner, partly=not owner["step"]),
        "summary": (
            f"Leaves of {cl.leaf_nodes} nodes, spine {cl.oversubscription:g}:1: " + each
            + (f"; {len(spine)} of them cross the spine" if spine else "; nothing crosses "
               "the spine")
        ),
    }


def _slower(full, now) -> str:
    """What the spine did to one group: how many times slower than on a 1:1 spine, or not."""
    if now.seconds <= 1.01 * full.seconds:
        return "unchanged"
    return f"{now.seconds / full.seconds:.1f}× slower"


def gemm_figure(result) -> dict:
    """A GPU's routed experts' forward GEMMs, one grouped GEMM: their share of the GPU's BF16
    peak against the tokens that reach each expert (log axis), the same GEMMs run one expert
    at a time (dotted), this state's mean expert and, for a model with one, the shared expert
    that computes every token of the GPU."""
    curve = result.gemm_curve
    here = result.tokens_per_expert
    # The curve up to this state's expert, shaded: how far along it the routed experts sit.
    upto = [(t, e) for t, e in curve if t < here] + [(here, result.gemm_efficiency)]
    data = [{
        "type": "scatter", "mode": "none", "name": "up to the tokens each expert gets",
        "x": [round(t, 2) for t, _ in upto], "y": [round(100 * e, 2) for _, e in upto],
        "fill": "tozeroy", "fillcolor": "rgba(76,120,168,0.18)", "hoverinfo": "skip",
        "showlegend": False,
    }, {
        "type": "scatter", "mode": "lines", "name": "one expert at a time (ungrouped)",
        "x": [t for t, _ in result.gemm_curve_alone],
        "y": [round(100 * e, 2) for _, e in result.gemm_curve_alone],
        "line": {"color": "#9aa3b2", "width": 1.5, "dash": "dot"},
        "hovertemplate": "one expert alone, %{x:,} tokens: %{y:.1f}% of peak<extra></extra>",
    }, {
        "type": "scatter", "mode": "lines",
        "name": f"the GPU's {result.experts_per_gpu} experts, one grouped GEMM",
        "x": [t for t, _ in curve], "y": [round(100 * e, 2) for _, e in curve],
        "line": {"color": LINE_COLOUR, "width": 2},
        "hovertemplate": "%{x:,} tokens an expert: %{y:.1f}% of peak<extra></extra>",
    }, {
        "type": "scatter", "mode": "markers", "name": "each routed expert here",
        "x": [round(result.tokens_per_expert, 2)],
        "y": [round(100 * result.gemm_efficiency, 2)],
        "marker": {"color": "#4c78a8", "size": 12},
        "hovertemplate": "routed expert: %{x:,.0f} tokens, %{y:.1f}% of peak<extra></extra>",
    }]
    if result.shared_tokens is not None:
        data.append({
            "type": "scatter", "mode": "markers", "name": "the shared expert",
            "x": [result.shared_tokens], "y": [round(100 * result.shared_efficiency, 2)],
            "marker": {"color": "#72b7b2", "size": 12, "symbol": "diamond"},
            "hovertemplate": "shared expert: %{x:,} tokens, %{y:.1f}% of peak<extra></extra>",
        })
    shared = ("" if result.shared_tokens is None else
              f"; the shared expert, on all {result.shared_tokens:,} tokens, "
              f"{100 * result.shared_efficiency:.0f}%")
    return {
        "data": data,
        "layout": base_layout(
            legend=LEGEND_TOP, margin=MARGIN,
            xaxis={"title": {"text": "tokens reaching one expert"}, "type": "log",
                   "fixedrange": True, "gridcolor": "#e6e9ef", "dtick": 1},
            yaxis={"title": {"text": "% of BF16 peak"}, "range": [0, 100], "fixedrange": True,
                   "gridcolor": "#e6e9ef"},
        ),
        "summary": (
            f"Each routed expert gets {result.tokens_per_expert:,.0f} tokens here (T x k x EP "
            f"/ E) and its GEMMs reach {100 * result.gemm_efficiency:.0f}% of the BF16 peak"
            + shared
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


def crossover_figure(result, keys: dict | None = None) -> dict:
    """EP07 step 11: the experts' GEMMs (∝ f at this state's rate) against dispatch + combine
    (flat: their bytes do not depend on f) by expert width, crossing at f*; the hollow marks
    the lab's own layer with experts of each width (labs.experts.crossover)."""
    c = ep_crossover(result)
    bound, side = verdict(c.compute_s, c.comm_s, "compute", "no all-to-all at EP 1")
    figure = threshold_figure(
        x_state=c.width, compute_s=c.compute_s, comm_s=c.comm_s, cross=c.crossover,
        compute_line=c.sweep, comm_line=None,
        compute_name="Expert GEMMs, ∝ f at this rate", comm_name="Dispatch + combine",
        compute_hover="f = %{x:,.0f}: %{y:.3s}s of expert GEMMs<extra></extra>",
        x_title="expert FFN width f (log scale)", y_title="time per MoE layer",
        cross_text=f"f* = {tokens(c.crossover)}",
        state_text=f"This state, f = {c.width:,}:<br>{bound}",
        points=[(f, a, m) for f, a, m in c.points], point_name="The lab at each f",
        x_ticks=[x for x in (2 ** e for e in range(6, 20, 2))
                 if c.sweep[0][0] <= x <= c.sweep[-1][0]], legend_y=-0.3,
        summary=(f"{result.input.model.name}, experts {c.width:,} wide, EP {c.ep}: "
                 f"{ms(c.compute_s)} of expert GEMMs a layer"
                 + (f" against {ms(c.comm_s)} of dispatch and combine ({side}); the two are "
                    f"equal at f = {tokens(c.crossover)}" if c.comm_s else ", no all-to-all")))
    # Where f* answers step 11 (``keys``): veiled whole, its summary past the model's name.
    keys = keys or {}
    shown = f"{result.input.model.name}, experts {c.width:,} wide, EP {c.ep}: "
    if keys.get("crossover_a2a") and c.comm_s:
        return _comm_held(figure, c, keys["crossover_a2a"])
    owned(figure["layout"], _owner(keys.get("crossover", ()),
                                   figure["summary"].removeprefix(shown),
                                   traces=list(range(len(figure["data"])))))
    return figure


def _comm_held(figure: dict, c, held) -> dict:
    """The crossover chart where its all-to-alls answer step 3 (``held``: DeepSeek-V3's EP
    across nodes; round-21 cold reading Q, finding 2: EP 64's 17.2 ms, 2 × step 3's 8.58 ms
    dispatch, and its effective rate): the GEMMs' line, their hollow marks and the state's
    point stay drawn; the all-to-alls' line and marks, the sides shaded at f*, the dashed f*,
    the state's gap and its ratio wait (partly: a link to another dispatch still moves them
    once step 3 is guessed). The time axis spans the GEMMs alone meanwhile."""
    layout = figure["layout"]
    traces = [i for i, t in enumerate(figure["data"])
              if t["name"] in ("Dispatch + combine", "communication")]
    compute = [s for _, s in c.sweep] + [c.compute_s] + [p[1] for p in c.points if p[1] > 0]
    state = layout["annotations"][-1]["text"].split("<br>")[0]
    after = _after(held)  # the state's label keeps its place; f*'s goes
    summary = figure["summary"].split(" of expert GEMMs a layer ", 1)[1]
    owned(layout, _owner(held, summary, traces=traces,
                         shapes=list(range(len(layout["shapes"]) - 1)),  # all but the chosen band
                         annotations=list(range(len(layout["annotations"])))),
          partly=True, axes={"yaxis": time_axis(compute, layout["yaxis"]["title"]["text"])},
          masked={str(len(layout["annotations"]) - 1): f"{state}<br>? {after}"})
    return figure


def hold_rank_counts(figure: dict, held) -> dict:
    """The rank map where its groups answer step 6 (``held``: DeepSeek-V3 coloured by DP,
    expert-DP or PP groups): its caption's "16 groups of 128" is DP 128, as PP's "128 groups
    of 16" (round-22 cold reading Q, finding 6), and the map's 16 blocks of colour count the
    same. Veiled whole until the guess, the caption's count, size and span masked."""
    summary = figure["summary"]
    part = summary[summary.index(" nodes of ") + len(" nodes of "):].split(", ", 1)[1]
    owned(figure["layout"], _owner(held, part, traces=list(range(len(figure["data"])))))
    return figure

