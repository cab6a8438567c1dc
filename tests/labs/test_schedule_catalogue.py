"""The schedule catalogue: every record agrees with the schedule its generator builds, and every
reader (simulator, ledger, exports, planner, option list) takes what it needs from it."""

import itertools

import pytest

from labs.core.errors import LabInputError
from labs.model.presets import get_model
from labs.recipe.export import export
from labs.recipe.inputs import Plan
from labs.recipe.lab import pipeline_slack
from labs.recipe.plan_space import PLAN_SCHEDULES
from labs.schedules.catalogue import CATALOGUE, INTERLEAVED, SCHEDULES, SPLIT_BACKWARD, V_SHAPE
from labs.schedules.inflight import in_flight
from labs.schedules.inputs import PipelineInput, check_shape
from labs.schedules.simulate import generate, simulate

SHAPES = list(itertools.product((1, 2, 3, 4, 8), (1, 2, 4, 8, 16), (1, 2, 4)))


def legal(schedule: str):
    """The (p, m, v) of SHAPES the schedule accepts, as PipelineInputs."""
    for p, m, v in SHAPES:
        try:
            yield PipelineInput(schedule=schedule, stages=p, microbatches=m, virtual=v)
        except LabInputError:
            continue


def test_ids_names_and_families_come_from_the_records():
    assert list(SCHEDULES) == list(CATALOGUE)
    assert all(CATALOGUE[k].id == k and SCHEDULES[k] == CATALOGUE[k].name for k in CATALOGUE)
    assert INTERLEAVED == ("interleaved-1f1b", "looped-bfs", "interleaved-zb")
    assert V_SHAPE == ("zb-v", "dualpipe-v")
    assert set(SPLIT_BACKWARD) == {"zb-h1", "interleaved-zb", "zb-v", "dualpipe-v"}
    for record in CATALOGUE.values():  # an interleaved schedule names its one-chunk self
        assert (record.plain in CATALOGUE) == record.interleaved
        assert not CATALOGUE.get(record.plain, record).interleaved


@pytest.mark.parametrize("schedule", tuple(CATALOGUE))
def test_each_record_describes_what_its_generator_builds(schedule):
    record = CATALOGUE[schedule]
    cases = list(legal(schedule))
    assert cases
    for inp in cases:
        p, chunks = inp.stages, record.chunks(inp.virtual)
        plan = generate(inp)
        assert inp.chunks == chunks
        kinds = set()
        for rank, acts in enumerate(plan):
            for a in acts:
                assert 0 <= a.chunk < chunks
                assert a.stage == record.piece(p, rank, a.chunk)  # where the record places it
                kinds.add(a.kind)
        assert ("I" in kinds) == record.split_backward
        # Every piece lives on exactly one rank; every micro-batch runs forward once on each.
        owners = {record.piece(p, r, j) for r in range(p) for j in range(chunks)}
        assert owners == set(range(p * chunks))
        forwards = [(a.microbatch, a.stage) for acts in plan for a in acts if a.kind == "F"]
        assert sorted(forwards) == sorted(itertools.product(range(inp.microbatches),
                                                            range(p * chunks)))
        result = simulate(inp)
        assert result.textbook_bubble == record.textbook_bubble(p, inp.microbatches,
                                                                inp.virtual)


@pytest.mark.parametrize("schedule", tuple(CATALOGUE))
def test_closed_form_in_flight_equals_the_measured_peak(schedule):
    """A record's closed form is what the simulator measures (for the schedules in rounds,
    where the micro-batches fill whole rounds of p, Megatron's case); a record without one is
    measured, so it cannot differ."""
    record = CATALOGUE[schedule]
    for inp in legal(schedule):
        p, m, v = inp.stages, inp.microbatches, inp.virtual
        if record.rounds and m % p:
            continue
        peaks = simulate(inp).peak_activations
        for r in range(p):
            assert in_flight(schedule, p, m, r, v) == pytest.approx(peaks[r] / inp.chunks)


@pytest.mark.parametrize("schedule", [k for k, s in CATALOGUE.items() if s.flush])
def test_closed_form_timeline_equals_the_simulated_one(schedule):
    """The recipe's closed form (bubble, slack per rank) is the simulated timeline at its costs."""
    flush = CATALOGUE[schedule].flush
    for inp in legal(schedule):
        p, m, v = inp.stages, inp.microbatches, inp.virtual
        closed = flush(p, m, v)
        if closed is None or p == 1:
            continue
        result = simulate(PipelineInput(schedule=schedule, stages=p, microbatches=m,
                                        virtual=v, f=1, b=1, w=1))
        assert closed[0] == pytest.approx(result.bubble_fraction, abs=1e-12)
        span = result.makespan
        for r, (head, tail) in enumerate(closed[1]):
            mine = [e for e in result.events if e.rank == r]
            assert head == pytest.approx(min(e.start for e in mine if e.kind == "F") / span)
            assert tail == pytest.approx(1 - max(e.end for e in mine) / span)


@pytest.mark.parametrize("schedule", tuple(CATALOGUE))
def test_every_schedule_exports_and_the_pipeline_rules_name_it(schedule):
    record = CATALOGUE[schedule]
    model = get_model("llama-3.1-8b")
    plan = Plan(tp=1, pp=4, dp=2, schedule=schedule, virtual=2, microbatches=8)
    fsdp = export(plan, model, "fsdp")
    assert f"from torch.distributed.pipelining import PipelineStage, {record.torch_class}\n" \
        in fsdp.text
    assert (record.torch_note in fsdp.notes) == bool(record.torch_note)
    megatron = export(plan, model, "megatron")
    assert ("--num-layers-per-virtual-pipeline-stage" in megatron.text) == (
        record.megatron == "interleaved")
    assert any("falls back to 1F1B" in n for n in megatron.notes) == (not record.megatron)
    assert len(pipeline_slack(schedule, 4, 8, 2)) == 4
    for p, m, v in ((4, 8, 1), (4, 8, 3), (4, 3, 2), (4, 7, 2)):
        try:
            check_shape(schedule, p, m, v)
        except LabInputError as exc:
            assert exc.message.startswith(record.name), exc.message


def test_the_planner_searches_the_schedules_megatron_runs():
    assert {k for k, _ in PLAN_SCHEDULES} == {k for k, s in CATALOGUE.items() if s.megatron}
    assert PLAN_SCHEDULES[0] == ("1f1b", 1)
