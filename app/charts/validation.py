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
