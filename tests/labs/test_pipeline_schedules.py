"""The schedules PyTorch's torch.distributed.pipelining has, in PyTorch's per-rank order.

The orders are checked action for action against tests/fixtures/torch_pipeline_orders.json
(made from PyTorch 2.13.0, see the README there); the figures are measured off the timeline.
"""

import json
import re
from pathlib import Path

import pytest

from labs.core.errors import LabInputError
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import generate, simulate

FIXTURE = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "torch_pipeline_orders.json").read_text()
)
CASES = FIXTURE["cases"]
ACTION = re.compile(r"^(\d+)([FBIW])(\d+)$")
TOL = 1e-9


def case_id(case):
    return f"{case['schedule']}-p{case['stages']}-m{case['microbatches']}-v{case['virtual']}"


def run(schedule, **kwargs):
    return simulate(PipelineInput(schedule=schedule, **kwargs))


def idle_per_rank(result):
    return result.bubble_fraction * result.makespan


def test_fixture_is_pytorch_2_13_and_covers_every_torch_schedule():
    assert FIXTURE["torch_version"].startswith("2.13.0")
    assert {c["schedule"] for c in CASES} == {
        "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "interleaved-zb", "zb-v",
        "dualpipe-v",
    }
    # m not a multiple of p is among the interleaved cases, with one round and with several
    uneven = {(c["stages"], c["microbatches"]) for c in CASES
              if c["schedule"] == "interleaved-1f1b" and c["microbatches"] % c["stages"]}
    assert {(4, 6), (4, 10), (4, 3), (6, 14)} <= uneven


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_order_is_pytorchs(case):
    inp = PipelineInput(schedule=case["schedule"], stages=case["stages"],
                        microbatches=case["microbatches"], virtual=case["virtual"])
    ours = [[f"{a.stage}{a.kind}{a.microbatch}" for a in acts] for acts in generate(inp)]
    assert len(ours) == len(case["ranks"])
    for rank, (mine, theirs) in enumerate(zip(ours, case["ranks"], strict=True)):
        assert all(ACTION.match(a) for a in theirs)
        assert mine == theirs, f"rank {rank}"


def megatron_interleaved(p, m, v):
    """Megatron-LM's interleaved order (m % p == 0), written from its description.

    Narayanan et al. 2021 sec. 2.2.2 / forward_backward_pipelining_with_interleaving: the
    k-th forward of a rank is micro-batch (k // (p*v))*p + k % p on chunk (k % (p*v)) // p;
    the k-th backward walks the same table with chunks reversed; warm-up
    (p-r-1)*2 + (v-1)*p forwards, then 1F1B, then the remaining backwards.
    """
    ranks = []
    for r in range(p):
        table = [((k // (p * v)) * p + k % p, (k % (p * v)) // p) for k in range(m * v)]
        fwd = [("F", mb, c) for mb, c in table]
        bwd = [("B", mb, v - 1 - c) for mb, c in table]
        warm = min((p - r - 1) * 2 + (v - 1) * p, m * v)
        acts = fwd[:warm]
        for i in range(m * v - warm):
            acts += [fwd[warm + i], bwd[i]]
        ranks.append(acts + bwd[m * v - warm:])
    return ranks


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (4, 16, 4), (3, 9, 3),
                                           (8, 16, 2), (4, 4, 2), (1, 3, 2)])
def test_interleaved_keeps_megatrons_order_when_m_is_a_multiple_of_p(p, m, v):
    plan = generate(PipelineInput(schedule="interleaved-1f1b", stages=p, microbatches=m,
                                  virtual=v))
    assert [[(a.kind, a.microbatch, a.chunk) for a in acts] for acts in plan] == (
        megatron_interleaved(p, m, v))


def test_interleaved_chunk_order_follows_megatron_groups():
    # p=2, v=2, m=4: forwards on rank 0 take mb 0,1 on chunk 0, then mb 0,1 on chunk 1, ...
    plan = generate(PipelineInput(schedule="interleaved-1f1b", stages=2, microbatches=4, virtual=2))
    fwd = [(a.microbatch, a.chunk) for a in plan[0] if a.kind == "F"]
    assert fwd == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]
    bwd = [(a.microbatch, a.chunk) for a in plan[0] if a.kind == "B"]
    assert bwd == [(0, 1), (1, 1), (0, 0), (1, 0), (2, 1), (3, 1), (2, 0), (3, 0)]
    warmup = 0
    for a in plan[0]:
        if a.kind == "B":
            break
        warmup += 1
    assert warmup == (2 - 0 - 1) * 2 + (2 - 1) * 2 + 1  # Megatron's warm-up, then 1F1B's F


# ----- interleaved with m not a multiple of p (PyTorch's rounds) ---------------------------------
@pytest.mark.parametrize(("p", "m", "v"), [(4, 6, 2), (4, 10, 2), (8, 12, 2), (6, 14, 3),
                                           (4, 5, 3), (3, 4, 2)])
def test_interleaved_bubble_when_m_is_not_a_multiple_of_p(p, m, v):
    # With m >= p the measured bubble is still the textbook (p-1)/(v*m+p-1).
    result = run("interleaved-1f1b", stages=p, microbatches=m, virtual=v)
    assert result.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1), abs=TOL)


@pytest.mark.parametrize("schedule", ["interleaved-1f1b", "interleaved-zb"])
@pytest.mark.parametrize(("p", "m", "accepted"), [(3, 7, "6 or 8"), (4, 11, "10 or 12"),
                                                  (4, 13, "12 or 15"), (8, 25, "24 or 27")])
def test_interleaved_needs_whole_rounds_as_pytorch_does(schedule, p, m, accepted):
    # PyTorch: rounds = max(1, m // p) must divide m (3 stages, 7 micro-batches: 2 rounds of
    # 3.5 do not exist); the message names the nearest counts that do split.
    with pytest.raises(LabInputError) as info:
        PipelineInput(schedule=schedule, stages=p, microbatches=m, virtual=2)
    assert info.value.field == "microbatches"
    assert f"{accepted} would" in info.value.message


@pytest.mark.parametrize("schedule", ["interleaved-1f1b", "interleaved-zb"])
def test_interleaved_accepts_the_micro_batch_counts_pytorch_accepts(schedule):
    for p, accepted in FIXTURE["interleaved_accepts"][schedule].items():
        ours = []
        for m in range(1, 49):
            try:
                PipelineInput(schedule=schedule, stages=int(p), microbatches=m, virtual=2)
            except LabInputError:
                continue
            ours.append(m)
        assert ours == accepted, f"p = {p}"


def test_interleaved_with_fewer_micro_batches_than_stages_idles_more():
    # m < p: one round of m; the chunk wraps before the first micro-batch comes back.
    result = run("interleaved-1f1b", stages=4, microbatches=3, virtual=2)
    assert result.bubble_fraction > 3 / (2 * 3 + 3) + 0.01


# ----- looped BFS ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("p", "m", "v"), [(4, 8, 2), (8, 32, 4), (4, 6, 3), (3, 3, 2)])
def test_looped_bfs_bubble_and_memory(p, m, v):
    # Breadth-first fills the pipe once per direction: same bubble as interleaved 1F1B for
    # m >= p, but like GPipe every rank holds all m*v micro-batch chunks at its peak.
    result = run("looped-bfs", stages=p, microbatches=m, virtual=v)
    assert result.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1), abs=TOL)
    assert result.textbook_bubble == pytest.approx((p - 1) / (v * m + p - 1), abs=TOL)
    assert result.peak_activations == (m * v,) * p


# ----- interleaved zero bubble (ZB1P) -------------------------------------------------------------
@pytest.mark.parametrize(("p", "m", "v"), [(4, 8, 2), (8, 32, 2), (4, 6, 2), (8, 12, 3),
                                           (4, 16, 4), (2, 2, 2)])
def test_interleaved_zero_bubble_is_a_third_of_interleaved_1f1b(p, m, v):
    # F = I = W: idle per rank is a third of interleaved 1F1B's (as ZB-H1 is of 1F1B's).
    zb = run("interleaved-zb", stages=p, microbatches=m, virtual=v)
    il = run("interleaved-1f1b", stages=p, microbatches=m, virtual=v)
    assert zb.bubble_fraction == pytest.approx((p - 1) / (3 * v * m + p - 1), abs=TOL)
    assert idle_per_rank(zb) == pytest.approx(idle_per_rank(il) / 3, abs=TOL)


def test_interleaved_zero_bubble_memory_stays_at_1f1bs():
    # Qi et al. 2024: ZB-1p keeps 1F1B's peak activation memory, p stages' worth on rank 0;
    # here in chunk units of 1/v stage: p*v, on every rank (W's come later than 1F1B's B's).
    result = run("interleaved-zb", stages=8, microbatches=32, virtual=2)
    assert result.peak_activations == (16,) * 8


# ----- ZB-V ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 32), (4, 9), (6, 13)])
def test_zb_v_bubble_matches_dualpipe_v_and_memory_matches_1f1b(p, m):
    # F = I = W and m >= 2p: only the start-up (p-1 half forwards per rank) is idle, as
    # with DualPipeV; the peak is 2p half-stage chunks = p stages, 1F1B's first stage
    # (Qi et al. 2024, sec. 6: ZB-V's memory equals 1F1B's).
    zb_v = run("zb-v", stages=p, microbatches=m, virtual=2)
    dual = run("dualpipe-v", stages=p, microbatches=m, virtual=2)
    assert zb_v.bubble_fraction == pytest.approx((p - 1) / (6 * m + p - 1), abs=TOL)
    assert zb_v.makespan == pytest.approx(dual.makespan, abs=TOL)
    assert max(zb_v.peak_activations) == 2 * p
    assert max(zb_v.peak_activations) < max(dual.peak_activations)


def test_zb_v_runs_with_few_micro_batches_as_pytorch_does():
    # PyTorch plans max(2p-1, m) micro-batches and drops the extra ones: m = 1 still works.
    result = run("zb-v", stages=4, microbatches=1, virtual=2)
    assert {e.microbatch for e in result.events} == {0}
    assert len(result.events) == 3 * 8  # F, I, W on each of the 8 pieces


def test_v_shapes_hold_two_chunks_per_rank():
    plan = generate(PipelineInput(schedule="zb-v", stages=3, microbatches=7))
    for rank, acts in enumerate(plan):
        assert {a.stage for a in acts} == {rank, 2 * 3 - 1 - rank}
