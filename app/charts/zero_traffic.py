"""EP03's diagrams of ZeRO's wire traffic and its hiding: bytes per GPU per step by stage
(``traffic_figure``) and the step's time, compute against the exposed communication
(``overlap_figure``), with what of them waits for which step's guess (``traffic_keys``,
``exposed_keys``, ``fall_keys``, ``overlap_keys``) and the veil that holds a figure whole until
then (``owned``, ``held_text``). Memory, checkpointing and offload are ``app.charts.zero``'s."""

from app.charts import base_layout, chosen_opacity, value_label
from app.charts.units import fmt_bytes, fmt_ms, gb_axis, gb_bar
from app.charts.zero import ACCENT, STAGE_NAMES, _legend_below
from labs.hardware.links import get_link
from labs.zero.published import GPU as FALL_GPU
from labs.zero.published import LINK as FALL_LINK
from labs.zero.published import MODEL as FALL_MODEL
from labs.zero.published import SEQ_LEN as FALL_SEQ_LEN

TRANSFERS = {  # (collective, what it moves) -> (label, colour)
    ("all_reduce", "gradients"): ("All-reduce of gradients", "#4c78a8"),
    ("reduce_scatter", "gradients"): ("Reduce-scatter of gradients", "#f58518"),
    ("all_gather", "weights"): ("All-gather of updated weights", "#72b7b2"),
    ("all_gather", "weights (forward)"): ("All-gather of weights, forward", "#54a24b"),
    ("all_gather", "weights (backward)"): ("All-gather of weights, backward", "#88d27a"),
}
COMPUTE_COLOUR = "#bab0ac"
EXPOSED_COLOUR = "#e45756"
# The lesson's step that asks ZeRO-3's traffic (round-10 cold reading of EP03, finding 3): its
# bytes or its time beside plain DP's, or beside the P and D the page states, give the 1.5 and
# so the answer, at any state. Every figure of ZeRO-3's traffic (the traffic and overlap charts
# whole, the crossover chart at a ZeRO-3 state, their tables' ZeRO-3 cells, the readout and the
# crossover note at a ZeRO-3 state) waits on the lesson for that step's guess.
TRAFFIC_STEP = "step-4"
# And the step that asks how much of it is exposed on Ethernet: at a state where ZeRO-3 exposes
# some (the bad case's Ethernet), its times against the compute give that answer.
EXPOSED_STEP = "step-5"
TRAFFIC = "ZeRO-3's traffic"
STEP_TIME = "The step time"  # what the step-time chart says meanwhile at an offload state


# And the step that asks how much of Table 2's published fall the lab shows (GPT-3 175B on
# Selene's A100s, labs.zero.published): at its states the lab's throughput (MFU, compute
# times), ZeRO-3's exposed time and T* answer it, "under a tenth" (round-29 reading A, #2).
FALL_STEP = "step-10"


def fall_keys(result) -> tuple[str, ...]:
    """Step 10's, at a state of its runs (the model, GPU, link and sequence Table 2 gives, any
    D): there the compute's times and the MFU, beside another D's, give the lab's fall."""
    inp = result.input
    run = (inp.model.id, inp.gpu.id, inp.link, inp.seq_len)
    return (FALL_STEP,) if run == (FALL_MODEL, FALL_GPU, FALL_LINK, FALL_SEQ_LEN) else ()


def traffic_keys(result) -> tuple[str, ...]:
    """The steps whose answers ZeRO-3's traffic at this state gives (lab.js masks keyed by
    them): step 4's always, step 5's where ZeRO-3 exposes some of it, step 10's at its runs."""
    return (TRAFFIC_STEP,) + exposed_keys(result)


def exposed_keys(result) -> tuple[str, ...]:
    """Step 5's, where ZeRO-3 exposes some of its traffic: there any stage's time on the link
    gives its answer (stages 0-2 send two thirds of ZeRO-3's bytes), so stages 0-2's times wait
    for its guess too (round-17 cold reading of EP03, finding 7: the bad case printed plain
    DP's 11,576 ms on Ethernet, and x 1.5 less the compute is step 5's 'most of it'); and step
    10's at its runs (``fall_keys``), where they say whether ZeRO-3 hides."""
    return ((EXPOSED_STEP,) if result.traffic[3].exposed_seconds else ()) + fall_keys(result)


# The step that asks what offload costs a step (its PCIe time against CPU Adam's): the offload
# panel's times, and at an offload state the step's time, wait for its guess.
OFFLOAD_STEP = "step-7"


def overlap_keys(result) -> tuple[str, ...]:
    """The steps whose answers the step-time chart at this state gives: ZeRO-3's traffic's
    (traffic_keys), and step 7's at an offload state, whose step time it prints."""
    return traffic_keys(result) + ((OFFLOAD_STEP,) if result.input.offload else ())


def held_text(what: str, steps: tuple[str, ...]) -> str:
    """What a held figure says until its steps are guessed: "… shows once steps 4 and 5 are
    guessed." """
    numbers = " and ".join(step.removeprefix("step-") for step in steps)
    return (f"{what} shows once step {numbers} is guessed." if len(steps) == 1 else
            f"{what} shows once steps {numbers} are guessed.")


def owned(figure: dict, steps: tuple[str, ...], what: str = TRAFFIC) -> dict:
    """The figure veiled whole on a lesson page until each of ``steps`` is guessed (lab.js,
    layout.meta.owners: each step owns every trace and label, its summary read as held_text);
    elsewhere (the playground, an embed) drawn as it is."""
    if not steps:
        return figure
    layout = figure["layout"]
    meta = layout.get("meta") or {}
    everything = {"traces": list(range(len(figure["data"]))),
                  "annotations": list(range(len(layout.get("annotations", [])))),
                  "summary": [figure["summary"], held_text(what, steps)]}
    layout["meta"] = {**meta, "masked": meta.get("masked", {}),
                      "owners": [{"step": step, **everything} for step in steps]}
    return figure


def traffic_figure(result) -> dict:
    """Wire bytes per GPU per step for each stage, stacked by collective."""
    rows = result.traffic
    x = [STAGE_NAMES[r.zero] for r in rows]
    chosen = chosen_opacity([r.zero == result.input.zero for r in rows])
    data = []
    for (kind, moves), (label, colour) in TRANSFERS.items():
        values = []
        for row in rows:
            match = [t for t in row.transfers if (t.collective, t.moves) == (kind, moves)]
            values.append(match[0].bytes_per_gpu if match else 0.0)
        if not any(values):
            continue
        data.append(gb_bar(label, x, values, f"{label}: %{{customdata}}<extra></extra>",
                           color=colour, opacity=chosen))
    top = max(r.bytes_per_gpu for r in rows)
    # Over each bar its bytes (what the prose quotes) and time on the link; the chosen
    # stage's in ink, the others faint like their bars.
    data.append({
        "type": "scatter", "mode": "text", "x": x,
        "y": [round(r.bytes_per_gpu / 1e9, 3) for r in rows],
        "text": [f"{fmt_bytes(r.bytes_per_gpu)}<br>{fmt_ms(r.seconds)}" for r in rows],
        "textposition": "top center",
        "textfont": {"color": [ACCENT if o == 1.0 else "#8a93a3" for o in chosen]},
        "showlegend": False, "hoverinfo": "skip",
    })
    inp = result.input
    plain, full = rows[0].bytes_per_gpu, rows[3].bytes_per_gpu
    # No ratio of the two: EP03 step 4 asks the student to predict it (issue 36), and the
    # lesson holds the whole chart until its guess.
    return owned({
        "data": data,
        "layout": base_layout(
            barmode="stack", bargap=0.35, legend=_legend_below(),
            yaxis=gb_axis(max(top, 1e9) * 1.3, per="per GPU per step"),
            xaxis={"fixedrange": True},
        ),
        "summary": (
            f"Wire traffic per GPU per step over {inp.dp:,} replicas on "
            f"{get_link(inp.link).name} ({inp.gpus_per_node} GPUs per node): ZeRO-0, 1 and 2 "
            f"send {fmt_bytes(plain)} each, ZeRO-3 "
            f"{fmt_bytes(full)}; time on the link is printed over each bar"
        ),
    }, traffic_keys(result))


def overlap_figure(result) -> dict:
    """Step time per stage: compute, plus the communication that does not hide behind it."""
    rows = result.traffic
    x = [STAGE_NAMES[r.zero] for r in rows]
    compute = result.compute_seconds
    picked = [r.zero == result.input.zero for r in rows]
    faint = chosen_opacity(picked)
    data = [
        {"type": "bar", "name": "Compute (forward + backward)", "x": x,
         "y": [round(compute * 1e3, 3)] * len(rows),
         "marker": {"color": COMPUTE_COLOUR, "opacity": faint},
         "hovertemplate": f"Compute: {fmt_ms(compute)}<extra></extra>"},
        {"type": "bar", "name": "Exposed communication", "x": x,
         "y": [round(r.exposed_seconds * 1e3, 3) for r in rows],
         "marker": {"color": EXPOSED_COLOUR, "opacity": faint},
         "customdata": [fmt_ms(r.exposed_seconds) for r in rows],
         "hovertemplate": "Exposed: %{customdata}<extra></extra>"},
        {"type": "scatter", "mode": "markers", "name": "Communication on the link", "x": x,
         "y": [round(r.seconds * 1e3, 3) for r in rows],
         "marker": {"symbol": "diamond", "size": 11, "color": ACCENT, "opacity": faint},
         "customdata": [fmt_ms(r.seconds) for r in rows],
         "hovertemplate": "On the link: %{customdata}<extra></extra>"},
    ]
    top = max(max(compute + r.exposed_seconds, r.seconds) for r in rows) * 1e3
    chosen = result.chosen_traffic
    at = picked.index(True)
    # The chosen stage's link time and exposed part, the figures the prose quotes.
    label = value_label(at, max(compute + chosen.exposed_seconds, chosen.seconds) * 1e3,
                        f"{fmt_ms(chosen.seconds)} on the link<br>"
                        f"{fmt_ms(chosen.exposed_seconds)} exposed",
                        xanchor="left" if at < 2 else "right", yshift=6)
    # ZeRO-3's time on the link beside plain DP's is step 4's answer, and where it is exposed,
    # step 5's: held until their guesses.
    return owned({
        "data": data,
        "layout": base_layout(
            barmode="stack", bargap=0.35, legend=_legend_below(),
            yaxis={"title": {"text": "ms per step"}, "range": [0, top * 1.35],
                   "gridcolor": "#e6e9ef", "fixedrange": True},
            xaxis={"fixedrange": True}, annotations=[label],
        ),
        "summary": (
            f"{STAGE_NAMES[result.input.zero]}: {fmt_ms(chosen.seconds)} on the link against "
            f"{fmt_ms(compute)} of compute; {fmt_ms(chosen.exposed_seconds)} is exposed, so a "
            f"step takes {fmt_ms(result.step_seconds)}"
        ),
    }, overlap_keys(result), STEP_TIME if result.input.offload else TRAFFIC)
