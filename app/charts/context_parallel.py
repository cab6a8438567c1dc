"""EP06's diagrams: the causal mask coloured by the rank that computes each cell and the causal
pairs per rank (the communication time per layer against the CP degree and the crossover are
``app.charts.context_parallel_cost``'s).

Every cell and bar is read off ``labs.context_parallel.lab`` (the owner of each query token, each
rank's pairs); nothing here knows a balance formula.
"""

from app.charts import LINE_COLOUR, base_layout, value_label
from labs.context_parallel.lab import LAYOUT_NAMES

PALETTE = (  # one colour per rank, repeating past 10 (tableau 10)
    "#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6",
    "#9d755d", "#bab0ac",
)
EMPTY = "#f1f3f7"
ULYSSES_PANELS = 4  # small multiples drawn for Ulysses; the rest are the same triangle


def rank_colour(rank: int) -> str:
    return PALETTE[rank % len(PALETTE)]


def _scale(ranks: int) -> list:
    """A discrete colourscale: rank r's colour on [r, r + 1) of ranks."""
    scale = []
    for r in range(ranks):
        scale += [[r / ranks, rank_colour(r)], [(r + 1) / ranks, rank_colour(r)]]
    return scale


def _triangle(s: int, value) -> list[list]:
    """z[query][key]: ``value(query)`` on and below the diagonal, None above (not computed)."""
    return [[value(q) if k <= q else None for k in range(s)] for q in range(s)]


def _axes(n: int, s: int, i: int, gap: float) -> tuple[dict, dict]:
    width = (1 - gap * (n - 1)) / n
    start = i * (width + gap)
    suffix = "" if i == 0 else str(i + 1)
    ticks = {"tickmode": "linear", "tick0": 0, "dtick": max(1, s // (8 if n == 1 else 4)),
             "fixedrange": True, "constrain": "domain",
             "showgrid": False, "zeroline": False}
    x = {"domain": [start, start + width], "range": [-0.5, s - 0.5],
         "title": {"text": "key token" if i == 0 else "", "standoff": 2}, **ticks}
    y = {"range": [s - 0.5, -0.5], "scaleanchor": f"x{suffix}", "anchor": f"x{suffix}",
         "title": {"text": "query token" if i == 0 else "", "standoff": 2}, **ticks}
    if i:
        x["anchor"] = f"y{suffix}"
        y["showticklabels"] = False
    return x, y


def _rank_key(mask) -> list[list[str]]:
    """The mask's colour key: the first 16 ranks' colours, with their heads under Ulysses
    (the page lists them too)."""
    return [[f"rank {r.rank}" + (f" (heads {r.heads[0]}–{r.heads[1]})" if r.heads else ""),
             rank_colour(r.rank)] for r in mask.ranks[:16]] + [
        ["not computed", EMPTY]]


def pairs_step(layout: str) -> str:
    """The guess that lifts a state's pair counts on the lesson: step 2's diagram's (the pairs
    chart), but a zigzag state's answer step 3 ("exactly as many"), so its wait for step 3
    (round-10 cold reading of EP06, item 5: the good case printed them before the guess)."""
    return "step-3" if layout == "zigzag" else "cp-pairs"


def _summary_owner(layout: str, text: str, mask_text: str) -> dict:
    """layout.meta for a chart drawn whole before the guess whose summary alone answers it:
    no part veiled, the summary's ``text`` shown as ``mask_text`` until the guess."""
    return {"masked": {}, "partly": True,
            "owners": [{"step": pairs_step(layout), "summary": [text, mask_text]}]}


# The mask's height: steps 1 and 4's links bring the memory readout above it into view, and
# the readout, the mask's title and the mask fit the bench's 400 px view together at 1280x800
# (round-20 cold reading Q, finding 6: at the usual 352 px, 75% of the mask was in view;
# tests/browser/test_changed_in_view.py asks 90%).
MASK_HEIGHT = 256


def mask_figure(mask) -> dict:
    """The causal mask of ``mask.tokens`` tokens; each computed cell in its rank's colour."""
    s, c = mask.tokens, mask.cp
    if mask.layout == "ulysses":
        return _ulysses_mask(mask)
    owner = mask.owner
    data = [{
        "type": "heatmap", "z": _triangle(s, lambda q: owner[q]),
        "zmin": -0.5, "zmax": c - 0.5, "colorscale": _scale(c), "showscale": False,
        "xgap": 1 if s <= 32 else 0, "ygap": 1 if s <= 32 else 0,
        "hovertemplate": "query %{y}, key %{x}: rank %{z}<extra></extra>",
        "hoverongaps": False,
    }]
    x, y = _axes(1, s, 0, 0)
    busiest = mask.busiest
    work = (f"computes {_num(busiest.causal_pairs)} of {mask.total_pairs} causal cells "
            f"(imbalance {mask.imbalance:.2f})")
    return {
        "data": data,
        "layout": base_layout(xaxis=x, yaxis=y, plot_bgcolor=EMPTY, height=MASK_HEIGHT,
                              margin={"l": 48, "r": 8, "t": 8, "b": 40},
                              meta=_summary_owner(mask.layout, work, "computes ? cells")),
        "key": _rank_key(mask),
        "summary": (
            f"{LAYOUT_NAMES[mask.layout]}, {s} tokens over CP = {c}: each query row is "
            f"computed by the rank holding that token; the busiest, rank {busiest.rank}, "
            f"{work}"
        ),
    }


def _ulysses_mask(mask) -> dict:
    """Small multiples: every rank computes the whole triangle, for its own heads."""
    s, c = mask.tokens, mask.cp
    n = min(c, ULYSSES_PANELS)
    data, axes, notes = [], {}, []
    for i in range(n):
        rank = mask.ranks[i]
        suffix = "" if i == 0 else str(i + 1)
        data.append({
            "type": "heatmap", "z": _triangle(s, lambda q, r=i: r),
            "xaxis": f"x{suffix}", "yaxis": f"y{suffix}",
            "zmin": -0.5, "zmax": c - 0.5, "colorscale": _scale(c), "showscale": False,
            "hovertemplate": (f"rank {i}, heads {rank.heads[0]}–{rank.heads[1]}: "
                              "query %{y}, key %{x}<extra></extra>"),
            "hoverongaps": False,
        })
        x, y = _axes(n, s, i, 0.03)
        axes[f"xaxis{suffix}"], axes[f"yaxis{suffix}"] = x, y
        # "r0" only: the legend under the chart names each rank's heads (phone-wide panels).
        notes.append({"xref": f"x{suffix} domain", "yref": f"y{suffix} domain", "x": 0.5,
                      "y": 1, "yanchor": "bottom", "showarrow": False, "font": {"size": 11},
                      "text": f"r{i}"})
    more = f"; ranks {n}–{c - 1} likewise" if c > n else ""
    work = f"{_num(mask.ranks[0].causal_pairs)} of {mask.total_pairs} cells each (imbalance 1.00)"
    return {
        "data": data,
        "layout": base_layout(**axes, annotations=notes, plot_bgcolor=EMPTY, height=MASK_HEIGHT,
                              margin={"l": 48, "r": 8, "t": 24, "b": 40},
                              meta=_summary_owner(mask.layout, work, "? cells each")),
        "key": _rank_key(mask),
        "summary": (
            f"DeepSpeed-Ulysses, {s} tokens over CP = {c}: every rank computes the whole "
            f"mask for {mask.heads // c} of {mask.heads} heads{more}; {work}"
        ),
    }


def _num(value) -> str:
    number = float(value)
    return f"{number:,.0f}" if number.is_integer() else f"{number:,.1f}"


def pairs_figure(mask) -> dict:
    """Causal (query, key) pairs per rank, the mean dashed."""
    c = mask.cp
    labels = [f"r{r.rank}" for r in mask.ranks]
    values = [float(r.causal_pairs) for r in mask.ranks]
    mean = mask.total_pairs / c
    labels_above = [value_label(i, v, _num(v), bgcolor="rgba(0,0,0,0)")
                    for i, v in enumerate(values)] if c <= 16 else []
    # What the numbers are (round-17 cold reading of EP06, finding 1: the bars' figures and
    # the dashed line were drawn unlabelled): the dashed line's mean with its unit, and the
    # imbalance the steps name, the busiest bar over it, above the plot.
    busiest = mask.busiest
    notes = labels_above + [
        # Above the line where the first bar is short of it (contiguous: its label clear of
        # the bars), inside the bars where every bar reaches it (balanced).
        {"xref": "paper", "yref": "y", "x": 0, "y": mean, "xanchor": "left",
         "yanchor": "bottom" if values[0] < 0.8 * mean else "top", "showarrow": False,
         "font": {"color": LINE_COLOUR, "size": 11},
         "bgcolor": "rgba(255,255,255,0.85)", "text": f"mean: {_num(mean)} pairs"},
        {"xref": "paper", "yref": "paper", "x": 0, "y": 1, "xanchor": "left",
         "yanchor": "bottom", "yshift": 2, "showarrow": False,
         "font": {"color": LINE_COLOUR, "size": 12},
         "text": (f"imbalance, busiest ÷ mean: {_num(busiest.causal_pairs)} ÷ {_num(mean)} "
                  f"= {mask.imbalance:.2f}")}]
    return {
        "data": [{
            "type": "bar", "x": labels, "y": values,
            "marker": {"color": [rank_colour(r.rank) for r in mask.ranks]},
            "hovertemplate": "%{x}: %{y:,} causal pairs<extra></extra>",
        }],
        "layout": base_layout(
            # Each bar's pairs above it (c <= 16), masked on the lesson until step 2's guess
            # (layout.meta.masked; round-6 cold reading of EP06, item 1: its "64 tokens, CP 8"
            # link drew the 484 it asks for on the last bar), a zigzag state's until step 3's
            # (pairs_step: its even bars are that step's answer).
            annotations=notes,
            meta={"masked": {str(i): "?" for i in range(len(labels_above))},
                  **({"owners": [{"step": "step-3", "traces": [0], "shapes": [0],
                                  "annotations": list(range(len(notes)))}]}
                     if pairs_step(mask.layout) == "step-3" else {})},
            margin={"l": 52, "r": 8, "t": 24, "b": 32},
            xaxis={"type": "category", "fixedrange": True, "tickangle": 0},
            yaxis={"title": {"text": "causal pairs a rank"}, "rangemode": "tozero",
                   "range": [0, max(values) * 1.18], "fixedrange": True,
                   "gridcolor": "#e6e9ef"},
            shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                     "y0": mean, "y1": mean,
                     "line": {"color": "#1d2330", "width": 1.5, "dash": "dash"}}],
            showlegend=False,
        ),
        "summary": (
            f"Causal pairs per rank, {mask.tokens} tokens, CP = {c}, "
            f"{LAYOUT_NAMES[mask.layout]}: from {_num(min(values))} to {_num(max(values))} "
            f"against a mean of {_num(mean)} (dashed); imbalance max/mean "
            f"{mask.imbalance:.2f}; they sum to {mask.total_pairs} = s(s+1)/2"
        ),
    }


def token_ranges(tokens) -> str:
    """Tokens as runs: (0, 1, 6, 7) -> "0–1, 6–7"."""
    runs: list[list[int]] = []
    for t in tokens:
        if runs and t == runs[-1][1] + 1:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in runs)
