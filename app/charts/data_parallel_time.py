"""EP02's time charts: where one step's time goes at the chosen point (compute, then the
all-reduce hidden behind backward or exposed), and its compute against its once-a-step
all-reduce with the crossover marked; each veiled while the guess its all-reduce gives waits
(``data_parallel.py``'s keys). Nothing here knows an all-reduce formula."""

import math

from app.charts import base_layout
from app.charts.crossover import crossover_figure, tokens
from app.charts.data_parallel import (
    ALLREDUCE_WHAT,
    STEP3,
    STEP3_WHAT,
    allreduce_keys,
    crossover_keys,
    crossover_what,
    sent_keys,
    time_keys,
    veiled,
)
from app.charts.units import fmt_gb2

PARTS = {  # part of the step -> (label, colour)
    "compute": ("Compute", "#4c78a8"),
    "overlapped": ("All-reduce hidden behind backward", "#b9d3ee"),
    "exposed": ("All-reduce exposed (the step waits)", "#e45756"),
}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds * 1e3 >= 1 else f"{seconds * 1e3:,.3f} ms"


def time_figure(result) -> dict:
    """One step at the chosen point, in ms: the GPU's compute then the exposed all-reduce
    (what the step pays), and under it the all-reduce stream, hidden part first. Veiled until
    the guess or answer its all-reduce gives (``allreduce_keys``: step 3's on Ethernet, a
    drill's at its state)."""
    keys = allreduce_keys(result)
    figure = _time_figure(result)
    sent = sent_keys(result)
    if keys:  # veiled whole, its bytes label with it (till step 1 too, at step 1's state)
        return veiled(figure, (*keys, *(k for k in sent if k not in keys)),
                      STEP3_WHAT if keys == (STEP3,) else ALLREDUCE_WHAT)
    owners, masked = [], {}
    layout, label = figure["layout"], len(figure["layout"]["annotations"]) - 1
    if sent:  # step 1's state: what each GPU sends held for step 1's guess
        masked[str(label)] = "each GPU sends ? (step 1)"
        owners.append({"step": " ".join(sent), "annotations": [label],
                       "summary": [_sent(result.point), "each GPU sends ? (step 1)"]})
    if STEP3 in time_keys(result):
        # One port a server across servers: the compute bar and the bytes drawn, the
        # all-reduce's bars, their times and the axis they stretch held for step 3's guess.
        p = result.point
        owners.append({"step": STEP3, "traces": [
            i for i, t in enumerate(figure["data"]) if t.get("legendgroup") != "compute"],
            "summary": [_times(p), "the all-reduce's time ? (step 3)"]})
        masked_axis = {"xaxis": {**layout["xaxis"], "range": [0, p.compute_s * 1e3 * 1.04]}}
    else:
        masked_axis = {}
    if not owners:
        return figure
    layout["meta"] = {"masked": masked, "partly": True, "owners": owners,
                      **({"axes": masked_axis} if masked_axis else {})}
    return figure


def _end(p) -> float:
    return p.compute_s * 1e3 + p.exposed_comm_s * 1e3


def _times(p) -> str:
    """The time chart's summary from the all-reduce on: what step 3's hold masks."""
    return (f"{ms(p.comm_s)} of all-reduce of which {ms(p.overlapped_comm_s)} hidden behind "
            f"backward and {ms(p.exposed_comm_s)} exposed; the step takes {ms(p.step_s)}")


def _sent(point) -> str:
    """The bytes the all-reduce bar's label says each GPU sends: step 1's question."""
    if point.gpus == 1:
        return "no all-reduce on one GPU"
    if point.algorithm == "nvls":  # the switch adds: a GPU sends S once (EP02 step 2)
        return f"{fmt_gb2(point.allreduce_bytes_per_gpu)} in ring units"
    return f"each GPU sends {fmt_gb2(point.allreduce_bytes_per_gpu)}"


def _time_figure(result) -> dict:
    p = result.point
    compute, exposed, hidden = p.compute_s * 1e3, p.exposed_comm_s * 1e3, \
        p.overlapped_comm_s * 1e3
    rows = ("GPU step", "All-reduce")
    bars = [
        ("compute", rows[0], 0, compute),
        ("exposed", rows[0], compute, exposed),
        ("overlapped", rows[1], compute - hidden, hidden),
        ("exposed", rows[1], compute, exposed),
    ]
    data = []
    shown = set()
    for key, row, base, width in bars:
        label, colour = PARTS[key]
        if width <= 0:
            continue
        data.append({
            "type": "bar", "orientation": "h", "name": label, "y": [row],
            "x": [round(width, 6)], "base": [round(base, 6)],
            "marker": {"color": colour}, "legendgroup": key, "showlegend": key not in shown,
            "hovertemplate": f"{label}: {ms(width / 1e3)}<extra></extra>",
        })
        shown.add(key)
    end = _end(p)
    # What the all-reduce row carries (round-16 cold reading, finding 5: step 1's move showed
    # no bytes in the diagram it names), in the gap above its bar: at the bar's left it was
    # drawn over a bucketed bar that starts early (round-21 cold reading P, finding 18). The
    # category axis puts the rows at 0 and 1: 0.5 is the gap between them.
    sent = {"xref": "x", "yref": "y", "x": 0, "y": 0.5, "xanchor": "left",
            "yanchor": "middle",
            "showarrow": False, "text": _sent(p) + (" →" if p.gpus > 1 else ""),
            "font": {"size": 12, "color": "#1d2330"}, "bgcolor": "rgba(255,255,255,0.85)"}
    return {
        "data": data,
        "layout": base_layout(
            barmode="overlay", bargap=0.3,
            margin={"l": 84, "r": 8, "t": 8, "b": 8},
            xaxis={"title": {"text": "ms in one step", "standoff": 2},
                   "range": [0, end * 1.04 or 1], "gridcolor": "#e6e9ef", "zeroline": False},
            yaxis={"type": "category", "autorange": "reversed", "fixedrange": True,
                   "categoryorder": "array", "categoryarray": list(rows)},
            legend={"orientation": "h", "x": 0, "y": -0.25, "yanchor": "top",
                    "font": {"size": 11}},
            annotations=[sent],
        ),
        "summary": f"One step at {p.gpus:,} GPUs: {_sent(p)}; {ms(p.compute_s)} of compute, "
                   f"{_times(p)}",
    }


def crossover_inputs(ratio, gpus: int) -> tuple[str, str, str]:
    """The rate (TFLOP/s) and busBW (GB/s) the crossover note's T* = ⅔ × (N−1)/N × rate ÷
    busBW prints, with the fewest digits (the busBW to four figures at least) whose product
    prints as the note's T* does (``tokens``): round-22 cold reading P, finding 8, '515.3
    TFLOP/s ÷ 26.2 GB/s = 11,457' gave 11,473. Third, the all-reduce's time (ms) to the
    digits that give that busBW's four figures from the bytes (round-23 cold reading P,
    finding 6: '24.5 GB in 934 ms' gave 26.23, not the note's 26.24)."""
    rate, busbw = ratio.rate / 1e12, ratio.busbw / 1e9
    if gpus < 2 or busbw <= 0:  # one GPU sends nothing: no busBW to divide by
        return f"{rate:,.1f}", f"{busbw:,.2f}", f"{ratio.allreduce_s * 1e3:,.0f}"
    shown = tokens(ratio.crossover_tokens)
    least = max(0, 3 - math.floor(math.log10(busbw))) if busbw > 0 else 0
    tries = sorted(((r, b) for r in range(1, 5) for b in range(least, least + 4)),
                   key=sum)
    r, b = next(((r, b) for r, b in tries if tokens(
        2 / 3 * (gpus - 1) / gpus * round(rate, r) * 1e3 / round(busbw, b)) == shown),
        (4, least + 3))
    ms, sent = ratio.allreduce_s * 1e3, ratio.busbw * ratio.allreduce_s / 1e9
    t = next((t for t in range(max(0, 2 - math.floor(math.log10(ms))) if ms > 0 else 0, 6)
              if round(sent / round(ms, t) * 1e3, least) == round(busbw, least)), 6) if ms else 0
    return f"{rate:,.{r}f}", f"{busbw:,.{b}f}", f"{ms:,.{t}f}"


def ratio_figure(result) -> dict:
    """EP02's compute against its once-a-step all-reduce (``app.charts.crossover``); veiled
    until the guess of the step it answers (``crossover_keys``): at an Ethernet state step
    3's (compute ÷ all-reduce gives its efficiency), on PCIe step 8's (its T*)."""
    r = result.ratio
    figure = crossover_figure(r.tokens_per_gpu, r.compute_s, r.allreduce_s, r.crossover_tokens,
                              r.sweep, "All-reduce, once a step", result.input.gpus)
    keys = crossover_keys(result)
    return veiled(figure, keys, crossover_what(result, keys))
