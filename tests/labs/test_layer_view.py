"""EP08's layer view (labs.recipe.layer_view) is the step model's own layer, laid out op by op:
its compute stream is the layer's kernels and waits end to end, each kind's waits are the
layer's exposed collectives (labs.parallel.layer_time) and ZeRO-3's per-layer exposure
(labs.recipe.dp_time.zero3_layer), and the stage's layers times them are the step's."""

import math

import pytest

from app.lesson_drills import MIXTRAL_64
from app.routers.recipe import LAYER, SEED, RecipeQuery, run
from labs.core.catalogue import RECIPES
from labs.hardware.nccl import sm_share
from labs.recipe.dp_time import dp_spreads, zero3_layer
from labs.recipe.layer_view import _layer, layer_view

MIXTRAL = {**MIXTRAL_64, "microbatches": 4}
STATES = [{**LAYER, "fsdp_prefetch": False}, {**LAYER, "reshard_after_forward": False},
          {**LAYER, "fsdp_prefetch": False, "reshard_after_forward": False},
          SEED, {**SEED, "tp_overlap": "none"}, {**SEED, "tp_overlap": "all"},
          {**SEED, "recompute": "full"}, {**SEED, "sequence_parallel": False},
          {**SEED, "zero": 3}, {**SEED, "zero": 3, "kernels": "eager"},
          {**SEED, "cp": 2, "dp": 1}, MIXTRAL, {**MIXTRAL, "ep_overlap": True},
          {**MIXTRAL, "zero": 3}, {**MIXTRAL, "dp_overlap": False},
          {**MIXTRAL, "tp_overlap": "all"}, LAYER, {**LAYER, "tp_overlap": "none"},
          {**LAYER, "tp_overlap": "all"}]
TOLERANCE = 1e-9  # relative: one computation, summed in another order


def _view(params):
    result = run(RecipeQuery(**params), two_d=False).result
    assert result.legal, result.problems
    return result, layer_view(result)


def _zero3(result):
    _, lt, params, _ = _layer(result)
    plan, timing = result.plan, result.timing
    return zero3_layer(lt, params, dp_spreads(plan.layout, result.cluster, list(timing.stages)),
                       result.cluster, RECIPES[plan.recipe].gathered_bytes,
                       RECIPES[plan.recipe].gradients, timing.options.compute.kernels != "fused",
                       plan.fsdp_prefetch, plan.reshard_after_forward)


@pytest.mark.parametrize("params", STATES)
def test_the_layer_view_is_the_step_models_layer(params):
    result, view = _view(params)
    n, lt, _, _ = _layer(result)
    # Each kind's waits and lent SMs are the layer's exposed collectives, both passes.
    for kind in ("tp", "cp", "ep"):
        exposed = sum(c.exposed for p in (lt.forward, lt.backward) for c in p.comms
                      if c.name == kind)
        assert view.exposed[kind] == pytest.approx(exposed, rel=TOLERANCE, abs=1e-15), kind
    extra_f = extra_b = 0.0
    if result.plan.zero == 3:
        z = _zero3(result)
        assert view.exposed["dp"] == pytest.approx(z.ahead + z.behind, rel=TOLERANCE)
        extra_f, extra_b = z.ahead + z.copy_out, z.behind + z.copy_out
    else:  # the step's DP sync, drawn after the stage's last layer to run backward
        assert view.exposed["dp"] == pytest.approx(result.segments["dp"], rel=TOLERANCE,
                                                   abs=1e-15)
        assert view.step_end_s == pytest.approx(view.exposed["dp"], rel=TOLERANCE, abs=1e-15)
    assert view.forward_s == pytest.approx(lt.forward.seconds + extra_f, rel=TOLERANCE)
    assert view.backward_s == pytest.approx(lt.backward.seconds + extra_b, rel=TOLERANCE)
    # The compute stream runs one thing at a time, end to end, from the forward's start.
    compute = sorted((o.start, o.seconds) for o in view.ops if o.lane == "compute")
    assert compute[0][0] == 0
    for (s0, d0), (s1, _) in zip(compute, compute[1:], strict=False):
        assert s1 == pytest.approx(s0 + d0, rel=1e-12, abs=1e-15)
    assert math.fsum(d for _, d in compute) == pytest.approx(view.seconds, rel=TOLERANCE)
    # Every other stream runs one collective at a time too.
    for lane in ("tp", "cp", "ep", "dp", "edp"):
        mine = sorted((o.start, o.seconds) for o in view.ops if o.lane == lane)
        for (s0, d0), (s1, _) in zip(mine, mine[1:], strict=False):
            assert s1 >= s0 + d0 - 1e-12, lane


@pytest.mark.parametrize("params", [SEED, MIXTRAL, LAYER, {**LAYER, "tp_overlap": "none"}])
def test_the_stages_layers_times_the_view_are_the_steps_collectives(params):
    """A stage of one kind of layer (one recomputation mode): its layers times the view's
    waits are the stage's micro-batch's exposed TP, CP and EP (``Stage.tp`` ...)."""
    result, view = _view(params)
    slow = result.timing.slow
    assert len([row for row in slow.layers if row[0]]) == 1
    for kind in ("tp", "cp", "ep"):
        assert view.count * view.exposed[kind] == pytest.approx(getattr(slow, kind),
                                                                rel=TOLERANCE, abs=1e-15)


def test_kernels_run_in_a_layers_order():
    _, view = _view(SEED)
    forward = [o.name for o in view.ops if o.lane == "compute" and o.phase == "forward"
               and o.state == "compute"]
    assert forward.index("qkv") < forward.index("attention") < forward.index("proj") \
        < forward.index("fc1") < forward.index("fc2")
    assert forward.count("norms") == 2 and forward.count("bias-dropout-add") == 2
    backward = [o.name for o in view.ops if o.lane == "compute" and o.phase == "backward"
                and o.state == "compute"]
    assert backward[0] == "recompute"  # selective: the attention core first
    assert backward.index("fc2.dgrad") < backward.index("fc1.wgrad") \
        < backward.index("proj.dgrad") < backward.index("attention") < backward.index("qkv.wgrad")


def test_each_tp_overlap_setting_moves_what_waits():
    """none: every TP collective blocks; backward: the backward's hide beside a GEMM, the
    forward's block; all: the forward's run beside their GEMMs too, in chunks."""
    views = {o: _view({**LAYER, "tp_overlap": o})[1] for o in ("none", "backward", "all")}

    def tp(view, phase, state):
        return sum(o.seconds for o in view.ops if o.lane == "tp" and o.phase == phase
                   and o.state == state)

    assert tp(views["none"], "forward", "hidden") == tp(views["none"], "backward", "hidden") == 0
    assert tp(views["backward"], "forward", "hidden") == 0
    assert tp(views["backward"], "backward", "hidden") > 0
    assert tp(views["all"], "forward", "hidden") > 0
    assert views["none"].exposed["tp"] > views["backward"].exposed["tp"] \
        > views["all"].exposed["tp"]


def test_the_prefetched_gather_costs_only_the_sms_it_holds_when_the_forward_covers_it():
    """TP4 x FSDP16's layer: the next layer's gather is shorter than the forward, so it adds
    only NCCL's 16 of 132 SMs for its time (the lesson's step 13 says so)."""
    result, view = _view(LAYER)
    z = _zero3(result)
    forward = sum(o.seconds for o in view.ops if o.phase == "forward" and o.lane == "compute"
                  and o.state == "compute")
    assert z.gather < forward
    added = sum(o.seconds for o in view.ops if o.phase == "forward" and o.lane == "compute"
                and o.kind == "dp")
    assert added == pytest.approx(sm_share(result.cluster) * z.gather, rel=TOLERANCE)
    assert round(sm_share(result.cluster) * 132) == 16


def test_ep_overlap_leaves_the_sms_and_dp_overlap_off_leaves_the_buckets_to_the_end():
    _, off = _view(MIXTRAL)
    _, on = _view({**MIXTRAL, "ep_overlap": True})
    assert on.exposed["ep"] < off.exposed["ep"]
    assert on.exposed["ep"] == pytest.approx(sum(o.seconds for o in on.ops if o.kind == "ep"
                                                 and o.state == "sm"), rel=TOLERANCE)
    result, no_dp = _view({**MIXTRAL, "dp_overlap": False})
    assert not [o for o in no_dp.ops if o.lane in ("dp", "edp") and o.state == "hidden"]
    assert [o for o in off.ops if o.lane == "dp" and o.state == "hidden"]
    assert no_dp.bucket_wait_s == result.segments["dp"]


def test_fsdp_backward_prefetch_off_makes_each_layer_wait_for_its_own_gather():
    """Without backward prefetch the layer's gather blocks before its backward: the view's
    backward waits that gather whole (then the reduce-scatter runs beside it), and the step
    charges it in every layer (PyTorch FSDP notes; FSDP2's set_modules_to_backward_prefetch)."""
    on_r, on = _view(LAYER)
    off_r, off = _view({**LAYER, "fsdp_prefetch": False})
    z = _zero3(off_r)
    waits = [o for o in off.ops if o.name == "its own gather" and o.lane == "compute"]
    assert len(waits) == 1 and waits[0].seconds == pytest.approx(z.gather, rel=TOLERANCE)
    assert waits[0].start == off.backward_start  # before any backward kernel
    assert z.behind > z.gather and off.exposed["dp"] > on.exposed["dp"]
    assert off_r.segments["dp"] > on_r.segments["dp"]
    # The forward's gathers overlap either way (implicit forward prefetching).
    assert [o for o in off.ops if o.phase == "forward"] == \
        [o for o in on.ops if o.phase == "forward"]


def test_keeping_the_gathered_weights_drops_the_backward_gather_and_costs_their_memory():
    """reshard_after_forward off: one gather per layer and micro-batch instead of two, no
    backward gather on the view, and every layer's gathered weights held (2 B a parameter
    of the stage's local ones, bf16)."""
    on_r, on = _view(LAYER)
    keep_r, keep = _view({**LAYER, "reshard_after_forward": False})
    z_on, z_keep = _zero3(on_r), _zero3(keep_r)
    assert z_on.gathers == 2 and z_keep.gathers == 1
    assert not [o for o in keep.ops if o.name == "next layer's gather"
                and o.phase == "backward"]
    assert keep.exposed["dp"] < on.exposed["dp"]
    dp_on = next(p for p in on_r.timing.parts if p.name == "dp")
    dp_keep = next(p for p in keep_r.timing.parts if p.name == "dp")
    assert dp_keep.bytes_per_step == pytest.approx(dp_on.bytes_per_step * 2 / 3, rel=1e-9)
    held = keep_r.memory.stages[0].breakdown["weights"] - on_r.memory.stages[0].breakdown[
        "weights"]
    sp, lay = keep_r.timing.slow.params, keep_r.plan.layout
    local = sp.tp_split / lay.tp + sp.replicated + sp.experts / (lay.ep * lay.etp)
    assert held == pytest.approx(2 * local, rel=1e-9)  # the stage's bf16 weights, whole
    assert keep_r.memory_per_gpu_bytes > on_r.memory_per_gpu_bytes


@pytest.mark.parametrize("change", [{}, {"fsdp_prefetch": False},
                                    {"reshard_after_forward": False},
                                    {"fsdp_prefetch": False, "reshard_after_forward": False}])
def test_the_steps_fsdp_segment_is_the_views_layer_times_the_layers(change):
    """One kind of layer, no pipeline: ZeRO-3's step segment is m x (layers x the view's
    per-layer FSDP charge + each pass's first gather): the view and the step are one count."""
    result, view = _view({**LAYER, **change})
    z = _zero3(result)
    m = result.plan.microbatches
    firsts = 2 if z.gathers == 2 and result.plan.fsdp_prefetch else 1
    per_layer = view.exposed["dp"] + z.gathers * z.copy_out
    assert result.segments["dp"] == pytest.approx(
        m * (view.count * per_layer + firsts * z.gather), rel=TOLERANCE)


def _step_dp(result):
    return next(p for p in result.timing.parts if p.name == "dp")


@pytest.mark.parametrize("params", [MIXTRAL, {**MIXTRAL, "microbatches": 1}, SEED,
                                    {**SEED, "zero": 0}, {**LAYER, "zero": 1},
                                    {**MIXTRAL, "dp_overlap": False}])
def test_ddp_buckets_are_timed_from_the_layers_place_in_the_step_models_schedule(params):
    """Issue 32 item 3: ZeRO-0/1/2's buckets on the layer view are the step model's own
    (labs.recipe.dp_time: Megatron's buckets of max(40M, 1M x DP) parameters, bucket j ready
    at j·share of the last backward, one after another), not an even split of their time:
    the drawn layer (the stage's last to run backward) ends the window, so its backward
    holds the buckets running then, the last bucket starts as it ends, and what is left is
    exposure_after_window (the step model's closed form) per group; the view's exposed DP
    is the step's DP segment."""
    from labs.data_parallel.lab import exposed_after_window

    result, view = _view(params)
    dp = _step_dp(result)
    reduces = [b for b in dp.buckets if b.kind != "all_gather"]
    assert reduces and view.exposed["dp"] == pytest.approx(result.segments["dp"],
                                                           rel=TOLERANCE, abs=1e-15)
    end = view.backward_start + view.backward_s
    for b in reduces:
        lane = "dp" if b.group == "dense" else "edp"
        ops = [o for o in view.ops if o.lane == lane and o.phase == "backward"
               and "bucket" in o.name]
        during = [o for o in ops if o.start < end - 1e-12]
        after = [o for o in ops if o.start >= end - 1e-12]
        assert all(view.backward_start - 1e-12 <= o.start
                   and o.start + o.seconds <= end + 1e-12 for o in during)
        if result.plan.dp_overlap:
            left = exposed_after_window(b.window_s, b.bucket_s, b.last_s, b.count, b.share)
            assert during  # some buckets run beside this layer's backward
            assert f"bucket {b.count} of {b.count}" in after[-1].name
        else:
            left = b.seconds
            assert not during
        assert math.fsum(o.seconds for o in after) == pytest.approx(left, rel=1e-9)
        # Readiness follows the window: no bucket runs before its gradients exist.
        for o in during:
            j = int(o.name.split("bucket ")[1].split(" of")[0])
            ready = b.window_s if j == b.count else j * b.share * b.window_s
            assert o.start - view.backward_start >= ready - (b.window_s - view.backward_s) \
                - 1e-12
