"""The step model against torchtitan's published FSDP2 runs (a validation group: no constant is
fitted to them), and the software kernels option they need.

Source: pytorch/torchtitan docs/performance.md. The A100 rows (Llama 3 8B and 70B, Llama 2 13B
and 70B, FSDP2 on 64 A100 80GB, tokens/s per GPU as "WPS"); the H100 rows (Llama 3.1 8B, FSDP2
on 8 and 128 Grand Teton H100s, eager and torch.compile, Tables 1 and 3; with Float8, context
parallelism from 32K to 256K tokens, Table 2; Llama 3.1 70B with TP 8 and AsyncTP on 256, Table
4; Llama 3.1 405B with TP 8 x PP 8 on 512, 1F1B and interleaved, Table 5). Each run's model,
cluster, batch, AC mode and software are labs/presets/runs.json's ``validation_runs``.

Accuracy: each run is held to its published figure within a band this file names, and the
direction the lesson states (the lab errs fast: ratio = lab / published tokens/s > 1): the
A100 runs, each in its own AC mode (full, none, torchtitan's selective layer AC as the lab's
every-2nd, its selective op AC as the lab's op mode), within +16%; the H100 runs ran at 500 W
on HBM2e, which has no datasheet, and are timed on the lab's 700 W H100 SXM: fast by up to
35%, but for context parallelism at 128K and 256K tokens (up to +60%: the published throughput
drops more than the work per token grows, at 84 of 96 GiB). Today's exact ratios are a change
detector, apart: tests/labs/test_runs_snapshot.py.
"""

import pytest

from labs.core.errors import LabInputError
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_cluster
from labs.model.ops import EAGER_BYTES, KERNELS, ComputeOptions, layer_ops
from labs.model.presets import get_model
from labs.recipe.inputs import Plan
from labs.recipe.lab import evaluate
from labs.recipe.runs import VALIDATION as ALL_VALIDATION
from labs.recipe.runs import check

# This file's group; the MoE groups are tests/labs/test_moe_runs.py's.
VALIDATION = tuple(r for r in ALL_VALIDATION if r.group == "torchtitan-fsdp2")

# run id -> published tokens/s per GPU (docs/performance.md)
PUBLISHED = {
    "torchtitan-llama3-8b-a100-layer": 2876,
    "torchtitan-llama3-8b-a100-op": 2973,
    "torchtitan-llama3-70b-a100-full": 323,
    "torchtitan-llama2-13b-a100-none": 2162,
    "torchtitan-llama2-13b-a100-layer": 1914,
    "torchtitan-llama2-13b-a100-op": 1904,
    "torchtitan-llama2-70b-a100-op": 355,
    "torchtitan-llama2-70b-a100-full": 353,
    "torchtitan-llama31-8b-h100x8": 5762,
    "torchtitan-llama31-8b-h100x8-compile": 6667,
    "torchtitan-llama31-8b-h100x128": 5605,
    "torchtitan-llama31-8b-h100x128-compile": 6514,
    "torchtitan-llama31-8b-h100x8-cp1": 3890,
    "torchtitan-llama31-8b-h100x8-cp2": 2540,
    "torchtitan-llama31-8b-h100x8-cp4": 1071,
    "torchtitan-llama31-8b-h100x8-cp8": 548,
    "torchtitan-llama31-70b-h100x256": 829,
    "torchtitan-llama31-70b-h100x256-asynctp": 876,
    "torchtitan-llama31-405b-h100x512-1f1b": 100,
    "torchtitan-llama31-405b-h100x512-interleaved": 128,
}
LONG_CP = ("torchtitan-llama31-8b-h100x8-cp4", "torchtitan-llama31-8b-h100x8-cp8")


def band(run) -> tuple[float, str]:
    """The most the lab may be fast on this run (lab / published), and why."""
    if run.cluster.gpu.id == "a100-80gb":
        return 1.16, "A100 80GB, each run in its own AC mode: within +16%"
    if run.id in LONG_CP:
        return 1.60, "CP at 128K and 256K tokens: the published drop outgrows the work"
    return 1.35, "500 W H100 (HBM2e) timed as the 700 W H100 SXM: fast by up to 35%"


def test_validation_group_holds_torchtitans_figures_with_citations():
    assert [r.id for r in VALIDATION] == list(PUBLISHED)
    for run in VALIDATION:
        assert run.published_tokens_s == PUBLISHED[run.id]
        assert "torchtitan docs/performance.md" in run.source
        assert run.plan.zero == 3 and run.plan.kernels in ("eager", "compiled")
        assert run.group == "torchtitan-fsdp2"
        if run.cluster.gpu.id != "a100-80gb":
            # The 500 W H100s are said once, for the group (the validation page).
            assert "500 W" not in run.note


@pytest.mark.parametrize("run", VALIDATION, ids=[r.id for r in VALIDATION])
def test_each_torchtitan_run_is_within_its_band_and_fast(run):
    c = check(run)
    assert c.result.legal
    assert c.published_tokens == pytest.approx(PUBLISHED[run.id])
    assert c.ratio == pytest.approx(c.lab_tokens / PUBLISHED[run.id])
    high, why = band(run)
    # Fast, as on every calibration run, and by no more than the band.
    assert 1.0 < c.ratio <= high, f"lab/published {c.ratio:.3f} outside (1, {high}]: {why}"


def test_the_group_errs_fast_within_a_quarter_at_the_median():
    ratios = sorted(check(r).ratio for r in VALIDATION)
    median = (ratios[9] + ratios[10]) / 2
    assert len(ratios) == 20 and 1.0 < median <= 1.25
    # Only the two long-context CP runs lie past +35%.
    assert sum(r > 1.35 for r in ratios) == len(LONG_CP)


def test_torchtitans_pipeline_runs_gain_from_interleaving_what_the_bubble_says():
    """Table 5: 128 against 100 tokens/s per GPU, interleaved against 1F1B, in 8 micro-batches
    (torchtitan's default: the PP degree): the lab's bubble, 7/15 against 7/23 of the step,
    gives the same gain within 5%."""
    one, two = (check(next(r for r in VALIDATION if r.id.endswith(k)))
                for k in ("405b-h100x512-1f1b", "405b-h100x512-interleaved"))
    assert one.result.bubble_fraction == pytest.approx(7 / 15)
    assert two.result.bubble_fraction == pytest.approx(7 / 23)
    assert one.lab_step_s / two.lab_step_s == pytest.approx(128 / 100, rel=0.05)


def test_torchtitans_selective_op_ac_runs_are_timed_in_the_op_mode():
    op = [r for r in VALIDATION if "selective op AC" in r.note]
    assert len(op) == 7  # 3 A100 runs and the 4 H100 runs
    for run in op:
        assert run.plan.recompute == "op" and "no lab mode" not in run.note


def test_torchtitans_selective_layer_ac_runs_are_timed_as_every_2nd():
    layer = [r for r in VALIDATION if r.name.endswith("selective layer AC")]
    assert [r.id for r in layer] == ["torchtitan-llama3-8b-a100-layer",
                                     "torchtitan-llama2-13b-a100-layer"]
    for run in layer:
        assert run.plan.recompute == "every-2nd" and "no lab mode" not in run.note


def test_eager_kernels_move_more_bytes_than_compiled_and_fused():
    model, gpu = get_model("llama-3.1-8b"), get_gpu("a100-80gb")
    moved = {}
    for k in KERNELS:
        ops = layer_ops(model, gpu, tp=1, cp=1, micro_batch=1, seq_len=8192, sp=False,
                        options=ComputeOptions(kernels=k))
        moved[k] = sum(x.nbytes for p in (ops.forward, ops.backward) for x in p.kernels)
        gemm = sum(x.seconds for x in ops.forward.kernels if x.kind == "gemm")
        moved[k + "-gemm"] = gemm
    assert moved["fused"] < moved["compiled"] < moved["eager"]
    assert moved["fused-gemm"] == moved["eager-gemm"]  # the GEMMs are the same kernels
    # Eager's norms: 36 B per element forward, 84 backward, against fused 4 and 6: per token
    # per layer two norms of h = 4096.
    ops = layer_ops(model, gpu, tp=1, cp=1, micro_batch=1, seq_len=8192, sp=False,
                    options=ComputeOptions(kernels="eager"))
    norms = next(x for x in ops.forward.kernels if x.name == "norms")
    assert norms.nbytes == 8192 * 2 * EAGER_BYTES["norm"][0] * 4096


def test_fsdp2_copies_only_with_pytorch_kernels():
    model, cluster = get_model("llama-3.1-8b"), get_cluster("dgx-a100")
    base = dict(tp=1, pp=1, dp=64, zero=3, seq_len=8192, micro_batch=1, microbatches=1)
    fused = evaluate(Plan(**base), model, cluster, 8)
    compiled = evaluate(Plan(**base, kernels="compiled"), model, cluster, 8)
    dp = {p.name: p for p in fused.timing.parts}["dp"]
    dp_c = {p.name: p for p in compiled.timing.parts}["dp"]
    assert dp_c.exposed > dp.exposed  # the copy-outs sit on the critical path


def test_bad_kernels_is_a_clear_refusal():
    with pytest.raises(LabInputError, match="kernels must be one of"):
        ComputeOptions(kernels="triton")
