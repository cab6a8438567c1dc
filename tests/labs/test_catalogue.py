"""The shared choices' catalogues (labs.core.catalogue, labs.core.recomputation): recomputation
modes, precision recipes and activation models are each defined once, and every reader applies
the record's rule."""

import pytest

from labs.core import limits
from labs.core.catalogue import (
    ACTIVATION_MODEL_HELP,
    ACTIVATION_MODEL_RECORDS,
    DEFAULT_RECIPE,
    RECIPES,
)
from labs.core.recomputation import RECOMPUTATION
from labs.model.activations import activation_bytes_per_layer
from labs.model.flops import (
    attention_flops_per_token,
    hardware_flops_per_token,
    layer_matmul_params,
    model_flops_per_token,
)
from labs.model.presets import get_model
from labs.recipe.export import export
from labs.recipe.inputs import Plan
from labs.tensor_parallel.comm import tp_collectives

MODEL = get_model("llama-3.1-8b")


def test_the_limits_ids_are_the_records_keys():
    assert limits.RECOMPUTE == tuple(RECOMPUTATION) == ("none", "flash", "selective", "full",
                                                        "every-2nd", "op")
    assert limits.KORTHIKANTI_RECOMPUTE == ("none", "selective", "full")
    assert limits.ACTIVATION_MODELS == tuple(ACTIVATION_MODEL_RECORDS) == ("classic", "megatron")
    assert limits.TRAIN_RECIPES == ("adam16", "adam18", "adam12", "fp8-delayed", "fp8-params",
                                    "fp8-blockwise", "mxfp8")
    assert limits.INFER_RECIPES == ("bf16", "int8", "int4")
    assert tuple(RECIPES) == limits.RECIPE_IDS  # training first, then inference
    assert all(RECIPES[DEFAULT_RECIPE[mode]].mode == mode for mode in limits.MODES)
    assert all(r.label and r.summary and r.describe for r in RECIPES.values())
    for a in ACTIVATION_MODEL_RECORDS.values():
        assert a.label.startswith(a.id) and a.described in ACTIVATION_MODEL_HELP


# The modes whose every layer follows the record's rules (the layer-granular one mixes two:
# tests/labs/test_layer_recompute.py; the op-level policy counts op by op:
# tests/labs/test_op_checkpoint.py).
PER_LAYER = tuple(k for k, r in RECOMPUTATION.items() if r.every == 1 and not r.policy)


@pytest.mark.parametrize("mode", PER_LAYER)
def test_each_mode_repeats_what_its_record_says(mode):
    record, s = RECOMPUTATION[mode], 4096
    extra = hardware_flops_per_token(MODEL, s, mode) - model_flops_per_token(MODEL, s)
    # The layers' forward again, not the output head's (Narayanan 2021 eq. 3).
    want = (2 * layer_matmul_params(MODEL) if record.forward_again else 0) \
        + (attention_flops_per_token(MODEL, s) / 3 if record.attention_again else 0)
    assert extra == pytest.approx(want)
    assert tp_collectives(10, mode) == (60 if record.forward_again else 40)


@pytest.mark.parametrize("mode", PER_LAYER)
def test_each_mode_keeps_what_its_record_says(mode):
    record = RECOMPUTATION[mode]
    s, h, a = 4096, MODEL.hidden, MODEL.heads
    kept = activation_bytes_per_layer(MODEL, s, 1, 1, 1, mode)
    if record.input_only:
        assert kept == 2 * s * h
    else:
        # Llama trains without dropout: the unfused core keeps its softmax output, 2·a·s²·b.
        scores = 2 * a * s * s if record.stores_scores else 0
        assert kept == pytest.approx(34 * s * h + scores)


@pytest.mark.parametrize("mode", tuple(RECOMPUTATION))
def test_each_mode_exports_its_own_arguments(mode):
    record = RECOMPUTATION[mode]
    plan = Plan(tp=1, pp=2, dp=4, recompute=mode, microbatches=4)
    text = export(plan, MODEL, "megatron").text
    for flag, value in record.megatron:
        assert f"  {flag} {value}" in text
    assert ("--recompute-granularity" in text) == bool(record.megatron)
    ds = export(plan, MODEL, "deepspeed").text
    assert f'"activation_checkpoint_interval": {record.deepspeed_interval}' in ds
