"""A change detector, not an accuracy test: the ratio (lab / published throughput) the step
model gives today on each validation run, within ±0.03, so that a change to the model that
moves one shows here, to be looked at and, if meant, written down again.

How close the lab must be to each published figure, and which way it errs, is the accuracy
tests' business (test_torchtitan_runs.py, test_moe_runs.py, test_nemo_runs.py); the
calibration runs are held to their papers in test_step_time.py.
"""

import pytest

from labs.recipe.runs import VALIDATION, check, summary

TODAY = {
    "torchtitan-llama3-8b-a100-layer": 1.096,
    "torchtitan-llama3-8b-a100-op": 1.082,
    "torchtitan-llama3-70b-a100-full": 1.107,
    "torchtitan-llama2-13b-a100-none": 1.105,
    "torchtitan-llama2-13b-a100-layer": 1.081,
    "torchtitan-llama2-13b-a100-op": 1.100,
    "torchtitan-llama2-70b-a100-op": 1.158,
    "torchtitan-llama2-70b-a100-full": 1.068,
    "torchtitan-llama31-8b-h100x8": 1.222,
    "torchtitan-llama31-8b-h100x8-compile": 1.230,
    "torchtitan-llama31-8b-h100x128": 1.261,
    "torchtitan-llama31-8b-h100x128-compile": 1.265,
    "torchtitan-llama31-8b-h100x8-cp1": 1.202,
    "torchtitan-llama31-8b-h100x8-cp2": 1.132,
    "torchtitan-llama31-8b-h100x8-cp4": 1.517,
    "torchtitan-llama31-8b-h100x8-cp8": 1.585,
    "torchtitan-llama31-70b-h100x256": 1.058,
    "torchtitan-llama31-70b-h100x256-asynctp": 1.267,
    "torchtitan-llama31-405b-h100x512-1f1b": 1.314,
    "torchtitan-llama31-405b-h100x512-interleaved": 1.327,
    "deepseek-v3-h800-2048": 1.320,  # 1.366 before 8651215 (ZB-H1/DualPipe at the stage's own I, W)
    "mcore-qwen3-235b-ep32-deepep": 1.108,
    "mcore-qwen3-235b-ep32-deepep-overlap": 1.345,
    "mcore-qwen3-235b-tp4-ep8": 1.733,
    "mcore-qwen3-235b-ep8-fsdp": 0.987,
    "nemo-llama2-7b-h100x8": 1.113,
    "nemo-llama2-13b-h100x16": 0.945,
    "nemo-llama2-70b-h100x64": 0.995,
    "nemo-llama3-8b-h100x8": 1.177,
    "nemo-llama3-70b-h100x64": 1.058,
    "nemo-gpt3-175b-h100x128": 1.004,
    "nemo-gpt3-175b-h100x512": 1.031,
}


def test_every_validation_run_has_a_snapshot():
    assert sorted(r.id for r in VALIDATION) == sorted(TODAY)


@pytest.mark.parametrize("run", VALIDATION, ids=[r.id for r in VALIDATION])
def test_ratio_as_today(run):
    assert check(run).ratio == pytest.approx(TODAY[run.id], abs=0.03), run.note


def test_moe_group_summary_as_today():
    s = summary(tuple(check(r) for r in VALIDATION
                      if r.group in ("deepseek-v3", "megatron-moe")))
    assert s["runs"] == 5 and s["within_10"] == 1 and s["within_25"] == 2
    assert s["median_deviation"] == pytest.approx(0.32, abs=0.03)  # 0.37 before 8651215
    assert s["worst_deviation"] == pytest.approx(0.76, abs=0.03)
