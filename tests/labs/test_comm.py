"""The collective model (NCCL's, labs.hardware.nccl, on measured bus bandwidths) pinned to
CURRICULUM EP02's data-parallel figures, and the textbook α–β ring beside it."""

import pytest

from labs.core.errors import LabInputError
from labs.hardware.comm import data_parallel_scaling, nccl_collective, ring
from labs.hardware.gpus import get_gpu, gpus
from labs.hardware.links import clusters, get_cluster, get_link, gpu_cluster, links, make_cluster
from labs.model.presets import custom_model

GRAD_7B = 2 * custom_model(7e9).params  # bf16 gradients of a 7B model
DGX_H100 = get_cluster("dgx-h100")
ETH_100 = get_cluster("hgx-h100-eth100")


def test_seven_b_bf16_gradients_are_14_gb():
    assert GRAD_7B == 14e9


@pytest.mark.parametrize("n", [2, 4, 8, 64, 1024])
def test_ring_all_reduce_moves_2_n_minus_1_over_n(n):
    cost = nccl_collective("all_reduce", GRAD_7B, n, DGX_H100)
    if cost.algorithm == "ring":
        assert cost.bytes_per_gpu == pytest.approx(2 * (n - 1) / n * GRAD_7B)
    one_node = nccl_collective("all_reduce", GRAD_7B, min(n, 8), DGX_H100)
    assert one_node.bytes_per_gpu == pytest.approx(2 * (min(n, 8) - 1) / min(n, 8) * GRAD_7B)


def test_alpha_beta_ring_times():
    # 2(N-1)·α + 2(N-1)/N · S/β; all-gather and reduce-scatter half of it.
    s, n, bw, lat = 1e9, 8, 100e9, 5e-6
    assert ring("all_reduce", s, n, bw, lat) == pytest.approx(14 * lat + 2 * 7 / 8 * s / bw)
    assert ring("all_gather", s, n, bw, lat) == pytest.approx(7 * lat + 7 / 8 * s / bw)
    assert ring("reduce_scatter", s, n, bw, lat) == ring("all_gather", s, n, bw, lat)
    assert ring("all_reduce", s, 1, bw, lat) == 0


def test_dp_8_gpus_nvlink_weak_scaling_7_6x():
    # EP02 good case: 8 GPUs on NVLink (≈450 GB/s per direction), ≈1 s compute -> ≈7.6x, ≈95%.
    # NCCL reduces in the NVSwitch (NVLS) at the measured 480 GB/s bus bandwidth.
    scaling = data_parallel_scaling(GRAD_7B, 8, DGX_H100, 1.0)
    assert DGX_H100.intra.bandwidth == 450e9
    assert scaling.comm_seconds == pytest.approx(2 * 7 / 8 * 14e9 / 480e9, rel=0.01)
    assert scaling.speedup == pytest.approx(7.6, abs=0.05)
    assert scaling.efficiency == pytest.approx(0.95, abs=0.005)


def test_dp_64_gpus_slow_ethernet_20x():
    # EP02 bad case: 64 GPUs (8 nodes x 8) whose nodes talk over 100 Gb/s Ethernet -> ≈20x, 30%.
    # NCCL's ring through all 64 (it has no two-level algorithm; issue 36, round 6): each GPU
    # sends 2·63/64·14 GB, and the hop out of each node crosses the port's 12 GB/s: ≈ 2.30 s.
    scaling = data_parallel_scaling(GRAD_7B, 64, ETH_100, 1.0)
    assert scaling.speedup == pytest.approx(19.5, abs=0.5)
    assert scaling.efficiency == pytest.approx(0.30, abs=0.01)
    cost = nccl_collective("all_reduce", GRAD_7B, 64, ETH_100)
    assert cost.algorithm == "ring"
    assert cost.seconds == pytest.approx(2 * 63 / 64 * GRAD_7B / 12e9, rel=0.001)
    assert cost.bottleneck == "eth-100g"
    flat = ring("all_reduce", GRAD_7B, 64, 12.5e9, 10e-6)
    # The textbook's flat ring at the datasheet's 12.5 GB/s errs fast by the busBW factor only.
    assert flat < cost.seconds < flat * 12.5 / 12 * 1.01


def test_strong_scaling_is_worse_than_weak():
    weak = data_parallel_scaling(GRAD_7B, 64, ETH_100, 1.0)
    strong = data_parallel_scaling(GRAD_7B, 64, ETH_100, 1.0, weak=False)
    assert strong.speedup < weak.speedup
    assert strong.speedup == pytest.approx(1.0 / (1.0 / 64 + weak.comm_seconds))


def test_group_spanning_nodes_uses_the_slower_link():
    inside = nccl_collective("all_gather", 1e9, 8, DGX_H100)
    across = nccl_collective("all_gather", 1e9, 16, DGX_H100)
    assert inside.bottleneck == "nvlink-4"
    assert across.seconds > inside.seconds
    # DP group strided across nodes, one member per node: the ring runs on one port's
    # measured 48 GB/s (NVIDIA/nccl-tests#267).
    strided = nccl_collective("reduce_scatter", 1e9, 8, DGX_H100, per_node=1)
    assert strided.seconds == pytest.approx(7 / 8 * 1e9 / 48e9, rel=0.01)
    assert strided.bottleneck == "ib-ndr"


def test_all_to_all_and_p2p():
    # NCCL's grouped send/recv: one Simple send's latency (8.4 + 3.4 µs on NVLink, 8.4 + 9.6
    # across nodes, tuning.cc) and the measured bandwidths.
    a2a = nccl_collective("all_to_all", 1e9, 8, DGX_H100)
    assert a2a.bytes_per_gpu == pytest.approx(7 / 8 * 1e9)
    assert a2a.seconds == pytest.approx(11.8e-6 + 7 / 8 * 1e9 / 367.6e9)
    # Across 2 nodes: half of each GPU's data leaves the node over its own port (48 GB/s).
    wide = nccl_collective("all_to_all", 1e9, 16, DGX_H100)
    assert wide.seconds == pytest.approx(18e-6 + 8 / 16 * 1e9 / 48e9)
    assert nccl_collective("p2p", 1e9, 2, DGX_H100).seconds == pytest.approx(
        11.8e-6 + 1e9 / 367.6e9)
    assert nccl_collective("p2p", 1e9, 2, DGX_H100, per_node=1).seconds == pytest.approx(
        18e-6 + 1e9 / 48e9)


def test_bad_collective_inputs():
    for args, field in ((("gather", 1, 2), "collective"), (("all_reduce", -1, 2), "size"),
                        (("all_reduce", 1, 0), "group")):
        with pytest.raises(LabInputError) as err:
            nccl_collective(*args, DGX_H100)
        assert err.value.field == field


def test_link_and_cluster_presets_have_sources():
    required = {"nvlink-3", "nvlink-4", "nvlink-5", "nvl72", "ib-hdr", "ib-ndr", "ib-xdr",
                "eth-25g", "eth-100g", "eth-400g", "pcie-4", "pcie-5"}
    assert required <= set(links())
    for link in links().values():
        assert link.source and link.id == link.id.lower()
        assert 1e-6 <= link.latency <= 2e-5  # a few microseconds
    assert get_link("ib-ndr").bandwidth == 400e9 / 8
    assert get_link("eth-100g").bandwidth == 100e9 / 8
    assert get_link("nvl72").domain == 72
    for cluster in clusters().values():
        assert cluster.source and cluster.gpu.id in gpus()
    with pytest.raises(LabInputError):
        make_cluster(get_gpu("h100-sxm"), 16, get_link("nvlink-4"), get_link("ib-ndr"))


def test_gpu_presets_bandwidth_fields_build_their_node():
    # The GPU presets' scale-up and network figures are the links of their own node.
    for gpu in gpus().values():
        node = gpu_cluster(gpu)
        assert node.intra.bandwidth == gpu.scale_up_bandwidth
        assert node.inter.bandwidth == gpu.network_bandwidth
        assert node.gpus_per_node == gpu.scale_up_domain
    # Unmeasured, its own links achieve the measured fraction of their kind: within 1% of
    # the DGX H100's measured ones.
    h100 = gpu_cluster(get_gpu("h100-sxm"))
    assert nccl_collective("all_reduce", 1e9, 64, h100).seconds == pytest.approx(
        nccl_collective("all_reduce", 1e9, 64, DGX_H100).seconds, rel=0.01)


def test_nvls_only_past_two_gpus_and_its_busbw_under_the_switch_bound():
    """NCCL's ncclNvlsInit (src/transport/nvls.cc) leaves NVLS off for 2 GPUs or fewer: a pair
    all-reduces over a ring, below the link (at 2 ranks busBW = algBW <= the link). Past 2, the
    switch adds the tensors, each GPU moving about S each way, so busBW = algBW x 2(n-1)/n
    may pass the link but not 2(n-1)/n of it (480 GB/s measured on NVLink 4's 450)."""
    from labs.hardware.nccl import nccl_time

    link = DGX_H100.intra.bandwidth
    pair = nccl_time("all_reduce", GRAD_7B, 2, DGX_H100)
    assert pair.algorithm == "ring" and pair.busbw < link
    for n in (4, 8):
        t = nccl_time("all_reduce", GRAD_7B, n, DGX_H100)
        assert t.algorithm == "nvls"
        assert t.busbw <= 2 * (n - 1) / n * link
    assert nccl_time("all_reduce", GRAD_7B, 8, DGX_H100).busbw > link


def test_one_collective_one_time_in_ep02_and_ep08():
    """Issue 36, round 6, item 1: EP02 timed the 7B model's gradient all-reduce over 64 H100s
    on one 100 Gb/s port a server as a two-level (Horovod-style) all-reduce, 2,109 ms, where
    EP08 timed the same collective on the same cluster as NCCL's ring, 2,298 ms. NCCL picks a
    ring or a tree across nodes (nccl-tests#196), so both now call one function
    (labs.hardware.comm.nccl_collective): the same bytes over the same GPUs take one time."""
    from labs.data_parallel.lab import all_reduce
    from labs.hardware.links import get_cluster, get_link
    from labs.model.presets import custom_model
    from labs.recipe.inputs import Plan
    from labs.recipe.lab import evaluate
    from labs.recipe.step_time import megatron_bucket_params

    cluster = get_cluster("hgx-h100-eth100")
    r = evaluate(Plan(tp=1, pp=1, dp=64, recompute="none", seq_len=4096), custom_model(7e9),
                 cluster, 8)
    dp = next(p for p in r.timing.parts if p.name == "dp")
    (buckets,) = dp.buckets
    per_param = dp.bytes_per_step / (2 * 63 / 64 * 7e9)  # the recipe's gradient bytes
    bucket = megatron_bucket_params(64) * per_param
    ep02 = all_reduce(bucket, 64, get_link("eth-100g"), nics_per_node=1)
    assert ep02.seconds == pytest.approx(buckets.bucket_s, rel=1e-12)
    assert ep02.algorithm == "ring"
    # The whole 14 GB gradient: one time, the ring's 2·63/64 x 14 GB at the port's 12 GB/s.
    whole = all_reduce(GRAD_7B, 64, get_link("eth-100g"), nics_per_node=1)
    assert whole.seconds == nccl_collective("all_reduce", GRAD_7B, 64, cluster).seconds
    assert whole.seconds == pytest.approx(2.298, abs=0.001)
