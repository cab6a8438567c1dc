"""Compute against communication by tokens per GPU per step, with the crossover T* marked:
EP02's all-reduce and EP03's ZeRO stages draw it from their labs' figures; nothing here knows
a collective's formula."""

import math

from app.charts import LINE_COLOUR, base_layout, chosen_band

_log10 = math.log10
COMPUTE, COMM = "#4c78a8", "#e45756"  # as EP02's step bars: compute, exposed communication


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"
COMPUTE_BOUND, COMM_BOUND = "rgba(84,162,75,0.10)", "rgba(228,87,86,0.10)"
# Compute-bound by the ratio yet still exposed: past T*, short of where the traffic hides.
EXPOSED = "rgba(242,142,43,0.32)"  # strong enough to show through the state's band
DISTINCT = 1.05  # a hiding point this close to T* shares its line (ZeRO-3's)


def tokens(value: float) -> str:
    """Tokens as the page prints them: from the API's figure (one decimal, as /api/dp and
    /api/zero answer it), so a prose quote and this label round alike (820.5 is 820 in both,
    not 821 on the chart and 820 in the step)."""
    return f"{round(value, 1):,.0f}"


def verdict(compute_s: float, comm_s: float, what: str, alone: str) -> tuple[str, str]:
    """The state's label ("<what> ÷ communication = r", or ``alone`` where nothing moves) and
    its side of the crossover, as every crossover chart words them."""
    if not comm_s:
        return alone, "compute only"
    side = "compute-bound" if compute_s >= comm_s else "communication-bound"
    return f"{what} ÷ communication = {compute_s / comm_s:.3g}", side


def crossover_figure(tokens_per_gpu: float, compute_s: float, comm_s: float, cross: float,
                     sweep, comm_name: str, gpus: int, hidden: float | None = None,
                     exposed_s: float = 0.0) -> dict:
    """Compute and communication against tokens per GPU per step (log-log): compute rises
    with the tokens, the communication does not, and they cross at the lab's T*. The state
    is marked on the compute line, the crossover by a dashed line, each side shaded.
    ``hidden``: the tokens from which the lab's overlap exposes nothing (EP03's stages, each
    collective behind its own pass; ``labs.zero.lab.hidden_tokens``), ``exposed_s`` what it
    exposes at this state; None where the lab models no such point (EP02: without overlap
    nothing hides, and bucketed overlap always leaves the last bucket exposed)."""
    bound, side = verdict(compute_s, comm_s, "compute", "no all-reduce on 1 GPU")
    if hidden is not None and comm_s:
        if exposed_s:  # a line of its own: beside the ratio it ran off a phone's chart
            bound += f"<br>{ms(exposed_s)} exposed"
        side += (f"; {ms(exposed_s)} of it exposed, all of it hidden past "
                 f"{tokens(hidden)} tokens per GPU" if exposed_s else
                 f"; all of it hidden, as it is past {tokens(hidden)} tokens per GPU")
    return threshold_figure(
        x_state=tokens_per_gpu, compute_s=compute_s, comm_s=comm_s, cross=cross,
        compute_line=sweep, comm_line=None,
        compute_name="Compute, 6·P·T ÷ rate", comm_name=comm_name,
        compute_hover="%{x:,} tokens: %{y:.3s}s of compute<extra></extra>",
        x_title="tokens per GPU per step (log scale)", y_title="time per step",
        cross_text=f"T* = {tokens(cross)} tokens",
        state_text=f"This state, {tokens(tokens_per_gpu)} tokens/GPU:<br>{bound}",
        hidden=hidden if comm_s else None, hidden_text=f"hidden past {tokens(hidden or 0)}",
        summary=(f"{tokens(tokens_per_gpu)} tokens per GPU on {gpus:,} GPUs: "
                 f"{ms(compute_s)} of compute"
                 + (f" against {ms(comm_s)} of communication ({side}); the two are equal at "
                    f"T* = {tokens(cross)} tokens per GPU" if comm_s else
                    ", no communication")))


def band(x0: float, x1: float, colour: str) -> dict:
    """One side of a threshold, shaded the plot's full height."""
    return {"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0,
            "y1": 1, "fillcolor": colour, "line": {"width": 0}, "layer": "below"}


def threshold_figure(*, x_state: float, compute_s: float, comm_s: float, cross: float,
                     compute_line, comm_line, compute_name: str, comm_name: str,
                     compute_hover: str, x_title: str, y_title: str, cross_text: str,
                     state_text: str, summary: str, points=(), point_name: str = "",
                     x_ticks=None, legend_y: float = -0.22,
                     cross_masked: str | None = None, state_masked: str | None = None,
                     hidden: float | None = None, hidden_text: str = "") -> dict:
    """Compute and communication against the quantity that decides between them (log-log),
    crossing at the lab's threshold: the state marked on the compute line, the crossover by
    a dashed line, each side shaded. ``comm_line`` None draws the communication flat at
    ``comm_s``; ``points`` (x, compute s, communication s) are the lab's own op-level figures
    at other states, drawn as markers beside the lines derived from this state's rates;
    ``x_ticks`` the x values to label (None: plotly's own); ``legend_y`` how far below the
    plot the legend starts (a longer legend wraps into more rows); ``cross_masked`` the
    crossover label a lesson shows until its step is guessed (kept in ``layout.meta.masked``
    by annotation index; lab.js: the step's try links
    stay live, so the move is seen, but not the number its prediction asks for), and
    ``state_masked`` the state's label meanwhile (its ratio would give the crossover away).
    ``hidden`` (at or past ``cross``) is where the lab's overlap stops exposing anything: past
    T* up to it the compute-bound side is shaded as exposed, a dotted line and
    ``hidden_text`` mark it where it stands apart from T*, and only past it is the side
    shaded as hidden (round-8 cold reading of EP03, item 11); None shades all past T*."""
    xs = [x for x, _ in compute_line]
    lo, hi = min(xs[0], x_state), max(xs[-1], x_state)
    data = [{"type": "scatter", "mode": "lines", "name": compute_name,
             "x": xs, "y": [round(s, 9) for _, s in compute_line],
             "line": {"color": COMPUTE, "width": 2.5}, "hovertemplate": compute_hover}]
    shapes, annotations = [], []
    masked: dict[int, str] = {}  # annotation index -> its text until the guess (layout.meta)
    if comm_s:
        line = comm_line if comm_line is not None else [(lo, comm_s), (hi, comm_s)]
        data.append({"type": "scatter", "mode": "lines", "name": comm_name,
                     "x": [x for x, _ in line], "y": [round(s, 9) for _, s in line],
                     "line": {"color": COMM, "width": 2.5},
                     "hovertemplate": f"{comm_name}: {ms(comm_s)}<extra></extra>"
                     if comm_line is None else
                     f"%{{x:,.0f}}: %{{y:.3s}}s, {comm_name}<extra></extra>"})
        calm = cross if hidden is None else hidden  # where the side past T* turns green
        shapes += [band(lo, cross, COMM_BOUND), band(cross, calm, EXPOSED),
                   band(calm, hi, COMPUTE_BOUND),
                   {"type": "line", "xref": "x", "yref": "paper", "x0": cross, "x1": cross,
                    "y0": 0, "y1": 1, "line": {"color": "#1d2330", "dash": "dash",
                                               "width": 1.5}}]
        shapes = [s for s in shapes if s["type"] == "line" or s["x1"] > s["x0"]]
        # Left of the dashed line where it sits in the right half, so the label stays in
        # on a phone too (round-4 cold reading of EP04, item 8: at 390 px '(h/t)* = 2,449',
        # 65% along, ran into the right edge and over the t = 2 mark).
        right = _log10(cross / lo) > 0.5 * _log10(hi / lo)
        annotations.append({"xref": "x", "yref": "paper", "x": _log10(cross), "y": 1,
                            "xanchor": "right" if right else "left", "yanchor": "top",
                            "showarrow": False, "xshift": -4 if right else 4,
                            "bgcolor": "rgba(255,255,255,0.85)", "text": cross_text})
        if cross_masked:
            masked[len(annotations) - 1] = cross_masked
        if hidden is not None and hidden > DISTINCT * cross:
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": hidden,
                           "x1": hidden, "y0": 0, "y1": 1,
                           "line": {"color": "#1d2330", "dash": "dot", "width": 1.5}})
            right = _log10(hidden / lo) > 0.5 * _log10(hi / lo)
            annotations.append({"xref": "x", "yref": "paper", "x": _log10(hidden), "y": 0.9,
                                "xanchor": "right" if right else "left", "yanchor": "top",
                                "showarrow": False, "xshift": -4 if right else 4,
                                "bgcolor": "rgba(255,255,255,0.85)", "text": hidden_text})
        # The state: its compute on the line and the gap to the communication between them.
        shapes.append({"type": "line", "xref": "x", "yref": "y", "x0": x_state,
                       "x1": x_state, "y0": compute_s, "y1": comm_s,
                       "line": {"color": "#1d2330", "width": 3}})
    for i, (colour, name) in enumerate(((COMPUTE, "compute"), (COMM, "communication"))):
        if points:
            data.append({"type": "scatter", "mode": "markers",
                         "name": f"{point_name}: {name}" if i == 0 else name,
                         "x": [p[0] for p in points], "y": [round(p[1 + i], 9) for p in points],
                         "marker": {"size": 8, "color": "white",
                                    "line": {"color": colour, "width": 2},
                                    "symbol": "circle" if i == 0 else "square"},
                         "hovertemplate": f"%{{x:,.0f}}: %{{y:.3s}}s of {name}, "
                                          "op by op<extra></extra>"})
    shapes.append(chosen_band(x_state / 1.25, x_state * 1.25))
    data.append({"type": "scatter", "mode": "markers", "name": "This state",
                 "x": [x_state], "y": [round(compute_s, 9)],
                 "marker": {"size": 14, "color": "#1d2330"}, "hoverinfo": "skip"})
    # The state's figures sit above the plot, left-aligned: beside its point they ran off a
    # phone's chart wherever the point sat mid-axis (215 px of text, 126 px to either side).
    annotations.append({"xref": "paper", "yref": "paper", "x": 0, "y": 1, "xanchor": "left",
                        "yanchor": "bottom", "yshift": 2, "align": "left", "showarrow": False,
                        "font": {"color": LINE_COLOUR, "size": 12}, "text": state_text})
    if state_masked and comm_s:
        masked[len(annotations) - 1] = state_masked
    ys = ([s for _, s in compute_line]
          + ([s for _, s in comm_line if s > 0] if comm_s and comm_line is not None else [])
          + ([comm_s] if comm_s else []) + [compute_s]
          + [v for p in points for v in p[1:] if v > 0])
    y_axis = time_axis(ys, y_title)
    return {
        "data": data,
        "layout": base_layout(
            margin={"l": 72 if "tickvals" in y_axis else 56, "r": 8,
                    "t": 40 + 14 * (state_text.count("<br>") - 1),  # the state's lines
                    "b": 44 if legend_y == -0.22 else 56},
            xaxis={"type": "log", "title": {"text": x_title, "standoff": 6},
                   "range": [_log10(lo) - 0.05, _log10(hi) + 0.05], "gridcolor": "#e6e9ef",
                   **({"tickvals": list(x_ticks), "ticktext": [f"{v:,.0f}" for v in x_ticks]}
                      if x_ticks is not None else {})},
            yaxis=y_axis,
            legend={"orientation": "h", "x": 0, "y": legend_y, "yanchor": "top",
                    "font": {"size": 11}},
            shapes=shapes, annotations=annotations,
            # plotly's free-form layout.meta (an annotation takes no key of our own:
            # test_figures_are_valid_plotly); lab.js swaps these texts in until the guess.
            **({"meta": {"masked": {str(i): t for i, t in masked.items()}}} if masked else {})),
        "summary": summary,
    }


def time_axis(ys, title: str) -> dict:
    """The log time axis over the times ``ys`` (seconds): its range, and its ticks at whole
    decades (1, 2 and 5 of each under two) in ms or s."""
    y_lo, y_hi = _log10(min(ys)) - 0.1, _log10(max(ys)) + 0.1
    # Decades only, in ms or s (round-4 cold reading of EP04, item 8: plotly's "2, 5, 0.01"
    # log ticks read as seconds where the step speaks of milliseconds).
    decades = [10.0 ** k for k in range(math.floor(y_lo), math.ceil(y_hi) + 1)]
    ticks = [v for v in decades if y_lo <= _log10(v) <= y_hi]
    if len(ticks) < 2:  # under two decades: 1, 2 and 5 of each
        ticks = [m * v for v in decades for m in (1, 2, 5) if y_lo <= _log10(m * v) <= y_hi]
    elif len(ticks) > 4:  # a short chart on a phone: every other decade
        ticks = ticks[::2]
    y_ticks = ({"tickvals": ticks, "ticktext": [
        f"{v * 1e3:,g} ms" if v < 1 else f"{v:,g} s" for v in ticks]} if len(ticks) >= 2 else {})
    return {"type": "log", "title": {"text": title}, "range": [y_lo, y_hi],
            "gridcolor": "#e6e9ef", **y_ticks}
