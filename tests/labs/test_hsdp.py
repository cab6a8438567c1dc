"""HSDP (labs.recipe.dp_time, labs.recipe.hsdp): ZeRO-3 sharded over a shard group of
dp_shard ranks and replicated across DP / dp_shard replicas. Its memory against ZeRO-3's
formula over the shard group, its traffic against NCCL's collective times counted by hand,
its groups against the layout's own rank lists, and its rules."""

import math

import pytest

from labs.core.catalogue import RECIPES
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link, paired_cluster
from labs.hardware.nccl import nccl_time
from labs.model.presets import get_model
from labs.parallel.layout import ParallelLayout
from labs.recipe.groups import hybrid_spreads, spread
from labs.recipe.hsdp import hsdp_view
from labs.recipe.inputs import Plan
from labs.recipe.lab import evaluate
from labs.schedules.stages import stage_params

H100 = paired_cluster(get_gpu("h100-sxm"), 8, get_link("nvlink-4"), get_link("ib-ndr"))
LLAMA_8B = get_model("llama-3.1-8b")
# Llama 3.1 8B on 8 nodes of 8 H100s as TP2 x DP32: 4 DP ranks a node.
JOB = {"tp": 2, "pp": 1, "dp": 32, "zero": 3, "recompute": "flash", "microbatches": 4,
       "seq_len": 8192}


def _run(**change):
    return evaluate(Plan(**{**JOB, **change}), LLAMA_8B, H100, 8)


def _dp(result):
    return next(p for p in result.timing.parts if p.name == "dp")


def _state(result) -> float:
    bill = result.memory.stages[result.memory.heaviest_stage].breakdown
    return sum(bill[k] for k in ("weights", "gradients", "master_weights", "optimizer_moments"))


@pytest.mark.parametrize("shard", [16, 8, 4, 2])
def test_hsdp_state_is_zero3_over_the_shard_group_not_dp(shard):
    """ZeRO-3 (Rajbhandari et al. 2020 Fig. 1): 16 B x the GPU's local parameters, divided by
    the shard group (dp_shard x CP), not by DP: replicas hold copies."""
    r = _run(dp_shard=shard)
    sp = stage_params(LLAMA_8B, 1, "1f1b", 1, 0, 0)[0]
    local = sp.tp_split / JOB["tp"] + sp.replicated
    per_param = RECIPES["adam16"]
    bytes_ = (per_param.weight_bytes + per_param.gradients + per_param.master_weights
              + per_param.optimizer_moments)
    assert bytes_ == 16
    assert _state(r) == pytest.approx(bytes_ * local / shard, rel=1e-12)
    assert hsdp_view(r).state_bytes == pytest.approx(_state(r), rel=1e-12)
    # Against plain FSDP over all 32: the state grows by the replicas, DP / dp_shard.
    assert _state(r) == pytest.approx(_state(_run()) * 32 / shard, rel=1e-12)


def test_full_shard_degree_is_plain_fsdp():
    """dp_shard = DP (or 0) is FSDP over all of DP: the same step and memory as before."""
    plain, full = _run(), _run(dp_shard=32)
    assert not full.plan.hybrid and full.plan.replicas == 1
    assert full.step_s == plain.step_s
    assert full.memory_per_gpu_bytes == plain.memory_per_gpu_bytes
    assert hsdp_view(full) is None


def test_hsdp_traffic_by_hand():
    """dp_shard 4 = the 4 DP ranks of a node: each layer's two all-gathers (forward and
    backward) and its reduce-scatter run inside the node on NVLink, per micro-batch; its
    gradient shard (its parameters / 4, bf16) is all-reduced once a step across the 8
    replicas, one GPU a node on InfiniBand. The step model's DP seconds are exactly that sum
    of NCCL's times (labs.hardware.nccl.nccl_time)."""
    r = _run(dp_shard=4)
    stage = r.timing.slow
    (layers, _lt, dense, expert), = stage.layers
    assert (layers, expert) == (32, 0.0)
    w, g = RECIPES["adam16"].gathered_bytes, RECIPES["adam16"].gradients
    ag = nccl_time("all_gather", dense * w, 4, H100, 4)
    rs = nccl_time("reduce_scatter", dense * g, 4, H100, 4)
    ar = nccl_time("all_reduce", dense / 4 * g, 8, H100, 1)
    assert (ag.bottleneck, rs.bottleneck, ar.bottleneck) == ("nvlink-4", "nvlink-4", "ib-ndr")
    m = JOB["microbatches"]
    hand = m * layers * (2 * ag.seconds + rs.seconds) + layers * ar.seconds
    dp = _dp(r)
    assert dp.seconds == pytest.approx(hand, rel=1e-12)
    # Bytes one GPU sends: ring all-gather / reduce-scatter (n-1)/n of the layer each,
    # all-reduce 2(n-1)/n of the shard.
    sent = m * layers * 3 * 3 / 4 * dense * 2 + layers * 2 * 7 / 8 * dense / 4 * 2
    assert dp.bytes_per_step == pytest.approx(sent, rel=1e-12)
    v = hsdp_view(r)
    assert (v.gather_s, v.reduce_scatter_s, v.all_reduce_s) == pytest.approx(
        (ag.seconds, rs.seconds, ar.seconds), rel=1e-12)
    assert v.all_reduce_step_s == pytest.approx(layers * ar.seconds, rel=1e-12)
    assert (v.shard_link, v.replica_link) == ("nvlink-4", "ib-ndr")
    assert dp.link == "ib-ndr" and (dp.group, dp.nodes) == (32, 8)


def test_replica_all_reduce_hides_behind_the_last_backward_but_not_without_overlap():
    """The replicas' all-reduce runs beside the last micro-batch's backward (layer by layer):
    on 32 layers at most the last layer's outlasts it; with DP overlap off all of it is
    exposed, and the step is that much longer."""
    on, off = _run(dp_shard=4), _run(dp_shard=4, dp_overlap=False)
    v_on, v_off = hsdp_view(on), hsdp_view(off)
    assert v_on.all_reduce_exposed_s == pytest.approx(v_on.all_reduce_s, rel=1e-9)
    assert v_off.all_reduce_exposed_s == v_off.all_reduce_step_s
    assert _dp(off).exposed - _dp(on).exposed == pytest.approx(
        v_off.all_reduce_step_s - v_on.all_reduce_exposed_s, rel=1e-9)


def test_hsdp_inside_a_node_exposes_less_than_fsdp_across_nodes():
    """FSDP's ring of 32 spans 8 nodes at 4 GPUs a node (half the node's NICs); HSDP's shard
    ring stays on NVLink: less of the DP traffic is exposed, for 8 x the state."""
    fsdp, hsdp = _run(), _run(dp_shard=4)
    assert _dp(hsdp).exposed < _dp(fsdp).exposed
    assert _state(hsdp) == pytest.approx(8 * _state(fsdp), rel=1e-12)


@pytest.mark.parametrize(("layout", "kind"), [
    (ParallelLayout(tp=2, dp=32), "dp-cp"), (ParallelLayout(tp=4, dp=16), "dp-cp"),
    (ParallelLayout(tp=2, cp=2, dp=8, pp=2), "dp-cp"), (ParallelLayout(tp=1, dp=24), "dp-cp"),
    (ParallelLayout(tp=2, dp=16, ep=4), "edp")])
@pytest.mark.parametrize("g", [4, 8])
def test_hybrid_groups_match_the_layouts_rank_lists(layout, kind, g):
    """The shard and replica groups (labs.recipe.groups.hybrid_spreads) are the data-parallel
    groups split with the replicas outermost (torchtitan's mesh order): checked against
    ``layout.groups`` walked rank by rank."""
    whole = layout.groups(kind)
    size = len(whole[0])
    for replicas in (r for r in (2, 4, 8) if size % r == 0):
        n = size // replicas
        shards = [grp[i * n:(i + 1) * n] for grp in whole for i in range(replicas)]
        reps = [grp[j::n] for grp in whole for j in range(n)]

        def worst(groups):
            nodes = max(len({r // g for r in grp}) for grp in groups)
            per_node = min(min(sum(1 for r in grp if r // g == node) for node in
                               {r // g for r in grp}) for grp in groups)
            return len(groups[0]), nodes, per_node

        shard_s, rep_s = hybrid_spreads(layout, kind, replicas, g)
        assert (shard_s.size, shard_s.nodes, shard_s.per_node) == worst(shards)
        assert (rep_s.size, rep_s.nodes, rep_s.per_node) == worst(reps)
    assert hybrid_spreads(layout, kind, 1, g)[0] == spread(layout, kind, g)


@pytest.mark.parametrize(("change", "fields"), [
    ({"dp_shard": 5}, {"dp_shard", "dp"}),
    ({"dp_shard": 4, "zero": 1}, {"dp_shard", "zero"}),
])
def test_inconsistent_shard_degree_names_both_controls(change, fields):
    r = _run(**change)
    assert not r.legal
    found = [p for p in r.problems if p.field == "dp_shard"]
    assert len(found) == 1 and {found[0].field, *found[0].also} == fields


def test_hsdp_optimizer_step_runs_on_the_shard():
    """The optimizer updates the GPU's shard: DP / dp_shard times the plain FSDP's."""
    from labs.model.head import optimizer_time
    from labs.recipe.stage_time import local_params

    fsdp, hsdp = _run(), _run(dp_shard=4)
    local = local_params(hsdp.timing.slow.params, hsdp.plan.layout)
    assert hsdp.timing.optimizer_s == pytest.approx(optimizer_time(H100.gpu, local / 4))
    assert fsdp.timing.optimizer_s == pytest.approx(optimizer_time(H100.gpu, local / 32))
    assert math.isfinite(hsdp.step_s) and hsdp.passes


def test_the_fsdp2_export_writes_hsdp_as_a_2d_mesh():
    """fully_shard on a 2-D mesh (replicate, shard) is FSDP2's HSDP: the export names the
    mesh's dims in torchtitan's order and says how to all-reduce once a step."""
    from labs.recipe.export import export

    text, notes = (lambda e: (e.text, e.notes))(export(Plan(**JOB, dp_shard=4), LLAMA_8B,
                                                       "fsdp"))
    assert "(1, 8, 4, 1, 2), mesh_dim_names=('pp', 'dp_replicate', 'dp_shard', 'cp', 'tp')" \
        in text
    assert 'mesh["dp_replicate", "dp_shard"]' in text
    assert any("set_requires_all_reduce(False)" in n for n in notes)
    plain = export(Plan(**JOB), LLAMA_8B, "fsdp")
    assert 'mesh["dp"]' in plain.text and "dp_replicate" not in plain.text


def test_a_replan_keeps_the_shard_group_where_it_still_divides():
    """Re-planning an HSDP job on more nodes keeps its shard degree (more replicas); a plan
    that leaves ZeRO-3 drops it rather than break the rule."""
    from labs.recipe.replan import nearest

    rp = nearest(Plan(**JOB, dp_shard=4), LLAMA_8B, H100, 16)
    assert rp.before.plan.dp == 64 and rp.before.plan.dp_shard == 4
    assert rp.before.legal
    assert rp.after is not None and (rp.after.plan.zero == 3 or rp.after.plan.dp_shard == 0)


def test_step_15s_bandwidths_are_the_ones_nccl_is_timed_at():
    """Step 15's why divides by NVLink's ring bus bandwidth inside the node, one NIC's across
    the replicas and 4 NICs' for FSDP's 32-GPU ring (4 GPUs a node): the bus bandwidths
    nccl_time runs those collectives at, so its derivation and the engine's figure agree."""
    from app.routers.recipe import HSDP, hsdp_consts

    k = hsdp_consts()
    layer = 109_060_096.0  # a layer's parameters a GPU after TP2 (test_hsdp_traffic_by_hand)
    assert nccl_time("all_gather", layer * 2, 4, H100, 4).busbw == k["nvlink_busbw"]
    assert nccl_time("all_reduce", layer / 4 * 2, 8, H100, 1).busbw == k["nic_busbw"]
    assert nccl_time("all_gather", layer * 2, 32, H100, 4).busbw == \
        k["per_node"] * k["nic_busbw"]
    assert (HSDP["intra_link"], HSDP["inter_link"]) == ("nvlink-4", "ib-ndr")


def test_the_planner_offers_hsdp_inside_a_node_and_its_bounds_hold():
    """With ``hsdp`` the planner offers each ZeRO-3 plan again with its shard group inside a
    node; the branch-and-bound floors (state over the shard group, the shard group's gathers
    packed) stay under the lab for every such plan, and the search returns HSDP plans exactly
    as the recipe times them."""
    import random

    from labs.recipe.bounds import state_bytes_floor
    from labs.recipe.lab import rule_problems
    from labs.recipe.plan_space import PlanRequest, candidates, node_shard
    from labs.recipe.planner import bound_step_s, search

    for model, batch in ((LLAMA_8B, 128), (get_model("mixtral-8x7b"), 64)):
        req = PlanRequest(model, H100, 64, 8192 if model is LLAMA_8B else 4096, batch,
                          hsdp=True)
        found = candidates(req)
        hybrid = [p for p in found if p.dp_shard]
        assert hybrid and all(p.zero == 3 and p.hybrid for p in hybrid)
        for plan in random.Random(7).sample(hybrid, min(25, len(hybrid))):
            assert plan.dp_shard == node_shard(plan, 8) == 8 // (plan.tp * plan.cp)
            assert not rule_problems(plan, model, H100, 8)
            r = evaluate(plan, model, H100, 8)
            assert bound_step_s(plan, model, H100) <= r.step_s * (1 + 1e-12)
            assert state_bytes_floor(plan, model) <= r.memory_per_gpu_bytes * (1 + 1e-12)
    plain = search(PlanRequest(LLAMA_8B, H100, 64, 8192, 128, top=10))
    both = search(PlanRequest(LLAMA_8B, H100, 64, 8192, 128, top=10, hsdp=True))
    assert not any(r.plan.dp_shard for r in plain.plans)
    shown = [r for r in both.plans if r.plan.dp_shard]
    assert shown
    for r in shown:
        lab = evaluate(r.plan, LLAMA_8B, H100, 8)
        assert lab.passes and lab.step_s == pytest.approx(r.step_s, rel=1e-12)
    assert both.plans[0].step_s <= plain.plans[0].step_s
