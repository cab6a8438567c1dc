"""Kernel rates (labs.hardware.kernels) and the op-level layer (labs.model.ops), pinned to the
microbenchmarks the presets cite: each figure the model uses comes back out of it."""

from dataclasses import replace

import pytest

from labs.core.errors import LabInputError
from labs.hardware.gpus import GPUSpec, KernelRates, get_gpu, gpus
from labs.hardware.kernels import (
    SLOWEST_GPU,
    attention_kernels,
    attention_rate,
    best_attention,
    flash_flops,
    flash_time,
    gemm_time,
    grouped_gemm_time,
    hbm_rate,
    matmul_rate,
    mem_time,
    wave,
)
from labs.hardware.links import clusters, get_cluster, get_link, links
from labs.model.head import head_ops, optimizer_time
from labs.model.ops import ComputeOptions, layer_ops
from labs.model.presets import get_model

A100, H100 = get_gpu("a100-80gb"), get_gpu("h100-sxm")


def test_every_gpu_preset_carries_sourced_kernel_rates():
    for gpu in gpus().values():
        k = gpu.kernels
        assert isinstance(k, KernelRates), gpu.id
        for name, source in k.sources:
            assert source.strip(), (gpu.id, name)
        assert 0 < k.matmul_efficiency * k.matmul_sustain <= 1
        assert 0 < k.hbm_efficiency <= 1


def test_kernel_rates_refuse_a_figure_without_a_source():
    with pytest.raises(LabInputError) as err:
        KernelRates.from_data({"hbm_bandwidth": {"value": 1e12, "source": "x"}})
    assert err.value.field == "gpu"
    with pytest.raises(LabInputError):
        KernelRates(1e12, 0.8, 100, 0.8, 1.0, sources=(("hbm_bandwidth", "x"),))
    with pytest.raises(LabInputError):
        KernelRates(1e12, 1.5, 100, 0.8, 1.0)


def test_a100_gemm_reproduces_hes_power_limited_rate():
    # H. He 2024: cuBLAS 8192^3 FP16 with randn inputs, 258 TFLOP/s on an A100; a job runs
    # at the slowest GPU of a node, 745/755 of the median (ml-engineering, 8 x H200).
    t = gemm_time(A100, 8192, 8192, 8192)
    assert 2 * 8192 ** 3 / t / 1e12 == pytest.approx(258 * SLOWEST_GPU, rel=0.005)
    assert pytest.approx(1421 / 1439, rel=0.002) == SLOWEST_GPU  # B200's node: the same


def test_hopper_gemm_is_mamf_times_the_sustained_clock():
    # MAMF 794.5 TFLOP/s (burst) x MSMF/MAMF 702.9/828.0 measured on the same die.
    assert matmul_rate(H100) / 1e12 == pytest.approx(794.5 * 702.9 / 828.0 * SLOWEST_GPU,
                                                     rel=1e-3)
    assert matmul_rate(H100, fp8=True) / 1e12 == pytest.approx(
        1402.6 * 702.9 / 828.0 * SLOWEST_GPU, rel=1e-3)
    assert matmul_rate(A100, fp8=True) == matmul_rate(A100)  # no FP8 on Ampere


def test_hbm_copy_rates_are_the_measured_ones():
    assert hbm_rate(A100) / 1e9 == pytest.approx(1536, rel=1e-3)  # FastIceFlo memcopy
    assert hbm_rate(H100) / 1e12 == pytest.approx(0.78 * 3.35)
    assert mem_time(A100, 1536e9) == pytest.approx(1.0, rel=1e-3)


def test_wave_quantisation_slows_small_matrices():
    # 2,048 tiles of 256x128 fill 19 waves of 108 SMs almost exactly; 218 tiles (either tile
    # shape) take 3 waves of 108, the last one mostly idle.
    assert wave(108, 8192, 8192) == pytest.approx(2048 / 2052)
    assert wave(108, 256 * 109, 256) == pytest.approx(218 / 324)
    narrow = 2 * 4096 * 1536 * 4096 / gemm_time(A100, 4096, 1536, 4096)
    wide = 2 * 4096 * 12288 * 4096 / gemm_time(A100, 4096, 12288, 4096)
    # TP 8's shard: 192 tiles in 2 waves of 108 (0.89 busy) against 1,536 in 15 (0.95)
    assert narrow < 0.95 * wide


def test_thin_gemms_are_memory_bound():
    # k = 64: 2·m·n·64 FLOPs over 2·m·n output bytes is below the A100's ridge.
    m = n = 8192
    t = gemm_time(A100, m, n, 64)
    assert t == pytest.approx((2 * (m * 64 + 64 * n) + 2 * m * n) / hbm_rate(A100))


def test_a_weight_gradient_accumulated_in_fp32_reads_and_writes_it():
    # An expert's fc1 weight gradient over its 512 tokens (Qwen3-235B at EP 8): fp32 C read
    # and written (8 B per element) makes it memory-bound; over 8,192 tokens it is not.
    m, n, k = 4096, 3072, 512
    fused = gemm_time(H100, m, n, k, accumulate=True)
    assert fused == pytest.approx((2 * (m * k + k * n) + 8 * m * n) / hbm_rate(H100))
    assert fused > 1.5 * gemm_time(H100, m, n, k)
    assert gemm_time(H100, m, n, 8192, accumulate=True) == gemm_time(H100, m, n, 8192)


def test_layer_ops_accumulate_weight_gradients_only_when_fused():
    qwen = get_model("qwen3-235b-a22b")
    common = dict(tp=4, cp=1, micro_batch=1, seq_len=4096, sp=True, moe=True, ep=8)
    plain = layer_ops(qwen, H100, **common)
    fused = layer_ops(qwen, H100, options=ComputeOptions(fp32_wgrad=True), **common)
    assert fused.forward == plain.forward
    wgrad = ("experts.fc1.wgrad", "experts.fc2.wgrad")
    assert all(fused.backward.named(n) > plain.backward.named(n) for n in wgrad)


def test_attention_curves_fit_the_published_bars():
    # FA3 paper, H100 hd128: forward 625 TFLOP/s at 2k, 648 at 16k; the fit within 5%.
    k = attention_kernels()[("h100-sxm", "flash3")]
    for s, published in ((2048, 625), (16384, 648), (1024, 565)):
        rate = k.forward[0] * s / (s + k.forward[1]) / 1e12
        assert rate == pytest.approx(published, rel=0.05)
    # FA2 on A100 scaled to its paper's 230 TFLOP/s plateau.
    assert attention_kernels()[("a100-80gb", "flash2")].forward[0] == pytest.approx(230e12)


def test_flash_time_uses_the_causal_curve_and_2_5x_backward():
    f, b = flash_time(H100, "flash3", 4096, 4096, 128, 32, True)
    flops = flash_flops(4096, 4096, 128, 32, True)
    # The causal forward bar at 4k (579 TFLOP/s, a burst benchmark), held to the power limit
    # as a GEMM is: x MSMF/MAMF 702.9/828.0, on the node's slowest GPU.
    sustained = 579 * 702.9 / 828.0 * SLOWEST_GPU
    assert flops / f / 1e12 == pytest.approx(sustained, rel=0.05)
    assert 2.5 * flops / b < flops / f  # backward runs slower than forward


def test_attention_is_held_to_the_power_limit_as_gemms_are():
    # A100: He's 258 TFLOP/s is already power-limited (matmul_sustain 1): its attention runs
    # at the FA2 paper's rate; H100: the sustain slows attention exactly as it slows a GEMM.
    assert A100.kernels.matmul_sustain == 1.0
    f_a, _ = flash_time(A100, "flash2", 8192, 8192, 128, 8, True)
    assert flash_flops(8192, 8192, 128, 8, True) / f_a == pytest.approx(
        attention_rate(A100, "flash2", 8192, 128, True))
    fast = replace(H100, kernels=replace(H100.kernels, matmul_sustain=1.0))
    f_h, b_h = flash_time(H100, "flash3", 8192, 8192, 128, 8, True)
    f_1, b_1 = flash_time(fast, "flash3", 8192, 8192, 128, 8, True)
    assert f_1 / f_h == pytest.approx(b_1 / b_h) == pytest.approx(H100.kernels.matmul_sustain)


def test_attention_falls_back_where_a_kernel_is_missing():
    assert best_attention(A100) == "flash2"  # FlashAttention-3 needs Hopper
    assert best_attention(H100) == "flash3"
    assert flash_time(A100, "flash3", 2048, 2048, 128, 8, True) == \
        flash_time(A100, "flash2", 2048, 2048, 128, 8, True)


def test_h800_is_an_h100_with_cut_nvlink():
    h800, cluster = get_gpu("h800"), get_cluster("hgx-h800")
    assert h800.bf16_flops == H100.bf16_flops and h800.kernels.hbm_bandwidth == 3.35e12
    assert cluster.intra.id == "nvlink-4-h800" and cluster.intra.bandwidth == 200e9
    assert cluster.intra.ring_busbw == 160e9  # DeepSeek-V3 sec 3.2.2
    assert "2412.19437" in h800.source and "2412.19437" in cluster.intra.source


def test_every_link_names_where_its_achieved_figures_come_from():
    for link in links().values():
        assert link.achieved_note.strip(), link.id
        assert 0 < link.ring_busbw <= link.bandwidth or link.kind == "scale-up"
    assert {c.gpu.id for c in clusters().values()} >= {"a100-80gb", "h100-sxm", "h800"}
    with pytest.raises(LabInputError):
        GPUSpec(id="x", name="x", memory_bytes=1, bf16_flops=1, scale_up_bandwidth=1,
                network_bandwidth=1, scale_up_domain=8, source="s", kernels={"x": 1})
    assert get_link("ib-hdr").ring_busbw == 24e9  # NVIDIA: 192 GB/s over 8 HDR ports


def test_layer_ops_lists_every_gemm_with_its_shape():
    model = get_model("llama-3.1-70b")
    ops = layer_ops(model, H100, tp=8, cp=1, micro_batch=1, seq_len=8192, sp=True)
    shapes = {k.name: k.shape for k in ops.forward.kernels if k.kind == "gemm"}
    q, kv = 64 * 128 // 8, 1 * 128  # 8 KV heads split 8 ways: one per GPU
    assert shapes["qkv"] == (8192, q + 2 * kv, 8192, 1)
    assert shapes["fc1"] == (8192, 2 * 28672 // 8, 8192, 1)
    assert shapes["fc2"] == (8192, 8192, 28672 // 8, 1)
    # backward: dgrad and wgrad of every forward GEMM, twice the FLOPs
    fwd_flops = sum(k.flops for k in ops.forward.kernels if k.kind == "gemm")
    bwd_flops = sum(k.flops for k in ops.backward.kernels if k.kind == "gemm")
    assert bwd_flops == pytest.approx(2 * fwd_flops)
    assert ops.attention == "flash3"


def test_tensor_parallelism_shrinks_the_matrices_and_they_run_slower():
    model = get_model("llama-3.1-8b")

    def gemm_rate(tp):
        ops = layer_ops(model, H100, tp=tp, cp=1, micro_batch=1, seq_len=4096, sp=True)
        gemm = [k for k in ops.forward.kernels if k.kind == "gemm"]
        return sum(k.flops for k in gemm) / sum(k.seconds for k in gemm)

    assert gemm_rate(8) < gemm_rate(1)


def test_sequence_parallelism_splits_the_norms_and_dropouts():
    model = get_model("gpt-3-175b")
    opts = ComputeOptions(attention="unfused", dropout=True)
    off = layer_ops(model, A100, tp=8, cp=1, micro_batch=1, seq_len=2048, sp=False, options=opts)
    on = layer_ops(model, A100, tp=8, cp=1, micro_batch=1, seq_len=2048, sp=True, options=opts)
    assert on.forward.of("memory") < off.forward.of("memory") / 2
    assert on.forward.of("gemm") == off.forward.of("gemm")


def test_moe_layer_runs_its_local_experts_as_a_grouped_gemm():
    model = get_model("deepseek-v3")
    ops = layer_ops(model, get_gpu("h800"), tp=1, cp=1, micro_batch=1, seq_len=4096, sp=False,
                    moe=True, ep=64)
    experts = next(k for k in ops.forward.kernels if k.name == "experts.fc1")
    m, n, k, batch = experts.shape
    assert batch == 256 // 64  # local experts
    assert m == 4096 * 8 * 64 // 256  # balanced top-8 routing over the EP group
    assert n == 2 * model.expert_ffn


def test_a_grouped_gemm_shares_its_waves_among_the_groups():
    """Megatron's --moe-grouped-gemm / DeepGEMM's grouped kernels: equal groups are
    gemm_time's batch; 32 experts of 256 tokens fill H800's 132 SMs where one alone, 32 tiles
    of 256 x 128 (up and gate, 2 x 2,048 wide), leaves three quarters idle; uneven groups
    count each group's row tiles."""
    h800 = get_gpu("h800")
    one = gemm_time(h800, 256, 4096, 7168)
    assert grouped_gemm_time(h800, (256,) * 32, 4096, 7168) == pytest.approx(
        gemm_time(h800, 256, 4096, 7168, batch=32))
    assert grouped_gemm_time(h800, (256,), 4096, 7168) == pytest.approx(one)
    assert wave(132, 256, 4096) == pytest.approx(32 / 132)
    assert grouped_gemm_time(h800, (256,) * 32, 4096, 7168) < 0.5 * 32 * one
    # 300 rows: two row tiles for the first group, one for the second (3 x 32 = 96 tiles).
    flops = 2.0 * 400 * 4096 * 7168
    moved = sum(2 * (m * 7168 + 7168 * 4096) + 2 * m * 4096 for m in (300, 100))
    assert grouped_gemm_time(h800, (300, 100, 0), 4096, 7168) == pytest.approx(
        max(flops / (matmul_rate(h800) * 96 / 132), moved / hbm_rate(h800)))


def test_head_and_optimizer():
    model = get_model("gpt-3-175b")
    head = head_ops(model, A100, tp=8, cp=1, micro_batch=1, seq_len=2048, sp=True)
    logits = next(k for k in head.output_forward.kernels if k.name == "logits")
    assert logits.shape[:3] == (2048, -(-model.vocab // 8), model.hidden)
    assert optimizer_time(A100, 1e9) == pytest.approx(52e9 / hbm_rate(A100))
