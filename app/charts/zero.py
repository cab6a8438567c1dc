"""EP03's diagrams: memory per GPU by ZeRO stage and DP degree, activation checkpointing,
optimizer offload. Plain dicts; EP01's colours for the ledger. The wire traffic and its hiding,
with what of them waits for which guess, are ``app.charts.zero_traffic``'s."""

from app.charts import (
    base_layout,
    chosen_opacity,
    cut_label,
    gpu_line_legend,
    gpu_memory_line,
    short_gpu_name,
)
from app.charts.memory import COMPONENTS
from app.charts.units import fmt_bytes, fmt_ms, gb_axis, gb_bar
from labs.core.recomputation import RECOMPUTATION
from labs.zero.lab import BASELINE_RECOMPUTE

STAGE_NAMES = {0: "ZeRO-0", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}
SHOWN = ("weights", "gradients", "master_weights", "optimizer_moments", "activations",
         "embedding_and_logits")
SHORT_NAMES = {"embedding_and_logits": "Embedding, logits"}
# The recomputation chart's bars: no recomputation with fused attention (labs.zero.lab
# BASELINE_RECOMPUTE, the +0% every other bar is priced against), and the unfused kernels of
# 2021-22 that stored the s x s scores, named so where a state runs them.
RECOMPUTE_NAMES = {"flash": "none, fused", "none": "none, unfused (2021–22)"}


def recompute_name(mode: str) -> str:
    return RECOMPUTE_NAMES.get(mode, mode)
ACCENT = "#1d2330"
# Of a memory axis's height: a bar's label this close under the GPU's line would touch it.
LINE_CLEARANCE = 0.12


def _unit_only(axis: dict) -> dict:
    """An axis titled by its unit alone (its bars are per GPU and per node)."""
    axis["title"] = {"text": axis["title"]["text"].split()[0]}
    return axis


def _legend_below() -> dict:
    # Above the plot (plotly makes room for it there): below it, at a share of the plot's
    # height, it lands on the axis labels of a phone's short plot.
    return {"orientation": "h", "y": 1.02, "x": 0, "yanchor": "bottom", "font": {"size": 11}}


def _and(ds: list[int]) -> str:
    """The bars' D values as a sentence lists them, each once: when the chosen D is one of the
    fixed columns it was listed twice ("1, 8, 64 and 64"; round-19 cold reading X, finding
    17)."""
    names = [f"{d:,}" for d in ds]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def memory_figure(result) -> dict:
    """Stacked bars (EP01's components) for each shown DP degree x ZeRO stage, on a two-level
    category axis, against the GPU's memory line; the chosen plan's bar is outlined."""
    inp = result.input
    bars = result.bars
    outer = [f"D = {b.dp:,}" for b in bars]
    inner = [STAGE_NAMES[b.zero].replace("ZeRO-", "Z") for b in bars]
    chosen = [b.dp == inp.dp and b.zero == inp.zero for b in bars]
    # Ranged to what a step compares, the chosen bar against the GPU: a taller bar is cut at
    # the top with its total printed there (plain DP's terabytes would flatten the rest).
    chosen_total = next(b.total_bytes for b, c in zip(bars, chosen, strict=True) if c)
    top = max(chosen_total, result.gpu_memory_bytes) * 1.3
    data = []
    for key in SHOWN:
        label, colour = COMPONENTS[key]
        values = [b.breakdown.get(key, 0.0) for b in bars]
        if not any(values):
            continue
        # The long name shortened: a phone's legend gives each entry half its width.
        data.append(gb_bar(
            SHORT_NAMES.get(key, label), [outer, inner], values,
            f"{label}: %{{customdata}}<extra>%{{x}}</extra>",
            color=colour, opacity=chosen_opacity(chosen),
            line={"color": ACCENT, "width": [2 if c else 0 for c in chosen]}))
    gpu = result.gpu_memory_bytes
    gpu_name = short_gpu_name(inp.gpu.name)
    at = chosen.index(True)
    chosen_bar = bars[at]
    # The GPU's label on the side away from the chosen D's bars (their cut totals hang from
    # the top there).
    right = at < len(bars) / 2
    line = gpu_memory_line(gpu / 1e9, f"{gpu_name}: {fmt_bytes(gpu)}", x=1 if right else 0,
                           xanchor="right" if right else "left")
    # The chosen bar's state, the figure the prose quotes, heads the legend above the plot
    # (in the plot it would sit on the cut bars' totals).
    legend = {**_legend_below(), "font": {"size": 10}}  # a phone's legend, short of scrolling
    legend["title"] = {"text": f"<b>{STAGE_NAMES[inp.zero]}, D = {inp.dp:,}</b>: "
                               f"{fmt_bytes(chosen_bar.state_bytes)} state", "side": "top"}
    # The cut bars of the chosen D, each with its total read up the bar (room on a phone).
    cut = [cut_label(i, top / 1e9, f"{fmt_bytes(b.total_bytes)} ↑")
           for i, b in enumerate(bars) if b.total_bytes > top and b.dp == inp.dp]
    return {
        "data": data,
        "layout": base_layout(
            barmode="stack", bargap=0.15, legend=legend,
            margin={"l": 52, "r": 8, "t": 8, "b": 44},
            yaxis=gb_axis(top),
            xaxis={"type": "multicategory", "fixedrange": True, "tickfont": {"size": 10}},
            shapes=line["shapes"], annotations=line["annotations"] + cut,
        ),
        "summary": (
            f"Per-GPU memory by ZeRO stage at D = {_and(sorted({b.dp for b in bars}))}: "
            "the chosen plan, "
            f"{STAGE_NAMES[inp.zero]} on {inp.dp:,} GPUs, holds {fmt_bytes(chosen_bar.state_bytes)}"
            f" of state and {fmt_bytes(chosen_bar.total_bytes)} in all against the {gpu_name}'s "
            f"{fmt_bytes(gpu)}; activations are the same in every bar"
        ),
    }


def recompute_figure(result) -> dict:
    """Memory per GPU for each recomputation mode (state + activations), with the compute
    each costs over none with fused attention."""
    rows = result.recompute
    x = [recompute_name(r.recompute) for r in rows]
    state = result.state_bytes
    data = [
        {"type": "bar", "name": "State on the GPU", "x": x,
         "y": [round((r.total_bytes - r.activation_bytes) / 1e9, 3) for r in rows],
         "marker": {"color": COMPONENTS["master_weights"][1]},
         "hovertemplate": f"State: {fmt_bytes(state)}<extra></extra>"},
        {"type": "bar", "name": "Activations", "x": x,
         "y": [round(r.activation_bytes / 1e9, 3) for r in rows],
         "marker": {"color": COMPONENTS["activations"][1]},
         "customdata": [fmt_bytes(r.activation_bytes) for r in rows],
         "hovertemplate": "Activations: %{customdata}<extra></extra>"},
    ]
    gpu = result.gpu_memory_bytes
    top = max(max(r.total_bytes for r in rows), gpu) * 1.15
    # Each bar's "+n% compute" above it (plotly's outside text, which shrinks to the bar's
    # width), on an empty bar stacked on top; a bar ending just under the GPU's line would
    # have its text on the line (the text is about 9% of the axis tall on a phone), so there
    # the empty bar reaches up to the line and the text stands above it.
    data.append({
        "type": "bar", "name": "Compute over none, fused", "x": x, "showlegend": False,
        "y": [round((gpu - r.total_bytes) / 1e9, 3)
              if 0 < gpu - r.total_bytes < LINE_CLEARANCE * top else 0 for r in rows],
        "marker": {"color": "rgba(0,0,0,0)"}, "hoverinfo": "skip",
        "text": [f"+{100 * r.extra_compute:.0f}% compute" for r in rows],
        "textposition": "outside", "cliponaxis": False,
    })
    chosen = next(r for r in rows if r.recompute == result.input.recompute)
    full = next(r for r in rows if r.recompute == "full")
    base = RECOMPUTATION[BASELINE_RECOMPUTE]  # the +0% every bar's compute is priced against
    # The GPU's line named in the legend: in the plot its label would sit on a bar's
    # "+n% compute" when the bar ends near the line.
    gpu_label = f"{short_gpu_name(result.input.gpu.name)}: {fmt_bytes(gpu)}"
    data.append(gpu_line_legend(gpu / 1e9, gpu_label, x))
    line = gpu_memory_line(gpu / 1e9, gpu_label)
    return {
        "data": data,
        "layout": base_layout(
            barmode="stack", bargap=0.35, legend=_legend_below(), yaxis=gb_axis(top),
            xaxis={"fixedrange": True}, shapes=line["shapes"],
        ),
        "summary": (
            f"Full recomputation: a GPU holds {fmt_bytes(full.total_bytes)} for "
            f"+{100 * full.extra_compute:.0f}% compute against {base.phrase}, which holds "
            f"{fmt_bytes(rows[0].total_bytes)}"
            if chosen is full else
            f"With {RECOMPUTATION[chosen.recompute].phrase} a GPU holds "
            f"{fmt_bytes(chosen.total_bytes)}; full recomputation brings it to "
            f"{fmt_bytes(full.total_bytes)} for "
            # against the chosen mode (EP03 step 6 quotes the same ratio)
            f"+{100 * ((1 + full.extra_compute) / (1 + chosen.extra_compute) - 1):.0f}% compute"
            f" against {RECOMPUTATION[chosen.recompute].phrase}"
        ),
    }


def offload_figure(result) -> dict:
    """Optimizer offload: the GPU's bill without and with it, and what lands in host RAM."""
    inp, off = result.input, result.offload
    x = ["GPU, no offload", "GPU, offload", "Host, per node"]
    per_node = inp.gpus_on_node
    without, with_ = off.breakdown_without, off.breakdown_with
    optimizer = ("master_weights", "optimizer_moments")
    # Host RAM holds the optimizer's state and, beside it, an fp32 gradient buffer the CPU's
    # Adam reads (labs.memory.lab.HOST_GRAD_BYTES): the host's bytes less the optimizer's.
    host_grads = off.host_bytes_per_node - per_node * sum(without[k] for k in optimizer)
    data = []
    for key in SHOWN:
        label, colour = COMPONENTS[key]
        host = 0.0
        if key in optimizer:
            host = without[key] * per_node
        elif key == "gradients":
            host = host_grads
        values = [without[key], with_[key], host]
        if not any(values):
            continue
        data.append(gb_bar(label, x, values, f"{label}: %{{customdata}}<extra></extra>",
                           color=colour))
    gpu = result.gpu_memory_bytes
    top = max(off.gpu_bytes_without, off.host_bytes_per_node, gpu) * 1.12
    hides = ("hides behind the backward pass" if off.download_hidden
             else "no longer hides behind the backward pass")
    return {
        "data": data,
        "layout": base_layout(
            barmode="stack", bargap=0.35, legend=_legend_below(),
            # Tick labels a little lower: a narrow frame's first one reaches the y axis's "0".
            yaxis=_unit_only(gb_axis(top)), xaxis={"fixedrange": True, "tickangle": 0,
                                                   "ticklabelstandoff": 6},
            **gpu_memory_line(gpu / 1e9, f"{short_gpu_name(inp.gpu.name)}: {fmt_bytes(gpu)}"),
        ),
        "summary": (
            f"Offload puts {fmt_bytes(off.host_bytes_per_gpu)} per GPU in host RAM (the "
            f"optimizer's state and an fp32 gradient buffer), "
            f"{fmt_bytes(off.host_bytes_per_node)} per node of {per_node} "
            f"GPU{'s' * (per_node != 1)}; the GPU drops "
            f"from {fmt_bytes(off.gpu_bytes_without)} to {fmt_bytes(off.gpu_bytes_with)}. "
            f"PCIe carries {fmt_bytes(off.pcie_down_bytes + off.pcie_up_bytes)} per step "
            f"({fmt_ms(off.pcie_seconds)}); the gradient download {hides}"
        ),
    }
