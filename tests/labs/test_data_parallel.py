"""EP02 data parallelism pinned to CURRICULUM's figures: 7B bf16 gradients (14 GB), ≈1 s of
compute (4 x 4,096 tokens per GPU at 6·P FLOPs a token on an H100's achieved 674 TFLOP/s),
≈7.6x (95%) on 8 GPUs over NVLink and ≈21x (33%) on 64 GPUs over 100 Gb/s Ethernet."""

import pytest

from labs.core.errors import LabInputError
from labs.data_parallel.inputs import DDP_BUCKET_BYTES, DataParallelInput
from labs.data_parallel.lab import (
    CURVE_LINKS,
    GPU_COUNTS,
    all_reduce,
    exposed_after_backward,
    link_family,
    simulate,
)
from labs.hardware.comm import data_parallel_scaling
from labs.hardware.links import get_cluster, get_link, links
from labs.model.presets import custom_model

SEVEN_B = custom_model(7e9)
GRAD = 14e9


def run(**kw):
    return simulate(DataParallelInput(model=SEVEN_B, grad_bytes=GRAD, **kw))


def test_good_case_8_gpus_nvlink_7_6x():
    point = run(gpus=8, link="nvlink-4").point
    assert point.speedup == pytest.approx(7.6, abs=0.05)
    assert point.efficiency == pytest.approx(0.95, abs=0.005)
    # As NCCL runs it: reduced in the NVSwitch (NVLS) at the measured 480 GB/s bus
    # bandwidth, 2·7/8·14 GB of it, plus Simple's ring latency (8.4 + 14 x 3.4 µs).
    assert point.comm_s == pytest.approx(2 * 7 / 8 * 14e9 / 480e9 + (8.4 + 14 * 3.4) * 1e-6)
    assert point.exposed_comm_s == point.comm_s


def test_bad_case_64_gpus_ethernet_20x_and_the_flat_ring_reading():
    result = run(gpus=64, link="eth-100g")
    point = result.point
    # NCCL's ring through all 64 at the port's 12 GB/s busBW: 2·63/64·14 GB in 2.30 s.
    assert point.speedup == pytest.approx(19.7, abs=0.05)
    assert point.efficiency == pytest.approx(0.31, abs=0.01)
    assert point.algorithm == "ring" and point.bottleneck == "eth-100g"
    assert point.comm_s == pytest.approx(2 * 63 / 64 * 14e9 / 12e9, rel=0.001)
    # As labs.hardware.comm on the EP02 cluster preset (8 x 8 H100, one 100 Gb/s port each).
    pinned = data_parallel_scaling(GRAD, 64, get_cluster("hgx-h100-eth100"),
                                  point.compute_s)
    assert point.speedup == pytest.approx(pinned.speedup)
    # The textbook reading (a port per GPU, one flat ring of 64): 2·63/64·14 GB / 12.5 GB/s.
    flat = result.flat_ring
    assert flat.comm_s == pytest.approx(2 * 63 / 64 * 14e9 / 12.5e9 + 126 * 10e-6)
    assert flat.speedup == pytest.approx(64 * point.compute_s / (point.compute_s + flat.comm_s))
    assert flat.efficiency == pytest.approx(0.31, abs=0.01)


@pytest.mark.parametrize("n", [2, 8, 64, 1000, 1024])
@pytest.mark.parametrize("link", CURVE_LINKS)
def test_all_reduce_bytes_per_gpu_is_2_n_minus_1_over_n(n, link):
    # A ring sends 2(N−1)/N of the gradients per GPU (a tree, as NCCL counts busBW, too).
    cost = all_reduce(GRAD, n, get_link(link))
    assert cost.bytes_per_gpu == pytest.approx(2 * (n - 1) / n * GRAD)
    domain = get_link(link).domain
    if get_link(link).kind == "scale-up" and n > domain:  # one server's fabric joins no more
        with pytest.raises(LabInputError) as err:
            run(gpus=n, link=link)
        assert (err.value.field, err.value.also) == ("link", ("gpus",))
        return
    assert run(gpus=n, link=link).point.allreduce_bytes_per_gpu == pytest.approx(
        2 * (n - 1) / n * GRAD)


def test_curve_one_entry_per_gpu_count_per_link():
    result = run(gpus=12, link="eth-400g")
    counts = sorted({*GPU_COUNTS, 12})
    assert result.curve_links == (*CURVE_LINKS, "eth-400g")
    assert [(p.link, p.gpus) for p in result.curve] == [
        (link, n) for link in result.curve_links for n in counts
        if get_link(link).kind == "scale-out" or n <= get_link(link).domain]
    one = [p for p in result.curve if p.gpus == 1]
    assert all(p.speedup == pytest.approx(1) and p.comm_s == 0 for p in one)
    # Faster links never scale worse; inside one server the network is idle.
    by = {(p.link, p.gpus): p for p in result.curve}
    for n in (k for k in GPU_COUNTS if k <= 8):  # NVLink 4's curve stops at one server
        assert by["nvlink-4", n].speedup >= by["ib-ndr", n].speedup >= by["eth-100g", n].speedup
    assert by["eth-100g", 8].speedup == pytest.approx(by["nvlink-4", 8].speedup)
    assert by["pcie-4", 8].speedup < by["nvlink-4", 8].speedup


def test_strong_scaling_and_the_global_batch_limit():
    weak = run(gpus=64, link="eth-100g", compute_s=1.0).point  # the override, old links
    strong = run(gpus=64, link="eth-100g", scaling="strong", compute_s=1.0).point
    assert strong.compute_s == pytest.approx(1 / 64)
    assert strong.speedup == pytest.approx(1 / (1 / 64 + weak.comm_s))
    capped = run(gpus=8, link="nvlink-4", scaling="strong", global_batch=100)
    assert capped.max_gpus == 100
    assert max(p.gpus for p in capped.curve) == 64
    with pytest.raises(LabInputError) as err:
        run(gpus=128, link="ib-ndr", scaling="strong", global_batch=100)
    assert err.value.field == "gpus"
    assert run(gpus=128, link="ib-ndr", scaling="weak", global_batch=100).point.gpus == 128


def test_bucketed_overlap_hides_communication_behind_backward():
    none = run(gpus=64, link="ib-ndr", nics_per_node=8).point
    over = run(gpus=64, link="ib-ndr", nics_per_node=8, overlap="bucketed").point
    assert over.buckets == -(-14e9 // DDP_BUCKET_BYTES) == 535
    assert over.exposed_comm_s < none.exposed_comm_s
    assert over.comm_s == pytest.approx(over.exposed_comm_s + over.overlapped_comm_s)
    assert over.speedup > none.speedup
    # Slow link: the buckets queue up from the first one on, so what backward hides is its
    # 2/3 s less the time to produce the first bucket; the rest of the 2 s is exposed.
    eth = run(gpus=64, link="eth-100g", overlap="bucketed").point
    assert eth.exposed_comm_s == pytest.approx(
        eth.comm_s - (2 / 3) * eth.compute_s * (1 - 1 / 535), rel=0.01)


def test_exposed_after_backward_closed_form():
    # One bucket: ready at the end of backward, so all of it is exposed.
    assert exposed_after_backward(1.0, 0.1, 0.1, 1, 1.0) == 0.1
    # Fast buckets: only the last one shows (ready at compute's end).
    assert exposed_after_backward(1.0, 0.001, 0.001, 100, 0.01) == pytest.approx(0.001)
    # Slow buckets: the chain starts at the first bucket's ready time and never waits again.
    k, t = 10, 0.5
    assert exposed_after_backward(1.0, t, t, k, 0.1) == pytest.approx(
        1 / 3 + 0.1 * 2 / 3 + k * t - 1.0)


def test_tiny_buckets_pay_the_ring_latency_again_and_again():
    big = run(gpus=8, link="pcie-4", overlap="bucketed", bucket_bytes=1e9).point
    tiny = run(gpus=8, link="pcie-4", overlap="bucketed", bucket_bytes=1e6).point
    # 14,000 buckets, each paying at least NCCL's LL ring latency: 3.6 + 2 x 7 x 0.47 µs.
    assert tiny.comm_s > big.comm_s + 14_000 * (3.6 + 2 * 7 * 0.47) * 1e-6 * 0.9


def test_replica_ledger_does_not_shrink_with_n():
    one = run(gpus=1).replica
    many = run(gpus=512, link="ib-ndr").replica
    assert many.total_bytes == one.total_bytes
    assert one.state_bytes == pytest.approx(16 * 7e9)


def test_link_families_cover_every_preset():
    families = {link_family(link) for link in links().values()}
    assert {"nvlink", "infiniband", "ethernet", "pcie"} <= families
    assert [link_family(get_link(i)) for i in CURVE_LINKS] == [
        "nvlink", "infiniband", "ethernet", "pcie"]


@pytest.mark.parametrize("kw, field", [
    ({"grad_bytes": 0}, "grad_bytes"), ({"grad_bytes": float("nan")}, "grad_bytes"),
    ({"gpus": 0}, "gpus"), ({"gpus": 2048}, "gpus"), ({"link": "carrier-pigeon"}, "link"),
    ({"compute_s": 0}, "compute_s"), ({"scaling": "sideways"}, "scaling"),
    ({"overlap": "some"}, "overlap"), ({"bucket_bytes": 10}, "bucket_bytes"),
    ({"nics_per_node": 9}, "nics_per_node"), ({"global_batch": 0}, "global_batch"),
])
def test_bad_inputs_name_their_field(kw, field):
    args = {"model": SEVEN_B, "grad_bytes": GRAD, **kw}
    with pytest.raises(LabInputError) as err:
        DataParallelInput(**args)
    assert err.value.field == field


# The crossover T* = (2/3)(N-1)/N x rate / busBW (labs.data_parallel.lab.compute_to_comm),
# derived from the stated inputs, against the lab's own step model run at T* tokens per GPU:
# compute and the all-reduce agree within 1% (NCCL's latency, tens of µs on a 14 GB
# all-reduce, is what the formula leaves out), and without overlap efficiency is 1/2.
CROSSOVER_TOL = 0.01


@pytest.mark.parametrize("link, gpus, busbw", [
    ("nvlink-4", 8, lambda link: link.allreduce_busbw),  # NVLS, 480 GB/s
    ("pcie-4", 8, lambda link: link.ring_busbw),  # 82% of 32 GB/s
    ("pcie-4", 4, lambda link: link.ring_busbw),
])
def test_crossover_from_the_stated_inputs_matches_the_step_model(link, gpus, busbw):
    from labs.data_parallel.lab import gpu_rate, timed_gpu
    # Dense bf16 x matmul share: the H100 SXM's (measured) on NVLink; on PCIe the H100 PCIe
    # card's 756 TFLOP/s at the SXM's shares, assumed (round-21 cold reading P, finding 1).
    peak = 989.4e12 if link == "nvlink-4" else 756e12
    rate = peak * 0.803 * 0.8489
    assert gpu_rate(timed_gpu(get_link(link))) == pytest.approx(rate)
    derived = 2 / 3 * (gpus - 1) / gpus * rate / busbw(get_link(link))
    result = run(gpus=gpus, link=link, micro_batch=1, seq_len=round(derived))
    point = result.point
    assert point.compute_s == pytest.approx(point.comm_s, rel=CROSSOVER_TOL)
    assert point.efficiency == pytest.approx(0.5, rel=CROSSOVER_TOL)
    assert result.ratio.crossover_tokens == pytest.approx(derived, rel=CROSSOVER_TOL)
    # Either side of it: half the tokens is communication-bound, twice compute-bound.
    assert run(gpus=gpus, link=link, micro_batch=1, seq_len=round(derived / 2)).ratio.ratio < 1
    assert run(gpus=gpus, link=link, micro_batch=1, seq_len=round(2 * derived)).ratio.ratio > 1


def test_accumulation_multiplies_compute_not_the_all_reduce():
    one = run(gpus=64, link="eth-100g")
    four = run(gpus=64, link="eth-100g", microbatches=4)
    assert four.point.compute_s == pytest.approx(4 * one.point.compute_s)
    assert four.point.comm_s == pytest.approx(one.point.comm_s)  # once per step
    assert four.ratio.ratio == pytest.approx(4 * one.ratio.ratio)
    assert four.ratio.global_batch_tokens == 4 * 4 * 4096 * 64  # micro x accum x seq x N
    # Efficiency without overlap is ratio / (1 + ratio): less than 4x the gain.
    assert four.point.efficiency == pytest.approx(four.ratio.ratio / (1 + four.ratio.ratio))
    # Bucketed overlap hides only behind the last micro-batch's backward.
    b1 = run(gpus=64, link="eth-100g", overlap="bucketed").point
    b4 = run(gpus=64, link="eth-100g", overlap="bucketed", microbatches=4).point
    assert b4.overlapped_comm_s == pytest.approx(b1.overlapped_comm_s)


def test_accumulation_controls_are_checked():
    for field, bad in (("microbatches", 0), ("micro_batch", 0), ("seq_len", 0)):
        with pytest.raises(LabInputError) as err:
            run(**{field: bad})
        assert err.value.field == field
