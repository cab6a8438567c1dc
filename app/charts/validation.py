"""The "Checked against real runs" scatter: the lab's throughput against the published one,
one point per run, with ±10% and ±25% bands about equality (log axes: the runs span 1.7B to
1T parameters)."""

import math

from app.charts import base_layout

GROUP_COLOURS = {"narayanan-2021-table1": "#1f77b4", "korthikanti-2022-table5": "#d9480f",
                 "korthikanti-2022-dp": "#2b8a3e", "torchtitan-fsdp2": "#862e9c",
                 "deepseek-v3": "#e8590c", "megatron-moe": "#0b7285",
                 "nemo-h100-fp8": "#5c940d"}


def validation_figure(found, groups: dict[str, str], urls: list[str], extra=(),
                      extra_groups: dict[str, str] | None = None,
                      extra_urls: list[str] | None = None) -> dict:
    """Tokens per second per GPU, published (x) and the lab's (y); each point's customdata is
    the EP08 URL of its plan. ``extra``: the validation runs (never calibrated on), drawn as
    open markers beside the calibration runs."""
    extra_groups, extra_urls = extra_groups or {}, extra_urls or []
    xs = [c.published_tokens for c in (*found, *extra)]
    lo, hi = min(xs) / 1.6, max(xs) * 1.6
    data = []
    for band, fill in ((0.25, "rgba(138,148,166,0.15)"), (0.10, "rgba(138,148,166,0.30)")):
        pct = f"±{band:.0%}"
        data.append({"type": "scatter", "mode": "lines", "x": [lo, hi],
                     "y": [lo * (1 - band), hi * (1 - band)], "line": {"width": 0},
                     "hoverinfo": "skip", "showlegend": False, "legendgroup": pct})
        data.append({"type": "scatter", "mode": "lines", "name": pct, "x": [lo, hi],
                     "y": [lo * (1 + band), hi * (1 + band)], "line": {"width": 0},
                     "fill": "tonexty", "fillcolor": fill, "hoverinfo": "skip",
                     "legendgroup": pct})
    data.append({"type": "scatter", "mode": "lines", "name": "lab = published", "x": [lo, hi],
                 "y": [lo, hi], "line": {"color": "#495057", "dash": "dot", "width": 1},
                 "hoverinfo": "skip"})
    for runs, named, links, hollow in ((found, groups, urls, False),
                                       (extra, extra_groups, extra_urls, True)):
        for group, title in named.items():
            idx = [i for i, c in enumerate(runs) if c.run.group == group]
            if not idx:
                continue
            colour = GROUP_COLOURS.get(group, "#495057")
            marker = ({"color": colour, "size": 11, "symbol": "diamond-open",
                       "line": {"color": colour, "width": 2}} if hollow else
                      {"color": colour, "size": 10, "line": {"color": "#ffffff", "width": 1}})
            data.append({
                "type": "scatter", "mode": "markers",
                "name": title + (" (validation)" if hollow else ""),
                "x": [round(runs[i].published_tokens, 1) for i in idx],
                "y": [round(runs[i].lab_tokens, 1) for i in idx],
                "text": [f"{runs[i].run.name}: lab/published {runs[i].ratio:.2f}"
                         for i in idx],
                "customdata": [links[i] for i in idx],
                "marker": marker,
                "hovertemplate": "%{text}<br>published %{x:,.0f}, lab %{y:,.0f} tokens/s "
                                 "per GPU<extra></extra>",
            })
    inside = sum(abs(c.ratio - 1) <= 0.10 for c in found)
    return {
        "data": data,
        "layout": base_layout(
            xaxis={"title": {"text": "Published (tokens/s per GPU)"}, "type": "log",
                   "gridcolor": "#e6e9ef", "range": [math.log10(lo), math.log10(hi)]},
            yaxis={"title": {"text": "Lab (tokens/s per GPU)"}, "type": "log",
                   "gridcolor": "#e6e9ef", "range": [math.log10(lo), math.log10(hi)]},
            margin={"l": 64, "r": 16, "t": 36, "b": 48},
            legend={"orientation": "h", "y": 1.02, "x": 0, "yanchor": "bottom"},
        ),
        "summary": (f"{len(found)} published runs: {inside} within ±10% of the lab, "
                    f"{sum(abs(c.ratio - 1) <= 0.25 for c in found)} within ±25%; the lab is "
                    f"fast on {sum(c.ratio > 1 for c in found)}"
                    + (f"; {len(extra)} validation runs (open diamonds), "
                       f"{sum(abs(c.ratio - 1) <= 0.25 for c in extra)} within ±25%"
                       if extra else "")),
    }


def ratio_figure(runs, groups: dict[str, str], urls: list[str]) -> dict:
    """Each run's lab/published ratio in a strip per group (x: the ratio, a line at 1 and the
    ±10% band about it): where the scatter's log axes, three decades wide, make the band a
    hairline, this shows which way and how far the lab errs on every run (cold reading C,
    issue 36 item 24). Each point's customdata is the EP08 URL of its plan."""
    ratios = [c.ratio for c in runs]
    lo, hi = min(0.9, min(ratios) - 0.05), max(1.8, max(ratios) + 0.05)
    order = [g for g in groups if any(c.run.group == g for c in runs)]
    names = [groups[g] for g in order]
    data = [{"type": "scatter", "mode": "lines", "name": "±10%", "x": [0.9, 1.1, 1.1, 0.9, 0.9],
             "y": [-0.5, -0.5, len(order) - 0.5, len(order) - 0.5, -0.5], "fill": "toself",
             "fillcolor": "rgba(138,148,166,0.25)", "line": {"width": 0}, "hoverinfo": "skip"},
            {"type": "scatter", "mode": "lines", "name": "lab = published", "x": [1, 1],
             "y": [-0.5, len(order) - 0.5], "line": {"color": "#495057", "dash": "dot",
                                                     "width": 1}, "hoverinfo": "skip"}]
    for row, group in enumerate(order):
        idx = [i for i, c in enumerate(runs) if c.run.group == group]
        colour = GROUP_COLOURS.get(group, "#495057")
        data.append({
            "type": "scatter", "mode": "markers", "name": groups[group], "showlegend": False,
            "x": [round(runs[i].ratio, 4) for i in idx], "y": [row] * len(idx),
            "text": [runs[i].run.name for i in idx], "customdata": [urls[i] for i in idx],
            "marker": {"color": colour, "size": 10, "opacity": 0.8,
                       "line": {"color": "#ffffff", "width": 1}},
            "hovertemplate": "%{text}: lab/published %{x:.3f}<extra></extra>",
        })
    fast = sum(r > 1 for r in ratios)
    return {
        "data": data,
        "layout": base_layout(
            xaxis={"title": {"text": "Lab / published throughput (above 1: the lab is fast)"},
                   "range": [lo, hi], "gridcolor": "#e6e9ef", "zeroline": False},
            # Each strip's group named above it, inside the plot: tick labels as long as
            # these would take half a phone's width.
            yaxis={"tickvals": list(range(len(order))), "showticklabels": False,
                   "range": [len(order) - 0.5, -0.5], "gridcolor": "#e6e9ef",
                   "zeroline": False, "fixedrange": True},
            annotations=[{"text": name, "xref": "paper", "x": 0, "yref": "y", "y": row - 0.22,
                          "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                          "font": {"size": 11, "color": "#495057"}}
                         for row, name in enumerate(names)],
            margin={"l": 16, "r": 16, "t": 36, "b": 48},
            legend={"orientation": "h", "y": 1.02, "x": 0, "yanchor": "bottom"},
        ),
        "summary": (f"{len(runs)} runs by group: the lab is fast on {fast}, slow on "
                    f"{len(runs) - fast}; ratios {min(ratios):.2f} to {max(ratios):.2f}"),
    }
