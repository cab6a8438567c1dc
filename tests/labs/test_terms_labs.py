"""More of the terms the lessons quote, counted by hand (tests/labs/test_terms.py holds the
first ones): the time each collective takes, the bytes each ZeRO stage and the offload move,
what a MoE layer holds per GPU. Every expected value is written out here from the model's
config, the datasheet and the measured rates the presets cite; none calls the engine's
helpers to get it.

Collectives as NCCL's tuning model prices them (NVIDIA/nccl src/graph/tuning.cc, 2.8-era):
time = latency + bytes / algBw, algBw = busBw x n / nsteps for a ring (nsteps = n - 1 for an
all-gather or reduce-scatter, 2(n - 1) for an all-reduce). Latencies, µs: base Simple 8.4, LL128
10.0; per hop on NVLink Simple 3.4, LL128 1.9; on the network Simple 9.6. A send/recv and each
leg of an all-to-all pay base + one hop (Simple). Measured bus bandwidths (labs/presets/
links.json, each with its source there): NVLink 4 ring 367.6 GB/s (8 x H200, NVLS off), which a
GPU's own scale-up link takes too (one physical link, one figure); InfiniBand NDR 48
GB/s a port; 25 Gb/s Ethernet 3 GB/s.
"""

import math

import pytest

from labs.context_parallel.lab import cp_cost
from labs.experts.inputs import MoEInput
from labs.experts.lab import simulate_moe
from labs.hardware.gpus import get_gpu
from labs.hardware.kernels import attention_rate, best_attention
from labs.hardware.links import get_cluster, get_link
from labs.model.presets import get_model

H100 = get_gpu("h100-sxm")
LLAMA70 = get_model("llama-3.1-70b")
US = 1e-6
SIMPLE_LAT = 8.4  # µs, tuning.cc baseLat ring Simple
NVLINK_HOP, NET_HOP = 3.4, 9.6  # µs, tuning.cc hwLat ring Simple
NVLINK4_BUS = 367.6e9
SEND = (SIMPLE_LAT + NVLINK_HOP) * US  # one send/recv, or one all-to-all, inside a node: 11.8 µs

# Llama 3.1 70B by hand (meta-llama config.json: 80 layers, hidden 8,192, 64 heads, 8 KV heads
# of 128, FFN 28,672, vocab 128,256, untied): Q and O 8,192², K and V 8,192 x 1,024, three
# MLP matrices 8,192 x 28,672, two norms per layer; the final norm; two embedding tables.
LAYER_70B = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
PARAMS_70B = 80 * LAYER_70B + 8192 + 2 * 128256 * 8192


def test_llama_70b_parameters_by_hand():
    assert PARAMS_70B == 70_553_706_496  # the model card's 70.6B
    assert LLAMA70.params == PARAMS_70B


# A GEMM on an H100 as the step model times it (labs.hardware.kernels): 2·m·n·k FLOPs at the
# matmul rate of a node's slowest GPU, 989.4 TFLOP/s x 0.803 (MAMF, 794.5 of 989) x 0.8489
# (sustained, 702.9 of 828.0) x 745/755 (slowest of 8), times the share of the 132 SMs its
# tiles (256 x 128 or 128 x 256, the better) keep busy over their waves; or its bytes at 78%
# of 3.35 TB/s (BabelStream), whichever is longer.
H100_MATMUL = 989.4e12 * 0.803 * 0.8489 * 745 / 755


def _gemm_by_hand(m, n, k):
    busy = max(tiles / (math.ceil(tiles / 132) * 132)
               for tiles in (math.ceil(m / 256) * math.ceil(n / 128),
                             math.ceil(m / 128) * math.ceil(n / 256)))
    return max(2 * m * n * k / (H100_MATMUL * busy),
               2 * (m * k + k * n + m * n) / (3.35e12 * 0.78))


# EP04: tensor parallelism, Llama 3.1 405B (hidden 16,384), 4,096 tokens, TP 8 in an NVLink 4
# node, sequence parallel (the lesson's good case).

@pytest.mark.parametrize("tp", [2, 8])
def test_tp_collective_time_by_hand(tp):
    """One of Megatron's f/g exchanges with SP: an all-gather and a reduce-scatter of the
    s·h activations, 4,096 x 16,384 x 2 B = 134,217,728 B, over t GPUs of NVLink 4. Simple
    beats LL128 for so large a message (at t = 8: 352.2 µs against 371.1 µs)."""
    from labs.tensor_parallel.inputs import Topology, TPInput
    from labs.tensor_parallel.lab import tensor_parallel, tp_cluster

    size = 4096 * 16384 * 2
    assert size == 134_217_728
    simple = (SIMPLE_LAT + (tp - 1) * NVLINK_HOP) * US + size * (tp - 1) / tp / NVLINK4_BUS
    ll128 = (10.0 + (tp - 1) * 1.9) * US + size * (tp - 1) / tp / (0.92 * NVLINK4_BUS)
    one = min(simple, ll128)
    assert one == simple
    topology = Topology("node", cluster=tp_cluster(H100, 8, "nvlink-4", "ib-ndr"))
    result = tensor_parallel(TPInput(get_model("llama-3.1-405b"), H100, topology, tp=tp))
    cost = result.cost
    assert cost.collective_sent == 2 * (tp - 1) / tp * size  # (t-1)/t of S, twice
    assert cost.collective_s == pytest.approx(2 * one, rel=1e-9)
    if tp == 8:
        assert cost.collective_s == pytest.approx(703.36e-6, rel=1e-4)
    # Forward: the exchanges after attention's and the MLP's row-split matrices block the
    # next matmul, both exposed whole.
    assert cost.forward_comm_s == pytest.approx(2 * 2 * one, rel=1e-9)
    # Backward (Megatron's default overlap): the row-split layers' output-gradient
    # all-gathers block; the column-split layers' input all-gather and gradient
    # reduce-scatter run beside their input- and weight-gradient GEMMs, each longer.
    s = 4096
    for m, n, k in ((s, 144 * 128 // tp, 16384), (s, 2 * 53248 // tp, 16384)):
        assert min(_gemm_by_hand(m, k, n), _gemm_by_hand(k, n, m)) > one
    assert cost.backward_comm_s == pytest.approx(2 * one, rel=1e-9)
    assert cost.comm_s == pytest.approx(6 * one, rel=1e-9)


# EP03: ZeRO, Llama 3.1 70B on 32 H100s (4 nodes of 8, a 400 Gb/s NDR port per GPU).

def _zero(model=LLAMA70, **kw):
    from labs.zero.inputs import ZeroInput
    from labs.zero.lab import simulate_zero

    return simulate_zero(ZeroInput(model=model, gpu=H100, **kw))


def test_zero_traffic_per_stage_by_hand():
    """Each GPU's wire bytes and seconds per step, S = 2 B x P of bf16 gradients (and
    weights). The ring's bus: the node's NVLink (367.6 GB/s) is below its eight NDR ports'
    share (8 x 48 = 384 GB/s), so it bounds; 3 of the 31 hops cross nodes (4 nodes)."""
    s = 2 * PARAMS_70B
    gather = (SIMPLE_LAT + 28 * NVLINK_HOP + 3 * NET_HOP) * US + s * 31 / 32 / 367.6e9
    assert gather == pytest.approx(0.37200, rel=1e-4)
    # The all-reduce: 62 steps, 6 across nodes, its Simple latency x 1.9 past 2 x 64 KiB
    # ("plateau effect of ring"); NCCL's tree loses at 80 GB/s x 0.9 past two nodes.
    reduce = (SIMPLE_LAT + 56 * NVLINK_HOP + 6 * NET_HOP) * 1.9 * US \
        + s * 62 / 32 / 367.6e9
    tree = s / (min(0.9 * 367.6e9, 80e9) / 2)
    assert reduce < tree
    result = _zero(dp=32, zero=3)
    rows = {r.zero: r for r in result.traffic}
    # ZeRO-0 all-reduces the gradients: 2 x 31/32 x S. ZeRO-1 and 2 reduce-scatter them and
    # all-gather the weights: the same bytes. ZeRO-3 gathers the weights twice: 1.5x.
    expected = {0: (2 * 31 / 32 * s, reduce), 1: (2 * 31 / 32 * s, 2 * gather),
                2: (2 * 31 / 32 * s, 2 * gather), 3: (3 * 31 / 32 * s, 3 * gather)}
    for stage, (nbytes, seconds) in expected.items():
        assert rows[stage].bytes_per_gpu == pytest.approx(nbytes, rel=1e-12), stage
        assert rows[stage].seconds == pytest.approx(seconds, rel=1e-9), stage
    assert rows[3].bytes_per_gpu == pytest.approx(410.09e9, rel=1e-4)  # "410 GB"
    # Exposed: forward's gather past the forward pass, backward's two past the backward.
    forward, backward = result.forward_seconds, result.backward_seconds
    assert rows[3].exposed_seconds == pytest.approx(
        max(0.0, gather - forward) + max(0.0, 2 * gather - backward), rel=1e-9)


def test_zero_traffic_on_ethernet_is_exposed_by_hand():
    """The same ZeRO-3 on 25 Gb/s Ethernet: the node's eight ports give 8 x 3 = 24 GB/s, far
    below NVLink, and every collective outlasts its pass."""
    s = 2 * PARAMS_70B
    gather = (SIMPLE_LAT + 28 * NVLINK_HOP + 3 * NET_HOP) * US + s * 31 / 32 / (8 * 3e9)
    result = _zero(dp=32, zero=3, link="eth-25g")
    row = next(r for r in result.traffic if r.zero == 3)
    assert row.seconds == pytest.approx(3 * gather, rel=1e-9)
    assert row.exposed_seconds == pytest.approx(
        3 * gather - result.forward_seconds - result.backward_seconds, rel=1e-9)


@pytest.mark.parametrize(("model", "dp", "zero", "gpus_on_node"), [
    ("llama-3.1-70b", 32, 3, 8),  # the lesson's offload case
    ("llama-3.1-8b", 1, 2, 1),  # one GPU: its shard is the whole model
])
def test_zero_offload_by_hand(model, dp, zero, gpus_on_node):
    """ZeRO-Offload (Ren et al. 2021): the rank's optimizer shard, P/D parameters, lives in
    host RAM. Per step its bf16 gradients go down PCIe 5.0 x16 (64 GB/s) and its updated bf16
    weights come back, 2 + 2 B a parameter; CPU Adam reads the fp32 weight, gradient and two
    moments and writes three back, 28 B a parameter, at the node's 2 sockets x 8 channels x
    4,400 MT/s (DDR5-4800 at two DIMMs a channel) x 8 B = 563.2 GB/s shared by the node's
    ranks."""
    params = {"llama-3.1-70b": PARAMS_70B, "llama-3.1-8b": 8_030_261_248}[model]
    shard = params / dp
    result = _zero(get_model(model), dp=dp, zero=zero, offload=True)
    o = result.offload
    assert o.pcie_down_bytes == pytest.approx(2 * shard, rel=1e-12)
    assert o.pcie_up_bytes == pytest.approx(2 * shard, rel=1e-12)
    assert o.pcie_seconds == pytest.approx(4 * shard / 64e9, rel=1e-12)
    host = 2 * 8 * 4400e6 * 8
    assert host == 563.2e9
    assert o.adam_bytes == pytest.approx(28 * shard, rel=1e-12)
    assert o.adam_seconds == pytest.approx(28 * shard * gpus_on_node / host, rel=1e-12)
    if model == "llama-3.1-70b":
        assert o.adam_seconds == pytest.approx(0.87691, rel=1e-4)


# EP06: context parallelism, Llama 3.1 70B, one 131,072-token sequence over 8 ranks on
# NVLink 4 (send/recv and all-to-all at its measured 367.6 GB/s).
S, C = 131072, 8
KV_TOKEN_70B = 8 * (128 + 128) * 2  # K and V of 8 KV heads of 128, bf16


@pytest.mark.parametrize("layout", ["zigzag", "allgather", "ulysses"])
def test_cp_communication_time_by_hand(layout):
    cost = cp_cost(LLAMA70, S, C, layout, get_link("nvlink-4"), H100)
    local = S // C
    if layout == "zigzag":
        # c - 1 sends of the rank's K/V block, 16,384 x 4,096 B = 67.1 MB, one after another.
        block = local * KV_TOKEN_70B
        expected = (C - 1) * (SEND + block / NVLINK4_BUS)
    elif layout == "allgather":
        # One all-gather of the whole sequence's K/V (536.9 MB): a ring of 7 steps, Simple.
        expected = (SIMPLE_LAT + 7 * NVLINK_HOP) * US + 7 / 8 * S * KV_TOKEN_70B / NVLINK4_BUS
    else:
        # Four all-to-alls: Q (64 heads), K and V (8 heads each), the output (64 heads), each
        # head 128 wide in bf16; a GPU keeps 1/8 of each and sends 7/8.
        shards = [local * heads * 128 * 2 for heads in (64, 8, 8, 64)]
        expected = sum(SEND + 7 / 8 * x / NVLINK4_BUS for x in shards)
    assert cost.comm_s == pytest.approx(expected, rel=1e-9)
    quoted = {"zigzag": 1.3605e-3, "allgather": 1.3101e-3, "ulysses": 1.4849e-3}[layout]
    assert cost.comm_s == pytest.approx(quoted, rel=1e-4)


def test_cp_ring_exposes_what_outlasts_the_attention_by_hand():
    """4,096 tokens over 8 ranks on 25 Gb/s Ethernet (each rank alone on its port, 3 GB/s
    measured): 7 sends of 512 x 4,096 B = 2.1 MB at 8.4 + 9.6 µs each, against the busiest
    rank's attention (zigzag: s(s + 1)/2c cells x 2 x 256 FLOPs x 64 heads) at the kernel's
    rate, a round of it (the busiest rank's ÷ 8) beside each send; a send hides only behind
    its own round, so what each send outlasts its round shows, 7 times (round-24 cold
    reading A, finding 1: not the sends less all the attention)."""
    s = 4096
    cost = cp_cost(LLAMA70, s, C, "zigzag", get_link("eth-25g"), H100)
    block = s // C * KV_TOKEN_70B
    assert block == 2_097_152
    comm = (C - 1) * ((SIMPLE_LAT + NET_HOP) * US + block / 3e9)
    assert cost.comm_s == pytest.approx(comm, rel=1e-9)
    flops = 2 * 256 * 64 * (s * (s + 1) // (2 * C))
    attention = flops / attention_rate(H100, best_attention(H100), s // C, 128, False)
    assert attention < comm
    assert cost.exposed_s == pytest.approx((C - 1) * (comm / (C - 1) - attention / C),
                                           rel=1e-9)


# EP07: Mixtral 8x7B on one DGX H100 node, EP 8, 4,096 tokens per GPU.
EXPERT = 3 * 4096 * 14336  # one expert's gate, up and down matrices
PARAMS_MIXTRAL = 46_702_792_704  # test_terms.py counts it


def test_moe_dispatch_time_and_weights_per_gpu_by_hand():
    """The all-to-all: each GPU sends 7 x 1,024 token copies of 4,096 x 2 B (58.7 MB) to its
    peers over NVLink at once, after one send's latency. Each GPU holds one expert of each of
    the 32 layers and every weight that is not an expert's."""
    result = simulate_moe(MoEInput(model=get_model("mixtral-8x7b"),
                                   cluster=get_cluster("dgx-h100"), nodes=1, ep=8))
    sent = 7 * 1024 * 4096 * 2
    assert result.dispatch_s == pytest.approx(SEND + sent / NVLINK4_BUS, rel=1e-9)
    assert result.dispatch_s == pytest.approx(171.5e-6, rel=1e-3)
    shared = PARAMS_MIXTRAL - 32 * 8 * EXPERT
    assert result.experts_per_gpu == 1
    assert result.params_per_gpu == shared + 32 * EXPERT == 7_242_780_672
    assert math.isclose(result.params, PARAMS_MIXTRAL)


# EP05: pipeline stages, Llama 3.1 70B on H100s, TP 8 inside each of 8 stages, 4,096 tokens,
# one sequence a micro-batch, the 16-byte Adam recipe, selective recomputation (Megatron's
# sequence parallelism with TP).

@pytest.mark.parametrize(("schedule", "m", "v", "peaks"), [
    ("1f1b", 32, 1, (8, 1)),  # rank r holds p - r micro-batches at its peak
    ("gpipe", 32, 1, (32, 32)),  # every micro-batch's forward before any backward
    # Megatron's interleaved warm-up, 2(p - r - 1) + (v - 1)p chunks, and the one in hand.
    ("interleaved-1f1b", 16, 2, (2 * 7 + 8 + 1, 2 * 0 + 8 + 1)),
])
def test_pipeline_stage_memory_by_hand(schedule, m, v, peaks):
    """Each of ranks 0 and 7 holds 10 layers, as v chunks. Its state: 16 B a parameter of its
    layers' matrices split over TP 8, their two norms per layer replicated on each GPU of the
    group (Megatron keeps the norm weights whole), rank 0 the input embedding
    (vocab-parallel), rank 7 the output head and the final norm. Its activations: Korthikanti
    et al. 2022 Table 2, selective recomputation with sequence parallelism, 34·s·b·h/t bytes
    a layer, for each chunk of a micro-batch it holds at its peak. Rank 0 adds the token
    ids (8 B per token; Llama, trained without dropout, keeps no embedding dropout mask),
    whole on every TP rank (Megatron-LM's get_batch_on_this_tp_rank broadcasts them; round-22
    cold reading Q, finding 2: over t until then), for each micro-batch it holds (peak / v);
    rank 7 the final norm's output
    (4·s·h/t) and the fp32 logits (4·s·v/t), once (the loss's backward follows its
    forward) except in GPipe."""
    from labs.pipeline.inputs import PipelineLabInput
    from labs.pipeline.lab import run_pipeline_lab
    from labs.schedules.inputs import PipelineInput

    s, h, vocab, t = 4096, 8192, 128256, 8
    norms = 2 * h
    layers = 10 * (LAYER_70B - norms)
    state0 = 16 * ((layers + vocab * h) / t + 10 * norms)
    state7 = 16 * ((layers + vocab * h) / t + 10 * norms + h)
    unit = 10 // v * 34 * s * h / t  # one micro-batch through one chunk
    assert 10 * 34 * s * h / t == 1_426_063_360
    edge0 = peaks[0] / v * 8 * s
    edge7 = (m if schedule == "gpipe" else 1) * (4 * s * h / t + 4 * s * vocab / t)
    result = run_pipeline_lab(PipelineLabInput(
        PipelineInput(schedule=schedule, stages=8, microbatches=m, virtual=v), LLAMA70, H100,
        tp=8, recompute="selective", seq_len=s))
    mem = result.memory
    assert (result.result.peak_activations[0], result.result.peak_activations[7]) == peaks
    assert mem.state_per_rank[0] == pytest.approx(state0, rel=1e-12)
    assert mem.state_per_rank[7] == pytest.approx(state7, rel=1e-12)
    assert mem.activation_bytes[0] == pytest.approx(peaks[0] * unit, rel=1e-12)
    assert mem.activation_bytes[7] == pytest.approx(peaks[1] * unit, rel=1e-12)
    assert mem.embedding_and_logits[0] == pytest.approx(edge0, rel=1e-12)
    assert mem.embedding_and_logits[7] == pytest.approx(edge7, rel=1e-12)
    assert mem.total_bytes[0] == pytest.approx(state0 + peaks[0] * unit + edge0, rel=1e-12)
    assert mem.total_bytes[7] == pytest.approx(state7 + peaks[1] * unit + edge7, rel=1e-12)
    if schedule == "1f1b":  # the lesson's "30.6 GB" and "20.9 GB"
        assert mem.total_bytes[0] == pytest.approx(30.63e9, rel=1e-3)
        assert mem.total_bytes[7] == pytest.approx(20.92e9, rel=1e-3)


# EP02: data parallelism, 14 GB of bf16 gradients (a 7B model) on 1,024 H100s, servers of 8
# on NVLink 4 with eight 400 Gb/s NDR ports each, DDP's buckets of 1 MiB.

def test_dp_bucket_count_and_time_by_hand():
    """13,352 buckets of 1,048,576 B. Each is all-reduced as NCCL runs it over 1,024 GPUs,
    8 a server (issue 36, round 6: the same function EP08 times it with, no two-level
    reading): its tree, a chain of the server's 8 GPUs over NVLink and a tree across the 128
    servers, beats a ring of 2 x 1,023 hops. Its busBw is NVLink's 367.6 GB/s (the server's
    eight 48 GB/s ports give 384), x 0.9 and capped at 80 GB/s past two nodes, LL's /3.8
    (capped at current NCCL's 20.4 GB/s),
    tuning.cc's correction 0.5 for a 1 MiB message (log2 of its 64-byte units, 14), half of
    that bandwidth each way; latency 4.4 + 2 x (7 NVLink hops x 0.52 x 1.8 + log2(128) x 5.0)
    µs. Simple's 1,092 µs of latency (28 and 50 µs a hop) loses."""
    from labs.data_parallel.inputs import DataParallelInput
    from labs.data_parallel.lab import simulate
    from labs.model.presets import custom_model

    size, grads = 1024 * 1024, 14e9
    assert math.ceil(grads / size) == 13_352
    # Current NCCL caps LL past two nodes at llMaxBws' 20.4 GB/s (an H100 server's Intel
    # host; labs.hardware.nccl.ll_cap, d488391): 80 / 3.8 = 21.1 GB/s is capped.
    tree_bw = min(min(0.9 * 367.6e9, 80e9) / 3.8, 20.4e9) * 0.5
    tree = (4.4 + 2 * (7 * 0.52 * 1.8 + 7 * 5.0)) * US + size / (tree_bw / 2)
    result = simulate(DataParallelInput(model=custom_model(7e9), grad_bytes=grads, gpus=1024,
                                        link="ib-ndr", nics_per_node=8, overlap="bucketed",
                                        bucket_bytes=size))
    point = result.point
    # The textbook reading: one flat ring of 1,024 ports at the datasheet's 50 GB/s and 5 µs
    # a hop, 2 x 1,023 hops: 10.23 ms of latency a bucket.
    flat = 2 * 1023 * 5e-6 + 2 * 1023 / 1024 * size / 50e9
    assert result.flat_ring.bucket_s == pytest.approx(flat, rel=1e-9)
    assert point.buckets == 13_352
    assert point.allreduce_bytes_per_gpu == pytest.approx(2 * 1023 / 1024 * grads, rel=1e-12)
    assert point.bucket_algorithm == point.bucket_across == "tree"
    assert point.bucket_s == pytest.approx(tree, rel=1e-9)
    assert point.bucket_s == pytest.approx(293.1e-6, rel=1e-3)  # 286.7 us before the LL cap


# EP12: failures. Llama 3 405B's pre-training (arXiv:2407.21783): 15.6T tokens in batches of
# 2,048 sequences of 8,192 tokens (sec 3.4.1, the final batch), 16,384 H100s at 400 TFLOP/s
# each (sec 3.3.2, "BF16 MFU 38-43%").

def test_failures_step_and_job_length_by_hand():
    """A step is 6 FLOPs a parameter a token over the GPUs' achieved rate; Llama 3.1 405B
    (126 layers, hidden 16,384, 8 KV heads of 128, FFN 53,248, vocab 128,256, untied) has
    405.85B parameters. Its step: 6 x 405.85e9 x 16,777,216 / (16,384 x 400e12) = 6.235 s; the
    job 15.6e12 / 16,777,216 = 929,832 steps, and the days it takes are their seconds over the
    goodput."""
    from labs.failures.inputs import FailuresInput
    from labs.failures.lab import (
        DAY,
        gpu_mtbi_llama3,
        llama3_step_s,
        llama3_steps,
        simulate_failures,
    )

    layer = 2 * 16384 * 16384 + 2 * 16384 * 1024 + 3 * 16384 * 53248 + 2 * 16384
    params = 126 * layer + 16384 + 2 * 128256 * 16384
    model = get_model("llama-3.1-405b")
    assert params == model.params == 405_853_388_800
    tokens = 2048 * 8192
    step = 6 * params * tokens / (16384 * 400e12)
    assert step == pytest.approx(6.2345, rel=1e-4)
    assert llama3_step_s(params) == pytest.approx(step, rel=1e-12)
    assert llama3_steps() == round(15.6e12 / tokens) == 929_832
    result = simulate_failures(FailuresInput(
        model=model, gpus=16_384, gpu_mtbi=gpu_mtbi_llama3(), step_s=step, step_gpus=16_384,
        steps=929_832, save="async", storage_bw=2e12, host_link=get_link("pcie-5"),
        interval=1800.0, restart=600.0))
    assert DAY == 86_400
    assert result.chosen.finish_days == pytest.approx(
        929_832 * step / result.chosen.goodput / 86_400, rel=1e-12)


# EP09: RL placement, Llama 3.1 8B (32 layers, hidden 4,096, 8 KV heads of 128, FFN 14,336,
# vocab 128,256, untied) trained with PP 2 on 8 H100s, engines of 2 GPUs.

def test_rl_cpu_adam_moves_each_ranks_weights_over_pcie_by_hand():
    """With the optimizer on the CPU each training GPU sends its gradients down, fp32 as its
    bill keeps them (Megatron's main gradients, what the CPU's Adam reads), and takes its
    updated bf16 weights back over PCIe 5.0 x16 (64 GB/s) every update: 4 + 2 B a parameter of
    the heavier stage, 16 layers, the final norm and the output head (round-18 cold reading B,
    finding 10: EP09 billed the gradients at 4 B and moved them at 2)."""
    from labs.rl.inputs import RLPlacementInput
    from labs.rl.lab import compute_rl_placement

    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    stage = 16 * layer + 4096 + 128256 * 4096
    kw = dict(model=get_model("llama-3.1-8b"), gpu=H100, train_gpus=8, pp=2, engine_gpus=2)
    with_cpu = compute_rl_placement(RLPlacementInput(**kw, cpu_adam=True))
    without = compute_rl_placement(RLPlacementInput(**kw))
    assert with_cpu.train_breakdown["weights"] == 2 * stage == 8_030_265_344
    assert with_cpu.train_breakdown["gradients"] == 4 * stage
    assert with_cpu.train_seconds - without.train_seconds == pytest.approx(
        (4 + 2) * stage / 64e9, rel=1e-9)


# Placement: where each rank of a job sits (labs.parallel.rank_map). Megatron numbers ranks
# TP fastest, then CP, DP, PP (megatron/core/parallel_state.py, RankGenerator); torchrun puts
# rank r on node r // gpus_per_node.

@pytest.mark.parametrize(("per_node", "spans"), [
    (8, {"tp": 1, "dp": 1, "pp": 2}),
    (4, {"tp": 1, "dp": 2, "pp": 2}),
    (2, {"tp": 1, "dp": 4, "pp": 2}),
])
def test_placement_of_tp2_dp4_pp2_by_hand(per_node, spans):
    """TP 2 x DP 4 x PP 2, 16 ranks: rank = tp + 2·dp + 8·pp. TP pairs (0, 1), (2, 3), ...;
    DP groups {0, 2, 4, 6}, {1, 3, 5, 7}, {8, ...}, {9, ...}; PP pairs (0, 8), (1, 9), ...
    Groups are numbered by their lowest rank."""
    from labs.parallel.layout import ParallelLayout
    from labs.parallel.rank_map import group_colouring, group_summaries

    layout = ParallelLayout(tp=2, dp=4, pp=2)
    by_hand = {
        "tp": tuple(r // 2 for r in range(16)),
        "dp": tuple((r % 2) + 2 * (r // 8) for r in range(16)),
        "pp": tuple(r % 8 for r in range(16)),
    }
    for kind, category in by_hand.items():
        groups = {}
        for rank, group in enumerate(category):
            groups.setdefault(group, set()).add(rank // per_node)
        assert max(len(nodes) for nodes in groups.values()) == spans[kind]
        colouring = group_colouring(layout, kind, per_node)
        assert colouring.category == category, kind
        assert max(colouring.nodes_spanned()) == spans[kind], kind
    summary = {s.kind: s for s in group_summaries(layout, per_node, ("tp", "dp", "pp"))}
    assert {k: (s.size, s.count, s.nodes_spanned) for k, s in summary.items()} == {
        "tp": (2, 8, spans["tp"]), "dp": (4, 4, spans["dp"]), "pp": (2, 8, spans["pp"])}


def test_cp_activations_and_ring_buffers_by_hand():
    """Each rank keeps its s/c tokens' activations for backward: Korthikanti et al. 2022
    Table 2 with selective recomputation and no TP, 34·s·h bytes a layer, 80 layers; 131,072
    tokens over 8 ranks 365.1 GB, 8 times less than one GPU's 2.92 TB. The ring holds its own
    K/V block and the one arriving, 2 x 16,384 x 4,096 B."""
    cost = cp_cost(LLAMA70, S, C, "zigzag", get_link("nvlink-4"), H100)
    assert cost.activation_bytes_per_gpu == 80 * 34 * (S // C) * 8192 == 365_072_220_160
    assert cost.activation_bytes_no_cp == 80 * 34 * S * 8192
    assert cost.kv_held_bytes == 2 * (S // C) * KV_TOKEN_70B


@pytest.mark.parametrize(("gpus", "link", "microbatches"), [
    (8, "nvlink-4", 1),  # the lesson's good case
    (64, "eth-100g", 4),  # its gradient accumulation case
])
def test_dp_compute_and_crossover_by_hand(gpus, link, microbatches):
    """A GPU's step computes its micro-batches of 4 sequences of 4,096 tokens at 6 FLOPs a
    parameter a token (7B) at the H100's achieved rate: 989.4 TFLOP/s x 0.803 (MAMF, 794.5 of
    989) x 0.8489 (sustained over burst, 702.9 of 828.0 on the same die) = 674.4 TFLOP/s.
    The crossover: the tokens a GPU must compute to take as long as the all-reduce."""
    from labs.data_parallel.inputs import DataParallelInput
    from labs.data_parallel.lab import simulate
    from labs.model.presets import custom_model

    rate = 989.4e12 * 0.803 * 0.8489
    assert rate == pytest.approx(674.4e12, rel=1e-4)
    tokens = 4 * microbatches * 4096
    result = simulate(DataParallelInput(model=custom_model(7e9), grad_bytes=14e9, gpus=gpus,
                                        link=link, microbatches=microbatches))
    point, ratio = result.point, result.ratio
    assert ratio.tokens_per_gpu == tokens and ratio.global_batch_tokens == tokens * gpus
    assert point.compute_s == pytest.approx(6 * 7e9 * tokens / rate, rel=1e-12)
    assert ratio.flops_per_gpu == 6 * 7e9 * tokens
    assert ratio.crossover_tokens == pytest.approx(point.comm_s / (6 * 7e9 / rate), rel=1e-9)
    assert point.speedup == pytest.approx(gpus * point.compute_s
                                          / (point.compute_s + point.comm_s), rel=1e-12)
    if gpus == 8:  # NVLS at 480 GB/s: 24.5 GB in 51.1 ms, against 1.020 s of compute
        assert point.comm_s == pytest.approx(24.5e9 / 480e9 + (8.4 + 14 * 3.4) * US)
        assert point.compute_s == pytest.approx(1.0203, rel=1e-4)


@pytest.mark.parametrize(("tp", "ep", "etp", "experts_held"), [
    (1, 8, 1, 1),  # one expert of each layer per GPU
    (2, 8, 1, 1),
    (2, 4, 1, 2),  # two experts a GPU, each whole
    (2, 4, 2, 1),  # two experts a GPU, each split in half by expert-TP: one expert's weights
])
def test_moe_weights_per_gpu_by_hand(tp, ep, etp, experts_held):
    """Mixtral 8x7B on one DGX H100 node. TP splits each layer's attention matrices, 4,096 x
    (2 x 4,096 + 2 x 1,024), and the vocab-parallel embedding and head, 2 x 32,000 x 4,096;
    the router (4,096 x 8) and the norms (two of 4,096 a layer, the final one) are copied on
    every GPU; EP x expert-TP split the 32 x 8 experts. EP01's ledger holds the same weights
    at 2 B, and 16 B of state with Adam, ZeRO off."""
    from labs.memory.inputs import MemoryInput
    from labs.memory.lab import compute_memory

    split = 32 * 4096 * (2 * 4096 + 2 * 1024) + 2 * 32000 * 4096
    copied = 32 * (4096 * 8 + 2 * 4096) + 4096
    experts = 32 * 8 * EXPERT / (ep * etp)
    assert experts == 32 * experts_held * EXPERT
    per_gpu = split / tp + copied + experts
    result = simulate_moe(MoEInput(model=get_model("mixtral-8x7b"), tp=tp, ep=ep, etp=etp,
                                   cluster=get_cluster("dgx-h100"), nodes=1))
    assert result.params_per_gpu == pytest.approx(per_gpu, rel=1e-12)
    bill = compute_memory(MemoryInput(model=get_model("mixtral-8x7b"), gpu=H100, tp=tp, ep=ep,
                                      etp=etp, dp=8 // tp)).breakdown
    assert bill["weights"] == pytest.approx(2 * per_gpu, rel=1e-12)
    assert bill["weights"] + bill["gradients"] + bill["master_weights"] \
        + bill["optimizer_moments"] == pytest.approx(16 * per_gpu, rel=1e-12)


# EP10: low precision. Llama 3.1 70B, TP 8 x DP 8, ZeRO-1 (the lesson's Megatron case).

def test_fp8_delayed_scaling_ledger_by_hand():
    """TransformerEngine's per-tensor delayed scaling (amax_history_len=1024): each GPU holds
    its TP share of the weights in bf16 (2 B), of its linear layers' in FP8 (1 B) and FP8
    transposed (1 B), bf16 gradients, and ZeRO-1 shards fp32 master weights and Adam moments
    over DP 8. Beside the weights, each of its 80 x 4 GEMMs (QKV, output projection, the MLP's
    two) keeps for 5 FP8 tensors an fp32 amax history of 1,024 and a scale and its inverse:
    320 x 5 x 1,026 x 4 B = 6.57 MB, sharded by nothing."""
    from labs.memory.inputs import MemoryInput
    from labs.memory.lab import compute_memory

    linear = 80 * (LAYER_70B - 2 * 8192) / 8
    local = linear + 2 * 128256 * 8192 / 8 + 80 * 2 * 8192 + 8192
    scaling = 80 * 4 * 5 * (1024 + 2) * 4
    assert scaling == 6_566_400
    bill = compute_memory(MemoryInput(model=LLAMA70, gpu=H100, tp=8, dp=8, zero=1,
                                      recipe="fp8-delayed")).breakdown
    # The FP8 copies are of the linear layers only: the embedding, the output head and the
    # norms stay bf16 (TE casts its linear modules; round-17 cold reading of EP10, finding 5).
    assert bill["weights"] == pytest.approx(2 * local + (1 + 1) * linear + scaling, rel=1e-12)
    assert bill["gradients"] == pytest.approx(2 * local, rel=1e-12)
    assert bill["master_weights"] == pytest.approx(4 * local / 8, rel=1e-12)
    assert bill["optimizer_moments"] == pytest.approx(8 * local / 8, rel=1e-12)


@pytest.mark.parametrize("sp", [True, False])
def test_fp8_activations_by_hand(sp):
    """FP8 keeps the linear layers' saved inputs in 1 B instead of 2 (Korthikanti et al.'s
    34·s·h a layer with selective recomputation: QKV's and the first MLP's inputs, 4·s·h
    outside the TP split, and the output projection's and second MLP's, 10·s·h inside it).
    With sequence parallelism everything divides by t: 20 of the 34 stay 16-bit, 14 halve.
    Without it the norms and residuals stay whole: 16-bit 10 + 24/t, of which 4 + 10/t
    halve."""
    from labs.memory.inputs import MemoryInput
    from labs.memory.lab import compute_memory

    s, h, t = 4096, 8192, 8
    if sp:
        layer = s * h * (34 - 14) / t + s * h * 14 / t / 2
    else:
        fp8 = s * h * (4 + 10 / t)
        layer = s * h * (10 + 24 / t) - fp8 + fp8 / 2
    bill = compute_memory(MemoryInput(model=LLAMA70, gpu=H100, tp=t, dp=8, zero=1, seq_len=s,
                                      recipe="fp8-params", sp=sp)).breakdown
    assert bill["activations"] == pytest.approx(80 * layer, rel=1e-12)


def test_qlora_bill_by_hand():
    """QLoRA's case (Dettmers et al. 2023): LLaMA 65B (80 layers, hidden 8,192, 64 heads, FFN
    22,016, vocab 32,000, untied), r = 64 on every linear layer, 512 tokens, full
    recomputation, 12-byte Adam for the adapters. The linear layers, 80 x (4 x 8,192² + 3 x
    8,192 x 22,016), in NF4 (4 bits) with double-quantized constants (sec 3: an 8-bit scale
    per 64 weights and a 32-bit one per 256 of those, 0.127 bits); the rest (embeddings,
    norms) in bf16; one dequantized matrix at a time (the largest, 8,192 x 22,016, in bf16).
    Adapters: r x (d_in + d_out) per matrix, 2 B weights, 2 B gradients, 8 B moments. Kept
    activations: each layer's bf16 input (2·s·h); the first stage's token ids (LLaMA trains
    without dropout: no embedding dropout mask), the final norm's output and the fp32
    logits."""
    from labs.model.code import decode
    from labs.precision.inputs import PrecisionInput
    from labs.precision.lab import compute_precision

    s, h, ffn, v = 512, 8192, 22016, 32000
    linear = 80 * (4 * h * h + 3 * h * ffn)
    rest = 2 * v * h + 80 * 2 * h + h
    model = decode("L80.h8192.a64.f22016.v32000")
    assert model.params == linear + rest == 65_285_660_672
    trainable = 80 * 64 * (4 * (h + h) + 3 * (h + ffn))
    assert trainable == 799_539_200
    expected = {
        "weights": linear * 4 / 8 + rest * 2,
        "quant_constants": linear * (8 / 64 + 32 / (64 * 256)) / 8,
        "dequant_workspace": h * ffn * 2,
        "adapter_weights": 2 * trainable, "gradients": 2 * trainable, "master_weights": 0,
        "optimizer_moments": 8 * trainable,
        "activations": 80 * 2 * s * h,
        "embedding_and_logits": 8 * s + (4 * s * h + 4 * s * v),
    }
    result = compute_precision(PrecisionInput(model=model, gpu=H100, rank=64, modules="all",
                                              seq_len=s, recompute="full", ft_recipe="adam12"))
    qlora = result.finetune("qlora")
    assert qlora.trainable == trainable
    assert qlora.breakdown == pytest.approx(expected, rel=1e-12)
    assert qlora.total_bytes == pytest.approx(45.17e9, rel=1e-3)  # under QLoRA's 48 GB


def test_rl_moe_decode_reads_the_experts_a_batch_touches_by_hand():
    """Decoding Mixtral 8x7B, 4 requests a step on one H100: each token picks 2 of 8 experts,
    so an expert is missed by all 4 with chance (6/8)^4 and the step reads the shared weights
    and 1 - 0.75^4 = 68.4% of the experts' (bf16), and the 4 caches (32 layers x 8 KV heads
    x 128 x 2 x 2 B = 131,072 B a token, the mean context 1,024 + 2,048), at 80% of 3.35
    TB/s."""
    from labs.rl.serving_time import decode_seconds

    mixtral = get_model("mixtral-8x7b")
    experts = 32 * 8 * EXPERT
    shared = PARAMS_MIXTRAL - experts
    touched = 1 - (1 - 2 / 8) ** 4
    read = 2 * (shared + touched * experts) + 4 * 3072 * 32 * 8 * 128 * 2 * 2
    step = read / (3.35e12 * 0.8)
    assert step == pytest.approx(24.8e-3, rel=1e-2)
    assert decode_seconds(mixtral, H100, 3.35e12, 1, 4, 1024, 4096, "bf16") == pytest.approx(
        4096 * step, rel=1e-12)


def test_moe_layer_time_by_hand():
    """The balanced Mixtral layer on each GPU: its expert's two GEMMs on the 8 x 1,024 tokens
    routed to it (gate and up fused, 8,192 x 28,672 x 4,096; down, 8,192 x 4,096 x 14,336),
    timed as ``_gemm_by_hand`` says (both compute-bound, their waves 98.7% and 97.0% full);
    then dispatch and combine, the same all-to-all each way."""
    compute = _gemm_by_hand(8192, 2 * 14336, 4096) + _gemm_by_hand(8192, 4096, 14336)
    assert compute == pytest.approx(2 * 8192 * 4096 * 3 * 14336 / H100_MATMUL, rel=0.03)
    result = simulate_moe(MoEInput(model=get_model("mixtral-8x7b"),
                                   cluster=get_cluster("dgx-h100"), nodes=1, ep=8))
    assert result.routing.compute_s == pytest.approx((compute,) * 8, rel=1e-9)
    dispatch = SEND + 7 * 1024 * 4096 * 2 / NVLINK4_BUS
    assert result.layer_s == pytest.approx(2 * dispatch + compute, rel=1e-9)
    assert result.layer_s == pytest.approx(4.763e-3, rel=1e-3)


@pytest.mark.parametrize(("tp", "tflops"), [(1, 656), (8, 636)])
def test_tp_gemm_rate_by_hand(tp, tflops):
    """EP04's "GEMM TFLOP/s": one Llama 3.1 405B layer's GEMMs on 4,096 tokens, each matrix
    1/t wide: QKV 16,384 -> (128 + 2 x 8) heads x 128, the output projection 128 x 128 ->
    16,384, gate and up 16,384 -> 2 x 53,248, down 53,248 -> 16,384. Forward (m, n, k),
    backward the input gradient (m, k, n) and the weight gradient (k, n, m)."""
    from labs.tensor_parallel.inputs import Topology, TPInput
    from labs.tensor_parallel.lab import tensor_parallel, tp_cluster

    s, h = 4096, 16384
    shapes = [(s, 144 * 128 // tp, h), (s, h, 128 * 128 // tp), (s, 2 * 53248 // tp, h),
              (s, h, 53248 // tp)]
    seconds = sum(_gemm_by_hand(m, n, k) + _gemm_by_hand(m, k, n) + _gemm_by_hand(k, n, m)
                  for m, n, k in shapes)
    flops = sum(3 * 2 * m * n * k for m, n, k in shapes)
    topology = Topology("node", cluster=tp_cluster(H100, 8, "nvlink-4", "ib-ndr"))
    cost = tensor_parallel(TPInput(get_model("llama-3.1-405b"), H100, topology, tp=tp)).cost
    assert cost.gemm_flops == flops
    assert cost.gemm_s == pytest.approx(seconds, rel=1e-9)
    assert round(cost.gemm_rate / 1e12) == tflops


@pytest.mark.parametrize("tp", [1, 8])
def test_tp_memory_bound_ops_by_hand(tp):
    """The rest of EP04's per-layer compute: the memory-bound kernels (labs.model.ops, fused
    as Megatron Core runs them, no dropout) at 78% of 3.35 TB/s, bytes per token: two norms,
    read 2 B and write 2 B of h each way (backward 6), the residual adds (6 B of h each way),
    SwiGLU (6 B forward, 10 backward, of FFN/t), RoPE on the queries and keys (4 B of their
    widths each way); with sequence parallelism (TP > 1) the norms and adds split by t. At TP
    8 each GPU keeps one of the 8 KV heads. Compute = GEMMs + attention + these; the step
    adds the embedding, the output layer and the loss."""
    from labs.tensor_parallel.inputs import Topology, TPInput
    from labs.tensor_parallel.lab import tensor_parallel, tp_cluster

    tokens, h, ffn = 4096, 16384, 53248
    split = 1 / tp  # norms, adds: split along s by SP when t > 1 (1 at t = 1)
    q, kv = 128 * 128 // tp, max(1, 8 // tp) * 128
    forward = tokens * (2 * 4 * h * split + 2 * 6 * h * split + ffn // tp * 6 + 4 * (q + kv))
    backward = tokens * (2 * 6 * h * split + 2 * 6 * h * split + ffn // tp * 10 + 4 * (q + kv))
    topology = Topology("node", cluster=tp_cluster(H100, 8, "nvlink-4", "ib-ndr"))
    cost = tensor_parallel(TPInput(get_model("llama-3.1-405b"), H100, topology, tp=tp)).cost
    assert cost.memory_s == pytest.approx((forward + backward) / (3.35e12 * 0.78), rel=1e-12)
    assert cost.compute_s == pytest.approx(cost.gemm_s + cost.attention_s + cost.memory_s,
                                           rel=1e-12)
    # The step: 126 layers, the embedding (read and write 2 B of h; backward 6), the final
    # norm (4 and 6 B of h), the vocab-parallel logits GEMMs (4,096 x 128,256/t x 16,384,
    # forward, input and weight gradients) and Megatron's fp32 cross-entropy, 38 B a logit
    # forward and 14 backward (labs.model.head's count of its kernels).
    vocab = math.ceil(128256 / tp)
    head = (tokens * split * (4 + 6 + 4 + 6) * h + tokens * vocab * (38 + 14)) / (3.35e12 * 0.78) \
        + _gemm_by_hand(tokens, vocab, h) + _gemm_by_hand(tokens, h, vocab) \
        + _gemm_by_hand(h, vocab, tokens)
    assert cost.step_compute_s == pytest.approx(126 * cost.compute_s + head, rel=1e-12)


# EP08: the 3D recipe's seed, GPT-3 175B (96 layers, hidden 12,288, 96 heads, FFN 49,152,
# vocab 50,257 tied, 2,048 learned positions, LayerNorm and a bias on every linear layer) on
# 8 DGX A100 nodes, TP 8 x PP 4 x DP 2, ZeRO-1.

def test_recipe_optimizer_step_by_hand():
    """The optimizer runs on the slowest stage's local parameters, its shard under ZeRO-1 (over
    DP 2): Megatron's mixed-precision Adam touches 52 B a parameter (model gradient into the
    fp32 main gradient 2 + 4, unscale 4 + 4, norm 4, FusedAdam 16 + 12, master to model 4 +
    2) at 75.33% of the A100's 2,039 GB/s (a measured 1,536 GB/s memcopy). The last stage
    holds 24 layers and the tied embedding's copy. TP 8 splits each layer's matrices and the
    column-split biases (QKV 3h, the MLP's up 4h) and the vocab; every GPU of the group keeps
    the row-split projections' biases (the attention output's and the MLP down's, h each:
    Megatron's RowParallelLinear adds them after the all-reduce), the two LayerNorms (2h
    each) and the final one."""
    from labs.recipe.inputs import Plan
    from labs.recipe.lab import evaluate

    h, v = 12288, 50257
    split = 24 * (12 * h * h + 3 * h + 4 * h) + v * h
    whole = 24 * (h + h + 2 * 2 * h) + 2 * h
    local = (split / 8 + whole) / 2
    result = evaluate(Plan(tp=8, pp=4, dp=2, zero=1, microbatches=16, seq_len=2048),
                      get_model("gpt-3-175b"), get_cluster("dgx-a100"), 8)
    assert result.timing.optimizer_s == pytest.approx(local * 52 / (2.039e12 * 0.7533),
                                                      rel=1e-12)


def test_rl_prefill_decode_split_by_hand():
    """Separate prefill and decode engines (4 engines of 2 GPUs, 1 of them prefill): the
    prefill engine takes all 64 prompts of 1,024 tokens at half the peak on its 2 GPUs
    (0.994 s), the 3 decode engines their 22, 21 and 21 requests (the fullest one paces the
    rollout, reading weights and caches from 2 GPUs' HBM for 4,096 steps), and each prompt's
    cache, 1,024 x 131,072 B, crosses the prefill GPUs' 400 Gb/s ports at NCCL's achieved
    48 GB/s each (InfiniBand NDR's busBW, not the datasheet's 50: EP02's one rule)."""
    from labs.rl.inputs import RLPlacementInput
    from labs.rl.lab import compute_rl_placement

    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    params = 32 * layer + 4096 + 2 * 128256 * 4096
    matmul = params - 128256 * 4096  # the input embedding is a lookup
    kv_token = 2 * 8 * 128 * 32 * 2
    prefill = 2 * matmul * 64 * 1024 / (2 * 989.4e12 * 0.5)
    decode = 4096 * (2 * params + 22 * (1024 + 2048) * kv_token) / (2 * 3.35e12 * 0.8)
    kv_move = 64 * 1024 * kv_token / (2 * 48e9)
    assert prefill < decode
    result = compute_rl_placement(RLPlacementInput(
        model=get_model("llama-3.1-8b"), gpu=H100, train_gpus=8, engine_gpus=2,
        placement="separate-pd", engines=4, prefill_engines=1, prompt_len=1024,
        response_len=4096, prompts=8, responses_per_prompt=8))
    assert result.rollout_seconds == pytest.approx(decode + kv_move, rel=1e-12)
    assert result.rollout_seconds == pytest.approx(19.132, rel=1e-4)


def test_cp_ulysses_holds_its_heads_whole_sequence_by_hand():
    """Ulysses gives each of 8 ranks 1 of the 8 KV heads over all 131,072 tokens: 131,072 x
    (128 + 128) x 2 B of K and V."""
    cost = cp_cost(LLAMA70, S, C, "ulysses", get_link("nvlink-4"), H100)
    assert cost.kv_held_bytes == S * 1 * 256 * 2 == 67_108_864


@pytest.mark.parametrize(("zero", "factor"), [(0, 2 / 3), (3, 1.0)])
def test_zero_crossover_by_hand(zero, factor):
    """EP03's crossover: the stage's collectives, one after another, against the step's
    compute; they take as long at comm_s / (compute_s / 4,096) tokens a GPU. ZeRO-0 moves
    2 x 31/32 of S, ZeRO-3 3 x 31/32: k/3 of 6·P·T's ratio, k = 2 or 3."""
    from labs.zero.lab import crossover

    s = 2 * PARAMS_70B
    gather = (SIMPLE_LAT + 28 * NVLINK_HOP + 3 * NET_HOP) * US + s * 31 / 32 / 367.6e9
    reduce = (SIMPLE_LAT + 56 * NVLINK_HOP + 6 * NET_HOP) * 1.9 * US + s * 62 / 32 / 367.6e9
    comm, sent = (reduce, 2 * 31 / 32 * s) if zero == 0 else (3 * gather, 3 * 31 / 32 * s)
    result = _zero(dp=32, zero=zero)
    c = crossover(result)
    assert c.tokens_per_gpu == 4096
    assert c.factor == pytest.approx(factor)
    assert c.comm_s == pytest.approx(comm, rel=1e-9)
    assert c.comm_bytes == pytest.approx(sent, rel=1e-12)
    assert c.busbw == pytest.approx(sent / comm, rel=1e-9)
    assert c.crossover_tokens == pytest.approx(comm * 4096 / result.compute_seconds, rel=1e-9)


def test_precision_offload_layer_forward_by_hand():
    """EP10's offload hides a layer's activation copy behind that layer's forward (and the
    reload behind its backward): the layer as EP08's step model times it, kernels and TP
    collectives (the copy engine runs beside both; round-29 cold reading B, finding 1). One
    Llama 3.1 70B layer on one GPU of TP 8, 8,192 tokens. Its GEMM and attention FLOPs alone
    (2 a weight, its matrices and norms and an 80th of the final norm, and QK^T and AV, 2 x 64
    heads x 8,192 x 256 a token) at the step model's full-wave matmul rate (989.4 TFLOP/s x
    0.803 x 0.8489 x 745/755) take 3.046 ms, the window until round 29: a floor the step
    model's kernels (norms, activations, part-filled waves) pass, and the collectives add."""
    from labs.hardware.links import node_cluster
    from labs.parallel.layer_time import Group, layer_time
    from labs.precision.inputs import PrecisionInput
    from labs.precision.lab import compute_precision

    per_token = 2 * (LAYER_70B + 8192 / 80) + 2 * 64 * 8192 * 256
    flops_only = 8192 * per_token / 8 / H100_MATMUL
    assert flops_only == pytest.approx(3.0462e-3, rel=1e-4)
    o = compute_precision(PrecisionInput(model=LLAMA70, gpu=H100, tp=8, pp=4, dp=1,
                                         seq_len=8192, offload=1.0, recompute="none",
                                         recipe="adam16")).offload
    lt = layer_time(LLAMA70, node_cluster(H100), tp=Group(8, 8), cp=Group(), ep=Group(),
                    micro_batch=1, seq_len=8192, sp=True, recompute="none")
    assert o.forward_kernels_s == pytest.approx(lt.forward.compute, rel=1e-12)
    assert o.forward_comms_s == pytest.approx(lt.forward.exposed, rel=1e-12)
    assert o.forward_comms_s > 0
    assert o.forward_s == pytest.approx(lt.forward.seconds, rel=1e-12)
    assert o.backward_s == pytest.approx(lt.backward.seconds, rel=1e-12)
    assert flops_only < o.forward_kernels_s < o.forward_s
    assert o.link_bandwidth == 64e9  # PCIe 5.0 x16
    assert o.hidden_share == pytest.approx(min(1.0, o.forward_s / (o.layer_bytes / 64e9)),
                                           rel=1e-12)


def test_moe_inference_holds_every_expert_by_hand():
    """EP01 in inference: Mixtral 8x7B in bf16 on one GPU holds all 46.7B weights, the 32 x
    8 experts among them, 2 B each."""
    from labs.memory.inputs import MemoryInput
    from labs.memory.lab import compute_memory

    bill = compute_memory(MemoryInput(model=get_model("mixtral-8x7b"), gpu=H100, mode="infer",
                                      recipe="bf16", seq_len=4096)).breakdown
    assert bill["weights"] == 2 * PARAMS_MIXTRAL


def test_switch_balance_loss_by_hand():
    """EP07 step 10's balance loss, E·Σ f_i·P_i with P_i = f_i (Fedus et al. 2021, eq. 4),
    counted by hand: 4 experts getting 6, 2, 0 and 0 of 8 copies: 4 x (0.75² + 0.25²) = 2.5;
    balanced, 1; every copy on one expert, E = 4."""
    from labs.experts.lab import balance_loss

    assert balance_loss((6, 2, 0, 0)) == pytest.approx(2.5, rel=1e-12)
    assert balance_loss((2, 2, 2, 2)) == pytest.approx(1.0, rel=1e-12)
    assert balance_loss((8, 0, 0, 0)) == pytest.approx(4.0, rel=1e-12)
