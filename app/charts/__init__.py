"""Lab results turned into plotly figure JSON, built as plain dicts.

Measured here: building a figure with ``plotly.graph_objects`` costs 7-11 ms, a plain dict
0.05-2 ms, so the charts are dicts; ``tests/app/test_charts.py`` checks every one against
plotly's own schema.
"""

FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}


def base_layout(**overrides) -> dict:
    """The layout every chart starts from: tight margins, no background, legend below."""
    layout = {
        "font": FONT,
        "margin": {"l": 56, "r": 16, "t": 12, "b": 40},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "legend": {"orientation": "h", "y": -0.12, "x": 0, "yanchor": "top"},
        "hoverlabel": {"font": FONT},
    }
    layout.update(overrides)
    return layout
