"""EP02's scaling chart: speedup and efficiency against GPU count per link, each curve named
with its GPUs where they are not the others', and what of it waits for step 3's guess or a
later step's (``step3_owner``, from ``data_parallel.py``'s keys). Drawn from
``labs.data_parallel.lab``'s curve; nothing here knows an all-reduce formula."""

import math
import re
from collections import Counter

from app.charts import DIMMED, base_layout, chosen_band, value_label
from app.charts.data_parallel import (
    STEP3,
    STEP3_LINK,
    STEP3_NAME,
    allreduce_keys,
    link_keys,
    speed_keys,
)
from app.charts.units import fmt_pct
from labs.data_parallel.lab import GPUS_PER_SERVER
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link

# Link family -> colour; one curve per link of the lesson (and the chosen one if apart).
FAMILY_COLOURS = {
    "nvlink": "#54a24b", "infiniband": "#4c78a8", "ethernet": "#e45756", "pcie": "#f58518",
    "infinity-fabric": "#b279a2",
}
EXTRA_DASH = "dot"  # the chosen link's own curve when it is not one of the four
IDEAL = "#9aa3b2"


def times(value: float) -> str:
    return f"{value:,.1f}×" if value >= 10 else f"{value:,.2f}×"


def short_name(name: str) -> str:
    """A link's name short enough for a phone legend: "InfiniBand NDR 400 Gb/s" -> "IB NDR
    400G", "NVLink 4 (H100/H200)" -> "NVLink 4"."""
    short = re.sub(r"\s*\([^)]*\)", "", name).replace("InfiniBand", "IB")
    return re.sub(r" Gb/s", "G", short)


def ports(link: str, nics: int) -> str:
    """How many ports of a scale-out link join each 8-GPU server, as a curve's name says it
    (round-20 cold reading P, finding 5: the IB curve read 40.93x at 64 GPUs unnamed, one
    port a server, under step 4's question on eight): ", 1 port a server"; "" for a link
    inside the server."""
    if get_link(link).kind != "scale-out":
        return ""
    return f", {nics} port{'s' if nics > 1 else ''} a server"


def step3_owner(result, names: dict[str, str], data: list[dict], summary: str,
                label: int) -> list[dict]:
    """Step 3's part of the scaling chart: its Ethernet traces, and the summary's clause on
    Ethernet where another link is the state's. Where a link's all-reduce at the state's GPU
    count answers a step or a drill (``link_keys``, step 3's aside), that link's points from
    the state's N on (its speedup and efficiency, their hover: round-16 cold reading, finding
    1, the IB curve hovered 12.6x at dp-predict-16-ib's own state) and, on another link, the
    summary's clause on it. Where the state's own all-reduce answers one (``allreduce_keys``),
    the chosen point too (its markers and ``label``, the annotation of its speedup) and the
    summary's lead."""
    traces = [i for i, t in enumerate(data) if t.get("legendgroup") == STEP3_LINK]
    owners = []
    if traces:
        owner = {"step": STEP3, "traces": traces}
        clause = (f"{names[STEP3_LINK]} at {result.point.gpus:,} GPUs "
                  f"{times(_point_at(result, STEP3_LINK, result.point.gpus).speedup)}")
        if clause in summary:
            owner["summary"] = [clause, f"{names[STEP3_LINK]} after step 3's guess"]
        owners.append(owner)
    gpus = result.point.gpus
    # Step 3 asks what one port a server leaves of the speedup: any other scale-out curve
    # across servers answers it in kind (InfiniBand's 40.93x at 64 GPUs is the bytes over
    # the port too: round-20 cold reading P, finding 5). Its points past one server wait for
    # step 3's guess, as Ethernet's whole curve does; where it is the state's link, the
    # state is the student's own.
    # Where a drill or a later step holds the same clause (below), one owner masks it for
    # both: two would nest their spans in the caption (app/labkit/render.py figure_summary).
    # Its own link too where its speedup answers step 3 in kind (speed_keys).
    own = STEP3 in speed_keys(result)
    across = [link for link in result.curve_links
              if link != STEP3_LINK and (own or link != result.input.link)
              and get_link(link).kind == "scale-out"]
    for link in across:
        owner = {"step": STEP3, "traces": [],
                 "points": [[i, j] for i, t in enumerate(data) if t.get("legendgroup") == link
                            for j, p in enumerate(_series(result, link))
                            if p.gpus > GPUS_PER_SERVER]}
        # While they wait, the curve's legend says which points and for what (round 21: the
        # IB curve stopped at 8 GPUs with nothing saying why; lab.js partlyVeiled).
        past = next((p.gpus for p in _series(result, link) if p.gpus > GPUS_PER_SERVER), None)
        if past:
            owner["names"] = {str(i): f"{t['name']} ({past:,}+ GPUs after step 3)"
                              for i, t in enumerate(data) if t.get("legendgroup") == link}
        clause = (f"{names[link]} at {gpus:,} GPUs {times(_point_at(result, link, gpus).speedup)}"
                  if gpus > GPUS_PER_SERVER and _has_point(result, link, gpus) else None)
        later = [k for k in link_keys(result, link) if k != STEP3]
        if clause and clause in summary and not later:
            owner["summary"] = [clause, f"{names[link]} after step 3's guess"]
        owners.append(owner)
    for link in result.curve_links:
        keys = [k for k in link_keys(result, link) if k != STEP3]
        if not keys or not _has_point(result, link, gpus):
            continue
        if link in across and gpus > GPUS_PER_SERVER:
            keys = [STEP3, *keys]
        held = [j for j, p in enumerate(_series(result, link)) if p.gpus >= gpus]
        owner = {"step": " ".join(keys), "traces": [],
                 "points": [[i, j] for i, t in enumerate(data)
                            if t.get("legendgroup") == link for j in held]}
        clause = f"{names[link]} at {gpus:,} GPUs {times(_point_at(result, link, gpus).speedup)}"
        if link != result.input.link and clause in summary:
            owner["summary"] = [clause, f"{names[link]} at {gpus:,} GPUs ?"]
        owners.append(owner)
    keys, speed = allreduce_keys(result), speed_keys(result)
    if not speed:
        return owners
    point = result.point
    chosen = [i for i, t in enumerate(data) if t.get("legendgroup") == "chosen"]
    lead = f"{times(point.speedup)} ({fmt_pct(point.efficiency)} efficiency)"
    # Where only its figures wait (speed_keys), the point stays drawn, its label held.
    return [*owners, {"step": " ".join(speed), "traces": chosen if keys else [],
                      "annotations": [label],
                      "summary": [lead, "? (step 3)" if speed == (STEP3,) else "?"]}]


def _series(result, link: str) -> list:
    return [p for p in result.curve if p.link == link]


def curve_gpus(result) -> dict[str, str]:
    """The GPUs a curve is timed on, where they are not the other curves' (the most common
    one's): "H100 PCIe 80GB cards" for PCIe's, whose curve changes the GPU with the link
    (``labs.data_parallel.lab.timed_gpu``; round-22 cold reading P, finding 7: the chart and
    its table put the whole 7.62x -> 4.71x on the link)."""
    timed = {link: series[0].gpu for link in result.curve_links
             if (series := _series(result, link))}
    common = Counter(timed.values()).most_common(1)[0][0] if timed else None
    return {link: get_gpu(gpu).name.removeprefix("NVIDIA ") + " cards"
            for link, gpu in timed.items() if gpu != common}


def _short_cards(cards: str) -> str:
    """"H100 PCIe 80GB cards" as a legend names it: "H100 PCIe"."""
    return re.sub(r"( \d+GB)? cards$", "", cards)


def curve_names(result, names: dict[str, str]) -> dict[str, str]:
    """Each link's name as the chart, its summary and its table say it: with its GPUs where
    they are not the other curves' (``curve_gpus``)."""
    return {**names, **{link: f"{names[link]} ({cards})"
                        for link, cards in curve_gpus(result).items()}}


def scaling_figure(result, names: dict[str, str], families: dict[str, str]) -> dict:
    """Speedup (top, log-log, against the ideal N) and efficiency (bottom) per link, each
    curve named with its GPUs where they are not the others' (``curve_names``)."""
    inp, point = result.input, result.point
    cards, names = curve_gpus(result), curve_names(result, names)
    data = []
    counts = sorted({p.gpus for p in result.curve})
    data.append({
        "type": "scatter", "mode": "lines", "name": "Ideal N×", "x": counts, "y": counts,
        "line": {"color": IDEAL, "dash": "dash", "width": 1.5}, "hoverinfo": "skip",
        "xaxis": "x", "yaxis": "y", "legendgroup": "ideal",
    })
    for link in result.curve_links:
        series = _series(result, link)
        colour = FAMILY_COLOURS[families[link]]
        dash = EXTRA_DASH if link not in result.curve_links[:4] else "solid"
        # The legend names the GPUs short ("H100 PCIe"): the bench's legend must not scroll.
        named = (short_name(names[link])
                 + (f" ({_short_cards(cards[link])})" if link in cards else "")
                 + ports(link, inp.nics_per_node))
        common = {"type": "scatter", "mode": "lines+markers", "name": named,
                  "x": [p.gpus for p in series], "legendgroup": link,
                  "line": {"color": colour, "dash": dash, "width": 2.5 if link == inp.link
                           else 1.5}, "marker": {"size": 5, "color": colour},
                  # The chosen link whole, the others faint: a link's link moves the highlight.
                  "opacity": 1.0 if link == inp.link else DIMMED}
        data.append({**common, "y": [round(p.speedup, 4) for p in series],
                     "customdata": [round(100 * p.efficiency, 1) for p in series],
                     "hovertemplate": f"{named}<br>%{{x:,}} GPUs: %{{y:,.3~r}}× "
                                      "(%{customdata}%)<extra></extra>",
                     "xaxis": "x", "yaxis": "y"})
        fill = ({"fill": "tozeroy", "fillcolor": colour + "33"}
                if link == inp.link else {})
        data.append({**common, **fill, "y": [round(p.efficiency, 4) for p in series],
                     "showlegend": False, "xaxis": "x", "yaxis": "y2",
                     "hovertemplate": f"{named}<br>%{{x:,}} GPUs: %{{y:.1%}}"
                                      "<extra></extra>"})
    chosen = {"type": "scatter", "mode": "markers", "name": "Chosen",
              "x": [point.gpus], "xaxis": "x", "legendgroup": "chosen",
              "marker": {"size": 13, "color": "rgba(0,0,0,0)",
                         "line": {"color": "#1d2330", "width": 2.5}}, "hoverinfo": "skip"}
    data.append({**chosen, "y": [round(point.speedup, 4)], "yaxis": "y"})
    data.append({**chosen, "y": [round(point.efficiency, 4)], "yaxis": "y2",
                 "showlegend": False})
    # The efficiency panel's title, across its top: rotated beside a panel a third of a
    # phone's short plot it ran past the panel and was cut (round 21, 390 px).
    shapes, annotations = [], [{"xref": "paper", "yref": "paper", "x": 0, "y": 0.32,
                                "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                                "text": "efficiency", "font": {"size": 11}}]
    if inp.scaling == "strong" and result.max_gpus < counts[-1] * 2:
        # The global batch caps N: one sequence per GPU at most.
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": result.max_gpus,
                       "x1": result.max_gpus, "y0": 0, "y1": 1,
                       "line": {"color": "#1d2330", "dash": "dot", "width": 1.5}})
        # At the top of the efficiency panel, where every curve has fallen by the time the
        # batch runs out: at the top of the speedup panel it met the chosen point's label
        # (step 7's 128 GPUs, on a phone).
        annotations.append({"xref": "x", "yref": "paper", "x": _log10(result.max_gpus),
                            "y": 0.32, "xanchor": "right", "yanchor": "top", "showarrow": False,
                            "text": f"global batch {inp.global_batch:,}",
                            "bgcolor": "rgba(255,255,255,0.85)"})
    # The chosen point's speedup and efficiency, the figures the prose quotes (log axes take
    # annotation positions as log10).
    right = point.gpus > 32
    annotations.append(value_label(
        _log10(point.gpus), _log10(max(point.speedup, 1e-3)),
        f"{point.gpus:,} GPUs:<br>{times(point.speedup)}, {fmt_pct(point.efficiency)}",
        xanchor="right" if right else "left", yanchor="bottom" if right else "top",
        xshift=-8 if right else 8, yshift=6 if right else -6))
    shapes.append(chosen_band(point.gpus / 1.3, point.gpus * 1.3))
    top = max(counts[-1], 1)
    # Strong scaling can be slower than one GPU: keep those points on the log axis.
    low = min(1.0, *(p.speedup for p in result.curve))
    reading = "weak scaling" if inp.scaling == "weak" else "strong scaling"
    summary = (
        f"{reading.capitalize()}, {point.gpus:,} GPUs on {names[inp.link]}: "
        f"{times(point.speedup)} ({fmt_pct(point.efficiency)} efficiency); "
        + "; ".join(f"{names[link]} at {point.gpus:,} GPUs "
                    f"{times(_point_at(result, link, point.gpus).speedup)}"
                    if _has_point(result, link, point.gpus) else
                    f"{names[link]} stops at {_series(result, link)[-1].gpus:,} GPUs"
                    for link in result.curve_links if link != inp.link)
    )
    label = len(annotations) - 1  # the chosen point's
    owners = step3_owner(result, names, data, summary, label)
    return {
        "data": data,
        "layout": base_layout(
            margin={"l": 52, "r": 8, "t": 8, "b": 40},
            xaxis={"type": "log", "title": {"text": "GPUs (log scale)", "standoff": 6},
                   "range": [-0.05, _log10(1024) + 0.05],
                   "tickvals": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
                   "ticktext": ["1", "", "4", "", "16", "", "64", "", "256", "", "1,024"],
                   "gridcolor": "#e6e9ef", "anchor": "y2"},
            # "speedup" (its ticks and the hover say ×) and a wider gap between the panels:
            # the two titles and the "1" over "100%" met on a short plot (EP12's panel).
            yaxis={"type": "log", "title": {"text": "speedup"}, "domain": [0.46, 1],
                   "range": [_log10(low) - 0.05, _log10(top) + 0.05], "gridcolor": "#e6e9ef",
                   # a factor of 8 a tick (a server's GPUs): the legend's rows leave EP12's
                   # panel (280 px) and a phone's bench (300 px) a short speedup panel, where
                   # 1, 4, ... 1,024 crowded each other and the efficiency panel's ticks
                   "tickvals": [0.01, 0.1, 1, 8, 64, 512],
                   "ticktext": ["0.01", "0.1", "1", "8", "64", "512"]},
            yaxis2={"domain": [0, 0.32],
                    "range": [0, 1.05], "tickformat": ".0%", "gridcolor": "#e6e9ef"},
            legend={"orientation": "h", "x": 0, "y": 1, "yanchor": "bottom",
                    "font": {"size": 11}},
            shapes=shapes, annotations=annotations,
            **({"meta": {"masked": {str(label): f"{point.gpus:,} GPUs: ?" + (
                             " (step 3)" if speed_keys(result) == (STEP3,) else "")}
                         if speed_keys(result) else {}, "partly": True, "owners": owners,
                         # a short name while veiled: a phone's legend keeps to its rows
                         "names": {**{str(i): STEP3_NAME for i, t in enumerate(data)
                                      if t.get("legendgroup") == STEP3_LINK},
                                   **({str(i): _chosen_name(allreduce_keys(result))
                                       for i, t in enumerate(data)
                                       if t.get("legendgroup") == "chosen"}
                                      if set(allreduce_keys(result)) - {STEP3} else {})}}}
               if owners else {}),
        ),
        "summary": summary,
    }


def _chosen_name(keys: tuple[str, ...]) -> str:
    """The chosen point's legend name while it waits: "Chosen (after step 6)", or "(after
    its drill)" for a drill's state (its key is a form's id, no name for a student)."""
    steps = [k.removeprefix("step-") for k in keys if k.startswith("step-")]
    if len(steps) < len(keys):
        return "Chosen (after its drill)"
    return f"Chosen (after step{'s' if len(steps) > 1 else ''} {' and '.join(steps)})"


def _has_point(result, link: str, gpus: int) -> bool:
    """Whether ``link``'s curve reaches ``gpus`` (a scale-up link's stops at its domain)."""
    return any(p.link == link and p.gpus == gpus for p in result.curve)


def _point_at(result, link: str, gpus: int):
    return next(p for p in result.curve if p.link == link and p.gpus == gpus)


def _log10(value: float) -> float:
    return math.log10(value)
