"""Each FLOP, byte and time term a lesson quotes or a chart draws, pinned to a count done by
hand here (the arithmetic written out from the model's config and the cited rates), not to
what the engine printed once. An ordering (more GPUs is faster) passes a term off by 2x; these
do not.

Models: Llama 3.1 8B and 70B (meta-llama config.json on Hugging Face: 8B 32 layers, hidden
4,096, 32 heads, 8 KV heads of 128, FFN 14,336, vocab 128,256, untied; 70B 80 layers, hidden
8,192, 64 heads, 8 KV heads of 128), Mixtral 8x7B (hidden 4,096, 8 experts, top-2). H100 SXM:
989.4 TFLOP/s dense BF16 and 3.35 TB/s HBM3 (NVIDIA datasheet).
"""

import pytest

from labs.context_parallel.lab import cp_cost
from labs.experts.inputs import MoEInput
from labs.experts.lab import simulate_moe
from labs.hardware.gpus import get_gpu
from labs.hardware.kernels import attention_rate, best_attention
from labs.hardware.links import get_cluster, get_link
from labs.model.flops import matmul_params
from labs.model.presets import get_model
from labs.rl.inputs import RLPlacementInput
from labs.rl.lab import compute_rl_placement
from labs.rl.serving import kv_bytes_per_token
from labs.rl.serving_time import (
    DECODE_MFU,
    HBM_EFFICIENCY,
    PREFILL_MFU,
    decode_seconds,
    prefill_seconds,
)

H100 = get_gpu("h100-sxm")
PEAK = 989.4e12  # dense BF16 FLOP/s
HBM = 3.35e12  # bytes/s
LLAMA8 = get_model("llama-3.1-8b")
LLAMA70 = get_model("llama-3.1-70b")

# Llama 3.1 8B by hand. Per layer: Q and O 4,096 x 4,096 each, K and V 4,096 x 1,024 each
# (8 KV heads x 128), gate, up and down 4,096 x 14,336 each, two RMSNorm weights of 4,096.
LAYER_8B = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
EMBED_8B = 128256 * 4096  # the input table; the untied output head is as large
# Parameters that multiply activations: every layer, the final norm and the output head (the
# input embedding is a lookup, no FLOPs).
MATMUL_8B = 32 * LAYER_8B + 4096 + EMBED_8B
PARAMS_8B = MATMUL_8B + EMBED_8B
# K and V, 8 heads of 128, 32 layers, 2 bytes each (bf16).
KV_TOKEN_8B = 2 * 8 * 128 * 32 * 2


def test_llama_8b_parameters_by_hand():
    assert PARAMS_8B == 8_030_261_248  # the model card's 8.03B
    assert LLAMA8.params == PARAMS_8B
    assert matmul_params(LLAMA8) == MATMUL_8B == 7_504_924_672
    assert kv_bytes_per_token(LLAMA8, "bf16") == KV_TOKEN_8B == 131_072
    assert kv_bytes_per_token(LLAMA8, "fp8") == KV_TOKEN_8B / 2


def test_rl_prefill_is_two_flops_per_matmul_parameter_per_prompt_token():
    # 64 prompts of 1,024 tokens on 8 GPUs: 2 x 7.505e9 x 65,536 = 9.837e14 FLOPs, at half
    # the 989.4 TFLOP/s peak on each of 8 GPUs = 0.2486 s.
    flops = 2 * MATMUL_8B * 64 * 1024
    assert flops == pytest.approx(9.8368e14, rel=1e-4)
    assert PREFILL_MFU == 0.5
    seconds = flops / (8 * PEAK * 0.5)
    assert seconds == pytest.approx(0.24856, rel=1e-4)
    assert prefill_seconds(LLAMA8, H100, 64 * 1024, 8) == pytest.approx(seconds, rel=1e-12)


def test_rl_decode_reads_weights_and_cache_once_per_token():
    # One GPU, 8 requests, prompt 1,024, response 4,096: the mean context is 1,024 + 2,048.
    # Each step reads the bf16 weights (16.06 GB) and the cache, 8 x 3,072 x 131,072 B
    # (3.22 GB), at 80% of 3.35 TB/s: 7.19 ms; its FLOPs, 2 x 7.505e9 x 8 at half the peak,
    # take 0.24 ms: memory-bound, 4,096 steps = 29.47 s.
    read = 2 * PARAMS_8B + 8 * (1024 + 4096 / 2) * KV_TOKEN_8B
    assert HBM_EFFICIENCY == 0.8 and DECODE_MFU == 0.5
    memory_time = read / (HBM * 0.8)
    compute_time = 2 * MATMUL_8B * 8 / (PEAK * 0.5)
    assert memory_time == pytest.approx(7.1947e-3, rel=1e-4)
    assert compute_time < memory_time / 20
    got = decode_seconds(LLAMA8, H100, HBM, 1, 8, 1024, 4096, "bf16")
    assert got == pytest.approx(4096 * memory_time, rel=1e-12)
    # A batch large enough to be compute-bound: 4,096 requests of 16 + 16 tokens.
    read = 2 * PARAMS_8B + 4096 * (16 + 8) * KV_TOKEN_8B
    compute_time = 2 * MATMUL_8B * 4096 / (PEAK * 0.5)
    assert compute_time > read / (HBM * 0.8)
    assert decode_seconds(LLAMA8, H100, HBM, 1, 4096, 16, 16, "bf16") == pytest.approx(
        16 * compute_time, rel=1e-12)


def test_rl_rollout_of_the_lab_is_prefill_then_decode_by_hand():
    """Colocated on 8 H100s, engines of 2 GPUs: 4 engines, 64 samples spread 16 per engine;
    prefill on all 8 GPUs, then each engine decodes its 16 with the weights and caches split
    over its 2 GPUs' HBM."""
    inp = RLPlacementInput(model=LLAMA8, gpu=H100, train_gpus=8, engine_gpus=2,
                           prompt_len=1024, response_len=4096, prompts=8,
                           responses_per_prompt=8)
    assert inp.engine_count == 4 and inp.samples == 64
    prefill = 2 * MATMUL_8B * 64 * 1024 / (8 * PEAK * 0.5)
    decode = 4096 * (2 * PARAMS_8B + 16 * 3072 * KV_TOKEN_8B) / (2 * HBM * 0.8)
    result = compute_rl_placement(inp)
    assert result.rollout_seconds == pytest.approx(prefill + decode, rel=1e-9)
    assert result.rollout_seconds == pytest.approx(0.2486 + 17.196, rel=1e-4)


@pytest.mark.parametrize("placement", ["separate", "colocated"])
def test_rl_weight_sync_by_hand(placement):
    """Llama 3.1 8B, TP 1 x PP 2 on 8 H100s, engines of 2 GPUs, every transfer at NCCL's bus
    bandwidth (EP02's rule), never the datasheet's. Separate pools: every engine GPU takes the
    whole bf16 model (16.06 GB) over its network port, a ConnectX-7 at 48 GB/s busBW (of the
    datasheet's 50; NVIDIA/nccl-tests#267): 0.3346 s. Colocated: each GPU gathers its stage's
    half over the H100 server's NVLink at 367.6 GB/s busBW (of 450 a direction), and a step's
    two switches move what training holds on the GPU (weights, gradients, and the master
    weights and Adam moments the distributed optimizer keeps there: round-29 reading C, finding
    1) out after training and back before the next over PCIe 5.0 x16 at its datasheet 64 GB/s
    (no NCCL there; the engine's weights are refilled by the sync)."""
    inp = RLPlacementInput(model=LLAMA8, gpu=H100, train_gpus=8, pp=2, engine_gpus=2,
                           placement=placement)
    result = compute_rl_placement(inp)
    full = 2 * PARAMS_8B
    if placement == "separate":
        assert result.sync_bytes_per_gpu == full
        assert result.sync_seconds == pytest.approx(full / 48e9, rel=1e-12)
        assert result.sync_seconds == pytest.approx(0.33459, rel=1e-4)
        return
    assert result.sync_bytes_per_gpu == full / 2
    resident = sum(result.train_breakdown[k] for k in ("weights", "gradients",
                                                        "master_weights", "optimizer_moments"))
    assert resident > result.train_breakdown["weights"] + result.train_breakdown["gradients"]
    seconds = full / 2 / 367.6e9 + 2 * resident / 64e9
    assert result.sync_seconds == pytest.approx(seconds, rel=1e-12)


def test_inference_workspace_by_hand():
    """EP01's inference workspace, the estimate labs/memory/lab.py states (one layer's bf16
    forward intermediates, s x b x (4h + 2 x FFN / t) x 2 B): Llama 3.1 70B, 8,192 tokens,
    TP 4: 8,192 x (4 x 8,192 + 2 x 28,672 / 4) x 2 = 771,751,936 B."""
    from labs.memory.inputs import MemoryInput
    from labs.memory.lab import compute_memory

    expected = 8192 * (4 * 8192 + 2 * 28672 // 4) * 2
    assert expected == 771_751_936
    bill = compute_memory(MemoryInput(model=LLAMA70, gpu=H100, mode="infer", recipe="bf16",
                                      seq_len=8192, tp=4))
    assert bill.breakdown["workspace"] == expected


def test_serving_workspace_is_one_prefill_chunk_not_every_cached_token():
    """Round-5 cold reading (EP01 step 4): 32 sequences of 8k drew 47.2 GB of workspace
    (262,144 tokens x (4 x 8,192 + 2 x 28,672) x 2 B), as if one layer ran over every cached
    token at once. A server's forward holds one prefill chunk of 8,192 tokens:
    8,192 x 90,112 x 2 = 1,476,395,008 B, under 2 GB."""
    from labs.memory.inputs import PREFILL_CHUNK_TOKENS, MemoryInput
    from labs.memory.lab import compute_memory

    assert PREFILL_CHUNK_TOKENS == 8192
    bill = compute_memory(MemoryInput(model=LLAMA70, gpu=H100, mode="infer", recipe="bf16",
                                      seq_len=8192, micro_batch=32))
    assert bill.breakdown["workspace"] == 8192 * (4 * 8192 + 2 * 28672) * 2 == 1_476_395_008
    assert bill.breakdown["workspace"] < 2e9
    # One short sequence runs all its tokens in one forward: 4,096 of them.
    one = compute_memory(MemoryInput(model=LLAMA70, gpu=H100, mode="infer", recipe="bf16",
                                     seq_len=4096))
    assert one.breakdown["workspace"] == 4096 * (4 * 8192 + 2 * 28672) * 2


def test_dp_textbook_ring_by_hand():
    """EP02's flat ring (Patarasuk & Yuan 2009): each GPU sends 2(N-1)/N of the gradients and
    pays 2(N-1) hops of latency: 16 GB of bf16 gradients (an 8B model) over 8 GPUs on NVLink
    4 at its datasheet 450 GB/s a direction: 28 GB each, 62.2 ms + 14 hops."""
    from labs.data_parallel.lab import all_reduce

    link = get_link("nvlink-4")
    cost = all_reduce(16e9, 8, link, 1, flat=True)
    assert cost.bytes_per_gpu == 2 * 7 / 8 * 16e9 == 28e9
    assert cost.seconds == pytest.approx(28e9 / link.bandwidth + 2 * 7 * link.latency,
                                         rel=1e-12)


def test_precision_activation_offload_by_hand():
    """EP10's offload: one layer's saved activations of one micro-batch (the heaviest GPU's
    ledger over its micro-batches in flight and its layers) copied over the host link at the
    chosen share; a copy longer than the layer's forward, or its backward, shows for every
    layer of every micro-batch, once each way."""
    from labs.precision.inputs import PrecisionInput
    from labs.precision.lab import compute_precision

    inp = PrecisionInput(model=LLAMA70, gpu=H100, tp=8, pp=4, dp=1, seq_len=8192,
                         offload=1.0, recompute="none")
    result = compute_precision(inp)
    o, ledger = result.offload, result.ledger.memory
    stage = ledger.stages[ledger.heaviest_stage]
    acts = ledger.breakdown["activations"]
    assert o.layer_bytes == pytest.approx(acts / (stage.in_flight * stage.layers))
    assert o.copy_s == pytest.approx(o.layer_bytes / o.link_bandwidth)
    layers = stage.layers * ledger.input.pipeline_microbatches
    assert o.exposed_s == pytest.approx(layers * (max(0, o.copy_s - o.forward_s)
                                                  + max(0, o.copy_s - o.backward_s)))
    assert o.host_bytes_per_node == pytest.approx(acts * inp.gpus_per_node)


# EP06: context parallelism, Llama 3.1 70B, one 131,072-token sequence over 8 ranks.
S, C = 131072, 8
KV_TOKEN_70B = 8 * (128 + 128) * 2  # K and V of 8 KV heads of 128, bf16: 4,096 B/token


@pytest.mark.parametrize("layout", ["zigzag", "contiguous", "allgather", "ulysses"])
def test_cp_attention_flops_and_traffic_by_hand(layout):
    link = get_link("nvlink-4")
    cost = cp_cost(LLAMA70, S, C, layout, link, H100)
    # The busiest rank's causal (query, key) cells. Zigzag's chunks r and 2c-1-r of
    # L = s/2c tokens hold L(s + 1) cells, the mask's 1/c: s(s+1)/2c. Contiguous (and the
    # all-gather's contiguous split): the last rank's queries 7s/8 .. s-1 attend to q + 1
    # keys each. Ulysses: every rank the whole mask for 1/c of the heads.
    if layout == "zigzag":
        busiest = S * (S + 1) // (2 * C)
    elif layout == "ulysses":
        busiest = S * (S + 1) / 2 / C
    else:
        busiest = sum(range(7 * S // 8 + 1, S + 1))
    assert cost.busiest_pairs == pytest.approx(busiest)
    # QK^T and AV: 2 FLOPs per multiply-add, d_qk + d_v = 256 per head, 64 heads.
    flops = 2 * (128 + 128) * 64 * busiest
    rate = attention_rate(H100, best_attention(H100), S // C, 128, False)
    assert cost.attention_s * rate == pytest.approx(flops, rel=1e-9)
    # Bytes each GPU sends per layer.
    if layout in ("zigzag", "contiguous"):
        # Ring attention: c - 1 hops of its own s/c tokens' K/V: 7 x 16,384 x 4,096 B.
        sent = (C - 1) * (S // C) * KV_TOKEN_70B
        assert sent == 469_762_048
        assert cost.block_bytes == (S // C) * KV_TOKEN_70B
    elif layout == "allgather":
        sent = (C - 1) / C * S * KV_TOKEN_70B  # the same bytes in one collective
        assert sent == 469_762_048
    else:
        # Ulysses: (c-1)/c of its shard of Q, K, V in and the output back:
        # (s/c) x (64 x 256 + 8 x 256) x 2 B.
        sent = (C - 1) / C * (S // C) * (64 * 256 + 8 * 256) * 2
        assert sent == 528_482_304
    assert cost.comm_bytes_per_gpu == pytest.approx(sent, rel=1e-12)


# EP07: MoE dispatch bytes, Mixtral 8x7B on one DGX H100 node, EP 8.

@pytest.mark.parametrize("dispatch", ["alltoall", "deepep"])
def test_moe_dispatch_bytes_by_hand(dispatch):
    """4,096 tokens per GPU, each to its top 2 of 8 experts, uniform: 1,024 copies per
    expert from each GPU, one expert per GPU. A GPU receives 1,024 tokens from each of its
    7 peers and sends 7,168 of its 8,192 copies away, each a bf16 hidden vector of 4,096 x
    2 B: 7 x 1,024 x 8,192 B = 58.7 MB each way."""
    inp = MoEInput(model=get_model("mixtral-8x7b"), cluster=get_cluster("dgx-h100"), nodes=1,
                   ep=8, tokens=4096, ep_dispatch=dispatch)
    routing = simulate_moe(inp).routing
    token = 4096 * 2
    assert routing.routed_per_expert == (8 * 1024,) * 8  # EP x per-GPU copies
    expected = 7 * 1024 * token
    assert expected == 58_720_256
    assert routing.received_bytes == pytest.approx((expected,) * 8)
    assert routing.sent_bytes == pytest.approx((expected,) * 8)


def test_moe_flops_per_token_the_lesson_quotes_by_hand():
    """Mixtral 8x7B (32 layers, hidden 4,096, 32 heads, 8 KV heads of 128, 8 experts of FFN
    14,336, top 2, vocab 32,000, untied). Per layer: attention 4,096 x (2 x 4,096 + 2 x
    1,024), each expert 3 x 4,096 x 14,336, the router 4,096 x 8, two norms of 4,096."""
    attention = 4096 * (2 * 4096 + 2 * 1024)
    expert = 3 * 4096 * 14336
    rest = 4096 * 8 + 2 * 4096
    head = 32000 * 4096
    params = 32 * (attention + 8 * expert + rest) + 4096 + 2 * head
    active = 32 * (attention + 2 * expert + rest) + 4096 + 2 * head
    assert (params, active) == (46_702_792_704, 12_879_925_248)  # "46.7B, 12.9B active"
    matmul = active - head  # the input embedding is a lookup
    # Training FLOPs per token at 4,096 tokens: 6 per active matmul parameter, and QK^T and
    # AV, 6 x layers x heads x s x (d_qk + d_v) (Narayanan et al. 2021 eq. 3's terms).
    per_token = 6 * matmul + 6 * 32 * 32 * 4096 * 256
    result = simulate_moe(MoEInput(model=get_model("mixtral-8x7b"),
                                   cluster=get_cluster("dgx-h100"), nodes=1, ep=8))
    assert result.params == params and result.active_params == active
    assert result.flops_per_token == per_token == 82_935_570_432
    # If every parameter were active: 6 more per parameter no token of it computes with.
    assert result.dense_equivalent_flops == per_token + 6 * (params - active)
    # One routed expert's forward on one token: 2 FLOPs per weight.
    assert result.expert_flops_per_token == 2 * expert == 352_321_536


def test_zero_lessons_mfu_is_model_flops_over_compute_time_and_peak():
    """EP03 quotes the MFU of a micro-batch's compute: Llama 3.1 70B, 4,096 tokens. Per layer
    Q and O 8,192 x 8,192, K and V 8,192 x 1,024, three MLP matrices 8,192 x 28,672, two
    norms; the output head 128,256 x 8,192; 6 FLOPs per matmul parameter per token and QK^T,
    AV at 6 x 80 layers x 64 heads x 4,096 x 256."""
    from labs.zero.inputs import ZeroInput
    from labs.zero.lab import achieved_mfu, simulate_zero

    layer = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    matmul = 80 * layer + 8192 + 128256 * 8192
    assert matmul == matmul_params(LLAMA70) == 69_503_033_344
    flops = (6 * matmul + 6 * 80 * 64 * 4096 * 256) * 4096
    inp = ZeroInput(model=LLAMA70, gpu=H100, seq_len=4096, micro_batch=1)
    seconds = simulate_zero(inp).compute_seconds
    assert achieved_mfu(inp, seconds) == pytest.approx(flops / (seconds * PEAK), rel=1e-12)
    assert 0.3 < achieved_mfu(inp, seconds) < 0.8  # a plausible share of the peak


def test_planner_tokens_per_second_is_its_batch_over_its_step():
    from labs.recipe.planner import PlanRequest, search

    found = search(PlanRequest(get_model("gpt-3-175b"), get_cluster("dgx-h100"), 64, 2048,
                               32, top=5))
    assert found.plans
    for ranked in found.plans:
        p = ranked.plan
        assert p.global_batch == 32 and p.seq_len == 2048
        assert ranked.tokens_per_s == pytest.approx(32 * 2048 / ranked.step_s, rel=1e-12)
        # MFU counts 6N + attention FLOPs per token (Narayanan et al. 2021, eq. 3 with
        # Korthikanti's causal attention) over the step on 64 GPUs at the dense peak.
        g = get_model("gpt-3-175b")
        n = matmul_params(g)
        attention = 6 * g.layers * g.heads * 2048 * (2 * g.head_dim)
        flops = (6 * n + attention) * 32 * 2048
        assert ranked.mfu == pytest.approx(flops / (ranked.step_s * 64 * PEAK), rel=1e-9)
