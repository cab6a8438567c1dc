"""Lab results turned into plotly figure JSON, built as plain dicts.

Measured on this machine for EP01's stacked bar: 0.01 ms as a plain dict, 2.5 ms through
``plotly.graph_objects`` (median of 200 builds), so the charts are dicts; the route tests
(``tests/app/test_*_routes.py``, ``test_site.py``) validate each one against plotly's schema.
"""

import re

LINE_COLOUR = "#1d2330"
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}
# The options a state did not choose are drawn faint, so that a link choosing another one
# moves the highlight the student sees (not only an outline).
DIMMED = 0.3


def chosen_opacity(chosen: list[bool]) -> list[float]:
    """Per bar or point: the chosen option whole, every other one dimmed."""
    return [1.0 if c else DIMMED for c in chosen]


def tint(colour: str, alpha: float = 0.15) -> str:
    """A line's colour ("#rrggbb") as a light fill under it."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def chosen_band(x0: float, x1: float) -> dict:
    """A light band behind the chosen x (data coordinates; on a log axis, data values too),
    the full height of the plot: moving the choice moves the band."""
    return {"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
            "fillcolor": "rgba(47,91,211,0.12)", "line": {"width": 0}, "layer": "below"}


def value_label(x, y: float, text: str, **extra) -> dict:
    """An annotation with the number the prose quotes, just above a bar or point (data
    coordinates; on a category axis, x is the category's index)."""
    label = {"xref": "x", "yref": "y", "x": x, "y": y, "yanchor": "bottom", "showarrow": False,
             "text": text, "font": {"color": LINE_COLOUR, "size": 12},
             "bgcolor": "rgba(255,255,255,0.85)"}
    label.update(extra)
    return label


def cut_label(x, top: float, text: str) -> dict:
    """A bar cut at the axis's top, its total read up the bar from the top (rotated, so that
    neighbouring bars' totals never run into each other, even on a phone)."""
    return value_label(x, top, text, yanchor="top", textangle=-90,
                       font={"size": 10, "color": LINE_COLOUR}, bgcolor="rgba(255,255,255,0.8)")


def bar_key(data: list[dict]) -> list[list[str]]:
    """A figure's colour key, [label, colour] per named bar trace, for a chart drawn without
    its legend (an embed shows it under the chart; the lesson's table names the colours)."""
    return [[t["name"], t["marker"]["color"]] for t in data
            if t.get("type") == "bar" and t.get("name")
            and isinstance(t.get("marker", {}).get("color"), str)]


def owned(layout: dict, *owners: dict, partly: bool = False, axes: dict | None = None,
          masked: dict | None = None) -> dict:
    """The layout with its parts owned by the steps each owner names (``step``: keys, as an
    .answer-mask's data-after-guess, several masking while any is; static/js/lab.js veilOf),
    owners naming none left out; with none left, the layout as it was. An owner of every
    trace veils the chart whole, unless ``partly``; ``axes``: each axis as drawn while some
    owner's parts are hidden (its reach would give them away); ``masked``: an owned label's
    text while it is hidden, by the label's index (drawn at the plot's middle)."""
    kept = [o for o in owners if o["step"]]
    if kept:
        layout["meta"] = {"masked": masked or {}, "partly": partly, "owners": kept,
                          **({"axes": axes} if axes else {})}
    return layout


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


def gpu_memory_line(gpu_memory: float, label: str, *, x: float = 1.0,
                    xanchor: str = "right") -> dict:
    """Layout parts for the dashed line of a GPU's memory (already in the axis unit), with its
    label above the line, its ``xanchor`` side at ``x`` (paper units): the caller puts it
    where no bar's text is."""
    return {
        "shapes": [{
            "type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
            "y0": gpu_memory, "y1": gpu_memory,
            "line": {"color": LINE_COLOUR, "width": 2, "dash": "dash"},
        }],
        "annotations": [{
            "xref": "paper", "x": x, "xanchor": xanchor, "yref": "y", "y": gpu_memory,
            "yanchor": "bottom", "showarrow": False, "bgcolor": "rgba(255,255,255,0.85)",
            "text": label, "font": {"color": LINE_COLOUR},
        }],
    }


def gpu_line_legend(gpu_memory: float, label: str, x: list) -> dict:
    """A legend entry for the GPU line (drawn by ``shapes``), for charts whose bars fill the
    width so an in-plot label would sit on a bar: a one-point line shows only in the legend."""
    return {
        "type": "scatter", "mode": "lines", "name": label, "x": x[:1], "y": [gpu_memory],
        "line": {"color": LINE_COLOUR, "width": 2, "dash": "dash"}, "hoverinfo": "skip",
    }


def short_gpu_name(name: str) -> str:
    """A GPU's name short enough for a phone-wide chart: "NVIDIA H100 SXM 80GB" -> "H100 SXM"
    (the memory is printed beside it anyway)."""
    short = re.sub(r"^(NVIDIA|AMD)\s+", "", name)
    short = re.sub(r"\s*\([^)]*\)", "", short)  # "(HGX, 180GB)"
    return re.sub(r"\s*\b\d+\s?GB\b", "", short).strip() or name


def veiled_after(figure: dict, keys: tuple[str, ...], *, copy: bool = False) -> dict:
    """The figure veiled whole on a lesson page while any of ``keys`` is masked
    (layout.meta.after, static/js/lab.js veilOf); elsewhere drawn as it is. Owners the
    figure already names (layout.meta.owners) hold their parts once it is unveiled.
    ``copy`` leaves ``figure`` as it is and veils a copy (the playground's figures come from
    cached runs, which must not change)."""
    if not keys:
        return figure
    meta = figure["layout"].get("meta") or {}
    meta = {**meta, "masked": meta.get("masked", {}), "after": " ".join(keys)}
    if copy:
        return {**figure, "layout": {**figure["layout"], "meta": meta}}
    figure["layout"]["meta"] = meta
    return figure
