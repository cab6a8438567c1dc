"""torchtitan's selective op checkpointing (labs.model.op_checkpoint): which matmuls run again
and what a layer keeps, against a count by hand from torchtitan's policy and Llama block."""

import math

import pytest

from labs.core.errors import LabInputError
from labs.core.recomputation import RECOMPUTATION
from labs.hardware.gpus import get_gpu
from labs.hardware.kernels import gemm_time
from labs.hardware.links import get_cluster
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model import op_checkpoint as op
from labs.model.activations import activation_bytes_per_layer
from labs.model.flops import hardware_flops_per_token, model_flops_per_token
from labs.model.ops import ComputeOptions
from labs.model.presets import get_model
from labs.parallel.layer_time import Group, layer_time
from labs.recipe.export import export
from labs.recipe.inputs import Plan
from labs.runs_log.lab import read_run
from labs.tensor_parallel.comm import tp_collectives
from tests.labs.test_layer_recompute import step_by_mode

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


# ---- The mode through the engine: ledger, FLOPs, layer time, TP, step time, exports ----

MODE = "op"
H100 = get_gpu("h100-sxm")


def test_the_record_names_the_policy_and_repeats_nothing_by_its_booleans():
    record = RECOMPUTATION[MODE]
    assert record.policy == "torchtitan-op" and record.every == 1
    assert not (record.stores_scores or record.input_only or record.attention_again
                or record.forward_again)
    assert dict(record.torchtitan) == {"mode": "selective", "selective_ac_option": "op"}


def test_the_ledger_keeps_the_policys_bytes_on_every_layer():
    s, b = 4096, 2
    assert activation_bytes_per_layer(LLAMA3_8B, s, b, 1, 1, MODE) == pytest.approx(
        s * b * 63_616, rel=1e-12)
    # Context parallelism splits the tokens; the count per token is the policy's.
    assert activation_bytes_per_layer(LLAMA3_8B, s, b, 8, 2, MODE, sp=True) == pytest.approx(
        s / 2 * b * op.kept_bytes_per_token(LLAMA3_8B, 8), rel=1e-12)
    # Between full (2sbh) and flash (34sbh in the classic model) for this block.
    full = activation_bytes_per_layer(LLAMA3_8B, s, b, 1, 1, "full")
    flash = activation_bytes_per_layer(LLAMA3_8B, s, b, 1, 1, "flash")
    assert full < activation_bytes_per_layer(LLAMA3_8B, s, b, 1, 1, MODE) < flash
    body = compute_memory(MemoryInput(model=LLAMA3_8B, gpu=H100, seq_len=s, recompute=MODE))
    assert body.breakdown["activations"] == pytest.approx(32 * s * 63_616, rel=1e-9)
    assert any("wk, wo, w3" in n for n in body.assumptions)


def test_hardware_flops_add_the_dropped_matmuls_forward_and_no_attention():
    s = 8192
    extra = hardware_flops_per_token(LLAMA3_8B, s, MODE) - model_flops_per_token(LLAMA3_8B, s)
    assert extra == pytest.approx(2 * 32 * (4096 * 1024 + 4096 * 4096 + 4096 * 14336),
                                  rel=1e-12)


def test_the_backward_replays_the_dropped_gemms_and_the_memory_bound_forward():
    cluster = get_cluster("dgx-h100")
    common = dict(tp=Group(1), cp=Group(1), ep=Group(1), micro_batch=1, seq_len=8192,
                  sp=False, options=ComputeOptions(kernels="eager"))
    flash = layer_time(LLAMA3_8B, cluster, recompute="flash", **common)
    mode = layer_time(LLAMA3_8B, cluster, recompute=MODE, **common)
    gemms = math.fsum(gemm_time(H100, 8192, n, k, 1, False)
                      for _, n, k in op.recomputed_matmuls(LLAMA3_8B))
    assert mode.backward.gemm - flash.backward.gemm == pytest.approx(gemms, rel=1e-9)
    assert mode.backward.memory - flash.backward.memory == pytest.approx(
        flash.forward.memory, rel=1e-9)
    assert mode.backward.attention == flash.backward.attention  # the core is kept
    assert mode.forward == flash.forward


def test_with_sequence_parallel_tp_the_all_gathers_run_again():
    cluster = get_cluster("dgx-h100")
    common = dict(tp=Group(4, 4), cp=Group(1), ep=Group(1), micro_batch=1, seq_len=8192,
                  sp=True)
    flash = layer_time(LLAMA3_8B, cluster, recompute="flash", **common)
    mode = layer_time(LLAMA3_8B, cluster, recompute=MODE, **common)
    f, b0, b1 = flash.forward.comm("tp"), flash.backward.comm("tp"), mode.backward.comm("tp")
    # Of the forward's two all-gathers and two reduce-scatters (one size), the all-gathers.
    assert b1.bytes_per_gpu - b0.bytes_per_gpu == pytest.approx(f.bytes_per_gpu / 2)
    assert tp_collectives(10, MODE) == tp_collectives(10, "full") == 60


def test_step_time_lies_between_flash_and_full_recomputation():
    step = step_by_mode(("flash", MODE, "full"))
    assert step["flash"] < step[MODE] < step["full"]


def test_exports_say_what_megatron_and_deepspeed_cannot_write():
    plan = Plan(tp=1, pp=2, dp=4, recompute=MODE, microbatches=4)
    megatron = export(plan, LLAMA3_8B, "megatron")
    assert "--recompute-granularity selective" in megatron.text
    assert any("no op-level policy" in n for n in megatron.notes)
    deepspeed = export(plan, LLAMA3_8B, "deepspeed")
    assert '"activation_checkpoint_interval": 1' in deepspeed.text
    assert any("op-level" in n for n in deepspeed.notes)
    fsdp = export(plan, LLAMA3_8B, "fsdp")
    assert any('selective_ac_option = "op"' in n and "every 2nd matmul" in n
               for n in fsdp.notes)


def test_torchtitans_op_option_reads_to_the_mode_for_its_llama_flavours():
    titan = ('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\n'
             'seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 8\n'
             '[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "op"\n')
    run = read_run(titan)
    assert run.query["recompute"] == MODE
