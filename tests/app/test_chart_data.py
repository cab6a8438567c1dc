"""Every diagram draws the lab's numbers: each test derives what must be drawn from the lab's
result (its events, breakdowns, sweeps and chosen point), by a route that does not go through
``app/charts``, and compares it with the figure JSON a page ships.

``tests/app/test_contracts.py`` checks that page, fragment, embed and API ship one figure for
one state; this file checks that the figure is right. A Gantt bar drawn as wide as its end
time, a stacked bar at half height, a curve read off the wrong field or a chosen point that is
not the state's own each fail here. Bars are drawn in GB (10^9 bytes) and ms and rounded by
the chart (3 or 4 decimals), so sums are compared to that rounding times the segment count.
"""

import json
import math
from collections import Counter

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.charts.precision import bytes_rows
from app.labkit import VIEWS, parse
from app.lesson_drills import MIXTRAL_64
from labs.core.catalogue import RECIPES
from labs.recipe.layer_view import LANES, layer_view
from labs.recipe.overlap import timeline

KINDS = ("default", "good", "bad")


def figures_for(name: str, query: dict):
    """(the lab's result for ``query``, its figures as the page's JSON gives them back, a
    lazy diagram's as its own route does)."""
    view = VIEWS[name]
    state, errors, _ = parse(view, list(query.items()))
    assert state is not None, errors
    drawn = {**view.figures(state.result),
             **(view.lazy_figures(state.result) if view.lazy_figures else {})}
    return state.result, json.loads(json.dumps(drawn))


def figures_of(name: str, kind: str):
    """The same for the lab's default state, or the good or bad case its lesson shows."""
    view = VIEWS[name]
    case = {"default": None, "good": view.good, "bad": view.bad}[kind]
    return figures_for(name, dict(case.query) if case else {})


def close(drawn, expected, tol: float, what: str) -> None:
    drawn, expected = list(drawn), list(expected)
    assert len(drawn) == len(expected), f"{what}: {len(drawn)} drawn, {len(expected)} expected"
    for i, (d, e) in enumerate(zip(drawn, expected, strict=True)):
        if e is None:
            assert d is None, f"{what}[{i}]: drew {d}, expected nothing"
            continue
        assert d is not None and math.isclose(d, e, rel_tol=1e-6, abs_tol=tol), (
            f"{what}[{i}]: drew {d}, expected {e}")


def bars(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if t["type"] == "bar"]


def stack_sums(traces: list[dict], axis: str = "y") -> list[float]:
    """Per category, the height of a stack of bar traces that share one category axis."""
    other = "x" if axis == "y" else "y"
    cats = traces[0][other]
    for t in traces:
        assert t[other] == cats, "every segment of a stack stands on the same categories"
    count = len(cats[0]) if cats and isinstance(cats[0], list) else len(cats)  # two-level
    return [sum(t[axis][i] for t in traces) for i in range(count)]


def trace(fig: dict, name: str) -> dict:
    (found,) = [t for t in fig["data"] if t.get("name") == name]
    return found


# EP01 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_memory_ledger_stacks_the_breakdown_to_the_total(kind):
    result, figs = figures_of("memory", kind)
    fig = figs["ledger"]
    parts = {k: v for k, v in result.breakdown.items() if v > 0}
    assert math.isclose(sum(parts.values()), result.total_bytes, rel_tol=1e-9)
    drawn = sorted(t["y"][0] for t in bars(fig))
    close(drawn, sorted(v / 1e9 for v in parts.values()), 6e-4, "segments (GB)")
    (height,) = stack_sums(bars(fig))
    close([height], [result.total_bytes / 1e9], 6e-4 * len(parts), "bar height (GB)")
    line = fig["layout"]["shapes"][0]
    close([line["y0"], line["y1"]], [result.gpu_memory_bytes / 1e9] * 2, 1e-9, "GPU line")


# EP05 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_pipeline_gantt_bars_are_the_events(kind):
    result, figs = figures_of("pipeline", kind)
    events = result.result.events
    drawn = Counter()
    for t in bars(figs["gantt"]):
        for y, base, width in zip(t["y"], t["base"], t["x"], strict=True):
            drawn[(y, round(base, 4), round(width, 4))] += 1
    expected = Counter((f"rank {e.rank}", round(e.start, 4), round(e.end - e.start, 4))
                       for e in events)
    assert drawn == expected, (
        f"bars not drawn from events: {(expected - drawn).most_common(3)} missing, "
        f"{(drawn - expected).most_common(3)} extra")
    # Each bar ends where its event ends and no rank's bars overlap.
    for rank in range(result.result.input.stages):
        spans = sorted((e.start, e.end) for e in events if e.rank == rank)
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:], strict=False))
    assert max(e.end for e in events) == pytest.approx(result.result.makespan)


@pytest.mark.parametrize("kind", KINDS)
def test_pipeline_activations_follow_the_timeline_and_mark_each_peak(kind):
    result, figs = figures_of("pipeline", kind)
    r = result.result
    lines = [t for t in figs["activations"]["data"] if t["mode"] == "lines"]
    marks = [t for t in figs["activations"]["data"] if t["mode"] == "markers"]
    assert lines and len(lines) == len(marks)
    for line, mark in zip(lines, marks, strict=True):
        rank = int(line["name"][1:])
        points = r.activation_timeline[rank]
        close(line["y"][:-1], [n for _, n in points], 0, f"rank {rank} held")
        close(line["x"][:-1], [t for t, _ in points], 1e-9, f"rank {rank} times")
        peak = max(n for _, n in points)
        assert mark["y"] == [peak] == [r.peak_activations[rank]]


@pytest.mark.parametrize("kind", KINDS)
def test_pipeline_stage_memory_is_state_plus_activations(kind):
    result, figs = figures_of("pipeline", kind)
    if result.memory is None:
        assert "memory" not in figs
        return
    mem = result.memory
    stack = bars(figs["memory"])
    close(stack[0]["y"], [s / 1e9 for s in mem.state_per_rank], 6e-4, "state (GB)")
    close(stack[1]["y"], [a / 1e9 for a in mem.activation_bytes], 6e-4, "activations (GB)")
    # The rank's total adds the embedding and logits activations (first and last rank) to
    # state and activations; the bars draw state and activations.
    for r, total in enumerate(mem.total_bytes):
        assert total == pytest.approx(mem.state_per_rank[r] + mem.activation_bytes[r]
                                      + mem.embedding_and_logits[r])
    close(stack_sums(stack), [(t - e) / 1e9 for t, e in
                              zip(mem.total_bytes, mem.embedding_and_logits, strict=True)],
          1.2e-3, "rank state + activations (GB)")


# EP06 ---------------------------------------------------------------------------------------

def owner_by_hand(tokens: int, cp: int, layout: str) -> list[int]:
    """Who computes each query token: contiguous gives rank r the r-th of c equal chunks;
    zigzag cuts 2c chunks and gives rank r chunks r and 2c-1-r (Brandon et al. 2023,
    'Striped Attention', and Megatron-Core's load-balanced CP)."""
    if layout == "contiguous":
        size = tokens // cp
        return [q // size for q in range(tokens)]
    size = tokens // (2 * cp)
    return [(q // size) if q // size < cp else 2 * cp - 1 - q // size for q in range(tokens)]


@pytest.mark.parametrize("query", [
    {}, {"tokens": 64, "cp": 8, "layout": "zigzag"}, {"tokens": 64, "cp": 8,
                                                      "layout": "contiguous"},
    {"tokens": 32, "cp": 4, "layout": "contiguous"},
])
def test_cp_mask_and_pairs_are_the_hand_counted_owners(query):
    result, figs = figures_for("cp", query)
    s, c, layout = result.mask.tokens, result.mask.cp, result.mask.layout
    assert layout in ("zigzag", "contiguous")
    owner = owner_by_hand(s, c, layout)
    (heat,) = figs["mask"]["data"]
    assert heat["z"] == [[owner[q] if k <= q else None for k in range(s)] for q in range(s)]
    # Query q attends to keys 0..q: q + 1 causal pairs, counted to its owner.
    pairs = [sum(q + 1 for q in range(s) if owner[q] == r) for r in range(c)]
    (bar,) = figs["pairs"]["data"]
    assert bar["y"] == pairs and sum(pairs) == s * (s + 1) // 2
    mean = figs["pairs"]["layout"]["shapes"][0]["y0"]
    assert mean == pytest.approx(s * (s + 1) / 2 / c)


@pytest.mark.parametrize("kind", KINDS)
def test_cp_cost_curves_are_the_sweep_and_the_mark_is_this_plan(kind):
    result, figs = figures_of("cp", kind)
    fig = figs["cost"]
    lines = [t for t in fig["data"] if t["mode"] == "lines+markers"]
    prefixes = {"zigzag": "Ring", "allgather": "All-gather", "ulysses": "Ulysses"}
    assert len(lines) == len(prefixes)
    for layout, prefix in prefixes.items():
        points = result.sweep[layout]
        (line,) = [t for t in lines if t["name"].startswith(prefix)]
        assert line["x"] == [c for c, _ in points]
        close(line["y"], [None if k is None else k.comm_s * 1e3 for _, k in points], 1e-6,
              f"{layout} ms")
    att = trace(fig, "Attention, busiest rank (zigzag)")
    close(att["y"], [None if k is None else k.attention_s * 1e3
                     for _, k in result.sweep["zigzag"]], 1e-6, "attention ms")
    mark = trace(fig, "this plan")
    assert mark["x"] == [result.input.cp]
    close(mark["y"], [result.cost.comm_s * 1e3], 1e-9, "this plan's ms")


@pytest.mark.parametrize("query", [{}, {"tokens": 64, "cp": 8, "layout": "zigzag"},
                                   {"cp": 8, "layout": "ulysses"}, {"cp": 1}])
def test_cp_crossover_is_attention_against_its_transfers(query):
    """EP06 step 8: attention through the state as L², the transfers through it as L, the
    dashed L* where they meet, the hollow marks the lab's own layer at each L. A ring's are
    drawn per round (round-24 cold reading A, finding 1): one round's attention, the layer's
    ÷ c, against one send, the transfers ÷ (c − 1); a collective's per layer."""
    from labs.context_parallel.lab import cp_cost
    result, figs = figures_for("cp", query)
    inp, cost = result.input, result.cost
    per_rank = inp.seq_len / inp.cp
    ring = inp.layout in ("contiguous", "zigzag") and inp.cp > 1
    rounds, sends = (inp.cp, inp.cp - 1) if ring else (1, 1)
    lines = {t["name"]: t for t in figs["crossover"]["data"]}
    att = lines["A round ∝ L²" if ring else "Attention ∝ L²"]
    close(att["y"], [cost.attention_s / rounds * (x / per_rank) ** 2 for x in att["x"]], 1e-6,
          "attention line (s)")
    assert lines["This state"]["x"] == [per_rank]
    close(lines["This state"]["y"], [cost.attention_s / rounds], 1e-6, "state's attention")
    if not cost.comm_s:
        assert "Lab: transfers" not in lines
        return
    # The transfers' line (its rate, send bandwidth or busBW, the note under the chart names:
    # tests/app/test_cp_routes.py), short in the legend (round-17 cold reading, finding 3).
    (comm,) = [t for n, t in lines.items() if n.endswith(" ∝ L")]
    close(comm["y"], [cost.comm_s / sends * x / per_rank for x in comm["x"]], 1e-6,
          "comm line (s)")
    (cross,) = [s for s in figs["crossover"]["layout"]["shapes"]
                if s.get("line", {}).get("dash") == "dash"]
    x = cross["x0"]
    close([cost.attention_s / rounds * (x / per_rank) ** 2], [cost.comm_s / sends * x / per_rank],
          1e-6, "attention at L*")
    marks = lines["Lab: transfers"]
    for per, drawn in zip(marks["x"], marks["y"], strict=True):
        again = cp_cost(inp.model, per * inp.cp, inp.cp, inp.layout, inp.link, inp.gpu)
        close([drawn], [again.comm_s / sends], 1e-6, f"the lab's transfers at L = {per}")


# EP02 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_dp_scaling_curves_and_the_chosen_point(kind):
    result, figs = figures_of("dp", kind)
    fig = figs["scaling"]
    for link in result.curve_links:
        series = [p for p in result.curve if p.link == link]
        speed, eff = [t for t in fig["data"] if t.get("legendgroup") == link]
        assert speed["x"] == eff["x"] == [p.gpus for p in series]
        close(speed["y"], [p.speedup for p in series], 1e-4, f"{link} speedup")
        close(eff["y"], [p.efficiency for p in series], 1e-4, f"{link} efficiency")
        # Efficiency is speedup per GPU.
        close(eff["y"], [p.speedup / p.gpus for p in series], 2e-4, f"{link} speedup/N")
    chosen = [t for t in fig["data"] if t.get("legendgroup") == "chosen"]
    p = result.point
    assert p.gpus == result.input.gpus and p.link == result.input.link
    assert [t["x"] for t in chosen] == [[p.gpus]] * 2
    close([chosen[0]["y"][0], chosen[1]["y"][0]], [p.speedup, p.efficiency], 1e-4, "chosen")


@pytest.mark.parametrize("kind", KINDS)
def test_dp_step_bar_is_compute_then_exposed_all_reduce(kind):
    result, figs = figures_of("dp", kind)
    p = result.point
    assert p.comm_s == pytest.approx(p.overlapped_comm_s + p.exposed_comm_s)
    assert p.step_s == pytest.approx(p.compute_s + p.exposed_comm_s)
    step = [t for t in bars(figs["time"]) if t["y"] == ["GPU step"]]
    spans = sorted((t["base"][0], t["x"][0]) for t in step)
    expected = [(0.0, p.compute_s * 1e3)] + (
        [(p.compute_s * 1e3, p.exposed_comm_s * 1e3)] if p.exposed_comm_s > 0 else [])
    close([b for b, _ in spans], [b for b, _ in expected], 1e-6, "step bases (ms)")
    close([w for _, w in spans], [w for _, w in expected], 1e-6, "step widths (ms)")
    wire = [t for t in bars(figs["time"]) if t["y"] == ["All-reduce"]]
    close([sum(t["x"][0] for t in wire)], [p.comm_s * 1e3], 2e-6, "all-reduce (ms)")


@pytest.mark.parametrize("kind", KINDS)
def test_dp_replica_is_the_replica_ledger(kind):
    result, figs = figures_of("dp", kind)
    stack = bars(figs["replica"])
    close(stack_sums(stack), [result.replica.total_bytes / 1e9], 6e-4 * len(stack), "GB")


@pytest.mark.parametrize("kind", KINDS)
def test_dp_ratio_is_compute_against_the_all_reduce(kind):
    result, figs = figures_of("dp", kind)
    r, p, inp = result.ratio, result.point, result.input
    lines = {t["name"]: t for t in figs["ratio"]["data"]}
    compute = lines["Compute, 6·P·T ÷ rate"]
    # Compute is 6 x active parameters x tokens at the rate, the line through the state.
    close(compute["y"], [6 * inp.model.active_params * t / r.rate for t in compute["x"]],
          1e-6, "compute line (s)")
    state = lines["This state"]
    assert state["x"] == [r.tokens_per_gpu]
    close(state["y"], [p.compute_s], 1e-6, "state's compute (s)")
    if inp.gpus > 1:
        close(lines["All-reduce, once a step"]["y"], [p.comm_s if p.buckets == 1 else
                                                     r.allreduce_s] * 2, 1e-6, "all-reduce")
        cross = [s for s in figs["ratio"]["layout"]["shapes"] if s.get("line", {}).get("dash")
                 == "dash"]
        # At the crossover, the compute line reaches the all-reduce.
        assert len(cross) == 1
        close([6 * inp.model.active_params * cross[0]["x0"] / r.rate], [r.allreduce_s], 1e-6,
              "compute at T*")


# EP07 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("query", [{}, {"skew": 1}, {"skew": 0.5, "capacity_factor": 1.0}])
def test_moe_experts_bars_are_the_routing(query):
    result, figs = figures_for("moe", query)
    fig = figs["experts"]
    r, inp = result.routing, result.input
    stack = bars(fig)
    kept, dropped = stack[0]["y"], stack[1]["y"] if len(stack) > 1 else [0] * len(stack[0]["y"])
    assert list(dropped) == list(r.dropped_per_expert)
    assert [k + d for k, d in zip(kept, dropped, strict=True)] == list(r.routed_per_expert)
    # Each of the EP group's GPUs sends its tokens to top_k experts: the bars sum to
    # EP x tokens x k token copies.
    assert sum(r.routed_per_expert) == inp.ep * inp.tokens * inp.model.top_k
    if inp.capacity_factor:
        # Capacity (Switch Transformer, Fedus et al. 2021): ceil(factor x tokens x k / E) per
        # expert per GPU, EP GPUs' worth; nothing is drawn kept above it.
        cap = inp.ep * math.ceil(inp.capacity_factor * inp.tokens * inp.model.top_k
                                 / inp.model.experts)
        assert max(kept) == cap and sum(dropped) > 0


@pytest.mark.parametrize("kind", KINDS)
def test_moe_gpu_bars_reach_the_layer_time(kind):
    result, figs = figures_of("moe", kind)
    r = result.routing
    stack = bars(figs["gpus"])
    names = [t["name"] for t in stack]
    dispatch = stack[0]["y"]
    close(dispatch, [s * 1e3 for s in r.dispatch_s], 1e-4, "dispatch ms")
    close(stack[1]["y"], [s * 1e3 for s in r.compute_s], 1e-4, "compute ms")
    assert stack[2]["y"] == dispatch, names  # combine moves the same bytes back
    close(stack_sums(stack), [r.layer_s * 1e3] * len(dispatch), 4e-4, "layer ms")


@pytest.mark.parametrize("kind", KINDS)
def test_moe_params_bars_are_total_active_and_per_gpu(kind):
    result, figs = figures_of("moe", kind)
    stack = bars(figs["params"])
    sums = stack_sums(stack, axis="x")
    close(sums, [result.params / 1e9, result.active_params / 1e9,
                 result.params_per_gpu / 1e9], 1.2e-3, "params (B)")
    close(stack[1]["x"], [result.expert_params / 1e9,
                          (result.active_params - (result.params - result.expert_params))
                          / 1e9, result.experts_per_gpu_params / 1e9], 6e-4, "experts (B)")


# EP09 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_rl_cluster_cells_count_each_pools_gpus(kind):
    result, figs = figures_of("placement", kind)
    heat = figs["cluster"]["data"][-1]  # the replicas, over the roles at step 1's states
    cells = [c for row in heat["z"] for c in row]
    assert len(cells) == len(result.gpus)
    placed = [g for g in result.gpus if g["role"] != "unplaced"]
    if result.all_ok and result.pools[0].role != "colocated":
        assert len(placed) == sum(p.gpus for p in result.pools)
    # Node n's row holds GPUs 8n .. 8n + 7, each named by its own role, marked when it
    # does not fit, or where the layout does not divide (no bill to fit: round-14 cold
    # reading of EP09, finding 8) marked so instead.
    from app.charts.rl import ROLES

    hover = [c for row in heat["customdata"] for c in row]
    text = [c for row in heat["text"] for c in row]
    for g, h, t in zip(result.gpus, hover, text, strict=True):
        assert h.split("<br>")[0] == ROLES[g["role"]][0], (g, h)
        broken = g.get("divides") is False
        assert t.endswith("✗") == (not g["fits"] and not broken), (g, t)
        assert t.endswith("÷") == broken, (g, t)
    # One colour per role (training and colocated shade replicas apart).
    for role in {g["role"] for g in result.gpus} - {"training", "colocated"}:
        assert len({c for g, c in zip(result.gpus, cells, strict=True)
                    if g["role"] == role}) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_rl_memory_stacks_are_each_pools_bill(kind):
    result, figs = figures_of("placement", kind)
    stack = bars(figs["memory"])
    heights: dict[str, float] = {}
    for t in stack:
        heights[t["x"][0]] = heights.get(t["x"][0], 0) + t["y"][0]
    pool = result.pools[0]
    if pool.role == "colocated":
        expected = {"training phase": sum(result.train_breakdown.values()),
                    "rollout phase": sum(result.rollout_breakdown.values())}
        if result.colocated_bytes is not None:
            expected["colocated need"] = result.colocated_bytes
            assert result.colocated_bytes == pytest.approx(
                max(expected["training phase"], expected["rollout phase"])
                + result.transition_overhead_bytes)
    else:
        expected = {f"{p.role} ({p.gpus} GPUs)": p.memory_per_gpu_bytes
                    for p in result.pools if p.memory_per_gpu_bytes < 1e30}
    assert set(heights) == set(expected)
    for name, value in expected.items():
        close([heights[name]], [value / 1e9], 6e-3, name)


@pytest.mark.parametrize("kind", KINDS)
def test_rl_timeline_bars_are_the_phases(kind):
    result, figs = figures_of("placement", kind)
    drawn = sorted((t["y"][0], t["base"][0], t["x"][0]) for t in bars(figs["timeline"]))
    expected = sorted((ph.lane, ph.start, ph.end - ph.start) for ph in result.timeline)
    assert [d[0] for d in drawn] == [e[0] for e in expected]
    close([d[1] for d in drawn], [e[1] for e in expected], 1e-4, "starts (s)")
    close([d[2] for d in drawn], [e[2] for e in expected], 1e-4, "durations (s)")
    # One step's phases: rollout, train and sync add up to the step (sync may overlap).
    steps = {ph.step for ph in result.timeline}
    assert max(ph.end for ph in result.timeline) <= len(steps) * result.step_seconds + 1e-6


# EP03 (precision) ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_precision_stacks_reach_each_ledgers_total(kind):
    result, figs = figures_of("precision", kind)
    base, led = result.baseline, result.ledger
    stack = bars(figs["ledger"])
    drawn = [base] + ([led] if led.recipe != base.recipe else [])  # BF16 alone: one bar
    close(stack_sums(stack), [b.total_bytes / 1e9 for b in drawn], 6e-5 * len(stack),
          "ledger (GB)")
    stack = bars(figs["finetune"])
    close(stack_sums(stack), [f.total_bytes / 1e9 for f in result.finetunes],
          6e-5 * len(stack), "fine-tune (GB)")
    stack = bars(figs["bytes"])
    rows = list(reversed(bytes_rows(result)))  # BF16 and the chosen recipe
    assert {r.recipe for r in rows} == {"adam16", result.input.recipe}
    close(stack_sums(stack, axis="x"), [r.total for r in rows], 1e-9, "bytes/param")
    close([r.total for r in rows], [sum(b for _, b in r.parts) for r in rows], 1e-9, "parts")


@pytest.mark.parametrize("kind", KINDS)
def test_precision_offload_curve_and_chosen_share(kind):
    result, figs = figures_of("precision", kind)
    o = result.offload
    copy = figs["offload"]["data"][0]
    assert copy["x"] == [round(100 * p.share) for p in o.points]
    close(copy["y"], [p.copy_s * 1e3 for p in o.points], 1e-4, "copy ms")
    # The copy is the shared bytes over the link: linear in the share.
    full = o.points[-1]
    assert full.share == 1
    close(copy["y"], [full.copy_s * 1e3 * p.share for p in o.points], 1e-3, "linear")
    fwd, bwd = figs["offload"]["data"][1:3]
    close(fwd["y"], [o.forward_s * 1e3] * 2, 1e-4, "forward ms")
    close(bwd["y"], [o.backward_s * 1e3] * 2, 1e-4, "backward ms")
    band = figs["offload"]["layout"]["shapes"][0]
    assert band["x0"] == pytest.approx(100 * o.share)


@pytest.mark.parametrize("kind", KINDS)
def test_precision_speed_bars_sum_to_each_step(kind):
    result, figs = figures_of("precision", kind)
    s = result.speed
    if not s.timed:
        assert figs["speed"]["data"] == []
        return
    drawn = bars(figs["speed"])
    # ms, or s once a part passes 10 s (the axis says which)
    unit = figs["speed"]["layout"]["xaxis"]["ticksuffix"].strip()
    scale = {"ms": 1e3, "s": 1.0}[unit]
    assert (unit == "s") == (max(max(p.bf16_s, p.fp8_s) for p in s.parts) >= 10)
    if RECIPES[result.input.recipe].family != "fp8":  # a 16-bit recipe's step is BF16's
        (bf16,) = drawn
        close([sum(bf16["x"])], [s.bf16_step_s * scale], 1e-3, f"step {unit}")
        assert s.fp8_step_s == pytest.approx(s.bf16_step_s)
        return
    bf16, fp8 = drawn
    close([sum(bf16["x"]), sum(fp8["x"])], [s.bf16_step_s * scale, s.fp8_step_s * scale],
          1e-3, f"step {unit}")
    assert s.speedup == pytest.approx(s.bf16_step_s / s.fp8_step_s)


@pytest.mark.parametrize("query", [{}, {"model": "deepseek-v3", "nodes": 8, "ep": 64},
                                   {"ep": 1}])
def test_moe_crossover_is_the_experts_against_their_all_to_alls(query):
    """EP07 step 11: the GEMM line through the state, straight in f at its rate; dispatch +
    combine flat; the dashed f* where they meet; the hollow marks the lab's own layer with
    experts of each width."""
    result, figs = figures_for("moe", query)
    r, inp = result.balanced, result.input
    compute, comm = max(r.compute_s), 2 * max(r.dispatch_s)
    f = inp.model.expert_ffn
    lines = {t["name"]: t for t in figs["crossover"]["data"]}
    gemm = lines["Expert GEMMs, ∝ f at this rate"]
    close(gemm["y"], [compute * x / f for x in gemm["x"]], 1e-6, "GEMM line (s)")
    assert lines["This state"]["x"] == [f]
    close(lines["This state"]["y"], [compute], 1e-6, "state's GEMMs")
    if not comm:
        assert "Dispatch + combine" not in lines
        return
    close(lines["Dispatch + combine"]["y"], [comm] * 2, 1e-6, "all-to-alls")
    (cross,) = [s for s in figs["crossover"]["layout"]["shapes"]
                if s.get("line", {}).get("dash") == "dash"]
    close([compute * cross["x0"] / f], [comm], 1e-6, "GEMMs at f*")
    assert lines["communication"]["x"] == [256 * 2 ** i for i in range(8)]


# EP08 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_recipe_step_bar_adds_up_to_the_step(kind):
    recipe, figs = figures_of("recipe", kind)
    r = recipe.result
    if not r.legal:
        assert figs == {}
        return
    assert sum(r.segments.values()) == pytest.approx(r.step_s, rel=1e-9)
    stack = bars(figs["step"])
    close([stack_sums(stack, axis="x")[0]], [r.step_s * 1e3], 1e-3 * len(stack), "step ms")
    mem = r.memory
    stack = bars(figs["memory"])
    close(stack_sums(stack), [b.total_bytes / 1e9 for b in mem.stages], 1.2e-3, "stage GB")
    # One micro-batch's share by cause: what is on the critical path adds up to the step over
    # the micro-batches; the bubble, the TP collectives and the optimizer are the step's
    # segments of those names, shared out.
    m = r.plan.microbatches
    on_path, hidden = bars(figs["causes"])
    close([sum(on_path["x"])], [r.step_s / m * 1e3], 1e-3 * len(on_path["x"]), "ms on path")
    drawn = dict(zip(on_path["y"], on_path["x"], strict=True))
    for label, segment in (("Pipeline bubble", "bubble"), ("TP collectives", "tp"),
                           ("Optimizer step", "optimizer")):
        if r.segments[segment] > 0:
            close([drawn[label]], [r.segments[segment] / m * 1e3], 1e-3, label)
    assert all(x >= 0 for x in hidden["x"])


@pytest.mark.parametrize("query", [{}, {"zero": 3}, {"tp_overlap": "none", "dp_overlap": "false"},
                                   {**MIXTRAL_64, "ep_overlap": "true"}])
def test_recipe_timeline_bars_are_the_events_and_the_step_bars_charge(query):
    """Each bar is an event of labs.recipe.overlap (start and length in ms); the compute lane's
    waits and lent SMs, times the micro-batches (DP once a step below ZeRO-3), are the step
    bar's TP, CP, EP, sends and DP segments."""
    recipe, figs = figures_for("recipe", query)
    r = recipe.result
    line = timeline(r)
    drawn = sorted((lane, b, x) for t in bars(figs["timeline"])
                   for lane, b, x in zip(t["y"], t["base"], t["x"], strict=True))
    lanes = {"compute": "Compute stream", "comm": "Comm stream", "dp": "DP stream",
             "edp": "Expert DP stream"}  # ZeRO-0/1/2's sync, a lane per group
    expected = sorted((lanes[e.lane], e.start * 1e3, e.seconds * 1e3) for e in line.events)
    assert [d[0] for d in drawn] == [e[0] for e in expected]
    close([d[1] for d in drawn], [e[1] for e in expected], 1e-3, "starts")
    close([d[2] for d in drawn], [e[2] for e in expected], 1e-3, "lengths")
    # The compute lane's waits and lent SMs, by the kind each bar names.
    kinds = {"TP": "tp", "CP": "cp", "EP": "ep", "sends": "sends", "DP reduce-scatters": "dp",
             "DP all-gathers": "dp", "DP all-reduces": "dp",
             "tied embeddings' all-reduce": "dp", "ZeRO-3": "dp"}
    charged = dict.fromkeys(kinds.values(), 0.0)
    for t in bars(figs["timeline"]):
        if t["name"] in ("Kernels", "Communication hidden behind compute"):
            continue
        for lane, x, text in zip(t["y"], t["x"], t["text"], strict=True):
            if lane == "Compute stream":
                charged[kinds[text]] += x / 1e3
    m = r.plan.microbatches
    for kind, seconds in charged.items():
        times = 1 if kind == "dp" and r.plan.zero < 3 else m
        close([seconds * times], [r.segments[kind]], 1e-5 * times * 20, kind)


@pytest.mark.parametrize("query", [{}, {"zero": 3, "tp_overlap": "all"},
                                   {**MIXTRAL_64, "ep_overlap": "true"}])
def test_recipe_layer_bars_are_the_layers_ops_and_its_table_their_sums(query):
    """Each bar is an op of labs.recipe.layer_view (its stream, start and length in ms), and
    the table under the chart gives each kind's hidden and waited seconds over both passes."""
    recipe, figs = figures_for("recipe", query)
    view = layer_view(recipe.result)
    drawn = sorted((lane, b, x) for t in bars(figs["layer"])
                   for lane, b, x in zip(t["y"], t["base"], t["x"], strict=True))
    expected = sorted((LANES[o.lane], o.start * 1e3, o.seconds * 1e3) for o in view.ops)
    assert [d[0] for d in drawn] == [e[0] for e in expected]
    close([d[1] for d in drawn], [e[1] for e in expected], 1e-3, "starts")
    close([d[2] for d in drawn], [e[2] for e in expected], 1e-3, "lengths")
    rows = {row["label"]: row for row in figs["layer"]["rows"]}
    labels = {"tp": "TP collectives", "cp": "CP ring", "ep": "EP all-to-all", "dp": "DP / FSDP"}
    for kind, label in labels.items():
        for what, totals in (("hidden", view.hidden), ("waited or slowed", view.exposed)):
            row = rows.get(f"{label}, {what}")
            if totals[kind] > 0:
                close([row["both_s"]], [totals[kind]], 1e-12, label)
                close([row["forward_s"] + row["backward_s"]], [totals[kind]], 1e-9, label)
            else:
                assert row is None, label
    kernels = [o.seconds for o in view.ops if o.state == "compute"]
    close([rows["Kernels"]["both_s"]], [sum(kernels)], 1e-9, "kernels")


@pytest.mark.parametrize("query", [{}, {"model": "llama-3.1-70b", "gpu": "h100-sxm",
                                       "intra_link": "nvlink-4", "inter_link": "ib-ndr",
                                       "seq_len": "8192", "tp": "4", "pp": "1", "dp": "16",
                                       "zero": "3", "recompute": "flash", "microbatches": "8"}])
def test_recipe_twod_lines_are_each_familys_best_plan_and_mark_this_one(query):
    """Each family's line is the planner's best plan of that family at each cluster size
    (labs.recipe.two_d.compare, searched again here), in tokens/s per GPU; a size with none
    is a gap on the line and a cross on the axis; the page's own plan is the marked point."""
    from labs.recipe.lab import evaluate
    from labs.recipe.two_d import FAMILIES, NAMES, family, sweep_nodes

    recipe, figs = figures_for("recipe", query)
    r = recipe.result
    fig = figs["twod"]
    nodes = sweep_nodes(r.nodes, r.cluster.gpus_per_node)
    traces = {t["name"]: t for t in fig["data"]}
    for key in FAMILIES:
        line = traces[NAMES[key]]
        assert line["x"] == [n * r.cluster.gpus_per_node for n in nodes]
        drawn = dict(zip(line["x"], line["y"], strict=True))
        missing = traces.get(f"no {NAMES[key]} plan passes")
        for p in recipe.two_d.points:
            b = p.best[key]
            if b is None:
                assert drawn[p.gpus] is None and p.gpus in missing["x"]
                continue
            # The family's own plan, passing, timed by the recipe lab as the page times it.
            again = evaluate(b.plan, r.model, r.cluster, p.nodes)
            assert family(b.plan) == key and again.passes
            close([drawn[p.gpus]], [again.tokens_per_s / p.gpus], 0.05, f"{key} at {p.gpus}")
            assert missing is None or p.gpus not in missing["x"]
    mine = traces["This plan"]
    assert mine["x"] == [r.gpus]
    close(mine["y"], [r.tokens_per_s / r.gpus], 0.05, "this plan")


# EP04 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_tp_curves_costs_and_memory_are_the_sweep(kind):
    result, figs = figures_of("tp", kind)
    eff = trace(figs["efficiency"], "This setup")
    assert eff["customdata"] == [c.tp for c in result.sweep]
    close(eff["y"], [100 * c.step_efficiency for c in result.sweep], 5e-3, "efficiency %")
    # Step efficiency is the speedup over one GPU per GPU.
    close(eff["y"], [100 * c.single_gpu_step_s / (c.step_compute_s + c.step_comm_s) / c.tp
                     for c in result.sweep], 5e-3, "speedup / t")
    (now,) = [t for t in figs["efficiency"]["data"] if t["name"].startswith("Now:")]
    assert result.cost.tp == result.input.tp
    close(now["y"], [100 * result.cost.step_efficiency], 5e-3, "now")
    stack = bars(figs["cost"])
    close(stack_sums(stack), [c.layer_s * 1e3 for c in result.sweep], 1e-4, "layer ms")
    close(stack[0]["y"], [c.compute_s * 1e3 for c in result.sweep], 1e-4, "compute ms")
    close(stack[1]["y"], [c.comm_s * 1e3 for c in result.sweep], 1e-4, "collectives ms")
    one = [t for t in figs["cost"]["data"] if t["type"] == "scatter"][0]
    close(one["y"], [result.sweep[0].single_gpu_s * 1e3] * len(result.sweep), 1e-4, "one GPU")
    stack = bars(figs["memory"])
    close(stack_sums(stack), [m.memory.total_bytes / 1e9 if m.memory else 0
                              for m in result.memory_sweep], 6e-4 * len(stack), "GB")


@pytest.mark.parametrize("kind", KINDS)
def test_tp_crossover_is_compute_against_the_layers_collectives(kind):
    """EP04 step 6: the compute line runs through the state, straight in h/t at its rate; the
    collectives flat at the layer's bytes over its bus bandwidth; the dashed (h/t)* where the
    line meets them; the hollow marks the lab's own layer at each timed t."""
    result, figs = figures_of("tp", kind)
    cost, h = result.cost, result.input.model.hidden
    per_gpu = h / result.input.tp
    lines = {t["name"]: t for t in figs["crossover"]["data"]}
    compute = lines["Compute, 6·k·h·(h/t)·s·b ÷ rate"]
    close(compute["y"], [cost.compute_s * x / per_gpu for x in compute["x"]], 1e-6,
          "compute line (s)")
    assert lines["This state"]["x"] == [per_gpu]
    close(lines["This state"]["y"], [cost.compute_s], 1e-6, "state's compute")
    close(lines["The lab at each t: compute"]["y"],
          [c.compute_s for c in result.sweep if c.tp > 1], 1e-6, "the lab's compute")
    close(lines["communication"]["y"], [c.comm_total_s for c in result.sweep if c.tp > 1],
          1e-6, "the lab's collectives")
    assert lines["communication"]["x"] == [h / c.tp for c in result.sweep if c.tp > 1]
    close(lines["Collectives, none hidden"]["y"], [cost.comm_total_s] * 2, 1e-6, "comm")
    (cross,) = [s for s in figs["crossover"]["layout"]["shapes"]
                if s.get("line", {}).get("dash") == "dash"]
    close([cost.compute_s * cross["x0"] / per_gpu], [cost.comm_total_s], 1e-6,
          "compute at (h/t)*")


# EP03 (ZeRO) --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_zero_crossover_is_compute_against_the_stage_traffic(kind):
    result, figs = figures_of("zero", kind)
    row, inp = result.chosen_traffic, result.input
    tokens = inp.micro_batch * inp.seq_len
    lines = {t["name"]: t for t in figs["crossover"]["data"]}
    # The compute line passes through the state: the lab's compute, straight in the tokens.
    compute = lines["Compute, 6·P·T ÷ rate"]
    close(compute["y"], [result.compute_seconds * t / tokens for t in compute["x"]], 1e-6,
          "compute line (s)")
    assert lines["This state"]["x"] == [tokens]
    close(lines["This state"]["y"], [result.compute_seconds], 1e-6, "state's compute")
    if row.seconds:
        close(lines[f"ZeRO-{inp.zero} communication"]["y"], [row.seconds] * 2, 1e-6, "comm")
        cross = [s for s in figs["crossover"]["layout"]["shapes"]
                 if s.get("line", {}).get("dash") == "dash"]
        assert len(cross) == 1
        close([result.compute_seconds * cross[0]["x0"] / tokens], [row.seconds], 1e-6,
              "compute at T*")


@pytest.mark.parametrize("state", ["l70_z0_1280", "l70_z0", "l70_z3", "l70_z3_1k", "eth"])
def test_zero_crossover_shades_hidden_only_where_the_lab_hides(state):
    """Round-8 cold reading of EP03, item 11: the chart shaded all past T* as if hidden, for
    every stage, so ZeRO-0 at 1,280 tokens sat in it with 110 ms exposed. The green band now
    starts where the lab's own overlap (labs.zero.lab.traffic_row: each collective behind its
    own pass, the passes straight in the tokens as the chart's compute line is) first exposes
    nothing; for stages 0-2 that is 1.5x T* and a dotted line marks it, for ZeRO-3 about T*."""
    from app.charts.crossover import COMPUTE_BOUND
    from app.routers.zero import crossover_chart, facts
    from labs.zero.lab import traffic_row

    result = facts()[state]["result"]
    inp, row = result.input, result.chosen_traffic
    tokens = inp.micro_batch * inp.seq_len
    shapes = crossover_chart(result)["layout"]["shapes"]
    cross = next(s["x0"] for s in shapes if s.get("line", {}).get("dash") == "dash")
    green = next(s["x0"] for s in shapes if s.get("fillcolor") == COMPUTE_BOUND)

    def exposed(x: float) -> float:
        windows = (result.forward_seconds * x / tokens, result.backward_seconds * x / tokens)
        return traffic_row(inp, inp.zero, windows).exposed_seconds

    assert exposed(green) == pytest.approx(0, abs=1e-9) and exposed(0.99 * green) > 0
    assert (row.exposed_seconds > 0) == (tokens < green)  # the state on its own side
    dotted = [s["x0"] for s in shapes if s.get("line", {}).get("dash") == "dot"]
    if inp.zero == 3:
        assert green == pytest.approx(cross, rel=0.05) and not dotted
    else:
        assert green == pytest.approx(1.5 * cross, rel=0.05) and dotted == [green]


@pytest.mark.parametrize("kind", KINDS)
def test_zero_memory_and_traffic_stacks_reach_each_total(kind):
    result, figs = figures_of("zero", kind)
    stack = bars(figs["memory"])
    close(stack_sums(stack), [b.total_bytes / 1e9 for b in result.bars], 6e-4 * len(stack),
          "memory GB")
    stack = bars(figs["traffic"])
    close(stack_sums(stack), [r.bytes_per_gpu / 1e9 for r in result.traffic],
          6e-4 * len(stack), "traffic GB")
    stack = bars(figs["overlap"])
    close(stack[0]["y"], [result.compute_seconds * 1e3] * len(result.traffic), 6e-4,
          "compute ms")
    close(stack[1]["y"], [r.exposed_seconds * 1e3 for r in result.traffic], 6e-4,
          "exposed ms")
    stack = [t for t in bars(figs["recompute"]) if t["name"] != "Compute over none, fused"]
    close(stack_sums(stack), [r.total_bytes / 1e9 for r in result.recompute], 1.2e-3,
          "recompute GB")
    off = result.offload
    stack = bars(figs["offload"])
    sums = stack_sums(stack)
    close(sums[:2], [sum(off.breakdown_without.values()) / 1e9,
                     sum(off.breakdown_with.values()) / 1e9], 6e-4 * len(stack), "GPU GB")
    close(sums[2:], [off.host_bytes_per_node / 1e9], 6e-4 * len(stack), "host GB")


# EP11 (failures) ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_failures_rate_line_is_gpus_over_the_mtbi(kind):
    result, figs = figures_of("failures", kind)
    inp = result.input
    line, published, mark = figs["rate"]["data"]
    # N GPUs each failing once per MTBI: N x 86,400 / MTBI interruptions a day.
    assert line["x"] == [p.gpus for p in result.scale]
    close(line["y"], [n * 86_400 / inp.gpu_mtbi for n in line["x"]], 1e-4, "per day")
    # Llama 3 (Dubey et al. 2024, sec 3.3.4): 419 unexpected interruptions in 54 days.
    assert published["x"] == [16_384] and published["y"] == [pytest.approx(419 / 54)]
    assert mark["x"] == [inp.gpus]
    close(mark["y"], [inp.gpus * 86_400 / inp.gpu_mtbi], 1e-9, "this job")


@pytest.mark.parametrize("kind", KINDS)
def test_failures_time_bars_share_out_the_wall_clock(kind):
    result, figs = figures_of("failures", kind)
    stack = bars(figs["time"])
    rows = (result.chosen, result.best)
    for t, field in zip(stack, ("goodput", "blocking", "rework", "restart"), strict=True):
        close(t["x"], [100 * getattr(g, field) for g in rows], 1e-4, field)
    # Training, saving, redoing and restarting fill the wall clock.
    close(stack_sums(stack, axis="x"), [100, 100], 5e-4, "% of wall time")


@pytest.mark.parametrize("kind", KINDS)
def test_failures_interval_curve_and_its_marks(kind):
    result, figs = figures_of("failures", kind)
    inp = result.input
    curve, best, chosen = figs["interval"]["data"]
    close(curve["x"], [g.interval for g in result.intervals], 1e-4, "intervals (s)")
    close(curve["y"], [100 * g.goodput for g in result.intervals], 1e-4, "goodput %")
    assert chosen["x"] == [inp.interval]
    close(chosen["y"], [100 * result.chosen.goodput], 1e-9, "this interval")
    close(best["x"] + best["y"], [result.best.interval, 100 * result.best.goodput], 1e-9,
          "best")
    # Young (1974): the interval sqrt(2 x save cost x MTBI), dashed.
    young = figs["interval"]["layout"]["shapes"][-1]
    assert young["x0"] == pytest.approx(math.sqrt(2 * result.checkpoint.cost_s
                                                  * result.mtbi_s))


@pytest.mark.parametrize("kind", KINDS)
def test_failures_scale_panels_are_the_sweep(kind):
    result, figs = figures_of("failures", kind)
    points = result.scale
    for n, (save, field) in enumerate((("sync", "sync"), ("async", "async_"))):
        good, days, *band = [t for t in figs["scale"]["data"] if t["legendgroup"] == save]
        assert good["x"] == days["x"] == [p.gpus for p in points]
        close(good["y"], [100 * getattr(p, field).goodput for p in points], 1e-4, save)
        close(days["y"], [getattr(p, field).finish_days for p in points], 1e-4, save)
        # Where the step is ideal, the days' range: its dotted top the sweep's held days
        # (round-14 cold reading of EP11, finding 12d), from the last timed size on.
        held = [p for p in points if p.held]
        assert len(band) == (2 if held else 0), save
        if held:
            area, edge = band
            start = points.index(held[0]) - 1
            assert edge["x"] == [p.gpus for p in points[start:]]
            close(edge["y"], [getattr(points[start], field).finish_days,
                              *(p.held[n].finish_days for p in held)], 1e-4, save)
            assert area["x"] == edge["x"] + edge["x"][::-1] and area["fill"] == "toself"


# The rank map (EP07) ------------------------------------------------------------------------

@pytest.mark.parametrize("query", [{}, {"model": "mixtral-8x7b", "nodes": 2, "ep": 8},
                                   {"nodes": 4, "ep": 8, "group": "dp"}])
def test_moe_rank_map_colours_each_group_by_its_members(query):
    result, figs = figures_for("moe", query)
    colouring, fig = result.rank_map, figs["ranks"]
    (heat,) = fig["data"]
    gpn = colouring.gpus_per_node
    # Node by node, GPU by GPU: rank = node x GPUs per node + slot; the cell's text is its
    # group's number and each group has as many cells as members.
    cells = {}
    rows_are_nodes = len(heat["z"]) == colouring.nodes
    for a, row in enumerate(heat["text"]):
        for b, text in enumerate(row):
            node, slot = (a, b) if rows_are_nodes else (b, a)
            cells[node * gpn + slot] = text
    ranks = len(colouring.category)
    assert [cells[r] for r in range(ranks)] == [str(c) for c in colouring.category]
    sizes = Counter(colouring.category)
    assert set(sizes.values()) == {ranks // len(sizes)}  # equal groups
    group = query.get("group", "ep")
    if group == "ep":
        assert set(sizes.values()) == {result.input.ep}


@pytest.mark.parametrize("query", [{}, {"model": "deepseek-v3", "nodes": 256, "pp": 16,
                                        "ep": 64, "leaf_nodes": 4, "oversubscription": 4}])
def test_moe_network_bars_are_each_groups_bandwidth(query):
    """One bar per kind of group, at bytes each GPU sends / its time, in its tier's trace; the
    rank map draws a line between each leaf's nodes."""
    result, figs = figures_for("moe", query)
    drawn = {}
    for trace in figs["network"]["data"]:
        for row, x in zip(trace["y"], trace["x"], strict=True):
            drawn[row] = (trace["name"], x)
    assert len(drawn) == len(result.network)
    for g in result.network:
        row = next(r for r in drawn if r.startswith({"edp": "expert-DP", "ep": "EP<",
                                                      "dp": "DP", "tp": "TP",
                                                      "pp": "PP"}[g.kind]))
        name, x = drawn[row]
        assert x == pytest.approx(g.bytes_per_gpu / g.seconds / 1e9, abs=0.006)
        assert name.startswith({"nvlink": "inside", "leaf": "network, under",
                                "spine": "network, across"}[g.tier])
    leaf = result.input.cluster.leaf_nodes
    nodes = result.rank_map.nodes
    assert len(figs["ranks"]["layout"]["shapes"]) == -(-nodes // leaf) - 1


@pytest.mark.parametrize("query", [{}, {"model": "deepseek-v3", "nodes": 256, "pp": 16,
                                        "ep": 8, "tokens": 1024, "skew": 0.3}])
def test_moe_gemm_and_balance_curves_are_the_labs(query):
    """The GEMM curve: 2 x tokens x a GPU's experts' weights / their grouped GEMMs' time / the
    BF16 peak (equal groups: gemm_time batched over the local experts), and the dotted one
    expert at a time, at this state's T·k·EP/E; the balance curve: E·Σf²
    over the routed copies and the layer over balanced, re-routed here at each skew."""
    from labs.experts.layer import route
    from labs.hardware.kernels import gemm_time, with_matmul_efficiency

    result, figs = figures_for("moe", query)
    inp, m = result.input, result.input.model
    gpu = with_matmul_efficiency(inp.cluster, inp.mfu).gpu
    local = m.experts // inp.ep
    up = (2 if m.gated_mlp else 1) * m.expert_ffn

    def share(t: int, batch: int) -> float:  # equal groups: a grouped GEMM is a batched one
        secs = (gemm_time(gpu, t, up, m.hidden, batch)
                + gemm_time(gpu, t, m.hidden, m.expert_ffn, batch))
        return 100 * 2 * t * batch * m.expert_size / (secs * gpu.bf16_flops)

    area, alone, line, here, *shared = figs["gemm"]["data"]
    assert area["x"][-1] == here["x"][0] and area["y"][-1] == here["y"][0]
    for t, y in zip(line["x"], line["y"], strict=True):
        assert y == pytest.approx(share(t, local), abs=0.006)
    for t, y in zip(alone["x"], alone["y"], strict=True):
        assert y == pytest.approx(share(t, 1), abs=0.006)
    assert here["x"][0] == pytest.approx(inp.tokens * m.top_k * inp.ep / m.experts, abs=0.01)
    assert bool(shared) == bool(m.shared_experts)
    loss, loss_here, slow, slow_here = figs["balance"]["data"]
    base = route(inp, 0.0, result.ep_per_node).layer_s
    for k, y_loss, y_slow in zip(loss["x"], loss["y"], slow["y"], strict=True):
        r = route(inp, k, result.ep_per_node)
        total = sum(r.routed_per_expert)
        assert y_loss == pytest.approx(
            m.experts * sum((n / total) ** 2 for n in r.routed_per_expert), abs=1e-4)
        assert y_slow == pytest.approx(r.layer_s / base, abs=1e-4)
    assert loss_here["x"] == slow_here["x"] == [inp.skew]
    assert slow_here["y"][0] == pytest.approx(result.layer_s / result.balanced.layer_s,
                                              abs=1e-4)


# EP04's split diagram -----------------------------------------------------------------------

@pytest.mark.parametrize("query", [{}, {"tp": 2}, {"tp": 8, "model": "llama-3.1-70b"}])
def test_tp_split_boxes_are_the_models_matrices_cut_by_t(query):
    from app.charts.tp_split import split_view

    result, _ = figures_for("tp", query)
    m, t = result.input.model, result.input.tp
    split = split_view(result)
    attention, mlp = split["blocks"]
    (qkv,) = attention["columns"]
    # Fused QKV: a query heads and 2 x kv key/value heads of d columns each (Megatron).
    assert (qkv["rows"], qkv["cols"]) == (m.hidden, (m.heads + 2 * m.kv_heads) * m.head_dim)
    assert len(qkv["strips"]) == t
    if qkv["strips"][0]["parts"]:
        shares = {p["label"]: p["share"] for p in qkv["strips"][0]["parts"]}
        per_gpu = (m.heads // t + 2 * max(1, m.kv_heads // t)) * m.head_dim
        assert shares["Q"] == pytest.approx(m.heads // t * m.head_dim / per_gpu)
    assert (attention["rows"]["rows"], attention["rows"]["cols"]) == (
        m.heads * m.head_dim, m.hidden)
    ups = mlp["columns"]
    assert [u["name"] for u in ups] == (["W_gate", "W_up"] if m.gated_mlp else ["W_up"])
    assert all((u["rows"], u["cols"]) == (m.hidden, m.ffn) for u in ups)
    assert (mlp["rows"]["rows"], mlp["rows"]["cols"]) == (m.ffn, m.hidden)
    assert f"{m.ffn // t:,}" in mlp["rows"]["caption"]


# EP08's planner and the published runs ------------------------------------------------------

def page_figure(html: str) -> dict:
    from tests.app.test_contracts import page_figures

    (fig,) = page_figures(html).values()
    return fig


def test_plan_scatter_is_the_apis_plans(client):
    query = {"model": "gpt-3-175b", "gpu": "a100-80gb", "gpus": 64, "gpus_per_node": 8,
             "intra_link": "nvlink-3", "inter_link": "ib-hdr", "seq_len": 2048,
             "global_batch": 32}
    plans = client.get("/api/plan", params=query).json()["plans"]
    fig = page_figure(client.get("/episodes/recipe-3d/plan", params=query).text)
    assert plans
    rest, front = fig["data"]
    expected_rest = [p for p in plans if not p["pareto"]]
    expected_front = sorted((p for p in plans if p["pareto"]),
                            key=lambda p: p["memory_per_gpu_bytes"])
    for drawn, want in ((rest, expected_rest), (front, expected_front)):
        close(drawn["x"], [p["memory_per_gpu_bytes"] / 1e9 for p in want], 6e-3, "GB")
        close(drawn["y"], [p["tokens_per_s"] / 1e3 for p in want], 6e-3, "k tokens/s")
    # Tokens per second is the global batch's tokens over the step.
    for p in plans:
        assert p["tokens_per_s"] == pytest.approx(
            p["global_batch"] * query["seq_len"] / p["step_s"], rel=1e-9)


def test_validation_scatter_is_each_runs_published_and_lab_figures(client):
    answer = client.get("/api/validation").json()
    from app.routers.validation import PATH
    from tests.app.test_contracts import page_figures

    figures = page_figures(client.get(PATH).text)
    fig = figures["validation-chart"]  # the scatter (the ratio strip: test_validation_routes)
    drawn = sorted((x, y) for t in fig["data"] if t["mode"] == "markers"
                   for x, y in zip(t["x"], t["y"], strict=True))
    runs = answer["runs"] + answer["validation_runs"]
    expected = sorted((r["published_tokens_per_s_per_gpu"], r["lab_tokens_per_s_per_gpu"])
                      for r in runs)
    close([x for x, _ in drawn], [x for x, _ in expected], 0.06, "published tokens/s")
    close([y for _, y in drawn], [y for _, y in expected], 0.06, "lab tokens/s")
    for r in runs:
        assert r["ratio"] == pytest.approx(
            r["lab_tokens_per_s_per_gpu"] / r["published_tokens_per_s_per_gpu"], abs=1e-3)
    # The ±10% and ±25% bands: y = x (1 ± band).
    bands = [t for t in fig["data"] if t["mode"] == "lines"]
    assert len(bands) == 5
    for t in bands:
        ratios = {round(y / x, 6) for x, y in zip(t["x"], t["y"], strict=True)}
        assert len(ratios) == 1 and ratios <= {0.75, 0.9, 1.0, 1.1, 1.25}


# The playground (EP12) and the coverage of this file ------------------------------------------

def test_the_playground_draws_what_each_lab_draws_for_the_same_state():
    """Each panel's figure is the one the lab's own page draws for the lab's own query of that
    state (so the tests above check its data)."""
    from urllib.parse import parse_qsl

    from app.charts import veiled_after
    from app.routers.playground import diagram_name, lab_query, unveiled, waits

    state, errors, _ = parse(VIEWS["playground"], [])
    assert state is not None, errors
    drawn = json.loads(json.dumps(VIEWS["playground"].figures(state.result)))
    held = waits(state.result)  # the playground's own steps' veils (``veiled_after``)
    checked = 0
    for p in state.result.panels:
        if p.result is None:
            continue
        _, own = figures_for(p.view.name, dict(parse_qsl(lab_query(p))))
        for name in p.diagrams:
            if name in own:
                keys, whole = held.get((p.lab, name), ""), unveiled(own[name])
                assert drawn[diagram_name(p.lab, name)] == veiled_after(
                    whole, tuple(keys.split())), (p.lab, name)
                checked += 1
    assert checked == len(drawn) > 0


def test_veiled_after_copying_leaves_the_cached_figure_as_it_was():
    """The playground veils a copy: its figures come from cached runs, drawn again for the
    next state with other veils (a mutated cache would veil a later panel by an old step)."""
    from app.charts import veiled_after

    figure = {"data": [], "layout": {"meta": {"names": {"a": "b"}}}}
    veiled = veiled_after(figure, ("step-2", "step-3"), copy=True)
    assert figure == {"data": [], "layout": {"meta": {"names": {"a": "b"}}}}
    assert veiled["layout"]["meta"] == {"names": {"a": "b"}, "masked": {},
                                        "after": "step-2 step-3"}
    assert veiled_after(figure, (), copy=True) is figure

COVERED = {  # lab -> the diagrams whose data a test above derives from the lab's result
    "memory": {"ledger"}, "dp": {"scaling", "time", "ratio", "replica"},
    "zero": {"memory", "traffic", "overlap", "crossover", "recompute", "offload"},
    "tp": {"split", "efficiency", "cost", "memory", "crossover"},
    "pipeline": {"gantt", "activations", "memory"}, "cp": {"mask", "pairs", "cost", "crossover"},
    "moe": {"experts", "gpus", "params", "ranks", "network", "gemm", "balance",
            "crossover"},
    "recipe": {"step", "causes", "memory", "timeline", "layer", "twod"},
    "placement": {"cluster", "memory", "timeline"},
    "precision": {"ledger", "bytes", "finetune", "offload", "speed"},
    "failures": {"rate", "time", "interval", "scale"},
}


def test_every_diagram_of_every_lab_has_its_data_checked_here():
    """A lab added to the registry fails here until a test above checks its diagrams' data
    (the playground draws the labs' own: the test above)."""
    labs = {name: {d.name for d in view.diagrams} for name, view in VIEWS.items()
            if name != "playground"}
    assert labs == COVERED


def test_a_replanned_step_chart_says_each_plans_figures_apart():
    """Round-6 reading (EP08 step 9, "lose 2 of 8 nodes"): the step chart's summary printed the
    re-plan's step time beside the running plan's compute share, efficiency and parts, true of
    neither plan. Each plan's bar now sums to its own step, and the summary says each plan's
    step, compute share, efficiency and MFU from that plan's result."""
    from app.charts.units import fmt_pct

    query = {"model": "gpt-3-175b", "gpu": "a100-80gb", "nodes": 8, "tp": 8, "pp": 4, "dp": 2,
             "microbatches": 16, "replan_nodes": 6}
    result, figs = figures_for("recipe", query)
    fig = figs["step"]
    plans = [result.result, result.replan.after]
    assert plans[1] is not None and plans[1].gpus == 48
    close(stack_sums(bars(fig), "x"), [round(r.step_s * 1e3, 3) for r in plans],
          len(bars(fig)) * 1e-3, "each bar is its plan's step")
    said = fig["summary"].split(". ")
    assert len(said) == 2, fig["summary"]
    for text, r in zip(said, plans, strict=True):
        assert f"takes {r.step_s * 1e3:,.0f} ms" in text, text
        assert f"{fmt_pct(r.segments['compute'] / r.step_s)} of it compute" in text, text
        assert f"efficiency {fmt_pct(r.efficiency)}" in text, text
        assert f"MFU {fmt_pct(r.mfu)}" in text, text
