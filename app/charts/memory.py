"""EP01's diagram: the per-GPU memory bill as a stacked bar against the GPU's memory line."""

from app.charts import base_layout, gpu_memory_line

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


def memory_figure(result) -> dict:
    """A stacked bar of ``result.breakdown`` (bytes per GPU), drawn in GB, with the GPU's line."""
    gpu_gb = result.gpu_memory_bytes / 1e9
    total_gb = result.total_bytes / 1e9
    data = []
    for key, (label, colour) in COMPONENTS.items():
        value = result.breakdown.get(key, 0)
        if value <= 0:
            continue
        gb = value / 1e9
        data.append({
            "type": "bar",
            "name": label,
            "x": ["Per GPU"],
            "y": [round(gb, 3)],
            "marker": {"color": colour},
            "text": [f"{label} {gb:,.1f}"] if gb >= 0.06 * max(total_gb, gpu_gb) else [""],
            "textposition": "inside",
            "insidetextanchor": "middle",
            "hovertemplate": f"{label}: %{{y:,.2f}} GB<extra></extra>",
        })
    top = max(total_gb, gpu_gb) * 1.12
    gpu_name = result.input.gpu.name
    fits = result.fits
    return {
        "data": data,
        "layout": base_layout(
            barmode="stack",
            height=360,
            bargap=0.45,
            showlegend=False,  # the table under the chart names each colour
            yaxis={"title": {"text": "GB per GPU"}, "range": [0, top],
                   "rangemode": "tozero", "gridcolor": "#e6e9ef"},
            xaxis={"fixedrange": True},
            **gpu_memory_line(gpu_gb),
        ),
        "summary": (
            f"{total_gb:,.1f} GB per GPU against {gpu_name}'s {gpu_gb:,.0f} GB: "
            + ("fits" if fits else "does not fit")
        ),
    }
