"""How many copies of a token each EP dispatch sends (labs.parallel.dispatch), checked against
a brute-force count of every routing, DeepSeek-V3's node limit and NCCL's all-to-all."""

import itertools
import math
from dataclasses import replace
from fractions import Fraction

import pytest

from labs.core.errors import LabInputError
from labs.hardware.links import get_cluster
from labs.hardware.nccl import nccl_time
from labs.model.presets import get_model
from labs.parallel.dispatch import block_missed, copies, dispatch_time

V3 = get_model("deepseek-v3")
QWEN = get_model("qwen3-235b-a22b")
DGX_H100 = get_cluster("dgx-h100")


def _brute_missed(experts, k, block, start, groups=0, limit=0):
    """P(a token's k experts all miss experts [start, start + block)), every routing
    enumerated: ``limit`` of ``groups`` groups at random, then k of their experts at random."""
    size = experts // groups if groups else experts
    choices = itertools.combinations(range(groups), limit) if groups else [(0,)]
    missed = total = Fraction(0)
    for chosen in choices:
        pool = [e for g in chosen for e in range(g * size, (g + 1) * size)]
        for pick in itertools.combinations(pool, k):
            total += 1
            missed += all(not start <= e < start + block for e in pick)
    return missed / total


@pytest.mark.parametrize("block", [1, 2, 4, 8])
def test_uniform_routing_misses_a_block_as_counted(block):
    assert block_missed(16, 3, block) == pytest.approx(float(_brute_missed(16, 3, block, 0)))


@pytest.mark.parametrize("block", [1, 2, 4, 8, 12])
def test_node_limited_routing_misses_a_block_as_counted(block):
    # 16 experts in 4 groups of 4, a token's 3 experts among its best 2 groups: blocks inside
    # a group, of one group, and of several (12 = three groups).
    got = block_missed(16, 3, block, groups=4, limit=2)
    assert got == pytest.approx(float(_brute_missed(16, 3, block, 0, 4, 2)))


def test_alltoall_sends_a_copy_per_expert_off_the_gpu():
    c = copies(QWEN, "alltoall", 32, 8)  # 4 nodes of 8
    assert c.network == pytest.approx(8 * 24 / 32)  # k x the experts on other nodes
    assert c.nvlink == pytest.approx(8 * 7 / 32)


def test_deepep_sends_a_copy_per_destination_node_under_deepseek_v3_routing():
    # DeepSeek-V3 (EP 64 over 8 nodes, 32 experts a node = one routing group; top-8 within
    # the best 4 groups): a token reaches at most 4 nodes (arXiv:2412.19437 sec 2.1.2).
    assert (V3.route_groups, V3.route_group_limit) == (8, 4)
    c = copies(V3, "deepep", 64, 8)
    node_missed = 0.5 + 0.5 * math.comb(96, 8) / math.comb(128, 8)
    assert c.network == pytest.approx(7 * (1 - node_missed))
    assert 3 < c.network < 4 < copies(V3, "alltoall", 64, 8).network == 7
    # Without the node limit, DeepEP would still send fewer than one copy per expert.
    free = replace(V3, route_groups=0, route_group_limit=0)
    assert c.network < copies(free, "deepep", 64, 8).network < 7


def test_deepep_inside_a_node_sends_once_per_destination_gpu():
    c = copies(QWEN, "deepep", 8, 8)  # 16 experts per GPU, top-8 of 128
    assert c.network == 0
    assert c.nvlink == pytest.approx(7 * (1 - math.comb(112, 8) / math.comb(128, 8)))


def test_dispatch_time_alltoall_is_nccls_and_deepep_is_faster_across_nodes():
    token = QWEN.hidden * 2
    nccl = nccl_time("all_to_all", QWEN.top_k * token * 2048, 32, DGX_H100, 8)
    a2a = dispatch_time(QWEN, "alltoall", token, 2048, 32, 8, DGX_H100)
    assert a2a.seconds == nccl.seconds
    deep = dispatch_time(QWEN, "deepep", token, 2048, 32, 8, DGX_H100)
    assert deep.bottleneck == DGX_H100.inter.id
    # IB-bound both: the time falls with the copies that cross the network.
    ratio = copies(QWEN, "deepep", 32, 8).network / copies(QWEN, "alltoall", 32, 8).network
    assert (deep.seconds - nccl.latency) == pytest.approx(ratio * (a2a.seconds - nccl.latency),
                                                          rel=1e-9)


def test_bad_dispatch_and_routing_are_refused():
    with pytest.raises(LabInputError, match="EP dispatch"):
        copies(QWEN, "nvshmem", 8, 8)
    with pytest.raises(LabInputError, match="routing groups"):
        replace(QWEN, route_groups=3, route_group_limit=1)  # 128 experts in 3 groups
    with pytest.raises(LabInputError, match="routing groups"):
        replace(QWEN, route_groups=64, route_group_limit=2)  # 4 experts cannot hold top-8
    with pytest.raises(LabInputError, match="needs route_groups"):
        replace(QWEN, route_group_limit=2)
