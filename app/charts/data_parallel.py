"""EP02's diagrams: speedup and efficiency against GPU count per link, and where one step's
time goes at the chosen point. Drawn from ``labs.data_parallel.lab``'s curve; nothing here knows
an all-reduce formula."""

import math
import re
from collections import Counter

from app.charts import DIMMED, base_layout, chosen_band, value_label
from app.charts.crossover import crossover_figure, tokens
from app.charts.units import fmt_gb2, fmt_pct
from app.charts.zero import held_text, owned
from labs.data_parallel.lab import GPUS_PER_SERVER, SERVER_LINK
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link

# Link family -> colour; one curve per link of the lesson (and the chosen one if apart).
FAMILY_COLOURS = {
    "nvlink": "#54a24b", "infiniband": "#4c78a8", "ethernet": "#e45756", "pcie": "#f58518",
    "infinity-fabric": "#b279a2",
}
EXTRA_DASH = "dot"  # the chosen link's own curve when it is not one of the four
IDEAL = "#9aa3b2"
PARTS = {  # part of the step -> (label, colour)
    "compute": ("Compute", "#4c78a8"),
    "overlapped": ("All-reduce hidden behind backward", "#b9d3ee"),
    "exposed": ("All-reduce exposed (the step waits)", "#e45756"),
}


def times(value: float) -> str:
    return f"{value:,.1f}×" if value >= 10 else f"{value:,.2f}×"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds * 1e3 >= 1 else f"{seconds * 1e3:,.3f} ms"


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


# Step 3 asks what is left of the speedup at 64 GPUs on one 100 Gb/s Ethernet port a
# server; the Ethernet curves (and their hover, "19.68×, 30.7%" at 64) wait for its guess on
# the lesson, at every state (lab.js, layout.meta.owners, "partly": the other curves stay).
# Round-12 cold reading of EP02, finding 11. At an Ethernet state (the bad case, step 1's 16
# and 64 GPUs) every figure of its all-reduce waits too: the chosen point and its label, the
# time and crossover charts, and the bench's figures (templates/partials/_data_parallel.html).
# Issue 36, s46: step 1's links and the bad case showed 19.7×, 30.7% before the guess.
STEP3_LINK, STEP3, STEP3_NAME = "eth-100g", "step-3", "Ethernet (step 3)"
STEP3_WHAT = "The all-reduce on 100 Gb/s Ethernet"  # held_text: "... shows once step 3 is guessed."
STEP3_MASK = held_text(STEP3_WHAT, (STEP3,))
ALLREDUCE_WHAT = "This all-reduce"  # a drill's state: "... shows once it is answered"
# Round-22 cold reading P, finding 3: at one port a server across servers on InfiniBand (step
# 1's 16 and 64 GPUs, step 4's "IB, 1 port"), the all-reduce's time over the bytes each GPU
# sends (27.56 GB in 575.2 ms) is the port's 48 GB/s, step 3's answer: its times wait too.
ONE_PORT_WHAT = "The all-reduce through one port a server"


# Step 8 asks the crossover T* on 8 GPUs over PCIe 4.0; step 2's "8 × PCIe" link printed it
# (T* 14,995 and compute ÷ all-reduce 1.09 at 16,384 tokens). At a PCIe state the crossover
# chart, note and T* wait for step 8's guess. Issue 36, s46.
STEP8_LINK, STEP8 = "pcie-4", "step-8"
CROSSOVER_WHAT = {STEP3: STEP3_WHAT, STEP8: "The crossover on PCIe 4.0"}

# The drills' states, as their questions state them (app/routers/data_parallel.py,
# app/lesson_drills/data_parallel.py), each keyed by its form's id: at a state the bench's
# controls set to one of them, what answers it waits for the drill's answer (lab.js masking).
# Round-14 cold reading of EP02-EP05, findings 1 and 2: 16 GB on 8 GPUs over PCIe printed
# 1,067.2 ms, 16 GPUs on two NDR ports a server 12.62×, 4 GPUs on PCIe T* = 12,852.
PCIE_DRILL = {"gpus": 8, "link": "pcie-4", "grad_bytes": 16e9}
IB16_DRILL = {"gpus": 16, "link": "ib-ndr", "nics_per_node": 2}
DRILL_STATES = {"drill-dp-allreduce-pcie": PCIE_DRILL, "drill-dp-predict-16-ib": IB16_DRILL}
# The states whose all-reduce answers a later step, keyed to that step as the drills' are
# (round-16 cold reading of EP01-EP02, finding 2: the bench's own controls printed step 2's
# 6.66x, step 4's 93.1%, step 6's 250.64x and step 9's 64.0% before their guesses; steps 5
# and 7 the same once step 3 was guessed). The lesson's try links are these states
# (app/routers/data_parallel.py facts), so a step's link and what its guess unmasks are one.
STRONG_GPUS, STRONG_BATCH = (16, 128), 256  # step 7: one global batch, 8x the GPUs
STEP_STATES = {
    "step-2": {"gpus": 8, "link": "nvlink-4", "micro_batch": 1},
    "step-4": {"gpus": 64, "link": "ib-ndr", "nics_per_node": 8},
    "step-5": {"gpus": 64, "link": STEP3_LINK, "overlap": "bucketed"},
    # On either scale-out link its buckets run the same tree, capped below both ports: 250.64x.
    "step-6": {"gpus": 1024, "link": ("ib-ndr", STEP3_LINK), "nics_per_node": 8,
               "overlap": "bucketed", "bucket_bytes": 1024 * 1024},
    # Step 7 asks how much faster 128 GPUs run a fixed global batch of 256 sequences than 16
    # do (round-17 cold reading of EP02, finding 4): at either count its all-reduce waits.
    "step-7": {"gpus": STRONG_GPUS, "link": STEP3_LINK, "scaling": "strong",
               "global_batch": STRONG_BATCH},
    "step-9": {"gpus": 64, "link": STEP3_LINK, "microbatches": 4},
}
# Step 6 asks which algorithm NCCL runs for a bucket: wherever the bench's readout names
# NCCL's tree, that word waits for its guess (at 25 MiB on 1,024 GPUs too).
STEP6, TREE = "step-6", "tree"
# Step 1 asks what each of 16 GPUs sends (2 × 15/16 × 14 GB) and step 10 what the 8B holds
# at one sequence of 8,192 tokens (its state and activations): at their states the readout's
# bytes sent and the replica panel wait for their guesses.
STEP1_STATE = {"gpus": 16, "grad_bytes": 14e9}
STEP10, STEP10_STATE = "step-10", {"micro_batch": 1, "seq_len": 8192}
STEP10_MODEL = "llama-3.1-8b"
WHAT = {"step-1": "What each GPU sends", STEP10: "The 8B's replica"}


def waits(what: str, keys: tuple[str, ...]) -> str:
    """What a held figure says until its keys are guessed or answered: held_text's "… shows
    once step 3 is guessed.", or "… once its drill is answered." """
    steps = tuple(k for k in keys if k.startswith("step-"))
    drill = "its drill below is answered" if len(steps) < len(keys) else ""
    if not steps:
        return f"{what} shows once {drill}."
    text = held_text(what, steps)
    return f"{text[:-1]} and {drill}." if drill else text


def veiled(figure: dict, keys: tuple[str, ...], what: str) -> dict:
    """``owned`` by one owner that waits for every key (lab.js: veiled while any is masked),
    its summary's mask saying what it waits for (``waits``)."""
    if not keys:
        return figure
    figure = owned(figure, (" ".join(keys),), what)
    figure["layout"]["meta"]["owners"][0]["summary"][1] = waits(what, keys)
    return figure


def _at(inp, state: dict, link: str | None = None) -> bool:
    """Whether the input, on ``link`` if given, is at ``state``: each of its fields equal (a
    tuple: any of them), its link one of the state's, a scale-out link within one server
    read as the server's NVLink, which is all its all-reduce crosses (step 2's 8 GPUs on one
    sequence print 6.66x on InfiniBand too)."""
    def fabric(link_id: str) -> str:
        inside = get_link(link_id).kind == "scale-out" and inp.gpus <= GPUS_PER_SERVER
        return SERVER_LINK if inside else link_id

    def same(key: str, value) -> bool:
        if key != "link":
            return getattr(inp, key) in (value if isinstance(value, tuple) else (value,))
        return fabric(link or inp.link) in {fabric(v) for v in
                                            (value if isinstance(value, tuple) else (value,))}

    return all(same(key, value) for key, value in state.items())


def one_port_across(result, link: str) -> bool:
    """Whether ``link``'s speedup at the state answers step 3 in kind: a scale-out link with
    one port a server, across servers (the bytes over the one port's busBW)."""
    inp = result.input
    return (get_link(link).kind == "scale-out" and inp.nics_per_node == 1
            and inp.gpus > GPUS_PER_SERVER)


def speed_keys(result, link: str | None = None) -> tuple[str, ...]:
    """What the speedup and efficiency on ``link`` (the state's own by default) at the
    state's GPU count wait for: ``link_keys``, and step 3's on one port a server across
    servers (``one_port_across``). Issue 36, round 21: step 4's "IB, 1 port" link drew
    InfiniBand's 40.93x at 64 GPUs (the chosen point's label, the readout, the table, the
    curve's hover), the curve step 3 holds at every other state, before step 3's guess.
    Only the figures wait there: the chosen point and the time chart stay drawn (step 1's
    links land on such states: its bytes move; round-14 cold reading, finding 3)."""
    link = link or result.input.link
    keys = link_keys(result, link)
    return keys if STEP3 in keys or not one_port_across(result, link) else (STEP3, *keys)


def link_keys(result, link: str) -> tuple[str, ...]:
    """What the all-reduce on ``link`` at the state's GPU count answers (its speedup,
    efficiency and times): step 3's on 100 Gb/s Ethernet, a drill's at its state."""
    step3 = link == STEP3_LINK
    return ((STEP3,) if step3 else ()) + tuple(
        key for key, state in (*STEP_STATES.items(), *DRILL_STATES.items())
        if _at(result.input, state, link))


def allreduce_keys(result) -> tuple[str, ...]:
    """What the state's own all-reduce (the chosen point, the time chart, the readout's
    times) answers: ``link_keys`` at its link."""
    return link_keys(result, result.input.link)


def algorithm_keys(result) -> dict[str, tuple[str, ...]]:
    """Step 6's guess where the readout's algorithm answers which one NCCL runs for a
    bucket: the whole gradients' where it names the tree; each bucket's at every bucketed
    state across servers (a "?" only where it is the tree would say so)."""
    point = result.point
    bucket = point.buckets > 1 and (bool(point.bucket_across) or point.bucket_algorithm == TREE)
    return {"whole": (STEP6,) if point.algorithm == TREE else (),
            "bucket": (STEP6,) if bucket else ()}


def sent_keys(result) -> tuple[str, ...]:
    """Step 1's guess where the readout's bytes sent a GPU are its answer (16 GPUs, 14 GB)."""
    return ("step-1",) if _at(result.input, STEP1_STATE) else ()


def replica_keys(result) -> tuple[str, ...]:
    """Step 10's guess where the replica panel prints its parts (the 8B's state and
    activations at one sequence of 8,192 tokens, whatever N)."""
    inp = result.input
    return (STEP10,) if inp.model.id == STEP10_MODEL and _at(inp, STEP10_STATE) else ()


def crossover_keys(result) -> tuple[str, ...]:
    """The step whose answer the state's crossover (chart, note, T*) gives: step 3's at an
    Ethernet state (its all-reduce), step 8's on PCIe (the T* it asks); and a drill whose
    state it is (its all-reduce)."""
    inp = result.input
    steps = (STEP3,) if inp.link == STEP3_LINK else (STEP8,) if inp.link == STEP8_LINK else ()
    # One port a server across servers: its all-reduce's time over the bytes is the port's
    # busBW, step 3's answer (round-22 cold reading P, finding 3; ``time_keys``).
    if not steps and one_port_across(result, inp.link):
        steps = (STEP3,)
    return (*steps, *(k for k in allreduce_keys(result) if k not in steps))


def crossover_what(result, keys: tuple[str, ...]) -> str:
    """What the held crossover says it is: Ethernet's all-reduce, one port's, PCIe's T*."""
    if not keys:
        return ""
    if keys[0] == STEP3 and result.input.link != STEP3_LINK:
        return ONE_PORT_WHAT
    return CROSSOVER_WHAT.get(keys[0], ALLREDUCE_WHAT)


def step3_state(result) -> bool:
    """Whether the state's all-reduce is step 3's: one 100 Gb/s Ethernet port a server."""
    return result.input.link == STEP3_LINK


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


def time_keys(result) -> tuple[str, ...]:
    """What the state's all-reduce times (the time chart's all-reduce, the readout's exposed
    time and bottleneck, the tables' times) wait for: ``allreduce_keys``, and step 3's at one
    port a server across servers, where its time over the bytes is the port's busBW (round-22
    cold reading P, finding 3: step 1's "64 GPUs" link printed 27.56 GB and 575.2 ms, 48 GB/s,
    before step 3's guess). The same keys as the state's speedup (``speed_keys``)."""
    return speed_keys(result)


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
