"""EP08's auto-planner scatter: memory per GPU against throughput, the Pareto front marked."""

from app.charts import base_layout


def plan_label(plan) -> str:
    """TP8 × PP4 × DP2 (CP and EP when used), ZeRO, schedule, micro-batches."""
    parts = [f"TP{plan.tp}", f"PP{plan.pp}"] + [f"{k.upper()}{getattr(plan, k)}"
                                                for k in ("cp", "ep") if getattr(plan, k) > 1]
    hybrid = getattr(plan, "hybrid", False)  # HSDP: DP as its replicas x shard groups
    parts.append(f"DP{plan.dp} (HSDP {plan.replicas}×{plan.shard_degree})" if hybrid
                 else f"DP{plan.dp}")
    return " × ".join(parts)


def plan_figure(plans, links: list[str], gpu_memory_bytes: float) -> dict:
    """One point per ranked plan (GB = 10^9 bytes, thousand tokens per second); the Pareto
    front (no plan both lighter and faster) joined by a line. Each point's customdata is the
    page URL that loads the plan."""
    def trace(name: str, idx: list[int], style: dict) -> dict:
        return {
            "type": "scatter", "name": name, "mode": style.pop("mode", "markers"),
            "x": [round(plans[i].memory_per_gpu_bytes / 1e9, 2) for i in idx],
            "y": [round(plans[i].tokens_per_s / 1e3, 2) for i in idx],
            "text": [f"#{i + 1} {plan_label(plans[i].plan)}, ZeRO {plans[i].plan.zero}, "
                     f"{plans[i].plan.recompute}, {plans[i].plan.schedule}" for i in idx],
            "customdata": [links[i] for i in idx],
            "hovertemplate": "%{text}<br>%{x:,.1f} GB per GPU, %{y:,.1f}k tokens/s"
                             "<extra></extra>",
            **style,
        }

    front = sorted((i for i, p in enumerate(plans) if p.pareto),
                   key=lambda i: plans[i].memory_per_gpu_bytes)
    rest = [i for i, p in enumerate(plans) if not p.pareto]
    data = [trace("Other plans", rest, {"marker": {"color": "#8a94a6", "size": 8}}),
            trace("Pareto front", front, {"mode": "lines+markers",
                                          "marker": {"color": "#d9480f", "size": 10},
                                          "line": {"color": "#d9480f", "dash": "dot"}})]
    best = plans[0] if plans else None
    return {
        "data": data,
        "layout": base_layout(
            xaxis={"title": {"text": "Memory per GPU (GB)"}, "gridcolor": "#e6e9ef",
                   "range": [0, gpu_memory_bytes / 1e9 * 1.05]},
            yaxis={"title": {"text": "Throughput (k tokens/s)"}, "gridcolor": "#e6e9ef"},
            margin={"l": 64, "r": 16, "t": 36, "b": 48},
            legend={"orientation": "h", "y": 1.02, "x": 0, "yanchor": "bottom"},
        ),
        "summary": (f"{len(plans)} plans; the fastest, {plan_label(best.plan)}, runs "
                    f"{best.tokens_per_s:,.0f} tokens/s at {best.memory_per_gpu_bytes / 1e9:,.1f} "
                    f"GB per GPU; {len(front)} on the Pareto front" if best else
                    "No plan fits and passes on this cluster"),
    }
