"""The two engine terms issue 35's mutation check (130 one-line changes) found no test
catching, by hand: NCCL's tree all-reduce bandwidth cap (tuning.cc maxTreeBw: 110 GB/s up to
two nodes, 80 GB/s beyond; no lesson state lets the tree win where it binds, so only this
count holds it) and the fp32 main_grad traffic of a fused weight-gradient GEMM."""

import pytest

from labs.hardware import nccl
from labs.hardware.links import get_cluster

GIB = 2**30  # past tuning.cc's correction table (log2(bytes / 64) = 24 > 21): factor 1


@pytest.mark.parametrize("nodes, cap", [(2, 110e9), (4, 80e9), (16, 80e9)])
def test_tree_bandwidth_is_capped_by_node_count(nodes, cap):
    cluster = get_cluster("dgx-h100")
    # Without the cap: min(NVLink 4's 367.6 GB/s ring busBW, 8 NICs x 48 GB/s) x 0.9 = 330.8 GB/s.
    uncapped = min(cluster.intra.ring_busbw,
                   cluster.nics_per_node * cluster.inter.ring_busbw) * 0.9
    assert uncapped == pytest.approx(330.84e9, rel=1e-12) and uncapped > cap
    tree = nccl._tree(GIB, 8, nodes, cluster)
    assert (tree.algorithm, tree.protocol, tree.busbw) == ("tree", "Simple", cap)
    # A tree all-reduce moves the tensor up and down: size / (busBW / 2), plus its latency.
    assert tree.seconds - tree.latency == pytest.approx(GIB / (cap / 2), rel=1e-12)


@pytest.mark.parametrize("fp32_wgrad, out_bytes", [(False, 2), (True, 8)])
def test_a_memory_bound_weight_gradient_reads_and_writes_fp32_main_grad(fp32_wgrad, out_bytes):
    """Megatron's gradient-accumulation fusion: the weight-gradient GEMM adds into the fp32
    main_grad itself, reading and writing 4 + 4 bytes per weight instead of writing 2. At 16
    tokens the GEMM is memory-bound, so that is its time, by hand from the H100 preset's HBM
    rate (issue 35's mutation check: no test saw this term)."""
    from labs.hardware.gpus import get_gpu
    from labs.model.ops import ComputeOptions, layer_ops
    from labs.model.presets import get_model

    gpu = get_gpu("h100-sxm")
    ops = layer_ops(get_model("llama-3.1-8b"), gpu, tp=1, cp=1, micro_batch=1, seq_len=16,
                    sp=False, options=ComputeOptions(fp32_wgrad=fp32_wgrad))
    # The attention output projection, 4,096 -> 4,096: dW[4096, 4096] = X^T[4096, 16] dY[16, 4096].
    moved = 2 * (4096 * 16 + 16 * 4096) + out_bytes * 4096 * 4096
    hbm = gpu.kernels.hbm_bandwidth * gpu.kernels.hbm_efficiency
    assert 2 * 4096 * 4096 * 16 / gpu.bf16_flops < moved / hbm / 10  # memory-bound by far
    assert ops.backward.named("proj.wgrad") == pytest.approx(moved / hbm, rel=1e-12)
