"""EP07's routings are computed once per what they depend on (issue 31): a state's own
routing, its balanced one and its balance curve's share one computation per skew, and the
crossover's eight expert widths share one routing, each width timing only its GEMMs. The
figures are the ones a routing of each computed afresh gives."""

from dataclasses import replace

import pytest

from app.routers.moe import MoEQuery
from app.routers.moe import run as run_query
from labs.experts import crossover, lab, layer
from labs.experts.crossover import POINT_WIDTHS, lab_points
from labs.experts.layer import _route
from labs.parallel.rank_map import group_of_rank, members_per_node

V3 = {"model": "deepseek-v3", "nodes": 256, "pp": 16, "link": "hgx-h800", "ep": 64}
STATES = {"mixtral": {}, "mixtral-skew": {"skew": 0.3, "capacity_factor": 1.25},
          "v3-deepep": {**V3, "ep_dispatch": "deepep", "skew": 0.45},
          "v3-etp": {**V3, "ep": 32, "etp": 2, "tokens": 1024}}


def per_node_of(inp):
    ids = group_of_rank(inp.layout, "ep")
    return members_per_node(tuple(g for g, i in enumerate(ids) if i == 0),
                            inp.cluster.gpus_per_node)


@pytest.mark.parametrize("name", STATES)
def test_the_crossover_points_are_each_widths_own_routing(name):
    """Each point (f, compute, dispatch + combine) is the layer routed afresh with its
    experts f wide: the width changes the GEMMs, never the all-to-alls."""
    result = run_query(MoEQuery(**STATES[name]))
    inp, per_node = result.input, per_node_of(result.input)
    want = []
    for f in POINT_WIDTHS:
        wide = replace(inp, skew=0.0, model=replace(inp.model, expert_ffn=f * inp.etp))
        r = _route(wide, 0.0, per_node)
        want.append((f, max(r.compute_s), 2 * max(r.dispatch_s)))
    assert lab_points(result) == tuple(want)


@pytest.mark.parametrize("name", STATES)
def test_a_state_and_its_balance_curve_are_its_own_routings(name):
    result = run_query(MoEQuery(**STATES[name]))
    inp, per_node = result.input, per_node_of(result.input)
    assert result.routing == _route(inp, inp.skew, per_node)
    assert result.balanced == _route(inp, 0.0, per_node)
    base = result.balanced.layer_s
    assert lab.balance_of(result) == tuple(
        (s, lab.balance_loss(r.routed_per_expert), r.layer_s / base)
        for s in lab.BALANCE_SKEWS for r in (_route(inp, s, per_node),))


def test_one_state_routes_each_skew_once(monkeypatch):
    """A fresh state on a skew of the curve's grid: its own routing and its balanced one,
    which its crossover's 8 widths share, routed twice (a control's answer draws no balance
    curve); its balance curve's 11 skews then add 9, its own two among them (22 in all when
    each asked its own); its colouring moved, none again."""
    for cached in (layer._route_kept, lab.balance_curve, crossover._points):
        cached.cache_clear()
    calls = []

    def counted(inp, skew, per_node):
        calls.append(skew)
        return _route(inp, skew, per_node)

    monkeypatch.setattr(layer, "_route", counted)
    state = {"tokens": 3072, "skew": 0.3}  # a state no other test asks
    result = run_query(MoEQuery(**state))
    lab_points(result)
    assert sorted(calls) == [0.0, 0.3]
    lab.balance_of(result)
    assert sorted(calls) == sorted(lab.BALANCE_SKEWS)
    again = run_query(MoEQuery(**state, group="tp"))
    lab_points(again)
    lab.balance_of(again)
    assert len(calls) == len(lab.BALANCE_SKEWS)
