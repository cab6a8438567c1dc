"""The memory ledger pinned to CURRICULUM EP01/EP03/EP07/EP09 figures and the papers' formulas."""

import math

import pytest

from labs.core.catalogue import RECIPES
from labs.core.errors import LabInputError
from labs.hardware.gpus import get_gpu
from labs.memory.inputs import BREAKDOWN_KEYS, MemoryInput
from labs.memory.lab import compute_memory, kv_cache_bytes
from labs.model.activations import activation_bytes_per_layer
from labs.model.presets import custom_model, get_model

H100 = get_gpu("h100-sxm")
L70 = get_model("llama-3.1-70b")
GPT3 = get_model("gpt-3-175b")
STATE = ("weights", "gradients", "master_weights", "optimizer_moments")


def ledger(model=L70, gpu=H100, **kwargs):
    return compute_memory(MemoryInput(model=model, gpu=gpu, **kwargs))


def state_per_gpu(result):
    return sum(result.breakdown[k] for k in STATE)


# ----- EP01: it does not fit -------------------------------------------------------------------
def test_llama_70b_adam16_state_is_1_13_tb():
    # EP01: 70.6B params x 16 B/param -> 1.13 TB of state (±0.005 TB).
    result = ledger()
    assert result.state_bytes == pytest.approx(1.13e12, abs=0.005e12)
    assert state_per_gpu(result) == pytest.approx(result.state_bytes)  # nothing sharded
    assert result.bytes_per_param == 16


def test_llama_70b_activations_91_gb():
    # EP01: one 4,096-token sequence, selective recomputation: 34·s·b·h per layer x 80 layers
    # ≈ 91 GB (±1 GB).
    result = ledger(seq_len=4096, micro_batch=1, recompute="selective")
    assert result.breakdown["activations"] == 34 * 4096 * 1 * 8192 * 80
    assert result.breakdown["activations"] == pytest.approx(91.3e9, abs=1e9)


def test_llama_70b_total_1_22_tb_does_not_fit():
    # EP01: ~1.22 TB against an 80 GB GPU; state alone needs at least 14 such GPUs.
    result = ledger()
    assert result.total_bytes == pytest.approx(1.22e12, abs=0.01e12)
    assert not result.fits
    assert result.headroom_bytes < 0
    assert result.gpu_memory_bytes == 80e9
    # 1.1289 TB / 80 GB = 14.1, so 15 GPUs (CURRICULUM's "at least 14" rounds the ratio down).
    assert result.min_gpus == 15
    assert result.min_gpus == math.ceil(result.state_bytes / 80e9)
    assert result.world_size == 1


def test_llama_405b_state_6_49_tb_not_on_32_gpus():
    # EP01: 405B -> 6.49 TB of state (±0.005 TB); 32 x 80 GB = 2.56 TB cannot hold it, even
    # fully sharded with ZeRO-3.
    result = ledger(get_model("llama-3.1-405b"))
    assert result.state_bytes == pytest.approx(6.49e12, abs=0.005e12)
    assert result.state_bytes > 32 * 80e9
    sharded = ledger(get_model("llama-3.1-405b"), dp=32, zero=3)
    assert state_per_gpu(sharded) == pytest.approx(6.49e12 / 32, rel=0.001)
    assert not sharded.fits


def test_custom_7b_int8_fits_gaming_card():
    # EP01 good case: 7B in int8 for inference, ~7 GB of weights, fits a 24 GB card.
    result = ledger(custom_model(7e9), get_gpu("rtx-4090"), mode="infer", recipe="int8")
    assert result.breakdown["weights"] == pytest.approx(7e9, rel=1e-9)
    assert result.fits
    assert result.bytes_per_param == 1
    assert result.breakdown["gradients"] == result.breakdown["activations"] == 0


def test_thirty_billion_weights_and_moments():
    # EP01: a 30B model: 60 GB of bf16 weights, 240 GB of fp32 Adam moments before sharding.
    result = ledger(custom_model(30e9))
    assert result.breakdown["weights"] == pytest.approx(60e9, rel=1e-9)
    assert result.breakdown["optimizer_moments"] == pytest.approx(240e9, rel=1e-9)


def test_training_is_eight_times_bf16_inference():
    # EP01: 16 B/param training vs 2 B/param bf16 inference.
    assert RECIPES["adam16"].bytes_per_param / RECIPES["bf16"].bytes_per_param == 8
    assert RECIPES["adam18"].bytes_per_param == 18
    assert RECIPES["int4"].bytes_per_param == 0.5
    assert "16 B/param" in ledger().recipe_description


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_activation_formulas(recompute):
    # Korthikanti et al. 2022 Table 2, for GPT-3 trained with dropout as they count it: none
    # sbh(34 + 5as/h), selective 34sbh, full 2sbh.
    s, b, h, a = 2048, 2, 12288, 96
    expected = {"none": s * b * h * (34 + 5 * a * s / h), "selective": 34 * s * b * h,
                "full": 2 * s * b * h}[recompute]
    assert activation_bytes_per_layer(GPT3, s, b, recompute=recompute) == pytest.approx(expected)
    result = ledger(GPT3, seq_len=s, micro_batch=b, recompute=recompute)
    assert result.breakdown["activations"] == pytest.approx(96 * expected)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_a_model_without_dropout_keeps_the_softmax_output_only(recompute):
    # Korthikanti sec 4.1's 5as²b is the softmax output (2), the attention-dropout mask (1)
    # and the dropout's output (2). Llama 3.1 trains with no dropout (config.json
    # attention_dropout 0.0): unfused attention keeps the softmax output alone, 2as²b, which
    # both the softmax's backward and the attention-over-values matmul read. The 34sbh stays.
    s, b, h, a = 2048, 2, 8192, 64
    assert not L70.dropout and GPT3.dropout
    expected = {"none": s * b * h * (34 + 2 * a * s / h), "selective": 34 * s * b * h,
                "full": 2 * s * b * h}[recompute]
    assert activation_bytes_per_layer(L70, s, b, recompute=recompute) == pytest.approx(expected)
    result = ledger(seq_len=s, micro_batch=b, recompute=recompute)
    assert result.breakdown["activations"] == pytest.approx(80 * expected)


def test_tp_with_sequence_parallel_divides_both_terms():
    one = activation_bytes_per_layer(L70, 4096, recompute="none")
    assert activation_bytes_per_layer(L70, 4096, tp=8, recompute="none") == pytest.approx(one / 8)
    # Full recomputation keeps only the layer input, 2sbh; sequence parallelism splits it along
    # s, so with TP + SP each rank keeps 2sbh/t (Korthikanti Table 2, last row).
    full = activation_bytes_per_layer(L70, 4096, recompute="full")
    assert activation_bytes_per_layer(L70, 4096, tp=8, recompute="full") == full / 8
    assert activation_bytes_per_layer(L70, 4096, tp=8, recompute="full", sp=False) == full


@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_without_sequence_parallel_only_split_matmuls_divide(recompute):
    # Korthikanti Table 2, TP without SP: sbh(10 + 24/t + 5as/(ht)); selective drops 5as/(ht).
    # Llama, without dropout, keeps 2as/(ht) of scores (test above).
    s, b, h, a, t = 4096, 1, 8192, 64, 8
    scores = 2 * a * s / (h * t) if recompute == "none" else 0
    expected = s * b * h * (10 + 24 / t + scores)
    got = activation_bytes_per_layer(L70, s, b, tp=t, recompute=recompute, sp=False)
    assert got == pytest.approx(expected, rel=1e-12)
    gpt = activation_bytes_per_layer(GPT3, 2048, b, tp=t, recompute=recompute, sp=False)
    gpt_scores = 5 * 96 * 2048 / (12288 * t) if recompute == "none" else 0
    assert gpt == pytest.approx(2048 * b * 12288 * (10 + 24 / t + gpt_scores), rel=1e-12)
    with_sp = ledger(tp=t, recompute=recompute)
    without = ledger(tp=t, recompute=recompute, sp=False)
    assert without.breakdown["activations"] > with_sp.breakdown["activations"]
    assert any("Sequence parallelism is off" in n for n in without.assumptions)


def test_context_parallel_local_queries_times_all_keys():
    s, cp, h, a = 8192, 4, 8192, 64
    got = activation_bytes_per_layer(L70, s, cp=cp, recompute="none")
    assert got == pytest.approx(34 * (s / cp) * h + 2 * a * (s / cp) * s)
    assert activation_bytes_per_layer(L70, s, cp=cp) == pytest.approx(34 * (s / cp) * h)


def test_pipeline_first_stage_holds_all_layers_worth():
    # 1F1B: the first stage holds p micro-batches x L/p layers = L layers' worth.
    assert ledger(pp=4).breakdown["activations"] == ledger().breakdown["activations"]


# ----- EP03: ZeRO ---------------------------------------------------------------------------
ZERO_FORMULAS = {  # bytes per parameter per GPU, D data-parallel replicas (CURRICULUM EP03)
    "adam16": [lambda d: 16, lambda d: 4 + 12 / d, lambda d: 2 + 14 / d, lambda d: 16 / d],
    "adam18": [lambda d: 18, lambda d: 6 + 12 / d, lambda d: 2 + 16 / d, lambda d: 18 / d],
}


@pytest.mark.parametrize("recipe", ["adam16", "adam18"])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("d", [1, 2, 8, 64])
def test_zero_formulas(recipe, stage, d):
    model = get_model("llama-3.1-8b")
    result = ledger(model, recipe=recipe, zero=stage, dp=d)
    expected = ZERO_FORMULAS[recipe][stage](d) * model.params
    assert state_per_gpu(result) == pytest.approx(expected, rel=1e-12)


def test_zero3_70b_on_32_gpus_is_35_gb():
    # EP03: 70B on 32 GPUs with ZeRO-3 -> 35 GB/GPU of state (±0.5 GB); activations unchanged.
    result = ledger(dp=32, zero=3)
    assert state_per_gpu(result) == pytest.approx(35e9, abs=0.5e9)
    assert result.breakdown["activations"] == ledger().breakdown["activations"]
    assert result.world_size == 32


def test_zero_shards_over_dp_times_cp():
    # Megatron's distributed optimizer shards over the data-parallel group including CP.
    result = ledger(dp=4, cp=2, zero=1)
    assert result.breakdown["optimizer_moments"] == pytest.approx(8 * L70.params / 8)


def test_offload_moves_optimizer_state_to_host():
    on_gpu = ledger(dp=8, zero=1)
    offloaded = ledger(dp=8, zero=1, offload=True)
    moved = on_gpu.breakdown["master_weights"] + on_gpu.breakdown["optimizer_moments"]
    # host RAM also holds DeepSpeed's fp32 gradient partition, 4 B a parameter of the shard
    assert offloaded.host_bytes == pytest.approx(moved + 4 * L70.params / 8)
    assert offloaded.breakdown["master_weights"] == offloaded.breakdown["optimizer_moments"] == 0
    for key in ("weights", "gradients", "activations"):
        assert offloaded.breakdown[key] == on_gpu.breakdown[key]
    assert on_gpu.host_bytes == 0


# ----- EP04/EP05/EP07: TP, PP and EP divide the state -----------------------------------------
def test_tp_and_pp_divide_state():
    # TP splits everything but the norms (replicated on every TP rank); PP gives each stage
    # L/p layers, the first also the embedding and the last the final norm and output head.
    base = state_per_gpu(ledger())
    norms = 2 * 8192 * 80 + 8192  # RMSNorm gains: two per layer and the final one
    assert state_per_gpu(ledger(tp=8)) == pytest.approx(16 * ((L70.params - norms) / 8 + norms),
                                                        rel=1e-12)
    embedding = L70.vocab * L70.hidden
    layers = (L70.params - 2 * embedding - 8192) / 80  # one decoder layer's weights
    staged = ledger(pp=4)
    firsts = [state_per_gpu_stage(staged, r) for r in range(4)]
    assert firsts[0] == pytest.approx(16 * (20 * layers + embedding), rel=1e-12)
    assert firsts[1] == firsts[2] == pytest.approx(16 * 20 * layers, rel=1e-12)
    assert firsts[3] == pytest.approx(16 * (20 * layers + embedding + 8192), rel=1e-12)
    assert sum(firsts) == pytest.approx(base, rel=1e-12)
    assert ledger(tp=8).breakdown["activations"] == pytest.approx(
        ledger().breakdown["activations"] / 8)


def state_per_gpu_stage(result, rank):
    return sum(result.stages[rank].breakdown[k] for k in STATE)


def test_first_stage_holds_embedding_last_holds_head_and_logits():
    result = ledger(pp=4, tp=8)
    bills = result.stages
    # Token ids (Llama keeps no embedding dropout mask), whole on every TP rank: Megatron-LM
    # broadcasts a micro-batch's tokens over the TP group (get_batch_on_this_tp_rank) and SP
    # scatters only the embedding's output (round-22 cold reading Q, finding 2: they were
    # divided by t). Megatron's estimate divides its whole sum by t, the ids with it, and its
    # mask s·b·h too (compute_activation_memory).
    emb = 8 * 4096
    assert bills[0].breakdown["embedding_and_logits"] == pytest.approx(4 * emb)
    megatron = ledger(pp=4, tp=8, activation_model="megatron").stages[0]
    assert megatron.breakdown["embedding_and_logits"] == pytest.approx(4 * (emb + 4096 * 8192) / 8)
    assert "divides by TP but the token ids, which every TP rank holds whole" in " ".join(
        result.assumptions)
    assert "but the token ids" not in " ".join(
        ledger(pp=4, tp=8, activation_model="megatron").assumptions)
    out = 4 * 4096 * 8192 / 8 + 4 * 4096 * L70.vocab / 8  # final norm in + out, fp32 logits
    assert bills[3].breakdown["embedding_and_logits"] == pytest.approx(out)
    assert bills[1].breakdown["embedding_and_logits"] == 0
    assert result.heaviest_stage == 0


def test_ep_divides_only_the_experts():
    mixtral = get_model("mixtral-8x7b")
    result = ledger(mixtral, dp=8, ep=8)
    expected = 2 * (mixtral.dense_params + mixtral.expert_params / 8)
    assert result.breakdown["weights"] == pytest.approx(expected)


def test_expert_state_shards_over_expert_dp():
    # Expert-DP = TP x CP x DP / EP (expert-TP = 1): here 2 x 1 x 4 / 8 = 1, so ZeRO-1 leaves
    # each rank's experts unsharded while dense state shards over DP x CP = 4.
    mixtral = get_model("mixtral-8x7b")
    result = ledger(mixtral, tp=2, dp=4, ep=8, zero=1)
    # Norms and routers are replicated on both TP ranks; the rest of the dense part splits.
    replicated = 32 * (2 * 4096 + 8 * 4096) + 4096
    dense = (mixtral.dense_params - replicated) / 2 + replicated
    experts = mixtral.expert_params / 8
    assert result.breakdown["master_weights"] == pytest.approx(4 * (dense / 4 + experts / 1))


def test_moe_memory_counts_total_params():
    result = ledger(get_model("deepseek-v3"))
    assert result.params == get_model("deepseek-v3").params
    assert result.active_params < result.params / 10
    assert result.state_bytes == 16 * result.params


# ----- inference ---------------------------------------------------------------------------
def test_llama_70b_kv_cache_4096_tokens():
    # K and V x 80 layers x 8 KV heads x 128 head dim x 4,096 tokens x 2 B.
    result = ledger(mode="infer", recipe="bf16", seq_len=4096)
    assert result.breakdown["kv_cache"] == 2 * 80 * 8 * 128 * 4096 * 2
    assert result.breakdown["weights"] == 2 * L70.params
    assert result.breakdown["workspace"] > 0
    assert result.breakdown["gradients"] == result.breakdown["optimizer_moments"] == 0


def test_kv_cache_splits_by_tp_until_heads_replicate():
    full = kv_cache_bytes(L70, 4096)
    assert kv_cache_bytes(L70, 4096, tp=8) == full / 8
    assert kv_cache_bytes(L70, 4096, tp=16) == full / 8  # 8 KV heads: one replica per rank
    assert kv_cache_bytes(L70, 4096, micro_batch=8, pp=2) == full * 8 / 2


def test_mla_caches_the_latent_not_split_by_tp():
    v3 = get_model("deepseek-v3")
    expected = 61 * (512 + 64) * 4096 * 2
    assert kv_cache_bytes(v3, 4096) == expected
    assert kv_cache_bytes(v3, 4096, tp=8) == expected


# ----- EP09 recipes: divisibility ------------------------------------------------------------
EP09 = [  # model, training GPUs, TP, PP, CP, EP (CURRICULUM EP09 table)
    ("glm-4-9b", 8, 2, 1, 2, 1),
    ("glm-4.7-flash", 8, 2, 2, 2, 4),
    ("glm-4.7", 64, 8, 4, 2, 16),
    ("deepseek-r1", 128, 8, 4, 4, 32),
]


@pytest.mark.parametrize(("model_id", "n", "tp", "pp", "cp", "ep"), EP09)
def test_ep09_recipes_pass_divisibility(model_id, n, tp, pp, cp, ep):
    model = get_model(model_id)
    dp = n // (tp * pp * cp)
    assert dp * tp * pp * cp == n and n % (ep * pp) == 0
    uneven = model.layers % pp != 0  # 47 and 61 layers need Megatron's uneven first/last stage
    result = ledger(model, tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, offload=model.is_moe,
                    uneven_pp=uneven, recompute="full")
    assert result.world_size == n
    if uneven:
        with pytest.raises(LabInputError) as err:
            ledger(model, tp=tp, pp=pp, cp=cp, dp=dp, ep=ep)
        assert err.value.field == "pp"


def test_uneven_pp_sizes_the_heaviest_stage():
    r1 = get_model("deepseek-r1")
    # 61 layers over 4 stages: 16, 15, 15, 15. Stage 0 holds the 3 dense layers and 13 MoE
    # layers; stages 1-3 hold 15 MoE layers each, so their routed experts weigh more.
    result = ledger(r1, tp=8, pp=4, cp=4, ep=32, uneven_pp=True)
    assert result.stage_layers == (16, 15, 15, 15)
    assert [s.moe_layers for s in result.stages] == [13, 15, 15, 15]
    per_layer = activation_bytes_per_layer(r1, 4096, tp=8, cp=4)
    assert result.stages[0].breakdown["activations"] == pytest.approx(4 * 16 * per_layer)
    # Stages 1-3 carry two more MoE layers' experts than stage 0; stage 3 adds the output head.
    totals = [s.total_bytes for s in result.stages]
    assert totals[3] > totals[1] > totals[0]
    assert result.heaviest_stage == 3
    assert result.breakdown == result.stages[3].breakdown
    assert any("largest stage holds 16 layers" in a for a in result.assumptions)


# ----- result shape, bad inputs -------------------------------------------------------
def test_result_shape():
    result = ledger()
    assert tuple(result.breakdown) == BREAKDOWN_KEYS
    assert result.total_bytes == pytest.approx(sum(result.breakdown.values()))
    assert result.assumptions and all(isinstance(a, str) for a in result.assumptions)
    with pytest.raises(AttributeError):
        result.fits = True


BAD_INPUTS = [
    ({"model": "llama-3.1-70b"}, "model"),
    ({"gpu": "h100-sxm"}, "gpu"),
    ({"mode": "serve"}, "mode"),
    ({"recipe": "adam32"}, "recipe"),
    ({"recipe": "bf16"}, "recipe"),
    ({"mode": "infer", "recipe": "adam16"}, "recipe"),
    ({"seq_len": 0}, "seq_len"),
    ({"seq_len": 2_000_000}, "seq_len"),
    ({"seq_len": 4096.0}, "seq_len"),
    ({"seq_len": True}, "seq_len"),
    ({"micro_batch": 0}, "micro_batch"),
    ({"micro_batch": 1025}, "micro_batch"),
    ({"recompute": "some"}, "recompute"),
    ({"tp": 0}, "tp"),
    ({"tp": 4097}, "tp"),
    ({"tp": 3}, "tp"),  # 64 heads
    ({"pp": 3}, "pp"),  # 80 layers
    ({"pp": 81, "uneven_pp": True}, "pp"),
    ({"cp": 3}, "cp"),
    ({"cp": 4096}, "cp"),  # 4096 % (2 x 4096) != 0: zigzag needs 2·cp chunks
    ({"dp": 0}, "dp"),
    ({"dp": 100_001}, "dp"),
    ({"tp": 64, "pp": 80, "dp": 1000}, "dp"),  # 5.1M GPUs
    ({"ep": 2}, "ep"),  # dense model
    ({"zero": 4}, "zero"),
    ({"zero": -1}, "zero"),
    ({"mode": "infer", "recipe": "bf16", "zero": 1}, "zero"),
    ({"mode": "infer", "recipe": "int4", "offload": True}, "offload"),
    ({"offload": "yes"}, "offload"),
    ({"uneven_pp": 1}, "uneven_pp"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_INPUTS)
def test_bad_inputs_name_their_field(overrides, field):
    kwargs = {"model": L70, "gpu": H100, **overrides}
    with pytest.raises(LabInputError) as err:
        MemoryInput(**kwargs)
    assert err.value.field == field
    assert err.value.message


@pytest.mark.parametrize(("overrides", "field"), [
    ({"ep": 3}, "ep"),  # 8 experts
    ({"ep": 8, "dp": 4}, "ep"),  # TP x CP x DP = 4 is not a multiple of EP = 8
])
def test_bad_expert_parallel(overrides, field):
    with pytest.raises(LabInputError) as err:
        MemoryInput(model=get_model("mixtral-8x7b"), gpu=H100, **overrides)
    assert err.value.field == field


def test_an_input_builds_its_layout_once():
    """Issue 31: a ledger asks its input's layout 10-20 times (each shard group, each stage's
    bill); it is built, and its degrees validated, once per input."""
    inp = MemoryInput(model=get_model("mixtral-8x7b"), gpu=H100, tp=2, dp=4, ep=4)
    assert inp.layout is inp.layout
    assert (inp.layout.tp, inp.layout.dp, inp.layout.ep, inp.layout.expert_dp) == (2, 4, 4, 2)


def test_own_layer_count_redoes_korthikanti_for_the_models_layer():
    """GPT's layer gives Korthikanti's 34 term by term; Llama 3.1 70B's (SwiGLU of 3.5h, K and
    V for 8 of 64 heads, no dropout masks) 33.5, the count EP01 step 3 derives."""
    from labs.model.activations import own_layer_coefficient, own_layer_terms

    assert own_layer_coefficient(GPT3) == 34
    terms = own_layer_terms(L70)
    assert terms["k"] == terms["v"] == 0.25 and terms["mlp"] == 21
    assert terms["attention_mask"] == terms["mlp_mask"] == 0
    assert own_layer_coefficient(L70) == 33.5
    with pytest.raises(ValueError):
        own_layer_coefficient(get_model("mixtral-8x7b"))
