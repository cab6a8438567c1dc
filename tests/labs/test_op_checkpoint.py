"""torchtitan's selective op checkpointing (labs.model.op_checkpoint): which matmuls run again
and what a layer keeps, against a count by hand from torchtitan's policy and Llama block."""

import pytest

from labs.core.errors import LabInputError
from labs.model import op_checkpoint as op
from labs.model.presets import get_model

LLAMA3_8B = get_model("llama-3.1-8b")  # h 4096, 32 heads, 8 KV heads of 128, MLP 14336


def test_every_second_matmul_of_the_llama_block_runs_again():
    # torchtitan's order wq, wk, wv, wo, w1, w3, w2; its counter recomputes the even ones.
    assert [name for name, _, _ in op.block_matmuls(LLAMA3_8B)] == [
        "wq", "wk", "wv", "wo", "w1", "w3", "w2"]
    assert [name for name, _, _ in op.recomputed_matmuls(LLAMA3_8B)] == ["wk", "wo", "w3"]
    # wk 4096x1024, wo 4096x4096, w3 4096x14336 weights.
    assert op.recomputed_params_per_layer(LLAMA3_8B) == 4096 * 1024 + 4096 * 4096 + 4096 * 14336


def test_a_layer_keeps_its_input_the_kept_matmuls_and_sdpa_outputs():
    # Per token, bf16: input 2·4096; wq 2·4096, wv 2·1024, w1 2·14336, w2 2·4096;
    # SDPA out 2·4096 and log-sum-exp 4·32.
    by_hand = 2 * 4096 + 2 * (4096 + 1024 + 14336 + 4096) + 2 * 4096 + 4 * 32
    assert by_hand == 63_616
    assert op.kept_bytes_per_token(LLAMA3_8B) == pytest.approx(by_hand, rel=1e-12)


def test_under_tensor_parallelism_the_widths_split_and_the_reduce_scatters_are_kept():
    # t = 8: q 512, one KV head of 128 (8 KV heads over 8), MLP 1792; the input and the two
    # reduce-scatter outputs are sequence-split (h/8 = 512); w2's partial sum is full width.
    by_hand = (2 * 512 + 2 * (512 + 128 + 1792 + 4096) + 2 * 512 + 4 * 4
               + 2 * 2 * 512)
    assert op.kept_bytes_per_token(LLAMA3_8B, tp=8) == pytest.approx(by_hand, rel=1e-12)


def test_models_the_policy_does_not_describe_are_refused_with_a_reason():
    for model_id in ("deepseek-v3", "mixtral-8x7b"):  # MLA + experts; experts
        with pytest.raises(LabInputError, match="dense Llama-style"):
            op.block_matmuls(get_model(model_id))
