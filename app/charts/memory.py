"""EP01's diagram: the per-GPU memory bill as a stacked bar against the GPU's memory line."""

from app.charts import bar_key, base_layout, gpu_memory_line, short_gpu_name
from app.charts.units import fmt_bytes, fmt_count, gb_axis
from labs.core.catalogue import RECIPES

# Component key -> (label, colour); the order is the stacking order, bottom first.
COMPONENTS = {
    "weights": ("Weights", "#4c78a8"),
    "gradients": ("Gradients", "#f58518"),
    "master_weights": ("FP32 master weights", "#54a24b"),
    "optimizer_moments": ("Adam moments", "#b279a2"),
    "activations": ("Activations", "#e45756"),
    "embedding_and_logits": ("Embedding and logits activations", "#ff9da6"),
    "kv_cache": ("KV cache", "#72b7b2"),
    "workspace": ("Workspace", "#9d755d"),
}
MODES = {"train": "training", "infer": "inference"}


def memory_figure(result) -> dict:
    """A stacked bar of ``result.breakdown`` (bytes per GPU) against the GPU's memory line.

    Bars are in GB; the axis ticks read in the unit the size calls for (GB, TB, PB). The bar
    sits in the left half of the plot and the line's label in the right half, so the label
    never covers a bar label."""
    total, gpu = result.total_bytes, result.gpu_memory_bytes
    data = []
    for key, (label, colour) in COMPONENTS.items():
        value = result.breakdown.get(key, 0)
        if value <= 0:
            continue
        # Only segments tall enough to hold two lines of text get one; the table has them all.
        big = value >= 0.08 * max(total, gpu)
        data.append({
            "type": "bar",
            "name": label,
            "x": [0],
            "y": [round(value / 1e9, 3)],
            "marker": {"color": colour},
            "text": [f"{label}<br>{fmt_bytes(value)}"] if big else [""],
            "textposition": "inside",
            "insidetextanchor": "middle",
            "textfont": {"color": "#ffffff"},
            "textangle": 0,  # never rotated: a narrow phone bar hides the label instead
            "hovertemplate": f"{label}: {fmt_bytes(value)}<extra></extra>",
        })
    gpu_name = short_gpu_name(result.input.gpu.name)
    model = result.input.model
    # A custom model's engine name carries its shape; the summary needs only its size.
    model_name = (f"A custom {fmt_count(result.params)} model" if model.id == "custom"
                  else model.name)
    headroom = abs(result.headroom_bytes)
    largest = max(COMPONENTS, key=lambda k: result.breakdown.get(k, 0))
    return {
        "data": data,
        "key": bar_key(data),
        "layout": base_layout(
            barmode="stack",
            # No height: the chart fills its box (.chart in lab.css), which the page sizes.
            bargap=0.25,
            margin={"l": 52, "r": 8, "t": 8, "b": 8},
            showlegend=False,  # the table under the chart names each colour
            uniformtext={"minsize": 9, "mode": "hide"},
            yaxis=gb_axis(max(total, gpu) * 1.12),
            # One category at 0 in a range up to 1.5: the bar fills the left half.
            xaxis={"range": [-0.5, 1.5], "fixedrange": True, "showticklabels": False,
                   "showgrid": False, "zeroline": False},
            **gpu_memory_line(gpu / 1e9, f"{gpu_name}: {fmt_bytes(gpu)}"),
        ),
        "summary": (
            f"{model_name}, {MODES[result.input.mode]} "
            f"({RECIPES[result.input.recipe].summary}): "
            f"{fmt_bytes(total)} per GPU against the {gpu_name}'s {fmt_bytes(gpu)}, "
            + (f"fits with {fmt_bytes(headroom)} to spare" if result.fits
               else f"does not fit, over by {fmt_bytes(headroom)}")
            + f"; largest part: {COMPONENTS[largest][0]}, "
            f"{fmt_bytes(result.breakdown.get(largest, 0))}"
        ),
    }
