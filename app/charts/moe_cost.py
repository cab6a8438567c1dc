"""EP07's diagrams of what expert parallelism costs, drawn from ``labs.experts``' result: each
kind of group's bandwidth on the cluster (``network_figure``), the grouped expert GEMM's share of
peak by tokens an expert (``gemm_figure``), the expert GEMMs against the all-to-alls by expert
width (``crossover_figure``, f*), and the rank map's group counts held for step 6
(``hold_rank_counts``). The layer's own diagrams are ``app.charts.moe``'s."""

from app.charts import LINE_COLOUR, base_layout, owned
from app.charts.crossover import ms, threshold_figure, time_axis, tokens, verdict
from app.charts.moe import LEGEND_TOP, MARGIN, _after, _ms, _owner
from labs.experts.crossover import ep_crossover

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
