"""Property tests for the engines' bounds (hypothesis): over every input the limits allow
(and a margin outside them), an engine either answers with finite, bounded figures or refuses
with a LabInputError naming a field; never another exception, never nan or a negative size."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labs.core.errors import LabInputError
from labs.core.limits import (
    MAX_DEGREE,
    MAX_MICRO_BATCH,
    MAX_MICROBATCHES,
    MAX_SEQ_LEN,
    MAX_STAGES,
    MAX_VIRTUAL,
    RECIPE_IDS,
    RECOMPUTE,
)
from labs.hardware.gpus import get_gpu, gpus
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.presets import custom_model, models
from labs.schedules.catalogue import SCHEDULES
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate as simulate_pipeline

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def degree(high: int):
    return st.one_of(st.sampled_from([1, 2, 4, 8, 16]), st.integers(-2, high + 2))


@FAST
@given(schedule=st.sampled_from([*SCHEDULES, "nope"]),
       stages=st.integers(-1, 16), microbatches=st.integers(-1, 48),
       virtual=st.integers(0, MAX_VIRTUAL + 1),
       f=st.one_of(st.floats(-1, 50), st.just(math.nan)), b=st.floats(0, 50), w=st.floats(0, 50),
       p2p=st.floats(0, 5))
def test_pipeline_answers_bounded_figures_or_refuses(schedule, stages, microbatches, virtual,
                                                      f, b, w, p2p):
    try:
        inp = PipelineInput(schedule=schedule, stages=stages, microbatches=microbatches,
                            virtual=virtual, f=f, b=b, w=w, p2p=p2p)
        result = simulate_pipeline(inp)
    except LabInputError as exc:
        assert exc.field and exc.message
        return
    assert 1 <= stages <= MAX_STAGES and 1 <= microbatches <= MAX_MICROBATCHES
    assert math.isfinite(result.makespan) and result.makespan > 0
    assert 0.0 <= result.bubble_fraction <= 1.0
    assert 0.0 <= result.textbook_bubble < 1.0
    assert len(result.busy) == stages
    # No rank is busier than the whole run, and the idle share matches the busy times.
    assert all(0 <= busy <= result.makespan * (1 + 1e-9) for busy in result.busy)
    idle = 1 - math.fsum(result.busy) / (stages * result.makespan)
    assert math.isclose(result.bubble_fraction, min(max(idle, 0.0), 1.0), abs_tol=1e-9)
    assert all(0 <= peak <= microbatches * max(virtual, 2) for peak in result.peak_activations)


@FAST
@given(model=st.one_of(st.sampled_from(sorted(models())),
                       st.floats(1e5, 2e14).map(lambda p: ("custom", p))),
       gpu=st.sampled_from(sorted(gpus())), mode=st.sampled_from(["train", "infer", "x"]),
       recipe=st.sampled_from([*RECIPE_IDS, "fp64"]),
       seq_len=st.one_of(st.sampled_from([512, 4096, 131072]), st.integers(0, MAX_SEQ_LEN + 1)),
       micro_batch=st.integers(0, MAX_MICRO_BATCH + 1),
       recompute=st.sampled_from([*RECOMPUTE, "some"]),
       tp=degree(MAX_DEGREE), pp=degree(64), dp=degree(1024), zero=st.integers(-1, 4))
def test_memory_answers_bounded_figures_or_refuses(model, gpu, mode, recipe, seq_len,
                                                    micro_batch, recompute, tp, pp, dp, zero):
    try:
        spec = custom_model(model[1]) if isinstance(model, tuple) else models()[model]
        result = compute_memory(MemoryInput(
            model=spec, gpu=get_gpu(gpu), mode=mode, recipe=recipe, seq_len=seq_len,
            micro_batch=micro_batch, recompute=recompute, tp=tp, pp=pp, dp=dp, zero=zero))
    except LabInputError as exc:
        assert exc.field and exc.message
        return
    assert mode in ("train", "infer") and 1 <= micro_batch <= MAX_MICRO_BATCH
    assert math.isfinite(result.total_bytes) and result.total_bytes > 0
    # One GPU's bill can never exceed the whole model's state on one GPU times a sane factor
    # (bf16/fp32 copies, optimizer, activations): a runaway formula shows up here.
    assert result.total_bytes < 1e18


@FAST
@given(params=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(),
                        st.booleans()))
def test_custom_model_is_exact_or_refused(params):
    try:
        spec = custom_model(params)
    except LabInputError as exc:
        assert exc.field == "params"
        return
    assert spec.params == int(params)
    assert spec.layers % 4 == 0 and spec.hidden % 1024 == 0
