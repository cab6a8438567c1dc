"""A rank map: every GPU of a cluster as one cell, coloured by its category (group or role).

Reusable by any lab. Input: a ``labs.parallel.rank_map.GpuColouring`` (``title``, ``gpus_per_node``,
``category`` = one index per global rank, ``names`` = one name per category), built for EP07
by ``labs.parallel.rank_map.group_colouring``; another lab may build its
own (training ranks vs rollout engines, say). Optional ``notes``: one extra hover line per
category ("inside node 3", "rollout engine 2").

Rank r sits on node r // gpus_per_node, slot r % gpus_per_node. Up to ``ROWS_AS_NODES`` nodes
each node is a row (its GPUs left to right); beyond, nodes become columns, so a 256-node job
still reads as bands. Colours repeat every ``len(PALETTE)`` categories; neighbouring
categories never share one. Cells carry the category number while they are big enough.
"""

from collections import Counter
from collections.abc import Sequence

from app.charts import base_layout

PALETTE = (
    "#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6",
    "#9d755d", "#8cd17d",
)
ROWS_AS_NODES = 16  # up to this many nodes, one row per node
LABELLED_CELLS = 256  # above this many GPUs, no number in each cell


def _colourscale(count: int) -> list:
    """A stepped scale: z = category mod count maps to one flat colour band each."""
    scale = []
    for i in range(count):
        colour = PALETTE[i % len(PALETTE)]
        scale += [[i / count, colour], [(i + 1) / count, colour]]
    return scale


def rank_map_figure(colouring, notes: Sequence[str] | None = None,
                    leaf_nodes: int | None = None) -> dict:
    """The cluster's GPUs as a heatmap of ``colouring.category`` (see the module docstring),
    with a line between the nodes of each ``leaf_nodes`` leaf switch (none: one switch)."""
    gpn, cats, names = colouring.gpus_per_node, colouring.category, colouring.names
    nodes = colouring.nodes
    bands = min(len(PALETTE), len(names))
    rows_are_nodes = nodes <= ROWS_AS_NODES
    outer, inner = (nodes, gpn) if rows_are_nodes else (gpn, nodes)
    labelled = len(cats) <= LABELLED_CELLS
    z, text, hover, ranks = [], [], [], []
    for a in range(outer):
        zr, tr, hr, rr = [], [], [], []
        for b in range(inner):
            node, slot = (a, b) if rows_are_nodes else (b, a)
            rank = node * gpn + slot
            rr.append(rank)
            if rank >= len(cats):
                zr.append(None)
                tr.append("idle")
                hr.append(f"node {node}, GPU {slot}: idle")
                continue
            cat = cats[rank]
            zr.append(cat % bands)
            tr.append(f"{cat:,}")  # a group past 999 with its separator (test_thousands)
            if labelled:
                extra = f"<br>{notes[cat]}" if notes else ""
                hr.append(f"rank {rank} · node {node}, GPU {slot}<br>{names[cat]}{extra}")
        z.append(zr)
        text.append(tr)
        hover.append(hr)
        ranks.append(rr)
    # A big map hovers from the cell's rank and category number: a sentence per cell would
    # make the figure JSON ten times larger.
    hovering = ({"hovertext": hover, "hovertemplate": "%{hovertext}<extra></extra>"}
                if labelled else
                {"customdata": ranks, "hovertemplate": "rank %{customdata} · node "
                 + ("%{y}, GPU %{x}" if rows_are_nodes else "%{x}, GPU %{y}")
                 + "<br>group %{text}<extra></extra>"})
    node_axis = {"title": {"text": "node"}, "autorange": "reversed" if rows_are_nodes else True,
                 "dtick": 1 if nodes <= ROWS_AS_NODES else None, "fixedrange": True,
                 "showgrid": False, "zeroline": False}
    slot_axis = {"title": {"text": "GPU in the node"}, "dtick": 1, "fixedrange": True,
                 "showgrid": False, "zeroline": False}
    if not rows_are_nodes:
        slot_axis["autorange"] = "reversed"
    # Leaf boundaries: between node leaf·k − 1 and leaf·k, across the whole map.
    cuts = [k * leaf_nodes - 0.5 for k in range(1, -(-nodes // leaf_nodes))] if leaf_nodes else []
    leaf_lines = [{"type": "line", "line": {"color": "#1b1f24", "width": 2, "dash": "dot"},
                   **({"xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": c, "y1": c}
                      if rows_are_nodes else
                      {"yref": "paper", "y0": 0, "y1": 1, "xref": "x", "x0": c, "x1": c})}
                  for c in cuts]
    spans = colouring.nodes_spanned()
    inside = sum(1 for s in spans if s == 1)
    sizes = set(Counter(cats).values())
    each = f" of {sizes.pop():,}" if len(sizes) == 1 else ""
    return {
        "data": [{
            "type": "heatmap", "z": z, "text": text,
            "texttemplate": "%{text}" if labelled else "", **hovering,
            "colorscale": _colourscale(bands), "zmin": -0.5 if bands == 1 else 0,
            "zmax": bands - 1 if bands > 1 else 0.5, "showscale": False,
            # Gaps mark the GPUs of a small map; on a wide one they would drown the colours.
            "xgap": 2 if inner <= 64 else 0, "ygap": 2 if outer <= 64 else 0,
            "textfont": {"color": "#ffffff", "size": 10},
        }],
        "layout": base_layout(
            margin={"l": 48, "r": 8, "t": 8, "b": 40},
            xaxis=slot_axis if rows_are_nodes else node_axis,
            yaxis=node_axis if rows_are_nodes else slot_axis,
            shapes=leaf_lines,
        ),
        "summary": (
            f"{colouring.title}: {len(cats):,} GPUs on {nodes:,} nodes of {gpn}, "
            f"{len(names):,} groups{each}; "
            + ("every group stays inside one node" if inside == len(names) else
               f"{len(names) - inside:,} of them span up to {max(spans):,} nodes")
            + (f"; dotted lines part the {len(cuts) + 1:,} leaf switches of "
               f"{leaf_nodes} nodes" if cuts else "")
        ),
    }
