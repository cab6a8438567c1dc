"""Training compute: 6·N + attention FLOPs per token, recomputation, time at a given MFU."""

import pytest

from labs.core.errors import LabInputError
from labs.hardware.gpus import get_gpu
from labs.model.flops import (
    attention_flops_per_token,
    hardware_flops_per_token,
    matmul_params,
    model_flops_per_token,
    training_time,
)
from labs.model.presets import get_model

L70, L405, H100 = get_model("llama-3.1-70b"), get_model("llama-3.1-405b"), get_gpu("h100-sxm")


def test_six_n_plus_attention():
    # PaLM appendix B: 6N + 12·L·H·Q·T.
    n = L70.params - L70.vocab * L70.hidden  # input embedding is a lookup
    assert matmul_params(L70) == n
    assert attention_flops_per_token(L70, 4096) == 12 * 80 * 64 * 128 * 4096
    assert model_flops_per_token(L70, 4096) == 6 * n + 12 * 80 * 64 * 128 * 4096


def test_moe_counts_active_parameters():
    v3 = get_model("deepseek-v3")
    assert 6 * matmul_params(v3) < 6 * v3.active_params < 6 * v3.params / 10
    # MLA: QK^T over 192-dim heads, AV over 128-dim values.
    assert attention_flops_per_token(v3, 4096) == 6 * 61 * 128 * 4096 * (192 + 128)


def test_full_recomputation_is_about_eight_n():
    # One more forward of the layers: ≈ 4/3 of the model FLOPs, i.e. ≈ 8·N (Korthikanti sec
    # 5), less the output head's second forward: Megatron recomputes the layers only, and
    # Narayanan eq. 3 counts the head's 2·V·h three times, not four (its V/(16·l·h) term).
    model = model_flops_per_token(L70, 4096)
    full = hardware_flops_per_token(L70, 4096, "full")
    assert full == pytest.approx(4 / 3 * model - 2 * L70.vocab * L70.hidden)
    assert full == pytest.approx(4 / 3 * model, rel=0.01)
    assert hardware_flops_per_token(L70, 4096, "none") == model
    selective = hardware_flops_per_token(L70, 4096, "selective")
    assert model < selective < 1.05 * model  # only the attention core is repeated
    with pytest.raises(LabInputError):
        hardware_flops_per_token(L70, 4096, "half")


def test_llama3_405b_training_budget():
    # Llama 3 report (arXiv:2407.21783) sec 3.4: 3.8e25 FLOPs for 15.6T tokens, i.e. 6·N·D;
    # 16K H100s at 38-43% MFU. Our 6·N·D (N without the input embedding) and its time.
    tokens = 15.6e12
    assert 6 * matmul_params(L405) * tokens == pytest.approx(3.8e25, rel=0.01)
    run = training_time(L405, H100, tokens, seq_len=8192, gpus=16384, mfu=0.4)
    assert run.flops == tokens * model_flops_per_token(L405, 8192)
    assert run.seconds == pytest.approx(run.flops / (16384 * 989.4e12 * 0.4))
    assert 50 < run.seconds / 86400 < 80  # days; the report's pre-training took about 54
    assert "H100" in run.source


def test_bad_compute_inputs():
    for kwargs, field in (({"mfu": 0}, "mfu"), ({"mfu": 1.5}, "mfu"), ({"gpus": 0}, "gpus")):
        with pytest.raises(LabInputError) as err:
            training_time(L70, H100, 1e9, **kwargs)
        assert err.value.field == field
    with pytest.raises(LabInputError) as err:
        training_time(L70, H100, -1)
    assert err.value.field == "tokens"
