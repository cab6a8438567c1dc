"""EP07: MoE layer under expert parallelism, pinned to published figures and labs.hardware."""

from itertools import combinations

import pytest

from labs.core.errors import LabInputError
from labs.experts.inputs import MoEInput
from labs.experts.lab import simulate_moe
from labs.experts.routing import (
    block_hit,
    deepep_traffic,
    pick_chances,
    whole_tokens,
)
from labs.hardware.comm import nccl_collective as collective
from labs.hardware.links import get_cluster
from labs.model.presets import get_model
from labs.parallel.dispatch import copies, dispatch_time
from labs.parallel.rank_map import group_colouring, group_summaries

H100 = get_cluster("dgx-h100")


def moe(model="mixtral-8x7b", **kw):
    kw.setdefault("nodes", 2)
    return simulate_moe(MoEInput(model=get_model(model), cluster=H100, **kw))


def test_memory_counts_total_and_compute_counts_active():
    # DeepSeek-V3 report (arXiv:2412.19437): 671B total, 37B activated; Mixtral paper
    # (arXiv:2401.04088): 46.7B total, 12.9B active. Computed from the presets' shapes.
    v3 = moe("deepseek-v3", nodes=256, pp=16, ep=64)
    assert v3.params == pytest.approx(671e9, rel=0.01)
    assert v3.active_params == pytest.approx(37e9, rel=0.02)
    mixtral = moe(ep=8)
    assert mixtral.params == pytest.approx(46.7e9, rel=0.01)
    assert mixtral.active_params == pytest.approx(12.9e9, rel=0.01)
    # Compute per token follows the active count: V3 costs far less than a dense 671B model.
    assert v3.dense_equivalent_flops / v3.flops_per_token > 10


def test_deepseek_v3_pp16_ep64_no_tp_passes_the_rank_rules():
    # DeepSeek-V3 sec 3.2: 16-way PP, 64-way EP over 8 nodes, ZeRO-1 DP, no TP, 2,048 H800s.
    r = moe("deepseek-v3", nodes=256, pp=16, ep=64)
    assert r.layout.world_size == 2048
    assert (r.layout.tp, r.layout.pp, r.layout.dp) == (1, 16, 128)
    assert r.layout.expert_dp == 2  # EP regroups each stage's 128 GPUs: 64 x 2, not on top
    assert r.experts_per_gpu == 4
    assert r.ep_per_node == 8  # one EP group spans 8 nodes of 8
    summary = {s.kind: s for s in group_summaries(r.layout, 8)}
    assert summary["ep"].nodes_spanned == 8 and not summary["ep"].inside_node
    assert summary["tp"].inside_node
    # EP regroups the stage's GPUs: at EP 8 the job is the same 2,048 GPUs with the same DP.
    ep8 = moe("deepseek-v3", nodes=256, pp=16, ep=8)
    assert (ep8.layout.world_size, ep8.layout.dp, ep8.layout.expert_dp) == (2048, 128, 16)


def test_expert_tp_splits_each_experts_compute():
    base, split = moe(ep=4), moe(ep=4, etp=2)
    assert split.layout.expert_dp == base.layout.expert_dp // 2
    # Half the FLOPs a GPU; the grouped GEMM's half as many tiles fill their last wave a
    # little worse (Mixtral's up GEMM, 2 experts of 4,096 rows: 7,168 tiles of 256 x 128 on
    # 132 SMs, 98.7% busy, against 3,584, 97.0%), so a little over half the time, never under.
    assert split.compute_s == pytest.approx(base.compute_s / 2, rel=0.02)
    assert split.compute_s >= base.compute_s / 2


@pytest.mark.parametrize(("model", "kw", "field", "words"), [
    ("deepseek-v3", {"nodes": 1, "pp": 16, "ep": 8}, "gpus", "TP x PP x CP"),  # 8 % 16
    ("deepseek-v3", {"nodes": 16, "pp": 16, "ep": 64}, "gpus", "EP x expert-TP x PP"),
    ("glm-4.7", {"nodes": 16, "ep": 64}, "ep", "160 experts"),
    ("mixtral-8x7b", {"nodes": 2, "tp": 16, "ep": 1}, "tp", "KV heads"),
])
def test_inconsistent_degrees_name_the_rule(model, kw, field, words):
    with pytest.raises(LabInputError) as err:
        moe(model, **kw)
    assert err.value.field == field
    assert words in err.value.message


def test_dense_model_is_refused():
    with pytest.raises(LabInputError) as err:
        MoEInput(model=get_model("llama-3.1-8b"), cluster=H100)
    assert err.value.field == "model"


def test_balanced_dispatch_equals_the_comm_all_to_all():
    # Uniform routing: each GPU sends (N−1)/N of its T·k token copies, as hardware.comm prices it.
    r = moe("deepseek-v3", nodes=256, pp=16, ep=64, tokens=4096)
    m = r.input.model
    size = 4096 * m.top_k * m.hidden * 2
    expected = collective("all_to_all", size, 64, H100, per_node=8)
    assert r.routing.received_bytes == pytest.approx([expected.bytes_per_gpu] * 64)
    assert r.dispatch_s == pytest.approx(expected.seconds)
    # Two all-to-alls per layer's forward (dispatch and combine) plus the experts' compute.
    assert r.layer_s == pytest.approx(2 * expected.seconds + r.compute_s)
    assert r.max_over_mean == pytest.approx(1.0)


def test_inside_a_node_the_all_to_all_is_far_cheaper():
    inside = moe(ep=8, nodes=2)  # the 8 experts on one node's NVLink
    assert inside.ep_per_node == 8
    across = moe("deepseek-v3", nodes=256, pp=16, ep=64)
    per_byte = [r.dispatch_s / max(r.routing.received_bytes) for r in (inside, across)]
    assert per_byte[1] > 5 * per_byte[0]


def test_hot_expert_bottlenecks_a_balanced_layout():
    balanced, hot = moe(ep=8), moe(ep=8, skew=0.5)
    # Mixtral top-2 of 8: expert 0's chance goes from 2/8 to 2/8 + 0.5·6/8 = 5/8.
    assert hot.max_over_mean == pytest.approx(2.5)
    assert hot.slowest_gpu == 0
    # 2.5x the tokens, a little under 2.5x the time: the hot expert's longer GEMMs fill their
    # last wave better (labs.hardware.kernels).
    assert hot.compute_s == pytest.approx(2.5 * balanced.compute_s, rel=0.01)
    assert hot.compute_s < 2.5 * balanced.compute_s
    assert hot.layer_s > 2 * balanced.layer_s
    assert hot.slowdown == pytest.approx(hot.layer_s / balanced.layer_s)
    # The work is the same; only its spread changed.
    assert sum(hot.routing.tokens_per_gpu) == sum(balanced.routing.tokens_per_gpu)


def test_one_hot_expert_takes_every_token_once():
    chances = pick_chances(8, 2, 1.0)
    assert chances[0] == 1.0 and sum(chances) == pytest.approx(2.0)
    counts = whole_tokens(4096, chances)
    assert counts[0] == 4096 and sum(counts) == 8192


def test_whole_tokens_is_deterministic_and_exact():
    chances = pick_chances(256, 8, 0.37)
    first, again = whole_tokens(1000, chances), whole_tokens(1000, chances)
    assert first == again and sum(first) == 8000


def test_capacity_drops_the_overflow():
    # Switch Transformer: C = ceil(cf · T·k / E) per expert from each GPU.
    r = moe(ep=8, skew=0.5, capacity_factor=1.25, tokens=4096)
    cap_local = -(-1.25 * 4096 * 2 // 8)
    assert r.routing.capacity == 8 * cap_local
    assert max(r.routing.routed_per_expert) - r.routing.dropped_per_expert[0] == 8 * cap_local
    assert r.dropped_fraction == pytest.approx(
        sum(r.routing.dropped_per_expert) / sum(r.routing.routed_per_expert))
    # Expert 0 gets 5/8 of 4,096 tokens from each GPU and keeps 1,280: 1,280 of 8,192 copies.
    assert r.dropped_fraction == pytest.approx((0.625 * 4096 - cap_local) / 8192)
    # Balanced routing at factor 1 drops nothing.
    assert moe(ep=8, capacity_factor=1.0).dropped_fraction == 0


def test_rank_map_follows_megatron_order():
    r = moe(ep=8, nodes=2, tp=2)
    tp = group_colouring(r.layout, "tp", 8)
    assert tp.category[:4] == (0, 0, 1, 1)  # TP fastest: consecutive ranks
    dp = group_colouring(r.layout, "dp", 8)
    assert dp.members(0) == (0, 2, 4, 6, 8, 10, 12, 14)
    assert dp.nodes_spanned()[0] == 2
    ep = group_colouring(r.layout, "ep", 8)
    assert ep.members(0) == tuple(range(8))  # experts regroup the ranks: EP 8 in node 0
    assert r.layout.expert_dp == 2


@pytest.mark.parametrize("layout", [
    dict(tp=2, cp=2, dp=4, pp=2, ep=4), dict(tp=1, pp=16, dp=8, ep=8),
    dict(tp=4, dp=6, pp=3, ep=3, etp=2), dict(tp=8, cp=1, dp=2, pp=4, ep=16),
])
def test_group_of_rank_matches_layout_groups(layout):
    from labs.parallel.layout import ParallelLayout
    from labs.parallel.rank_map import group_of_rank

    lay = ParallelLayout(**layout)
    for kind in ("tp", "cp", "dp", "pp", "ep", "edp", "dp-cp"):
        ids = group_of_rank(lay, kind)
        rebuilt = [tuple(r for r, g in enumerate(ids) if g == i) for i in range(max(ids) + 1)]
        assert rebuilt == lay.groups(kind), kind


def _mixture_hit_by_enumeration(experts: int, k: int, hot: float, block: range) -> float:
    """P(a token reaches ``block``) enumerated over every pick set of the skewed router's two
    branches: expert 0 and k − 1 of the others (chance ``hot``), or k of the others."""
    others = range(1, experts)
    with_hot = list(combinations(others, k - 1))
    without = list(combinations(others, k))
    hit_with = sum(any(e in block for e in (0, *s)) for s in with_hot) / len(with_hot)
    hit_without = sum(any(e in block for e in s) for s in without) / len(without)
    return hot * hit_with + (1 - hot) * hit_without


@pytest.mark.parametrize("skew", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("lo,hi", [(0, 2), (2, 4), (4, 8), (0, 4)])
def test_block_hit_is_the_skewed_routers_chance_by_enumeration(skew, lo, hi):
    spec = get_model("mixtral-8x7b")  # 8 experts, top-2, no group limit
    hot = pick_chances(8, 2, skew)[0]
    assert block_hit(spec, hot, lo, hi) == pytest.approx(
        _mixture_hit_by_enumeration(8, 2, hot, range(lo, hi)))
    # The mixture keeps the router's marginals: each single expert's chance is its pick chance.
    for e in range(8):
        assert block_hit(spec, hot, e, e + 1) == pytest.approx(pick_chances(8, 2, skew)[e])


def test_deepep_in_ep07_is_ep08s_copies_under_uniform_routing():
    """Balanced routing: each GPU receives what labs.parallel.dispatch counts EP08 sending,
    network and NVLink copies of its 4,096 tokens (DeepSeek-V3's node-limited routing and
    Qwen3's plain top-8 alike), and the dispatch is EP08's dispatch_time."""
    for model, nodes, pp, ep in (("deepseek-v3", 256, 16, 64), ("qwen3-235b-a22b", 4, 1, 32)):
        r = moe(model, nodes=nodes, pp=pp, ep=ep, ep_dispatch="deepep")
        m = r.input.model
        c = copies(m, "deepep", ep, r.ep_per_node)
        token = m.hidden * 2
        assert r.routing.received_bytes == pytest.approx(
            [(c.network + c.nvlink) * 4096 * token] * ep)
        assert r.routing.sent_bytes == pytest.approx(r.routing.received_bytes)
        t = dispatch_time(m, "deepep", token, 4096, ep, r.ep_per_node, H100)
        assert r.dispatch_s == pytest.approx(t.seconds)
        assert r.dispatch_s < moe(model, nodes=nodes, pp=pp, ep=ep).dispatch_s / 2


def test_deepep_matches_the_all_to_all_when_every_gpu_holds_one_expert_in_a_node():
    # Mixtral EP 8 in a node: a token's copies per GPU are its copies per expert.
    a, d = moe(ep=8), moe(ep=8, ep_dispatch="deepep")
    assert d.routing.received_bytes == pytest.approx(a.routing.received_bytes)
    assert d.dispatch_s == pytest.approx(a.dispatch_s)


def test_a_hot_expert_under_deepep_loads_its_nodes_nics_and_nvlink_not_its_own_nic():
    """Every token picks expert 0 (skew 1): NCCL's all-to-all brings every remote copy in on
    GPU 0's own NIC; DeepEP brings each remote token in once on the NIC of the GPU with the
    sender's in-node index, and forwards it to GPU 0 on NVLink."""
    kw = dict(nodes=4, ep=32, skew=1.0)
    a, d = moe("qwen3-235b-a22b", **kw), moe("qwen3-235b-a22b", ep_dispatch="deepep", **kw)
    token = a.input.model.hidden * 2
    legs = deepep_traffic(d.input, 1.0, d.ep_per_node, [1.0] * 32)
    assert legs[0][0] == pytest.approx(3 * 4096)  # one copy from each other node's peer
    assert legs[0][1] == pytest.approx((32 - 4) * 4096)  # the rest forwarded on NVLink
    assert max(d.routing.received_bytes) == pytest.approx(sum(legs[0][:2]) * token)
    assert d.dispatch_s < a.dispatch_s / 4
    assert d.compute_s == pytest.approx(a.compute_s)  # the same experts compute the same tokens


def test_an_oversubscribed_spine_slows_the_all_to_all_not_the_ring():
    """Leaves of 4 nodes, 4:1 (labs.hardware.nccl, "The leaf and the spine"): an EP group over
    8 nodes sends 4/7 of its network bytes to the other leaf, so its network leg takes
    4/7 x 4 = 16/7 times as long; DP's rail-aligned ring crosses each leaf once and keeps
    its time until r passes the nodes per leaf."""
    from labs.hardware.links import with_network
    from labs.hardware.nccl import spine_alltoall, spine_ring

    v3 = get_model("deepseek-v3")
    h800 = get_cluster("hgx-h800")

    def run(leaf, r):
        return simulate_moe(MoEInput(model=v3, cluster=with_network(h800, leaf, r),
                                     nodes=256, pp=16, ep=64))

    flat, tor = run(None, 1.0), run(4, 4.0)
    assert spine_alltoall(with_network(h800, 4, 4.0), 8) == pytest.approx(16 / 7)
    assert spine_ring(with_network(h800, 4, 4.0), 16) == 1.0
    assert spine_ring(with_network(h800, 2, 7.0), 16) == 3.5
    ep = {g.kind: g for g in flat.network}, {g.kind: g for g in tor.network}
    # The network leg (above one send's latency) grows by 16/7; the bytes stay.
    lat = 8.4e-6 + 9.6e-6
    assert (ep[1]["ep"].seconds - lat) / (ep[0]["ep"].seconds - lat) == pytest.approx(
        16 / 7, rel=1e-6)
    assert ep[1]["ep"].bytes_per_gpu == ep[0]["ep"].bytes_per_gpu
    assert (ep[0]["ep"].tier, ep[1]["ep"].tier) == ("leaf", "spine")
    assert ep[1]["dp"].seconds == ep[0]["dp"].seconds and ep[1]["dp"].tier == "spine"
    # Past r = nodes per leaf the ring slows too; inside a leaf nothing changes at any r.
    assert run(2, 7.0).network[2].seconds > flat.network[2].seconds
    assert run(32, 8.0).layer_s == flat.layer_s


def test_strided_groups_cross_the_spine_from_every_node_at_once():
    """Round-3 cold reading of EP07, item 4: under leaves of 4 nodes at 4:1, PP's sends (node n
    to n + 16) and expert-DP's pairs (n and n + 8) leave the leaf from all 4 nodes at once, 4
    flows a rail through its one uplink: 4 times the network time, where the contiguous DP ring
    leaves once. Leaves of 32 at 4:1: PP's second stage of the leaf sends out, 16 flows a rail
    through 8 uplinks, twice. Gradients all-reduce in fp32 (Megatron's default for bf16)."""
    from labs.experts.lab import GRAD_BYTES
    from labs.hardware.links import with_network
    from labs.hardware.nccl import nccl_time
    from labs.parallel.rank_map import spine_flows

    v3 = get_model("deepseek-v3")
    h800 = get_cluster("hgx-h800")

    def run(leaf, r):
        return simulate_moe(MoEInput(model=v3, cluster=with_network(h800, leaf, r),
                                     nodes=256, pp=16, ep=64))

    flat, tor, rail = run(None, 1.0), run(4, 4.0), run(32, 4.0)
    net = [{g.kind: g for g in x.network} for x in (flat, tor, rail)]
    lay = tor.layout
    tor4 = with_network(h800, 4, 4.0)
    assert spine_flows(lay, "pp", tor4, ring=False) == 4
    assert spine_flows(lay, "edp", tor4, ring=True) == 4
    assert spine_flows(lay, "dp", tor4, ring=True) == 1
    assert spine_flows(lay, "pp", with_network(h800, 32, 4.0), ring=False) == 16
    p2p = nccl_time("p2p", net[0]["pp"].bytes_per_gpu, 16, h800, 1)
    assert net[1]["pp"].seconds == pytest.approx(p2p.latency + 4 * (p2p.seconds - p2p.latency))
    assert net[2]["pp"].seconds == pytest.approx(p2p.latency + 2 * (p2p.seconds - p2p.latency))
    assert 3.9 < net[1]["edp"].seconds / net[0]["edp"].seconds < 4.0  # latency stays
    assert net[1]["dp"].seconds == net[0]["dp"].seconds
    assert GRAD_BYTES == 4
    dense = net[0]["dp"].bytes_per_gpu / (2 * 127 / 128 * GRAD_BYTES)
    assert dense == pytest.approx(2.91e9, rel=0.01)


def test_network_controls_are_checked():
    from labs.hardware.links import with_network

    for leaf, r, name in ((0, 1.0, "leaf_nodes"), (4, 0.5, "oversubscription"),
                          (4, 9.0, "oversubscription")):
        with pytest.raises(LabInputError) as err:
            with_network(H100, leaf, r)
        assert err.value.field == name
