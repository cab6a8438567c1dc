"""EP05 pipeline schedules: figures measured off the simulated timeline, never the formula."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labs.core.errors import LabInputError
from labs.core.limits import MAX_VIRTUAL
from labs.schedules.catalogue import SCHEDULES
from labs.schedules.generators import Action
from labs.schedules.inputs import Event, PipelineInput, PipelineResult
from labs.schedules.simulate import generate, simulate

TOL = 1e-9  # the measured figures are exact up to float rounding
NON_INTERLEAVED = ("gpipe", "1f1b")


def run(schedule="1f1b", **kwargs):
    return simulate(PipelineInput(schedule=schedule, **kwargs))


def idle_per_rank(result):
    return result.bubble_fraction * result.makespan


# ----- textbook seed figures (CURRICULUM EP05), f = b = w = 1 so every stage is equal ---------
@pytest.mark.parametrize("schedule", NON_INTERLEAVED)
@pytest.mark.parametrize(
    ("stages", "microbatches", "figure", "tol"),
    [
        (8, 1, 0.875, 1e-9),  # the bad case: 87.5% idle
        (8, 32, 0.179, 0.0005),  # the good case: 7/39 = 17.9%
        (4, 8, 0.273, 0.0005),  # 3/11 = 27.3%
    ],
)
def test_textbook_bubble_is_measured(schedule, stages, microbatches, figure, tol):
    result = run(schedule, stages=stages, microbatches=microbatches)
    assert result.bubble_fraction == pytest.approx(figure, abs=tol)
    exact = (stages - 1) / (microbatches + stages - 1)
    assert result.bubble_fraction == pytest.approx(exact, abs=TOL)
    assert result.textbook_bubble == pytest.approx(exact, abs=TOL)


@pytest.mark.parametrize("schedule", NON_INTERLEAVED)
def test_forward_pipeline_takes_m_plus_p_minus_1_steps(schedule):
    # (m+p-1) steps of F + B = 1 + 2 each; utilization m/(m+p-1).
    result = run(schedule, stages=8, microbatches=32)
    assert result.makespan == pytest.approx((32 + 8 - 1) * 3, abs=TOL)
    assert result.busy == pytest.approx((32 * 3,) * 8, abs=TOL)


@pytest.mark.parametrize("schedule", NON_INTERLEAVED)
@pytest.mark.parametrize(("f", "b", "w"), [(1.0, 2.0, 0.0), (0.5, 1.5, 1.0), (3.0, 1.0, 0.25)])
def test_textbook_bubble_holds_for_any_equal_stage_costs(schedule, f, b, w):
    result = run(schedule, stages=6, microbatches=10, f=f, b=b, w=w)
    assert result.bubble_fraction == pytest.approx(5 / 15, abs=TOL)


@pytest.mark.parametrize(
    ("stages", "virtual", "microbatches"),
    [(2, 2, 4), (4, 2, 8), (4, 3, 12), (4, 4, 16), (8, 2, 32), (8, 4, 8), (3, 5, 6), (6, 8, 12)],
)
def test_interleaved_bubble_is_divided_by_v(stages, virtual, microbatches):
    result = run("interleaved-1f1b", stages=stages, microbatches=microbatches, virtual=virtual)
    exact = (stages - 1) / (virtual * microbatches + stages - 1)
    assert result.bubble_fraction == pytest.approx(exact, abs=TOL)
    assert result.textbook_bubble == pytest.approx(exact, abs=TOL)
    plain = run("1f1b", stages=stages, microbatches=microbatches)
    assert idle_per_rank(result) == pytest.approx(idle_per_rank(plain) / virtual, abs=TOL)


def test_interleaved_bubble_with_unequal_costs():
    result = run("interleaved-1f1b", stages=4, microbatches=8, virtual=2, f=1.0, b=2.0, w=0.5)
    assert result.bubble_fraction == pytest.approx(3 / (2 * 8 + 3), abs=TOL)


@pytest.mark.parametrize(("stages", "microbatches"), [(2, 2), (4, 8), (8, 8), (8, 32), (5, 17)])
def test_zb_h1_bubble_is_a_third_of_1f1b(stages, microbatches):
    # With F = I = W and m >= p: idle (p-1) per rank instead of 3(p-1), i.e. (p-1)/(3m+p-1).
    zb = run("zb-h1", stages=stages, microbatches=microbatches)
    plain = run("1f1b", stages=stages, microbatches=microbatches)
    exact = (stages - 1) / (3 * microbatches + stages - 1)
    assert zb.bubble_fraction == pytest.approx(exact, abs=TOL)
    assert idle_per_rank(zb) == pytest.approx(idle_per_rank(plain) / 3, abs=TOL)


def test_zb_h1_seed_figure_8_by_32():
    assert run("zb-h1", stages=8, microbatches=32).bubble_fraction == pytest.approx(
        7 / 103, abs=TOL
    )


@pytest.mark.parametrize(("stages", "microbatches"), [(1, 2), (2, 4), (4, 8), (8, 32), (6, 19)])
def test_dualpipe_v_bubble_measured(stages, microbatches):
    # Measured off the timeline (not a formula in the code): with F = I = W each rank idles
    # (p-1) half-stage forwards, half of ZB-H1's idle time, i.e. (p-1)/(6m+p-1).
    v = run("dualpipe-v", stages=stages, microbatches=microbatches, virtual=2)
    zb = run("zb-h1", stages=stages, microbatches=microbatches)
    exact = (stages - 1) / (6 * microbatches + stages - 1)
    assert v.bubble_fraction == pytest.approx(exact, abs=TOL)
    assert idle_per_rank(v) == pytest.approx(idle_per_rank(zb) / 2, abs=TOL)


def test_p2p_latency_adds_idle_time():
    fast = run("1f1b", stages=4, microbatches=8)
    slow = run("1f1b", stages=4, microbatches=8, p2p=0.5)
    assert slow.makespan > fast.makespan
    assert slow.bubble_fraction > fast.bubble_fraction
    assert slow.busy == fast.busy


# ----- activations held, measured from the timeline ------------------------------------------
@pytest.mark.parametrize(("stages", "microbatches"), [(4, 8), (8, 32), (8, 3), (1, 5)])
def test_peak_activations_1f1b_and_gpipe(stages, microbatches):
    one = run("1f1b", stages=stages, microbatches=microbatches)
    assert one.peak_activations == tuple(min(stages - r, microbatches) for r in range(stages))
    gp = run("gpipe", stages=stages, microbatches=microbatches)
    assert gp.peak_activations == (microbatches,) * stages


@pytest.mark.parametrize(("stages", "microbatches"), [(4, 8), (8, 32), (8, 3), (1, 5)])
def test_peak_activations_zb_h1_matches_1f1b_memory_limit(stages, microbatches):
    # ZB-H1 keeps 1F1B's peak: the first stage's min(p, m). Activations are held until W, so
    # the later stages, which defer W's, also reach that peak (1F1B's rank r holds p-r).
    zb = run("zb-h1", stages=stages, microbatches=microbatches)
    one = run("1f1b", stages=stages, microbatches=microbatches)
    assert max(zb.peak_activations) == max(one.peak_activations) == min(stages, microbatches)
    assert zb.peak_activations[0] == one.peak_activations[0]
    assert zb.peak_activations == (min(stages, microbatches),) * stages


def test_peak_activations_dualpipe_v():
    # Measured: 2p+1 half-stage chunks on every rank (p + 1/2 stages' worth).
    result = run("dualpipe-v", stages=8, microbatches=32)
    assert result.peak_activations == (17,) * 8


def test_activation_timeline_is_consistent():
    for schedule in SCHEDULES:
        result = run(schedule, stages=4, microbatches=8, virtual=2)
        for rank, steps in enumerate(result.activation_timeline):
            times = [t for t, _ in steps]
            assert times == sorted(times)
            assert len(set(times)) == len(times)
            assert steps[0][0] == 0.0
            assert steps[-1][1] == 0  # everything released by the end
            assert all(held >= 0 for _, held in steps)
            assert max(held for _, held in steps) == result.peak_activations[rank]


# ----- structure of the result ---------------------------------------------------------------
def test_result_types_and_event_order():
    result = run("zb-h1", stages=3, microbatches=4)
    assert isinstance(result, PipelineResult)
    assert result.input == PipelineInput(schedule="zb-h1", stages=3, microbatches=4)
    assert all(isinstance(e, Event) for e in result.events)
    keys = [(e.rank, e.start) for e in result.events]
    assert keys == sorted(keys)
    assert {e.kind for e in result.events} == {"F", "I", "W"}
    assert len(result.busy) == len(result.peak_activations) == 3
    assert len(result.activation_timeline) == 3
    assert result.makespan == max(e.end for e in result.events)
    first = result.events[0]
    assert first == Event(**first._asdict())
    assert hash(first) == hash(Event(**first._asdict()))
    with pytest.raises(AttributeError):  # immutable
        first.start = 1.0  # type: ignore[misc]


def test_generate_matches_simulated_order():
    inp = PipelineInput(schedule="dualpipe-v", stages=3, microbatches=7, virtual=2)
    plan = generate(inp)
    assert all(isinstance(a, Action) for acts in plan for a in acts)
    events = simulate(inp).events
    for rank, acts in enumerate(plan):
        ran = [(e.kind, e.microbatch, e.chunk) for e in events if e.rank == rank]
        assert ran == [(a.kind, a.microbatch, a.chunk) for a in acts]
        assert {a.stage for a in acts} == {rank, 2 * 3 - 1 - rank}


def test_an_order_that_cannot_progress_is_reported():
    from labs.schedules.timeline import ScheduleDeadlock, place

    inp = PipelineInput(schedule="1f1b", stages=2, microbatches=1)
    broken = [[("B", 0, 0, 0), ("F", 0, 0, 0)], [("F", 0, 0, 1), ("B", 0, 0, 1)]]
    with pytest.raises(ScheduleDeadlock, match="never progress"):
        place(inp, broken, [0, 1])


# ----- property test: every schedule is a valid timeline ------------------------------------
def owner_of(schedule, p, rank, chunk):
    """Piece (virtual stage) of ``chunk`` on ``rank``, written independently of the code."""
    if schedule in ("dualpipe-v", "zb-v"):
        return rank if chunk == 0 else 2 * p - 1 - rank
    return chunk * p + rank  # interleaved: piece k on rank k % p; otherwise chunk is 0


@st.composite
def pipelines(draw):
    schedule = draw(st.sampled_from(list(SCHEDULES)))
    p = draw(st.integers(1, 6))
    if schedule in ("interleaved-1f1b", "interleaved-zb"):
        virtual = draw(st.integers(2, 4))
        # whole rounds (PyTorch): m = rounds x size, rounds = max(1, m // p)
        m = draw(st.integers(1, 4 * p).filter(lambda n: n % max(1, n // p) == 0))
    elif schedule == "looped-bfs":
        virtual = draw(st.integers(2, 4))
        m = draw(st.integers(1, 12))
    elif schedule == "dualpipe-v":
        virtual = draw(st.sampled_from((1, 2)))
        m = draw(st.integers(2 * p, 2 * p + 6))
    else:
        virtual = draw(st.integers(1, 3) if schedule != "zb-v" else st.sampled_from((1, 2)))
        m = draw(st.integers(1, 12))
    cost = st.integers(1, 40).map(lambda x: x / 8)
    if draw(st.booleans()):  # the send time typed in (p2p), or none at all
        send = {"p2p": draw(st.one_of(st.none(), st.integers(0, 10).map(lambda x: x / 10)))}
    else:  # or from a link: 1 MB over 10-100 GB/s plus a latency, f = 1 ms
        send = {
            "boundary_bytes": 1e6,
            "link_bandwidth": draw(st.integers(1, 10)) * 1e10,
            "link_latency": draw(st.integers(0, 50)) * 1e-6,
            "forward_seconds": 1e-3,
        }
    return PipelineInput(
        schedule=schedule,
        stages=p,
        microbatches=m,
        virtual=virtual,
        f=draw(cost),
        b=draw(cost),
        w=draw(st.one_of(st.just(0.0), cost)),
        **send,
    )


@settings(max_examples=100, deadline=None)
@given(pipelines())
def test_every_schedule_is_a_valid_timeline(inp):
    result = simulate(inp)
    p, m, c = inp.stages, inp.microbatches, inp.chunks
    pieces = p * c
    eps = 1e-9
    by_key = {}
    for e in result.events:
        k = owner_of(inp.schedule, p, e.rank, e.chunk)
        assert 0 <= k < pieces and 0 <= e.microbatch < m
        assert (e.kind, e.microbatch, k) not in by_key  # nothing runs twice
        by_key[e.kind, e.microbatch, k] = e
        assert e.end >= e.start >= 0

    # every (micro-batch, piece) runs forward once and backward once: B, or I and W
    split = inp.schedule in ("zb-h1", "interleaved-zb", "zb-v", "dualpipe-v")
    for mb in range(m):
        for k in range(pieces):
            assert ("F", mb, k) in by_key
            has_b = ("B", mb, k) in by_key
            has_iw = ("I", mb, k) in by_key and ("W", mb, k) in by_key
            assert has_b != has_iw
            assert split or has_b
            assert ("I", mb, k) in by_key or ("W", mb, k) not in by_key
    counts = Counter(e.kind for e in result.events)
    assert counts["F"] == counts["B"] + counts["I"] == m * pieces

    # no dependency is broken (+ p2p when it crosses ranks)
    def after(e, dep):
        hop = inp.send_time if dep.rank != e.rank else 0.0
        assert e.start >= dep.end + hop - eps, (e, dep)

    def backward(mb, k):
        return by_key.get(("B", mb, k)) or by_key[("I", mb, k)]

    for (kind, mb, k), e in by_key.items():
        if kind == "F" and k > 0:
            after(e, by_key["F", mb, k - 1])
        elif kind in "BI":
            after(e, by_key["F", mb, k] if k == pieces - 1 else backward(mb, k + 1))
            after(e, by_key["F", mb, k])
        elif kind == "W":
            after(e, by_key["I", mb, k])
            assert e.rank == by_key["I", mb, k].rank

    # a rank never runs two things at once
    for r in range(p):
        mine = [e for e in result.events if e.rank == r]
        assert all(a.end <= b.start + eps for a, b in zip(mine, mine[1:], strict=False))

    # makespan >= critical path of one micro-batch and >= the busiest rank
    ranks = {}
    for r in range(p):
        for j in range(c):
            ranks[owner_of(inp.schedule, p, r, j)] = r
    hops = sum(ranks[k] != ranks[k + 1] for k in range(pieces - 1))
    backward_cost = inp.b if split else inp.b + inp.w
    chain = inp.f + backward_cost + 2 * hops * inp.send_time  # pieces add up to a stage x c
    assert result.makespan >= chain - eps
    assert result.makespan >= max(result.busy) - eps
    assert result.busy == pytest.approx([m * (inp.f + inp.b + inp.w)] * p)
    assert 0.0 <= result.bubble_fraction < 1.0
    assert result.bubble_fraction == pytest.approx(
        1 - sum(result.busy) / (p * result.makespan), abs=1e-9
    )


# ----- bad inputs name their field -------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"schedule": "pipedream"}, "schedule"),
        ({"schedule": ""}, "schedule"),
        ({"stages": 0}, "stages"),
        ({"stages": 65}, "stages"),
        ({"stages": 2.5}, "stages"),
        ({"stages": True}, "stages"),
        ({"microbatches": 0}, "microbatches"),
        ({"microbatches": 1025}, "microbatches"),
        ({"virtual": 0}, "virtual"),
        ({"virtual": MAX_VIRTUAL + 1}, "virtual"),
        ({"schedule": "interleaved-1f1b", "virtual": 1}, "virtual"),
        (
            {"schedule": "interleaved-1f1b", "virtual": 2, "stages": 4, "microbatches": 11},
            "microbatches",
        ),
        (
            {"schedule": "interleaved-zb", "virtual": 2, "stages": 3, "microbatches": 7},
            "microbatches",
        ),
        ({"schedule": "interleaved-zb", "virtual": 1}, "virtual"),
        ({"schedule": "looped-bfs", "virtual": 1}, "virtual"),
        ({"schedule": "zb-v", "virtual": 3}, "virtual"),
        (
            {"schedule": "interleaved-zb", "stages": 32, "microbatches": 256, "virtual": 4},
            "microbatches",
        ),
        ({"schedule": "dualpipe-v", "virtual": 3, "stages": 2, "microbatches": 8}, "virtual"),
        ({"schedule": "dualpipe-v", "virtual": 2, "stages": 4, "microbatches": 7}, "microbatches"),
        ({"stages": 64, "microbatches": 1024}, "microbatches"),
        (
            {"schedule": "interleaved-1f1b", "stages": 32, "microbatches": 256, "virtual": 8},
            "microbatches",
        ),
        ({"f": 0}, "f"),
        ({"f": -1.0}, "f"),
        ({"f": 1000.5}, "f"),
        ({"f": float("nan")}, "f"),
        ({"b": 0.0}, "b"),
        ({"b": float("inf")}, "b"),
        ({"w": -0.1}, "w"),
        ({"w": "1"}, "w"),
        ({"p2p": -0.5}, "p2p"),
        ({"p2p": 1001}, "p2p"),
    ],
)
def test_bad_inputs_name_their_field(kwargs, field):
    with pytest.raises(LabInputError) as info:
        PipelineInput(**kwargs)
    assert info.value.field == field
    assert len(info.value.message) > 20


def test_error_messages_say_what_would_be_accepted():
    with pytest.raises(LabInputError, match="2 rounds of equal size") as info:
        PipelineInput(schedule="interleaved-1f1b", stages=4, microbatches=11, virtual=2)
    assert "10 or 12 would" in info.value.message
    with pytest.raises(LabInputError, match="65,536"):
        PipelineInput(stages=64, microbatches=1024)
    with pytest.raises(LabInputError, match="x 3 actions"):  # split backward: F, I and W
        PipelineInput(schedule="zb-h1", stages=64, microbatches=512)
    with pytest.raises(LabInputError, match="at least 8"):
        PipelineInput(schedule="dualpipe-v", stages=4, microbatches=7, virtual=2)
    with pytest.raises(LabInputError, match="interleaved-1f1b, looped-bfs, zb-h1, interleaved-zb"):
        PipelineInput(schedule="zb-h2")


def test_limits_are_inclusive():
    assert PipelineInput(stages=64, microbatches=512).stages == 64  # 65,536 events
    assert PipelineInput(schedule="zb-h1", stages=64, microbatches=341).stages == 64
    big = PipelineInput(schedule="interleaved-1f1b", stages=32, microbatches=256, virtual=4)
    assert big.chunks == 4
    assert PipelineInput(schedule="zb-h1", w=0.0, p2p=0.0, f=1000.0).f == 1000.0
    assert PipelineInput(schedule="dualpipe-v", stages=2, microbatches=4, virtual=1).chunks == 2


def test_schedule_ids_are_stable():
    assert list(SCHEDULES) == [
        "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "interleaved-zb", "zb-v",
        "dualpipe-v",
    ]
    assert SCHEDULES["zb-h1"] == "ZB-H1" and SCHEDULES["zb-v"] == "ZB-V"


# ----- the two textbook forms of one bubble (issue 36, item 7) --------------------------------
@pytest.mark.parametrize(
    ("schedule", "virtual", "stages", "microbatches"),
    [(s, 1, p, m) for s in ("gpipe", "1f1b") for p, m in ((8, 1), (4, 8), (8, 32), (8, 16))]
    + [("interleaved-1f1b", v, p, m) for v in (2, 4) for p, m in ((4, 8), (8, 32), (8, 16))],
)
def test_the_papers_bubble_is_the_same_idle_time_over_the_ideal_time(schedule, virtual, stages,
                                                                     microbatches):
    """GPipe's (p-1)/(m+p-1) is idle over the step; Megatron-LM's (p-1)/m (interleaved:
    (p-1)/(v*m)) is the same idle time over the ideal time, the busy time. Both measured."""
    result = run(schedule, stages=stages, microbatches=microbatches, virtual=virtual)
    idle = result.bubble_fraction * stages * result.makespan
    assert result.idle_over_ideal == pytest.approx(idle / sum(result.busy), abs=TOL)
    v, m, p = virtual, microbatches, stages
    assert result.idle_over_ideal == pytest.approx((p - 1) / (v * m), abs=TOL)
    assert result.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1), abs=TOL)
