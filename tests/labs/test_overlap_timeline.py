"""EP08's overlap timeline (labs.recipe.overlap) is the step model's own charge, laid out: each
kind's exposed and lent-SM seconds, times the micro-batches (DP once a step under ZeRO-0/1/2),
equal the step bar's segments to 1e-9 relative, for every overlap setting."""

import pytest

from app.lesson_drills import MIXTRAL_64
from app.routers.recipe import SEED, RecipeQuery, run
from labs.recipe.overlap import check, timeline

MIXTRAL = {**MIXTRAL_64, "microbatches": 4}
STATES = [SEED, {**SEED, "tp_overlap": "none"}, {**SEED, "tp_overlap": "all"},
          {**SEED, "dp_overlap": False}, {**SEED, "zero": 3},
          {**SEED, "zero": 3, "kernels": "eager"},
          {**SEED, "cp": 2, "dp": 1}, MIXTRAL, {**MIXTRAL, "ep_overlap": True},
          {**MIXTRAL, "zero": 3}, {**MIXTRAL, "dp_overlap": False}]
TOLERANCE = 1e-9  # relative: one computation, summed in another order


def _line(params):
    result = run(RecipeQuery(**params)).result
    assert result.legal, result.problems
    return result, timeline(result)


@pytest.mark.parametrize("params", STATES)
def test_the_timeline_charges_what_the_step_bar_does(params):
    result, line = _line(params)
    assert max(check(result, line).values()) < TOLERANCE
    # The compute lane is the micro-batch's kernels and its exposed pieces, end to end.
    u = result.timing.micro
    lane = sum(e.seconds for e in line.events if e.lane == "compute")
    assert lane == pytest.approx(u.compute + sum(line.exposed.values()), rel=TOLERANCE)


def test_overlapping_the_all_to_all_leaves_only_the_sms_it_takes():
    _, off = _line(MIXTRAL)
    _, on = _line({**MIXTRAL, "ep_overlap": True})
    assert off.charged_sm_s == 0 and on.exposed["ep"] < off.exposed["ep"]
    # Mixtral's all-to-all hides whole behind the other micro-batch: 20 of 132 SMs remain.
    assert on.exposed["ep"] == pytest.approx(20 / 132 * off.exposed["ep"], rel=1e-9)
    assert on.charged_sm_s == pytest.approx(on.exposed["ep"], rel=1e-9)


def test_tp_overlap_moves_only_backward_waits_and_dp_overlap_only_the_end():
    def waits(line, phase, kind):
        return sum(e.seconds for e in line.events if e.lane == "compute" and e.phase == phase
                   and e.kind == kind and e.state != "compute")
    _, base = _line(MIXTRAL)
    _, none = _line({**MIXTRAL, "tp_overlap": "none"})
    assert waits(none, "forward", "tp") == pytest.approx(waits(base, "forward", "tp"))
    assert waits(none, "backward", "tp") > waits(base, "backward", "tp")
    _, off = _line({**MIXTRAL, "dp_overlap": False})
    assert waits(off, "after", "dp") > waits(base, "after", "dp")
    assert not [e for e in off.events if e.kind == "dp" and e.state == "hidden"
                and e.seconds > 1e-6]


def test_zero3_lends_sms_in_both_passes_and_is_charged_per_micro_batch():
    result, line = _line({**MIXTRAL, "zero": 3})
    lent = {e.phase for e in line.events if e.kind == "dp" and e.state == "sm"}
    assert lent == {"forward", "backward"}
    assert line.charged()["dp"] == pytest.approx(result.segments["dp"], rel=TOLERANCE)
    assert line.charged()["dp"] == pytest.approx(4 * line.exposed["dp"])


@pytest.mark.parametrize("overlap", [True, False])
def test_the_dp_groups_wait_at_once_with_overlap_and_in_turn_without(overlap):
    """fixA #1: with DP overlap Megatron runs the dense buffers' buckets and the experts' on
    their own communicators, so each way the step waits for the later group's tail (the
    step model's DP segment, the timeline's legs and lanes alike); without it each
    collective is issued synchronously and the groups wait in turn (their sum)."""
    result, line = _line({**MIXTRAL, "dp_overlap": overlap})
    dp = next(p for p in result.timing.parts if p.name == "dp")
    combine = max if overlap else sum
    ways = [[b.exposed for b in dp.buckets if (b.kind == "all_gather") == gather]
            for gather in (False, True)]
    assert all(len(w) == 2 for w in ways)  # the dense layers' and the experts'
    assert dp.exposed == pytest.approx(sum(combine(w) for w in ways), rel=TOLERANCE)
    assert result.segments["dp"] == pytest.approx(dp.exposed, rel=TOLERANCE)
    assert all(leg.concurrent == overlap for leg in line.sync)
    for gather in (False, True):
        kind = "all_gather" if gather else "reduce_scatter"
        lanes = [e for e in line.events if e.phase == "after" and e.lane != "compute"
                 and e.collective == kind]
        starts = {round(e.start, 12) for e in lanes}
        assert len(starts) == (1 if overlap else 2)
