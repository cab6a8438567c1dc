"""EP06's cost diagrams: the communication time per layer against the CP degree, one line per
collective (``cost_figure``, with what of it waits for steps 4 and 6: ``bytes_step``), and the
crossover of attention against moving the keys and values by tokens per rank
(``crossover_figure``, step 8, waiting for steps 7 and 8: ``CROSSOVER_KEYS``).

Every line is read off ``labs.context_parallel`` (each layout's cost, its crossover).
"""

import math

from app.charts import DIMMED, base_layout, chosen_band, tint, value_label
from app.charts.crossover import ms, threshold_figure, tokens, verdict
from app.charts.units import fmt_bytes, fmt_duration
from labs.context_parallel.crossover import cp_crossover
from labs.context_parallel.lab import LAYOUT_NAMES

COST_LINES = {  # layout -> (label, colour, dash)
    "zigzag": ("Ring: pass K/V, c−1 steps", "#4c78a8", "solid"),
    "allgather": ("All-gather K/V", "#f58518", "dot"),
    "ulysses": ("Ulysses: 4 all-to-alls", "#54a24b", "solid"),
}


# Step 6 asks GPT-3 175B's ring bytes at this sequence and CP degree (app/routers/
# context_parallel.py facts, "ring_gpt3_cp16"). Any model's ring or all-gather bytes at the
# same two give that answer by one multiplication, GPT-3's K/V bytes a token over the
# model's (Llama 3.1 70B's 503 MB in the cost chart's hover, x 12: round-17 cold reading of
# EP06, finding 2), so those wait for step 6's guess; at another sequence or CP the student
# still has to know how the bytes scale with s and (c - 1)/c, which step 6 teaches.
STEP_6_ASKS = {"seq_len": 131072, "cp": 16}
WHOLE_KV = ("contiguous", "zigzag", "allgather")  # each GPU moves (c - 1)/c of the K/V


def completes_step_6(seq_len: int, cp: int, layout: str) -> bool:
    return layout in WHOLE_KV and (seq_len, cp) == (STEP_6_ASKS["seq_len"], STEP_6_ASKS["cp"])


def bytes_step(inp) -> str:
    """The guess a state's K/V bytes sent (the cost chart's collectives and the bench's bytes
    and times) wait for: step 6's for a model without grouped-query attention, whose bytes it
    asks (GPT-3 175B's); step 4's and step 6's at step 6's sequence and CP degree
    (``completes_step_6``); else step 4's, so the cost chart draws from step 4 on, where its
    all-gather and ring first differ (round-15 cold reading of EP06, finding 12: it stayed
    flat grey placeholders until step 6)."""
    if inp.model.kv_heads == inp.model.heads:
        return "step-6"
    return "step-4 step-6" if completes_step_6(inp.seq_len, inp.cp, inp.layout) else "step-4"


def step_6_points(sweep, inp) -> list[list[int]]:
    """The cost chart's [trace, point] pairs that give step 6's answer by one multiplication:
    the ring's and the all-gather's at step 6's CP degree, at its sequence length."""
    return [[i, j] for i, layout in enumerate(COST_LINES) if layout in WHOLE_KV
            for j, (c, cost) in enumerate(sweep[layout])
            if cost is not None and completes_step_6(inp.seq_len, c, layout)]


def cost_figure(sweep, current) -> dict:
    """Communication per GPU per layer (ms, log scale) against CP, one line per collective,
    and the busiest rank's attention (zigzag) that a ring can hide behind."""
    data = []
    # The chosen layout's line whole, the others faint (both ring layouts send alike: the
    # zigzag line stands for them).
    picked = "zigzag" if current.input.layout in ("contiguous", "zigzag") else current.input.layout
    for layout, (label, colour, dash) in COST_LINES.items():
        points = sweep[layout]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": label,
            "x": [c for c, _ in points],
            "y": [None if cost is None else round(cost.comm_s * 1e3, 6) for _, cost in points],
            "line": {"color": colour, "dash": dash, "width": 3 if layout == picked else 2},
            "opacity": 1.0 if layout == picked else DIMMED,
            **({"fill": "tozeroy", "fillcolor": tint(colour)} if layout == picked else {}),
            "customdata": [None if cost is None else fmt_bytes(cost.comm_bytes_per_gpu)
                           for _, cost in points],
            "hovertemplate": f"{label}, CP %{{x}}: %{{y:.3g}} ms, %{{customdata}} "
                             "per GPU<extra></extra>",
        })
    att = sweep["zigzag"]
    data.append({
        "type": "scatter", "mode": "lines", "name": "Attention, busiest rank (zigzag)",
        "x": [c for c, _ in att],
        "y": [None if cost is None else round(cost.attention_s * 1e3, 6) for _, cost in att],
        "line": {"color": "#1d2330", "dash": "dash", "width": 1.5},
        "hovertemplate": "attention at CP %{x}: %{y:.3g} ms<extra></extra>",
    })
    inp, cost = current.input, current.cost
    data.append({
        "type": "scatter", "mode": "markers", "name": "this plan", "showlegend": False,
        "x": [inp.cp], "y": [max(cost.comm_s * 1e3, 1e-6)],
        "marker": {"size": 14, "symbol": "circle-open", "color": "#b42318",
                   "line": {"width": 2.5}},
        "hovertemplate": f"this plan: {LAYOUT_NAMES[inp.layout]}, CP {inp.cp}<extra></extra>",
    })
    # The axis ends where the last collective's line does (a link refuses CP degrees past its
    # domain: NVLink's lines stop at 8), not at the sweep's end with nothing drawn there.
    last = max([inp.cp] + [c for layout in COST_LINES for c, cost in sweep[layout] if cost])
    # The plan's own degree is always a tick: at a sequence too short to split (seq_len 1) the
    # sweep refuses every c >= 2, and CP = 1 is all there is to draw.
    xs = sorted({inp.cp, *(c for c, _ in att if c <= last)})
    # The plan's bytes and time, the figures the prose quotes (log axes: log10 positions).
    right = inp.cp >= 8
    label = value_label(
        math.log10(inp.cp), math.log10(max(cost.comm_s * 1e3, 1e-6)),
        f"{LAYOUT_NAMES[inp.layout].split(' (')[0]}, CP {inp.cp}:<br>"
        f"{fmt_bytes(cost.comm_bytes_per_gpu)}, {cost.comm_s * 1e3:.3g} ms",
        xanchor="right" if right else "left", xshift=-10 if right else 10, yanchor="middle",
        align="right" if right else "left")
    # The bytes with their time: a time beside masked bytes and the rate on the bench multiply
    # to them (round-10 cold reading of EP06, item 6).
    sent = (f"sends {fmt_bytes(cost.comm_bytes_per_gpu)} per GPU per layer in "
            f"{cost.comm_s * 1e3:.3g} ms")
    attention = f"against {cost.attention_s * 1e3:.3g} ms of attention"
    held = [] if "step-6" in bytes_step(inp) else step_6_points(sweep, inp)
    return {
        "data": data,
        "layout": base_layout(
            annotations=[label], shapes=[chosen_band(inp.cp / 1.35, inp.cp * 1.35)],
            # Masked on the lesson, each part until the guess of the step that asks for it
            # (lab.js, layout.meta.owners): the collectives' lines, the plan's mark and its
            # bytes until step 4's, or step 6's at a model without GQA (its GPT-3 link drew the
            # 6.04 GB it asks for: round-6 cold reading of EP06, item 1; ``bytes_step``); the
            # attention line until step 7's, which asks whether
            # the ring's sends hide behind it (step 6's guess drew it whole).
            meta={"masked": {"0": f"{LAYOUT_NAMES[inp.layout].split(' (')[0]}, CP {inp.cp}:"
                                  "<br>? per GPU"},
                  "owners": [
                      {"step": bytes_step(inp),
                       "traces": [*range(len(COST_LINES)), len(data) - 1],
                       "annotations": [0],
                       "summary": [sent, "sends ? per GPU per layer in ? ms"]},
                      {"step": "step-7", "traces": [len(COST_LINES)],
                       "summary": [attention, "against ? of attention"]},
                      *([{"step": "step-6", "points": held}] if held else [])]},
            margin={"l": 56, "r": 8, "t": 8, "b": 8},
            xaxis={"type": "log", "title": {"text": "CP degree c", "standoff": 2},
                   "tickvals": xs, "ticktext": [str(c) for c in xs], "fixedrange": True,
                   "range": [math.log10(xs[0]) - 0.05, math.log10(last) + 0.05]},
            yaxis={"type": "log", "title": {"text": "ms per layer, forward"}, "dtick": 1,
                   "gridcolor": "#e6e9ef", "fixedrange": True},
            legend={"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top",
                    "font": {"size": 11}},
        ),
        "summary": (
            f"{inp.model.name}, {inp.seq_len:,} tokens on {inp.link.name}: this plan "
            f"({LAYOUT_NAMES[inp.layout]}, CP = {inp.cp}) {sent} {attention} on the busiest rank"
        ),
    }


# Each layout's transfers, as the crossover's legend names them (short: two a phone's row).
CROSSOVER_SENDS = {"contiguous": "K/V sends", "zigzag": "K/V sends",
                   "allgather": "All-gather", "ulysses": "All-to-alls"}

# The guesses the crossover chart and its bench figures wait for (lab.js: masked while any
# is to come): step 8's, whose chart it is, and step 7's, whose answer it gives at step 7's
# state (512 tokens a rank on 25 Gb/s Ethernet: attention ÷ communication, and the chart's
# "communication-bound"), reached by the bench's controls before step 7's guess (issue 36,
# EP06: guessing step 8 first lifted it).
CROSSOVER_KEYS = "step-7 step-8"


def crossover_figure(result) -> dict:
    """EP06 step 8: attention (∝ L²) against the time to move keys and values (∝ L) by tokens
    per rank, at this state's rate and bus bandwidth, crossing at L*; the hollow marks the
    lab's own layer at each L (labs.context_parallel.crossover). A ring's are drawn per round,
    one round's attention against one send, since a send hides only behind its own round
    (the engine's exposure); an all-gather's and Ulysses' per layer, the layer's attention
    against the collective it waits for. On the lesson it is veiled whole until steps 7 and 8
    are guessed (``CROSSOVER_KEYS``)."""
    c = cp_crossover(result)
    inp = result.input
    att, send = c.round_attention_s, c.send_s
    bound, side = verdict(att, send, "attention", "nothing to move on one rank")
    if c.per_round:
        t = fmt_duration
        names = ("A round ∝ L²", "A K/V send ∝ L")
        unit = "time a ring round"
        what = (f"{t(att)} of attention a round ({c.rounds} rounds a layer) against "
                f"{t(send)} a send")
        exposed = result.cost.exposed_s
        after = (f"; {c.sends} × ({t(send)} − {t(att)}) = {t(exposed)} of the layer exposed"
                 if exposed else "")
    else:
        names = ("Attention ∝ L²", f"{CROSSOVER_SENDS[inp.layout]} ∝ L")
        unit, what = "time per layer", (f"{ms(att)} of attention a layer against {ms(send)} "
                                        "to move its keys and values")
        after = ""
    figure = threshold_figure(
        x_state=c.per_rank, compute_s=att, comm_s=send if c.comm_s else 0.0,
        cross=c.crossover,
        compute_line=[(x, a / c.rounds) for x, a, _ in c.sweep],
        comm_line=[(x, m / c.sends) for x, _, m in c.sweep] if c.comm_s else None,
        compute_name=names[0], comm_name=names[1],
        compute_hover="L = %{x:,.0f}: %{y:.3s}s of attention<extra></extra>",
        x_title="tokens per rank, L = s/c (log scale)", y_title=unit,
        cross_text=f"L* = {tokens(c.crossover)}", cross_masked="L* = ?",
        state_masked=f"This state, L = {tokens(c.per_rank)}:<br>attention ÷ communication = ?",
        state_text=f"This state, L = {tokens(c.per_rank)}:<br>{bound}",
        points=[(x, a / c.rounds, m / c.sends) for x, a, m in c.points],
        point_name="The lab at each L",
        x_ticks=[x for x in (2 ** e for e in range(0, 21, 2))
                 if c.sweep[0][0] <= x <= c.sweep[-1][0]], legend_y=-0.3,
        summary=(f"{LAYOUT_NAMES[inp.layout]} over {c.cp} ranks, {tokens(c.per_rank)} tokens "
                 f"each: "
                 + (f"{what} ({side}); the two are equal at L = {tokens(c.crossover)} tokens "
                    f"a rank{after}" + (
                        f". The lab's own marks, each at its block's rates, cross at about "
                        f"L = {tokens(c.lab_crossover)}" if c.lab_crossover else "")
                    if c.comm_s else
                    f"{ms(c.attention_s)} of attention a layer, nothing to move")))
    meta = figure["layout"].setdefault("meta", {"masked": {}})
    meta["owners"] = crossover_owners(figure, bool(c.comm_s))
    return readable(figure, meta)


def readable(figure: dict, meta: dict) -> dict:
    """The crossover with a plot that reads on a phone (round-17 cold reading of EP06,
    finding 3: at 390x844 its five-row legend left the plot 98 px tall): four short names in
    two rows on a phone and one on a laptop, this state's point left to the chart's title
    ("● = this state"), and a taller figure (lab.js caps it to 300 px on a phone). What the lines
    are drawn at, this state's rate and its send bandwidth or busBW, the note under the
    chart says. While the transfers wait for their guesses their entries keep a name as
    short (layout.meta.names), not "(after step 7 and step 8)" appended."""
    data, layout = figure["data"], figure["layout"]
    for t in data:
        if t["name"] == "The lab at each L: compute":
            t["name"] = "Lab: attention"
        elif t["name"] == "communication":
            t["name"] = "Lab: transfers"
        elif t["name"] == "This state":
            t["showlegend"] = False
    waiting = [i for g in meta["owners"] if g["step"] == CROSSOVER_KEYS for i in g["traces"]]
    meta["names"] = {str(i): "Lab, step 8" if data[i]["mode"] == "markers" else
                     "Sends, step 8" for i in waiting}
    # 85 px a name: two a row on a phone's 267 px plot, all four in one on a laptop's.
    layout["legend"] = {**layout["legend"], "entrywidth": 85, "entrywidthmode": "pixels",
                        "y": -0.22}
    # Taller than the bench's 280, short enough that a step's link shows it whole on a
    # laptop's 1280x800 (tests/browser/test_changed_in_view.py: 90% of it in view).
    layout["height"] = 320
    # Room between the time ticks ("100 ms") and the axis's title on a phone.
    layout["margin"] = {**layout["margin"], "l": layout["margin"]["l"] + 6}
    layout["yaxis"]["title"]["standoff"] = 4
    return figure


def crossover_owners(figure: dict, transfers: bool) -> list[dict]:
    """The crossover's parts by the guesses they wait for (lab.js, layout.meta.owners): its
    attention side (the line ∝ L², the lab's compute marks, this state's point) for step 7's,
    and everything that carries the transfers (their line and marks, the shading, L*, the
    state's gap and its ratio) for steps 7 and 8 (``CROSSOVER_KEYS``). Veiled whole until step
    7's guess, it then draws the attention side (round-15 cold reading of EP06, finding 12:
    blank through step 7, with nothing to look at before step 8): the attention alone gives
    neither step 8's L* nor, at another state, its ratio, both needing the transfers' rate."""
    data, layout = figure["data"], figure["layout"]
    # threshold_figure's order: the attention line, the transfers' line (where there are
    # transfers), the lab's compute and communication marks, this state's point.
    comm = [1] * transfers + [i for i, t in enumerate(data) if t["name"] == "communication"]
    attention = [i for i in range(len(data)) if i not in comm]
    chosen = len(layout.get("shapes", [])) - 1  # this state's band: a place, no value
    return [{"step": "step-7", "traces": attention},
            {"step": CROSSOVER_KEYS, "traces": comm,
             "shapes": [i for i in range(len(layout.get("shapes", []))) if i != chosen],
             "annotations": list(range(len(layout.get("annotations", []))))}]
