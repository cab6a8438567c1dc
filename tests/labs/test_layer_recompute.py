"""The layer-granular recomputation mode (labs.core.catalogue, "every-2nd"): torchtitan's
selective layer AC with selective_ac_option = "2" (torchtitan/distributed/activation_checkpoint.py,
``_apply_layer_sac``: a per-process counter wraps the block when count % 2 == 0), i.e. per
pipeline rank of L layers floor(L/2) keep their input only and run their forward again, the
other ceil(L/2) keep what FlashAttention without recomputation keeps. Each reader is pinned to
a hand count from Korthikanti et al. 2022 (arXiv:2205.05198) Table 2 and sec 5."""

import pytest

from labs.core.recomputation import RECOMPUTATION, layer_rules
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_cluster
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.activations import activation_bytes_per_layer, layers_activation_bytes
from labs.model.flops import (
    attention_flops_per_token,
    hardware_flops_per_token,
    layer_matmul_params,
    matmul_params,
    model_flops_per_token,
)
from labs.model.presets import get_model
from labs.precision.finetune import finetunes
from labs.precision.inputs import PrecisionInput
from labs.recipe.export import export
from labs.recipe.inputs import Plan
from labs.recipe.lab import evaluate
from labs.runs_log.lab import read_run
from labs.tensor_parallel.comm import tp_collectives
from labs.zero.inputs import ZeroInput
from labs.zero.lab import compute_windows

MODE = "every-2nd"
L8B = get_model("llama-3.1-8b")  # 32 layers, h = 4096
H100 = get_gpu("h100-sxm")
EXACT = 1e-12  # the ledger's sums are a handful of float products: equal to rounding


def test_the_record_mixes_full_and_flash_as_torchtitans_counter_does():
    record = RECOMPUTATION[MODE]
    assert (record.every, record.every_mode, record.others) == (2, "full", "flash")
    full = RECOMPUTATION["full"]
    # Its own rules are those of the layers it checkpoints.
    assert (record.stores_scores, record.input_only, record.attention_again,
            record.forward_again) == (full.stores_scores, full.input_only,
                                      full.attention_again, full.forward_again)
    # Blocks 2, 4, 6, ... of a rank (1-based count % 2 == 0): floor(L/2) of L.
    assert record.groups(32) == (("full", 16, 0), ("flash", 16, 0))
    assert record.groups(5) == (("full", 2, 0), ("flash", 3, 0))
    assert record.groups(1) == (("full", 0, 0), ("flash", 1, 0))
    # 3 leading dense layers then 5 MoE: positions 2 (dense), 4, 6, 8 (MoE) are wrapped.
    assert record.groups(3, 5) == (("full", 1, 3), ("flash", 2, 2))
    assert RECOMPUTATION["full"].groups(3, 5) == (("full", 3, 5),)
    assert record.label == "full, every 2nd layer" and record.nth == "2nd"
    with pytest.raises(ValueError, match="mixes two per-layer modes"):
        layer_rules(MODE)
    with pytest.raises(ValueError, match="mixes two per-layer modes"):
        activation_bytes_per_layer(L8B, 4096, 1, 1, 1, MODE)


def test_a_32_layer_model_keeps_16_inputs_and_16_flash_layers():
    s, h = 4096, L8B.hidden
    want = 16 * 2 * s * h + 16 * 34 * s * h  # Table 2: full 2sbh, selective/flash 34sbh
    assert layers_activation_bytes(L8B, s, 1, 1, 1, MODE, dense_layers=32) \
        == pytest.approx(want, rel=EXACT)
    bill = compute_memory(MemoryInput(model=L8B, gpu=H100, seq_len=s, recompute=MODE))
    assert bill.breakdown["activations"] == pytest.approx(want, rel=EXACT)
    # Strictly between full and flash.
    full = compute_memory(MemoryInput(model=L8B, gpu=H100, seq_len=s, recompute="full"))
    flash = compute_memory(MemoryInput(model=L8B, gpu=H100, seq_len=s, recompute="flash"))
    assert full.breakdown["activations"] < want < flash.breakdown["activations"]
    assert any("4 of 8" not in n and "16 of 32 layers" in n for n in bill.assumptions)


def test_each_stage_counts_its_own_layers_times_its_micro_batches_in_flight():
    # PP 4 x TP 2 (SP on), 1F1B with 8 micro-batches: 8 layers a stage, 4 of them input-only;
    # stage r holds p - r micro-batches (Narayanan et al. 2021 sec 2.2).
    s, h, t = 4096, L8B.hidden, 2
    bill = compute_memory(MemoryInput(model=L8B, gpu=H100, seq_len=s, recompute=MODE, tp=t,
                                      pp=4, microbatches=8))
    per_mb = (4 * 2 * s * h + 4 * 34 * s * h) / t
    for stage, held in zip(bill.stages, (4, 3, 2, 1), strict=True):
        assert stage.in_flight == held
        assert stage.breakdown["activations"] == pytest.approx(held * per_mb, rel=EXACT)


def test_an_odd_stage_keeps_floor_half_inputs_and_ceil_half_full_layers():
    m = get_model("L5.h1024.a16.f4096.v32000")  # 5 layers: blocks 2 and 4 wrapped
    s, h = 2048, m.hidden
    bill = compute_memory(MemoryInput(model=m, gpu=H100, seq_len=s, recompute=MODE))
    assert bill.breakdown["activations"] == pytest.approx(2 * 2 * s * h + 3 * 34 * s * h,
                                                          rel=EXACT)


def test_hardware_flops_add_half_a_forward():
    s = 4096
    n, attention = matmul_params(L8B), attention_flops_per_token(L8B, s)
    # Model FLOPs 6N + attention (PaLM appendix B); half the layers add full's one more
    # forward of the layers, 2N_layers + attention / 3 (Korthikanti sec 5): the output head
    # is not recomputed (Narayanan 2021 eq. 3; round-18 cold reading C, finding 8).
    layers = layer_matmul_params(L8B)
    assert layers < n
    want = 6 * n + attention + (2 * layers + attention / 3) / 2
    assert hardware_flops_per_token(L8B, s, MODE) == pytest.approx(want, rel=EXACT)
    assert model_flops_per_token(L8B, s) == pytest.approx(6 * n + attention, rel=EXACT)
    # Counted per rank: 3 stages of 5 layers wrap 2 each, 6 of 15.
    m = get_model("L15.h1024.a16.f4096.v32000")
    n, attention = matmul_params(m), attention_flops_per_token(m, s)
    assert hardware_flops_per_token(m, s, MODE, (5, 5, 5)) == pytest.approx(
        6 * n + attention + 6 / 15 * (2 * layer_matmul_params(m) + attention / 3), rel=EXACT)


def test_tp_traffic_repeats_the_forward_on_half_the_layers():
    # 2 forward and 2 backward collectives a layer; the 5 wrapped layers run the 2 again.
    assert tp_collectives(10, MODE) == 5 * 6 + 5 * 4
    assert tp_collectives(10, "flash") < tp_collectives(10, MODE) < tp_collectives(10, "full")


def step_by_mode(modes: tuple[str, ...]) -> dict[str, float]:
    """Llama 3.1 8B's step at TP2 x PP2 x DP2 on one DGX H100 in each recomputation mode."""
    step = {}
    for mode in modes:
        result = evaluate(Plan(tp=2, pp=2, dp=2, microbatches=8, recompute=mode), L8B,
                          get_cluster("dgx-h100"), 1)
        assert result.legal
        step[mode] = result.step_s
    return step


def test_step_time_lies_strictly_between_flash_and_full():
    step = step_by_mode(("flash", MODE, "full"))
    assert step["flash"] < step[MODE] < step["full"]
    # The recomputed forward is about half of full's extra time (the layers are alike).
    assert (step[MODE] - step["flash"]) / (step["full"] - step["flash"]) \
        == pytest.approx(0.5, abs=0.05)
    zero = ZeroInput(model=L8B, gpu=H100)
    backward = {mode: compute_windows(zero, mode)[1] for mode in ("flash", MODE, "full")}
    assert backward["flash"] < backward[MODE] < backward["full"]


def test_exports_write_the_block_method_torchtitan_and_deepspeed_spellings():
    plan = Plan(tp=1, pp=2, dp=4, recompute=MODE, microbatches=4)
    megatron = export(plan, L8B, "megatron")
    assert "  --recompute-granularity full \\\n  --recompute-method block \\\n" \
           "  --recompute-num-layers 8 " in megatron.text  # 16 layers a stage, first 8
    assert not megatron.notes  # 8 of 16 on each stage: the lab's count
    whole = export(Plan(tp=1, pp=1, dp=8, recompute=MODE), L8B, "megatron")
    assert "  --recompute-num-layers 16 " in whole.text
    # Interleaved 3 x 2 chunks of 6, 6, 5, 5, 5, 5: 2 of each chunk of 5 is 4 of 11, where
    # torchtitan's counter wraps 5 of a rank's 11; the note says so.
    uneven = export(Plan(tp=1, pp=3, dp=4, recompute=MODE, microbatches=6,
                         schedule="interleaved-1f1b", virtual=2), L8B, "megatron")
    assert "  --recompute-num-layers 2 " in uneven.text
    assert any("stage 0 4 of 11 (the lab 5)" in n for n in uneven.notes)
    deepspeed = export(plan, L8B, "deepspeed")
    assert '"activation_checkpoint_interval": 1' in deepspeed.text
    assert any("cannot leave every 2nd layer" in n for n in deepspeed.notes)
    fsdp = export(plan, L8B, "fsdp")
    assert any('mode = "selective", selective_ac_option = "2"' in n for n in fsdp.notes)
    assert not any("selective_ac_option" in n
                   for n in export(Plan(tp=1, pp=2, dp=4, recompute="full", microbatches=4),
                                   L8B, "fsdp").notes)


def test_lora_keeps_its_adapters_intermediates_on_the_unwrapped_half():
    common = dict(model=L8B, gpu=H100, seq_len=2048)
    kept = {mode: {f.method: f.breakdown["activations"]
                   for f in finetunes(PrecisionInput(**common, recompute=mode))}
            for mode in ("flash", MODE, "full")}
    adapters = {mode: kept[mode]["lora"] - kept[mode]["full"] for mode in kept}
    assert adapters["full"] == 0
    assert adapters[MODE] == pytest.approx(adapters["flash"] / 2, rel=EXACT)


TITAN = ("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 1\n"
         "seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 8\n")


@pytest.mark.parametrize(("table", "mode", "note"), [
    ("", MODE, None),  # torchtitan's defaults: selective, option "2"
    ('[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "2"\n', MODE, None),
    ('[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "op"\n', "op", None),
    ('[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "1"\n', "full", None),
    ('[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "4"\n', MODE,
     "checkpoints 1 block in 4"),
    ('[activation_checkpoint]\nmode = "none"\n', "flash", None),
])
def test_torchtitans_layer_option_reads_to_the_layer_granular_mode(table, mode, note):
    run = read_run(TITAN + table)
    assert run.query["recompute"] == mode
    assert any(note in n for n in run.notes) if note else \
        not any("checkpoint" in n for n in run.notes)


def test_torchtitans_bad_layer_option_is_refused():
    from labs.core.errors import LabInputError

    with pytest.raises(LabInputError, match="selective_ac_option = 'two'"):
        read_run(TITAN + '[activation_checkpoint]\nmode = "selective"\n'
                         'selective_ac_option = "two"\n')


def _megatron(method: str, layers: str) -> str:
    from pathlib import Path

    raw = (Path(__file__).parents[1] / "fixtures" / "runs" / "megatron_llama3_8b.log").read_text()
    # 32 layers over PP 2 x 2 virtual stages: 8 a chunk.
    return raw.replace("recompute_granularity ........................... selective",
                       "recompute_granularity ........................... full") \
        .replace("recompute_method ................................ None",
                 f"recompute_method ................................ {method}") \
        .replace("recompute_num_layers ............................ None",
                 f"recompute_num_layers ............................ {layers}")


@pytest.mark.parametrize(("layers", "mode", "noted"), [
    ("4", MODE, False), ("8", "full", False), ("2", MODE, True), ("7", "full", True)])
def test_megatrons_block_method_reads_by_its_share_of_a_chunk(layers, mode, noted):
    run = read_run(_megatron("block", layers))
    assert run.query["recompute"] == mode
    assert any("recompute_method block" in n for n in run.notes) == noted
