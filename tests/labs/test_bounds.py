"""Property tests for the engines' bounds (hypothesis): over every input the limits allow
(and a margin outside them), an engine either answers with finite, bounded figures or refuses
with a LabInputError naming a field; never another exception, never nan or a negative size."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labs.core.errors import LabInputError
from labs.core.limits import (
    INFER_RECIPES,
    MAX_DEGREE,
    MAX_MICRO_BATCH,
    MAX_MICROBATCHES,
    MAX_SEQ_LEN,
    MAX_STAGES,
    MAX_VIRTUAL,
    RECIPE_IDS,
    RECOMPUTE,
    TRAIN_RECIPES,
)
from labs.hardware.gpus import get_gpu, gpus
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.presets import custom_model, models
from labs.model.spec import ModelSpec
from labs.schedules.catalogue import CATALOGUE, SCHEDULES
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate as simulate_pipeline

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def degree(high: int):
    return st.one_of(st.sampled_from([1, 2, 4, 8, 16]), st.integers(-2, high + 2))


@st.composite
def pipeline_inputs(draw):
    """Nine in ten a schedule the lab runs (its chunks per stage, interleaved rounds of the
    stages, DualPipeV's two micro-batches a stage, positive forward and backward); one in
    ten anything in a margin around the limits."""
    if draw(st.integers(0, 9)) == 5:  # the margin (not 0: hypothesis tries the ends often)
        return dict(schedule=draw(st.sampled_from([*SCHEDULES, "nope"])),
                    stages=draw(st.integers(-1, 16)), microbatches=draw(st.integers(-1, 48)),
                    virtual=draw(st.integers(0, MAX_VIRTUAL + 1)),
                    f=draw(st.one_of(st.floats(-1, 50), st.just(math.nan))),
                    b=draw(st.floats(0, 50)), w=draw(st.floats(0, 50)),
                    p2p=draw(st.floats(0, 5)))
    schedule = draw(st.sampled_from(sorted(SCHEDULES)))
    kind = CATALOGUE[schedule]
    stages = draw(st.integers(1, 16))
    virtual = 2 if kind.v_shape else draw(st.integers(2, 8)) if kind.interleaved else 1
    rounds = stages if kind.rounds else 1
    microbatches = rounds * draw(st.integers(1, max(1, 48 // rounds)))
    if schedule == "dualpipe-v":  # both arms of the V filled: at least 2 per stage
        microbatches = draw(st.integers(2 * stages, 48))
    return dict(schedule=schedule, stages=stages, microbatches=microbatches, virtual=virtual,
                f=draw(st.floats(0.1, 50)), b=draw(st.floats(0.1, 50)), w=draw(st.floats(0, 50)),
                p2p=draw(st.floats(0, 5)))


TRIES: dict[str, list[bool]] = {"memory": [], "pipeline": []}  # per example: answered?


def most_reach_the_assertions(name: str, prop) -> None:
    """Run a property and check that most of its examples reached its assertions (the old
    uniform strategies got an answer for 3 of 450 memory inputs and 35 of 150 pipelines;
    these, 81-96% in runs here)."""
    TRIES[name].clear()
    prop()
    tries = TRIES[name]
    assert sum(tries) >= 0.7 * len(tries), f"{sum(tries)} of {len(tries)} answered"


def test_pipeline_answers_bounded_figures_or_refuses():
    most_reach_the_assertions("pipeline", pipeline_property)


@FAST
@given(args=pipeline_inputs())
def pipeline_property(args):
    stages, microbatches, virtual = args["stages"], args["microbatches"], args["virtual"]
    try:
        result = simulate_pipeline(PipelineInput(**args))
    except LabInputError as exc:
        assert exc.field and exc.message
        TRIES["pipeline"].append(False)
        return
    TRIES["pipeline"].append(True)
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


def divisors(n: int, high: int) -> list[int]:
    return [d for d in range(1, min(n, high) + 1) if n % d == 0]


@st.composite
def memory_inputs(draw):
    """Nine in ten a state the page accepts (a preset or custom model, a recipe of its mode,
    TP dividing the heads and KV heads, PP dividing the layers, ZeRO for training only); one
    in ten anything in a margin around the limits (answered in bounds or refused by field)."""
    gpu = get_gpu(draw(st.sampled_from(sorted(gpus()))))
    if draw(st.integers(0, 9)) == 5:  # the margin (not 0: hypothesis tries the ends often)
        return dict(
            model=draw(st.one_of(st.sampled_from(sorted(models())),
                                 st.floats(1e5, 2e14).map(lambda p: ("custom", p)))),
            gpu=gpu, mode=draw(st.sampled_from(["train", "infer", "x"])),
            recipe=draw(st.sampled_from([*RECIPE_IDS, "fp64"])),
            seq_len=draw(st.integers(0, MAX_SEQ_LEN + 1)),
            micro_batch=draw(st.integers(0, MAX_MICRO_BATCH + 1)),
            recompute=draw(st.sampled_from([*RECOMPUTE, "some"])), tp=draw(degree(MAX_DEGREE)),
            pp=draw(degree(64)), dp=draw(degree(1024)), zero=draw(st.integers(-1, 4)))
    spec = draw(st.one_of(st.sampled_from(sorted(models())).map(lambda m: models()[m]),
                          st.integers(10**9, 10**14).map(custom_model)))
    mode = draw(st.sampled_from(["train", "infer"]))
    heads = math.gcd(spec.heads, spec.kv_heads if mode == "train" and not spec.uses_mla
                     else spec.heads)
    return dict(
        model=spec, gpu=gpu, mode=mode,
        recipe=draw(st.sampled_from(TRAIN_RECIPES if mode == "train" else INFER_RECIPES)),
        seq_len=draw(st.one_of(st.sampled_from([512, 4096, 131072]),
                               st.integers(1, MAX_SEQ_LEN))),
        micro_batch=draw(st.integers(1, MAX_MICRO_BATCH)),
        # torchtitan's op-level checkpointing is modelled for dense layers only.
        recompute=draw(st.sampled_from([r for r in RECOMPUTE if r != "op" or not spec.is_moe])),
        tp=draw(st.sampled_from(divisors(heads, MAX_DEGREE))),
        pp=draw(st.sampled_from(divisors(spec.layers, 64))),
        dp=draw(st.sampled_from([1, 2, 4, 8, 64, 1024])),
        zero=draw(st.integers(0, 3)) if mode == "train" else 0)


@FAST
@given(args=memory_inputs())
def memory_property(args):
    try:
        model = args["model"]
        if not isinstance(model, ModelSpec):  # a preset's id, or a custom parameter count
            model = custom_model(model[1]) if isinstance(model, tuple) else models()[model]
        result = compute_memory(MemoryInput(**{**args, "model": model}))
    except LabInputError as exc:
        assert exc.field and exc.message
        TRIES["memory"].append(False)
        return
    TRIES["memory"].append(True)
    assert args["mode"] in ("train", "infer") and 1 <= args["micro_batch"] <= MAX_MICRO_BATCH
    assert math.isfinite(result.total_bytes) and result.total_bytes > 0
    assert math.isclose(math.fsum(result.breakdown.values()), result.total_bytes, rel_tol=1e-9)
    assert all(v >= 0 for v in result.breakdown.values())
    # Sharding only divides the model's state: one GPU never holds more than the recipe's
    # bytes per parameter times the parameters (16 B for mixed-precision Adam). A bound on
    # the total (1e18 B) stood here, never reached by the old draws; these reach 8.8e18 B of
    # honest activations (DeepSeek-R1, a million tokens, micro-batch 64, no recomputation).
    # (FP8 recipes add their scaling factors, 0.0009 B a parameter for delayed scaling,
    # which the recipe's round figure leaves out: 0.1% allowed.)
    state = sum(result.breakdown.get(k, 0.0) for k in
                ("weights", "gradients", "master_weights", "optimizer_moments"))
    assert 0 < state <= result.bytes_per_param * result.params * 1.001


def test_memory_answers_bounded_figures_or_refuses():
    most_reach_the_assertions("memory", memory_property)


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
