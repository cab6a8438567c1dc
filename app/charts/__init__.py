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


def gpu_memory_line(gpu_gb: float) -> dict:
    """Layout parts for the dashed line of a GPU's memory (in GB), labelled at the right."""
    return {
        "shapes": [{
            "type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
            "y0": gpu_gb, "y1": gpu_gb,
            "line": {"color": "#1d2330", "width": 2, "dash": "dash"},
        }],
        "annotations": [{
            "xref": "paper", "x": 1, "xanchor": "right", "yref": "y", "y": gpu_gb,
            "yanchor": "bottom", "showarrow": False, "bgcolor": "rgba(255,255,255,0.85)",
            "text": f"GPU memory: {gpu_gb:,.0f} GB", "font": {"color": "#1d2330"},
        }],
    }
