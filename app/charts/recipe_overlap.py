"""EP08's overlap diagrams, what hides behind what: the step's last micro-batch as a compute and
a communication lane (``timeline_figure``, step 12) and one layer op by op, a lane per stream
(``layer_figure``, step 13), read off the answer's ``timeline`` and ``layer``."""

from app.charts import base_layout
from app.charts.units import fmt_ms

# Timeline state -> (legend label, colour): labs.recipe.overlap.Event.state.
TIMELINE_STATES = {
    "compute": ("Kernels", "#4c78a8"),
    "hidden": ("Communication hidden behind compute", "#9ecae9"),
    "sm": ("Compute slowed: SMs lent to NCCL", "#b279a2"),
    "split": ("Compute slowed: GEMM cut into chunks", "#f2a65a"),
    "exposed": ("Exposed: the compute stream waits", "#e45756"),
}
TIMELINE_LANES = ("Compute stream", "Comm stream")
# ZeRO-0/1/2's DP sync, a lane per group (labs.recipe.overlap.Leg.lane): its reductions and
# its all-gathers' wait, each a bar of its own (round-24 expert reading: one bar merged them).
SYNC_LANES = {"dp": "DP stream", "edp": "Expert DP stream"}
# The backward's start, as a share of the axis, below which "forward →" and "backward →"
# (about 50 px each) take a row each: a phone's plot is about 230 px wide.
PASS_LABELS_APART = 0.3


def timeline_figure(line: dict) -> dict:
    """``line``: the answer's ``timeline`` (app.recipe_answer.timeline_api). Two lanes, a bar
    per event from its start for its seconds (ms), coloured by what it costs; the backward's
    start marked."""
    lanes = {"compute": TIMELINE_LANES[0], "comm": TIMELINE_LANES[1],
             **{k: v for k, v in SYNC_LANES.items()
                if any(e["lane"] == k for e in line["events"])}}
    named = set()  # (lane, label) already written on a bar: the overlaid hidden and exposed
    # parts of one collective (DP buckets) would print the same word on top of itself

    def text(rows: list[dict], names: list[str]) -> dict:
        shown = []
        for e in rows:
            shown.append("" if (e["lane"], e["label"]) in named else "%{text}")
            named.add((e["lane"], e["label"]))
        return {"text": names, "texttemplate": shown}

    data = _state_bars(line["events"], lanes, "label", text, digits=3, edge=1)
    return {"data": data, "layout": _lanes_layout(line, list(lanes.values())),
            "summary": line["summary"]}


def _state_bars(items: list[dict], lanes: dict[str, str], name: str, text, *, digits: int,
                edge: float) -> list[dict]:
    """An overlaid bar trace per cost state of TIMELINE_STATES that ``items`` (events or ops)
    hold: a bar per item on its lane from its start for its seconds (ms to ``digits``
    decimals, white edges ``edge`` px wide), named by its ``name`` key; ``text(rows, names)``
    gives a trace's text keys, what its bars print."""
    data = []
    for state, (label, colour) in TIMELINE_STATES.items():
        rows = [e for e in items if e["state"] == state]
        if not rows:
            continue
        names = [e[name] for e in rows]
        # A bar that says what it is (the DP sync's: which collective, how long, how much
        # exposed) hovers its own words; the rest their name, length and start.
        hover = ({"hovertext": [e.get("hover", "").replace("\n", "<br>") or (
            f"{e[name]}: {e['seconds'] * 1e3:,.{digits - 1}f} ms ({label.lower()}), "
            f"from {e['start_s'] * 1e3:,.{digits - 2}f} ms") for e in rows],
            "hovertemplate": "%{hovertext}<extra></extra>"}
            if any(e.get("hover") for e in rows) else {
            "hovertemplate": f"%{{customdata}}: %{{x:,.{digits - 1}f}} ms ({label.lower()}), "
                             f"from %{{base:,.{digits - 2}f}} ms<extra></extra>"})
        data.append({
            "type": "bar", "orientation": "h", "name": label,
            "y": [lanes[e["lane"]] for e in rows],
            "base": [round(e["start_s"] * 1e3, digits) for e in rows],
            "x": [round(e["seconds"] * 1e3, digits) for e in rows],
            # A DP sync's hidden bucket runs unedged: the dense layers' buckets, each about a
            # pixel wide at 1280 px, vanished under a white edge.
            "marker": {"color": colour, "line": {"color": "#ffffff", "width": edge if not any(
                e.get("collective") for e in rows) else [
                0 if e.get("collective") and state == "hidden" else edge for e in rows]}},
            **text(rows, names), "textposition": "inside", "insidetextanchor": "middle",
            "textangle": 0, "textfont": {"size": 10}, "customdata": names, **hover,
        })
    return data


def _lanes_layout(line: dict, lanes: list[str], rows: bool = True) -> dict:
    """A timeline's layout: ``lanes`` top to bottom, ms across to ``line``'s end, the
    backward's start marked; ``rows``: the pass labels a row each where they would meet."""
    end = line["seconds"] * 1e3
    back = line["backward_start_s"] * 1e3
    # The pass labels on two rows where the backward starts early on the axis: at 390 px,
    # EP08 step 12's DP overlap off (backward at 14% of the axis) wrote "backward →" over
    # "forward →".
    near = rows and back < PASS_LABELS_APART * end
    return base_layout(
        barmode="overlay", bargap=0.3, showlegend=True,
        margin={"l": 8, "r": 8, "t": 36 if near else 24, "b": 40},
        uniformtext={"minsize": 8, "mode": "hide"},
        # At most 3 level ticks: a phone auto-rotated "2000 ms" into its neighbours and
        # the legend below (test_text_fits, bad case at 390 px).
        xaxis={"ticksuffix": " ms", "range": [0, end * 1.01], "nticks": 3, "tickangle": 0,
               "gridcolor": "#e6e9ef", "fixedrange": True},
        yaxis={"automargin": True, "fixedrange": True, "autorange": "reversed",
               "categoryorder": "array", "categoryarray": lanes},
        shapes=[{"type": "line", "xref": "x", "yref": "paper", "x0": back, "x1": back,
                 "y0": 0, "y1": 1, "line": {"color": "#555", "width": 1, "dash": "dot"}}],
        annotations=[{"xref": "x", "yref": "paper", "x": back, "y": 1, "yanchor": "bottom",
                      "xanchor": "left", "showarrow": False, "text": "backward →",
                      "font": {"size": 10}, "yshift": 12 if near else 0},
                     {"xref": "x", "yref": "paper", "x": 0, "y": 1, "yanchor": "bottom",
                      "xanchor": "left", "showarrow": False, "text": "forward →",
                      "font": {"size": 10}}],
        legend={"orientation": "h", "y": -0.18, "x": 0, "yanchor": "top",
                "font": {"size": 10}},
    )


LAYER_KINDS = {"tp": "TP collectives", "cp": "CP ring", "ep": "EP all-to-all",
               "dp": "DP / FSDP"}


def layer_figure(layer: dict | None) -> dict | None:
    """``layer``: the answer's ``layer`` (app.recipe_answer.layer_api). One lane per stream, a
    bar per op from its start for its seconds (ms), kernels in blue, the collectives coloured
    by what they cost as on the micro-batch timeline; the backward's start marked."""
    if layer is None:
        return None
    lanes = {lane["id"]: lane["label"] for lane in layer["lanes"]}
    own = layer["forward_s"] + layer["backward_s"]
    # The step's DP wait after the layer is named once, above it (its bars run off the
    # axis); the hover keeps each bar's name.
    data = _state_bars(layer["ops"], lanes, "name", lambda rows, names: {
        "text": ["" if o["start_s"] >= own * (1 - 1e-9) else o["name"] for o in rows]},
        digits=4, edge=0.5)
    # The step's DP wait after the layer (once a step) can be ten times the layer: the axis
    # stops a quarter past the layer and the wait runs off it, its length written there.
    tail = layer["step_end_s"]
    layout = _lanes_layout({**layer, "seconds": min(layer["seconds"], 1.25 * own)},
                           list(lanes.values()), rows=False)
    if tail > 0:
        layout["annotations"].append({
            "xref": "paper", "yref": "paper", "x": 1, "y": 1, "yanchor": "bottom",
            "xanchor": "right", "showarrow": False, "font": {"size": 10},
            # A line above "backward →", which a narrow frame puts under it (test_embed_fit).
            "yshift": 14,
            "text": f"DP wait {fmt_ms(tail)}" + (" →" if tail > 0.25 * own else "")})
        layout["margin"] = {**layout["margin"], "t": 38}
    return {"data": data, "layout": layout, "summary": layer["summary"],
            "rows": layer_rows(layer)}


def layer_rows(layer: dict) -> list[dict]:
    """The table under the layer chart: the kernels, and each kind's hidden and waited (or
    SM-slowed) seconds, in the forward, the backward and both."""
    f, b = layer["by_pass"]["forward"], layer["by_pass"]["backward"]
    rows = [{"label": "Kernels", "kind": None, "forward_s": f["compute_s"],
             "backward_s": b["compute_s"], "both_s": f["compute_s"] + b["compute_s"]}]
    for k, name in LAYER_KINDS.items():
        for key, what in (("hidden_s", "hidden"), ("exposed_s", "waited or slowed")):
            if f[key][k] + b[key][k] > 1e-12:
                rows.append({"label": f"{name}, {what}", "kind": k, "forward_s": f[key][k],
                             "backward_s": b[key][k], "both_s": layer[key][k]})
    return rows
