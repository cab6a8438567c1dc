"""The failures lab's diagrams: interruptions per day against the job's GPUs, where the wall
clock goes, goodput against the checkpoint interval (the optimum marked) and goodput and days
to finish against the job's GPUs for sync, async and peer-memory saves.

Every point is read off ``labs.failures.lab``'s result (its interval and cluster-size sweeps);
nothing here knows a formula.
"""

import math

from app.charts import DIMMED, LINE_COLOUR, base_layout, chosen_band, owned, tint, value_label
from app.charts.units import fmt_duration, fmt_pct
from labs.failures.lab import LLAMA3

SAVE_COLOURS = {"sync": "#e45756", "async": "#4c78a8", "peer": "#b279a2"}
FIELDS = {"sync": "sync", "async": "async_", "peer": "peer"}  # ScalePoint's field per save
PARTS = (  # Goodput field, label, colour
    ("goodput", "training that counts", "#54a24b"),
    ("blocking", "stopped for saves", "#eeca3b"),
    ("rework", "redoing lost steps", "#f58518"),
    ("restart", "restarting", "#e45756"),
)


def _after(keys) -> str:
    """What a mask waits for: "step 5's guess and step 6's guess"."""
    return " and ".join(f"{k.replace('-', ' ')}'s guess" for k in keys)


def _log_band(x: float) -> dict:
    return chosen_band(x / 1.25, x * 1.25)


def _gpu_axis(points) -> dict:
    xs = [p.gpus for p in points]
    ticks = [n for n in xs if math.log2(n).is_integer() and int(math.log2(n)) % 2 == 0]
    return {"type": "log", "title": {"text": "GPUs in the job", "standoff": 2},
            "tickvals": ticks, "ticktext": [f"{n // 1024}K" if n >= 1024 else str(n)
                                            for n in ticks],
            "fixedrange": True, "range": [math.log10(min(xs)) - 0.05,
                                          math.log10(max(xs)) + 0.05]}


def rate_figure(result, keys: tuple[str, ...] = (), line_keys: tuple[str, ...] = ()) -> dict:
    """Interruptions per day against the job's GPUs; Llama 3's published count marked. This
    job's point, label and rate wait for ``keys``; the line, every size's rate, and the
    summary's rule (in proportion to the GPUs) for ``line_keys`` (round-16 cold reading of
    EP11, finding 4: it drew step 1's answer at 1,024 GPUs, a stop every 2 days, before the
    guess); the published point stays."""
    points = result.scale
    inp = result.input
    published = LLAMA3["interruptions"] / LLAMA3["days"]
    data = [
        {"type": "scatter", "mode": "lines", "name": "at this GPU's rate",
         "x": [p.gpus for p in points], "y": [round(p.per_day, 4) for p in points],
         "line": {"color": LINE_COLOUR, "width": 2.5},
         # No hover on the line: the MTBI drills (24 h ÷ the rate at 4,096 and 32,768 GPUs)
         # would be one hover away. Only the published point and this job's are read out.
         "hoverinfo": "skip"},
        {"type": "scatter", "mode": "markers", "name": "Llama 3, published (419 in 54 days)",
         "x": [LLAMA3["gpus"]], "y": [published],
         "marker": {"size": 11, "symbol": "diamond", "color": "#f58518"},
         "hovertemplate": "Llama 3 405B: 16,384 GPUs, %{y:.3g} a day<extra></extra>"},
        {"type": "scatter", "mode": "markers", "name": "this job", "showlegend": False,
         "x": [inp.gpus], "y": [result.per_day],
         "marker": {"size": 14, "symbol": "circle-open", "color": "#b42318",
                    "line": {"width": 2.5}},
         "hovertemplate": "this job: %{y:.3g} a day<extra></extra>"},
    ]
    # Below and right of the point on the left half (the line rises to the right), above
    # and left of it on the right half: never across the line or the axes.
    left = inp.gpus <= math.sqrt(points[0].gpus * points[-1].gpus)
    label = value_label(math.log10(inp.gpus), math.log10(result.per_day),
                        f"{result.per_day:.3g} a day<br>(every {fmt_duration(result.mtbi_s)})",
                        xanchor="left" if left else "right",
                        xshift=10 if left else -10, yanchor="top" if left else "bottom",
                        align="left" if left else "right")
    this_job = (f"stop {result.per_day:.3g} times a day, one every "
                f"{fmt_duration(result.mtbi_s)}")
    rule = "Interruptions a day grow in proportion to the GPUs"
    return {
        "data": data,
        "layout": owned(base_layout(
            annotations=[label], shapes=[_log_band(inp.gpus)],
            margin={"l": 56, "r": 8, "t": 8, "b": 8},
            xaxis=_gpu_axis(points),
            yaxis={"type": "log", "title": {"text": "interruptions a day"}, "dtick": 1,
                   "gridcolor": "#e6e9ef", "fixedrange": True},
            legend={"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top",
                    "font": {"size": 11}}),
            {"step": " ".join(keys), "traces": [2], "annotations": [0],
             "summary": [this_job, f"stop ? times a day (after {_after(keys)})"]},
            {"step": " ".join(line_keys), "traces": [0],
             "summary": [rule, f"The line waits for {_after(line_keys)}"]},
            partly=True),
        "summary": (f"{rule}: {inp.gpus:,} GPUs {this_job}; Llama 3 reported "
                    f"{published:.3g} a day on 16,384"),
    }


def _whole(keys: tuple[str, ...], data: list, summary: str, **parts) -> dict:
    """An owner of a whole chart for ``keys``: every trace, the given labels and shapes, and
    the summary."""
    return {"step": " ".join(keys), "traces": list(range(len(data))), **parts,
            "summary": [summary, f"Its figures show after {_after(keys)}."]}


def time_figure(result, keys: tuple[str, ...] = (), lost_keys: tuple[str, ...] = (),
                best_keys: tuple[str, ...] = (), best_goodput_keys: tuple[str, ...] = ()) -> dict:
    """Shares of the wall clock at the chosen interval and at the best one, stacked; veiled
    whole while ``keys`` wait, the redone steps' and the restarts' shares while ``lost_keys``
    do (the rest is drawn), the saves' share and the best interval's length while
    ``best_keys`` do, and the training share (its bars and the best interval's figure in the
    summary) while ``best_goodput_keys`` do."""
    rows = (("this interval", result.chosen), ("best interval", result.best))
    labels = [f"{name}<br>{fmt_duration(g.interval)}"
              if name == "this interval" or not best_keys else name for name, g in rows]
    data = [{"type": "bar", "orientation": "h", "name": label, "y": labels,
             "x": [round(100 * getattr(g, field), 4) for _, g in rows],
             "marker": {"color": colour},
             "text": [fmt_pct(getattr(g, field)) if getattr(g, field) >= 0.06 else ""
                      for _, g in rows],
             "textposition": "inside", "insidetextanchor": "middle",
             "hovertemplate": f"{label}: %{{x:.3g}}%<extra></extra>"}
            for field, label, colour in PARTS]
    g = result.chosen
    lost = f"{fmt_pct(g.rework)} redoes lost steps, {fmt_pct(g.restart)} restarts"
    best = f"({fmt_duration(result.best.interval)})"
    saves = f"{fmt_pct(g.blocking)} waits for saves"
    best_trains = f"{fmt_pct(result.best.goodput)} trains there"
    summary = (f"At a {fmt_duration(g.interval)} interval: {fmt_pct(g.goodput)} trains, "
               f"{saves}, {lost}; at the best interval {best} {best_trains}")
    # The shares a failure costs (redone steps, restarts: traces 2 and 3) and the best
    # interval's length, each owned by the step it answers (failures_state.answer_keys); the
    # saves' share (trace 1) with the best interval: over the interval it is the stop δ
    # (round-16 cold reading of EP11, finding 6).
    parts = ({"step": " ".join(lost_keys), "traces": [2, 3],
              "summary": [lost, "? redoes lost steps, ? restarts"]},
             {"step": " ".join(best_keys), "traces": [1],
              "summary": [saves, "? waits for saves"]},
             {"step": " ".join(best_keys), "traces": [], "summary": [best, "(?)"]},
             {"step": " ".join(best_goodput_keys), "traces": [0],
              "summary": [best_trains, "? trains there"]})
    return {
        "data": data,
        "layout": owned(base_layout(
            barmode="stack", margin={"l": 96, "r": 8, "t": 8, "b": 8},
            xaxis={"range": [0, 100], "title": {"text": "% of wall time", "standoff": 2},
                   "fixedrange": True, "gridcolor": "#e6e9ef"},
            yaxis={"autorange": "reversed", "fixedrange": True},
            legend={"orientation": "h", "x": 0, "y": -0.35, "yanchor": "top",
                    "font": {"size": 11}, "traceorder": "normal"}),
            _whole(keys, data, summary), *parts, partly=True),
        "summary": summary,
    }


def interval_figure(result, keys: tuple[str, ...] = (), best_keys: tuple[str, ...] = ()) -> dict:
    """Goodput against the interval (log), Young's interval dashed, the best and the chosen
    interval marked; veiled whole while ``keys`` wait, the best and Young's marks while
    ``best_keys`` do."""
    inp = result.input
    sweep = result.intervals
    colour = SAVE_COLOURS[inp.save]
    data = [
        {"type": "scatter", "mode": "lines", "name": f"{inp.save} saves",
         "x": [round(g.interval, 4) for g in sweep],
         "y": [round(100 * g.goodput, 4) for g in sweep],
         "line": {"color": colour, "width": 3}, "fill": "tozeroy",
         "fillcolor": tint(colour, 0.10),
         "hovertemplate": "every %{x:,.3~r} s: %{y:.3g}% goodput<extra></extra>"},
        {"type": "scatter", "mode": "markers", "name": "best (Daly's, up to whole steps)",
         "x": [result.best.interval], "y": [100 * result.best.goodput],
         "marker": {"size": 11, "symbol": "star", "color": "#54a24b"},
         "hovertemplate": "best: every %{x:,.3~r} s, %{y:.3g}%<extra></extra>"},
        {"type": "scatter", "mode": "markers", "name": "this interval",
         "x": [inp.interval], "y": [100 * result.chosen.goodput],
         "marker": {"size": 14, "symbol": "circle-open", "color": "#b42318",
                    "line": {"width": 2.5}},
         "hovertemplate": "this interval: %{y:.3g}%<extra></extra>"},
    ]
    young = {"type": "line", "xref": "x", "yref": "paper", "x0": result.young_s,
             "x1": result.young_s, "y0": 0, "y1": 1,
             "line": {"color": LINE_COLOUR, "width": 1.5, "dash": "dash"}}
    right = inp.interval > math.sqrt(sweep[0].interval * sweep[-1].interval)
    label = value_label(math.log10(inp.interval), 100 * result.chosen.goodput,
                        f"every {fmt_duration(inp.interval)}:<br>"
                        f"{fmt_pct(result.chosen.goodput)}",
                        xanchor="right" if right else "left", xshift=-10 if right else 10,
                        yanchor="top", align="right" if right else "left")
    best = (f"the best interval, {fmt_duration(result.best.interval)}, gives "
            f"{fmt_pct(result.best.goodput)}")
    summary = (f"{inp.save.capitalize()} saves on {inp.gpus:,} GPUs: saving every "
               f"{fmt_duration(inp.interval)} gives {fmt_pct(result.chosen.goodput)}; {best}; "
               "too short and saves eat the time, too long and failures do")
    return {
        "data": data,
        "layout": owned(base_layout(
            annotations=[label], shapes=[_log_band(inp.interval), young],
            margin={"l": 56, "r": 8, "t": 8, "b": 8},
            xaxis={"type": "log", "title": {"text": "seconds between saves (dashed: Young)",
                                            "standoff": 2}, "fixedrange": True, "dtick": 1},
            yaxis={"title": {"text": "goodput, % of wall time"}, "range": [0, 100],
                   "gridcolor": "#e6e9ef", "fixedrange": True},
            legend={"orientation": "h", "x": 0, "y": -0.22, "yanchor": "top",
                    "font": {"size": 11}}),
            _whole(keys, data, summary, annotations=[0]),
            {"step": " ".join(best_keys), "traces": [1], "shapes": [1],
             "summary": [best, f"the best interval shows after {_after(best_keys)}"]},
            partly=True),
        "summary": summary,
    }


def scale_figure(result, goodput_keys: tuple[str, ...] = (),
                 days_keys: tuple[str, ...] = ()) -> dict:
    """Two panels against the job's GPUs: goodput, and days to finish the job's steps, for
    each save (sync, async, peer memory) at its best interval. The goodput panel waits for
    ``goodput_keys``; the days panel for ``days_keys`` and step 7, which asks for it."""
    inp = result.input
    points = result.scale
    data = []
    # Each point's step, said on the hover: EP08's engine's where it timed it, else ideal
    # (round-10 cold reading, EP11 finding 3); ideal points are drawn open.
    # The step itself only on the days panel, which waits for step 7: each size's step beside
    # its goodput gave step 7's days as steps x step / goodput (round-13 cold reading of
    # EP10-EP11, finding 5: 929,832 x 5.675 s / 50.5% = 121 days on 65,536 GPUs).
    timing = ["timed by EP08's engine" if p.step_timed else "ideal: 1/GPUs" for p in points]
    steps = [f"step {p.step_s:.4g} s, {t}" for p, t in zip(points, timing, strict=True)]
    symbols = ["circle" if p.step_timed else "circle-open" for p in points]
    for save, field in FIELDS.items():
        chosen = save == inp.save
        style = {"color": SAVE_COLOURS[save], "width": 3 if chosen else 2}
        opacity = 1.0 if chosen else max(DIMMED, 0.5)
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"{save} saves",
            "x": [p.gpus for p in points],
            "y": [round(100 * getattr(p, field).goodput, 4) for p in points],
            "line": style, "opacity": opacity, "legendgroup": save,
            "marker": {"symbol": symbols, "size": 7}, "customdata": timing,
            "hovertemplate": f"{save}, %{{x:,}} GPUs: %{{y:.3g}}% goodput (%{{customdata}})"
                             "<extra></extra>"})
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": f"{save} saves",
            "showlegend": False, "xaxis": "x2", "yaxis": "y2", "legendgroup": save,
            "x": [p.gpus for p in points],
            "y": [None if getattr(p, field).finish_days is None
                  else round(getattr(p, field).finish_days, 4) for p in points],
            "line": style, "opacity": opacity,
            "marker": {"symbol": symbols, "size": 7}, "customdata": steps,
            "hovertemplate": f"{save}, %{{x:,}} GPUs: %{{y:,.3~r}} days (%{{customdata}})"
                             "<extra></extra>"})
    bands = _bands(points, inp.save)
    data += bands
    here = next(p for p in points if p.gpus == inp.gpus)
    field = FIELDS[inp.save]
    mine = getattr(here, field)
    days = mine.finish_days
    finish = [g.finish_days for p in points for g in (*(getattr(p, f) for f in FIELDS.values()),
                                                      *p.held) if g.finish_days is not None]
    axis = _gpu_axis(points)
    labels = [value_label(math.log10(inp.gpus), 100 * mine.goodput,
                          f"{inp.gpus:,}: {fmt_pct(mine.goodput)}", yanchor="top",
                          xanchor="right", xshift=-8)]
    if days is not None:
        labels.append(value_label(math.log10(inp.gpus), math.log10(days),
                                  f"{days:,.3g} days", xref="x2", yref="y2",
                                  xanchor="left", xshift=8))
    finish_text = f" and finish in {days:,.3g} days" if days is not None else " and never finish"
    keep_text = f"keep {fmt_pct(mine.goodput)} of the wall clock"
    labels.append(_step_note(points, inp))
    return {
        "data": data,
        "layout": owned(base_layout(
            annotations=labels,  # two stacked plots by their axes' domains (the bundle has no grid)
            shapes=[_log_band(inp.gpus)],
            # The days panel answers step 7 (how much sooner each doubling finishes: the
            # flattening line, hovered 33.2 -> 24.5 -> 22.6 days), which step 6's links and the
            # bad case drew before its guess (round-10 cold reading, EP11 finding 1): its
            # traces, its label and the summary's days hidden until step 7's guess (lab.js,
            # layout.meta.owners); the goodput panel stays ("partly").
            # Its label is dropped while veiled (a masked one sits at the plot's middle, on
            # the goodput panel's axis). Where the state's goodput answers a step
            # (goodput_keys), the goodput panel waits for it too, and the days with it.
            margin={"l": 56, "r": 8, "t": 8, "b": 8},
            xaxis={**axis, "title": {"text": ""}, "domain": [0, 1]},
            yaxis={"title": {"text": "goodput, %"}, "range": [0, 100], "domain": [0.56, 1],
                   "tickvals": [25, 50, 75, 100],
                   "gridcolor": "#e6e9ef", "fixedrange": True},
            xaxis2={**axis, "anchor": "y2", "domain": [0, 1]},
            yaxis2={"type": "log", "title": {"text": "days to finish"}, "domain": [0, 0.44],
                    "dtick": 1,
                    "anchor": "x2", "gridcolor": "#e6e9ef", "fixedrange": True,
                    "range": [math.log10(min(finish)) - 0.1, math.log10(max(finish)) + 0.1]},
            legend={"orientation": "h", "x": 0, "y": -0.12, "yanchor": "top",
                    "font": {"size": 11}}),
            {"step": " ".join(goodput_keys), "traces": [0, 2, 4], "annotations": [0],
             "summary": [keep_text, f"keep ? of the wall clock (after {_after(goodput_keys)})"]},
            {"step": " ".join(dict.fromkeys((*days_keys, "step-7"))),
             "traces": [1, 3, 5, *range(6, 6 + len(bands))],
             "annotations": [1] if days is not None else [],
             "summary": [finish_text, " and finish in ? days"]},
            partly=True),
        "summary": (f"Each at its best interval, {inp.save} saves on {inp.gpus:,} GPUs "
                    f"{keep_text}" + finish_text + ". " + _step_words(points, inp)),
    }


def _bands(points, chosen: str) -> list[dict]:
    """On the days panel, for each save, the range of the days where the step is ideal: from
    the ideal days (the open points, the low edge) up to the days with the step no faster than
    on the size it is scaled from (ScalePoint.held, the high edge, dotted), from the last timed
    size on (round-14 cold reading of EP11, finding 12d: past 65,536 GPUs the days turned down
    the moment the engine stopped timing the step). A polygon each, and its high edge; the
    saves not ``chosen`` dimmed as their lines are."""
    ideal = [i for i, p in enumerate(points) if p.held]
    if not ideal:
        return []
    start = ideal[0] - 1 if ideal[0] and not points[ideal[0] - 1].held else ideal[0]
    span = points[start:ideal[-1] + 1]
    base = span[0].gpus if not span[0].held else None
    past = f" past {base // 1024}K" if base and base >= 1024 else ""
    out = []
    for n, (save, field) in enumerate(FIELDS.items()):
        low = [getattr(p, field).finish_days for p in span]
        high = [p.held[n].finish_days if p.held else getattr(p, field).finish_days
                for p in span]
        if None in low or None in high:
            continue
        xs = [p.gpus for p in span]
        colour = SAVE_COLOURS[save]
        common = {"type": "scatter", "xaxis": "x2", "yaxis": "y2", "showlegend": False,
                  "legendgroup": save, "opacity": 1.0 if save == chosen else max(DIMMED, 0.5)}
        out.append({**common, "mode": "lines", "name": f"{save} saves: range",
                    "x": xs + xs[::-1], "y": [round(v, 4) for v in high + low[::-1]],
                    "fill": "toself", "fillcolor": tint(colour, 0.14),
                    "line": {"width": 0, "color": colour}, "hoverinfo": "skip"})
        out.append({**common, "mode": "lines", "name": f"{save} saves: no speed-up",
                    "x": xs, "y": [round(v, 4) for v in high],
                    "line": {"color": colour, "width": 1.5, "dash": "dot"},
                    "hovertemplate": f"{save}, %{{x:,}} GPUs: %{{y:,.3~r}} days if the step "
                                     f"gains nothing{past}<extra></extra>"})
    return out


def _step_words(points, inp) -> str:
    """Where the scale chart's steps come from: EP08's engine at the sizes it timed (filled
    points), ideal 1/GPUs scaling elsewhere (open points), or ideal everywhere."""
    timed = [p.gpus for p in points if p.step_timed]
    if not timed:
        return (f"Each step is {inp.step_s:.3g} s × {inp.step_gpus:,} ÷ GPUs, ideal away from "
                f"{inp.step_gpus:,} GPUs: the lab times other sizes on EP08's engine only for "
                "Llama 3's job, so the days err low for big jobs; the shaded range runs up to "
                f"the days with the step no faster than on {inp.step_gpus:,} GPUs (dotted).")
    rest = [p.gpus for p in points if not p.step_timed]
    words = (f"Filled points: the step EP08's engine times on Llama 3's layout and batch, "
             f"{min(timed):,} to {max(timed):,} GPUs")
    if rest:
        words += (f"; open points: ideal, 1/GPUs from the nearest timed size, where the engine "
                  f"cannot time the layout (past {max(timed):,} GPUs each pipeline has fewer "
                  "micro-batches than it can run), so their days err low; the shaded range "
                  "runs up to the days with the step no faster than on "
                  f"{max(timed):,} GPUs (dotted)")
    return words + "."


def _step_note(points, inp) -> dict:
    """The days panel's note of where its steps come from (``_step_words``, shortened)."""
    timed = [p.gpus for p in points if p.step_timed]
    if not timed:
        text = "ideal steps: 1/GPUs"
    elif all(p.step_timed for p in points):
        text = "● steps timed by EP08's engine"
    else:
        text = f"● EP08's engine  ○ ideal (1/GPUs) past {max(timed) // 1024}K"
    if any(p.held for p in points):  # the days' ranges (_bands)
        text += "<br>shaded: up to no speed-up"
    return {"text": text, "xref": "x2 domain", "yref": "y2 domain", "x": 1, "y": 1,
            "xanchor": "right", "yanchor": "top", "showarrow": False,
            "font": {"size": 11}}

