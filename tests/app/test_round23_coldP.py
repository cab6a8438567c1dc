"""Round-23 cold reading P (issue 36) on EP02-EP04: bounds said the wrong way, figures whose
printed terms did not give them, and a rate told two ways.

EP02 step 1's PCIe box (finding 1): the socket link caps the ring, so the lab errs fast by at
least its ratio, printed per host from NCCL's topo.h; the bench says so at a PCIe state. EP02's
crossover note (6): the time to the digits its busBW needs, the busBW named an effective rate.
EP02 step 2's note (5): the socket link's error sized against the 4.71×."""

import json
import re

import pytest

from app.routers.data_parallel import facts as dp_facts
from app.routers.data_parallel_state import DataParallelQuery, run
from labs.hardware.links import get_link
from labs.hardware.nccl_constants import SOCKET_LINK
from tests.app.test_round22_coldP import _step
from tests.app.test_zero_routes import visible_text


def test_ep02_step_1_says_the_pcie_busbw_errs_fast_by_at_least_each_hosts_ratio(client):
    # Fix E, finding 1: the bound is a PCIe 4.0 host's (Zen 3), where the card runs at Gen4.
    one = _step(client.get("/episodes/data-parallel").text, 1)
    busbw = get_link("pcie-4").ring_busbw / 1e9
    zen = SOCKET_LINK["zen3-4"] / 1e9
    assert (f"errs fast, by at least {busbw:.2f} ÷ {zen:g} = {busbw / zen:.2f}×: its PCIe "
            "speedups err high") in one, one
    assert "up to" not in one.split("PCIe 4.0:")[1].split("NVLink 4 with NVLS")[0]


@pytest.mark.parametrize(("query", "says"), [("?gpus=8&link=pcie-4", True),
                                             ("?gpus=8&link=nvlink-4", False)])
def test_ep02_bench_says_at_a_pcie_state_that_one_fabric_errs_fast(client, query, says):
    html = client.get("/episodes/data-parallel" + query).text
    bench = visible_text(html.split("How this is computed")[1].split("</details>")[0])
    assert ("as one fabric (errs fast: EP02, step 1;" in bench) is says, bench


@pytest.mark.parametrize("query", [{"gpus": 8, "link": "pcie-4"}, {"gpus": 4, "link": "pcie-4"},
                                   {"gpus": 8, "link": "nvlink-4"}])
def test_ep02_crossover_note_times_the_all_reduce_to_its_busbws_digits(client, query):
    url = "/episodes/data-parallel?" + "&".join(f"{k}={v}" for k, v in query.items())
    note = visible_text(client.get(url).text.split('data-testid="crossover"')[1].split("</p>")[0])
    busbw = float(re.search(r"÷ ([\d,.]+) GB/s = [\d,]+ tokens", note)[1].replace(",", ""))
    sent, ms = re.search(r"reaches: ([\d.]+) GB.*? in ([\d,.]+) ms\.", note).groups()
    assert "busBW here is an effective rate (step 1: NCCL's latency folded in)" in note, note
    # The printed bytes over the printed time give the printed busBW to four figures.
    assert float(sent) / float(ms.replace(",", "")) * 1e3 == pytest.approx(busbw, rel=2e-4)
    result = run(DataParallelQuery(**query))
    assert float(ms.replace(",", "")) == pytest.approx(result.ratio.allreduce_s * 1e3, rel=1e-4)


def test_ep02_step_2_note_sizes_the_socket_links_error_against_the_clocks(client):
    from app.routers.data_parallel import socket_bound  # new with finding 5

    two = _step(client.get("/episodes/data-parallel").text, 2)
    p8 = dp_facts()["pcie8"]["api"]
    bound = socket_bound(p8)
    compute, sock = (f"{s * 1e3:,.0f} ms" for s in (p8["compute_s"], bound["comm_s"]))
    assert (f"with a Zen 3 host's socket link, 24 GB/s, alone, 8 × {compute} ÷ ({compute} + "
            f"24.5 GB ÷ 24 "
            f"GB/s = {sock}) = {bound['speedup']:.2f}×, not {p8['speedup']:.2f}×; the clock's "
            "error, unmeasured, runs the other way") in two, two
    # The engine's compute and the socket link's time, redone by hand.
    assert bound["speedup"] == pytest.approx(
        8 * p8["compute_s"] / (p8["compute_s"] + 24.5e9 / SOCKET_LINK["zen3-4"]))
    assert round(bound["speedup"], 2) < round(p8["speedup"], 2)


def test_ep04_step_3_derives_the_backward_pairs_exposed_time(client):
    from app.routers.tensor_parallel import facts as tp_facts

    three = _step(client.get("/episodes/tensor-parallel").text, 3)
    g = tp_facts()["good"]["api"]
    whole, qkv = g["collective_s"] * 1e3, g["backward_beside"][0]["seconds"] * 1e3
    assert (f"which hide all but {whole:.3f} − {qkv:.3f} = {g['backward_comm_s'] * 1e3:.2f} ms "
            f"(QKV's matmul, {qkv:.3f} ms: step 4's note)") in three, three
    assert round(whole, 3) - round(qkv, 3) == pytest.approx(g["backward_comm_s"] * 1e3, abs=0.005)
    # Step 4's note derives that 0.479 from QKV's FLOPs and rate.
    assert f"Step 4's hidden {qkv:.3f}" in _step(client.get("/episodes/tensor-parallel").text, 4)


def test_ep04_step_5_sums_are_the_sums_of_their_printed_terms(client):
    from app.routers.tensor_parallel import facts as tp_facts

    five = _step(client.get("/episodes/tensor-parallel").text, 5)
    said = re.search(r"The two nearly cancel: ([\d.]+) → ([\d.]+) ms a layer", five)
    assert said, five
    for key, total in (("sp_off", said[1]), ("sp_on", said[2])):
        api = tp_facts()[key]["api"]
        terms = round(api["compute_s"] * 1e3, 2) + round(api["comm_s"] * 1e3, 2)
        assert total == f"{terms:.2f}", (key, total)
        assert f"{api['compute_s'] * 1e3:.2f}" in five and f"{api['comm_s'] * 1e3:.2f}" in five


def test_ep03_step_9_note_derives_the_1280_token_line_from_its_rate_and_backward_share(client):
    from app.routers.zero import facts as zero_facts

    nine = _step(client.get("/episodes/zero").text, 9)
    f = zero_facts()["l70_z0_1280"]
    x, r = f["api"]["crossover"], f["result"]
    share = 100 * r.backward_seconds / r.compute_seconds
    t_star, line = f"{x['crossover_tokens']:,.0f}", f"{x['hidden_tokens']:,.0f}"
    assert (f"At 1,280 tokens the matmuls run slower, {x['rate'] / 1e12:.1f} TFLOP/s (T* "
            f"{t_star}), and the backward is {share:.1f}% of the compute: the line sits at "
            f"{t_star} ÷ {share:.1f}% = {line}.") in nine, nine
    # The printed terms give the printed line (1.5 × T* alone gave 1,505) ...
    assert f"{round(x['crossover_tokens']) / round(share, 1) * 100:,.0f}" == line
    # ... and the printed rate the printed T*: ⅔ × 7/8 × rate ÷ busBW (the why's formula).
    d = f["api"]["dp"]
    assert x["crossover_tokens"] == pytest.approx(
        2 / 3 * (d - 1) / d * x["rate"] / x["busbw"], rel=1e-3)


@pytest.mark.parametrize("query", ["", "?gpus=16&link=ib-ndr", "?gpus=64&link=ib-ndr"])
def test_ep02_step_1_intro_points_at_the_time_charts_bytes_label(client, query):
    """Finding 7: 'the time chart's all-reduce row' at states (16 and 64 GPUs, before step 3)
    where the chart draws no such row; the label under its bar is drawn at every state."""
    html = client.get("/episodes/data-parallel" + query).text
    one = _step(html, 1)
    assert "all-reduce row" not in one
    assert "The label under the time chart's bar says how many bytes that is" in one
    fig = json.loads(re.search(r'data-target="dp-time"[^>]*>(.*?)</script>', html, re.S)[1])
    labels = [a.get("text", "") for a in fig["layout"]["annotations"]]
    assert any(re.search(r"[\d.]+ GB.* →$", t) for t in labels), labels  # the bytes, at the bar


def test_ep03_step_6_gives_the_16k_bill_and_its_peak_apart(client):
    """Finding 8: '(44.0 GB at the peak; at 16,384 tokens, 65.7 GB)' read the 65.7 as a peak;
    it is the kept bill, its peak 70.3 GB (recompute_peak_bytes)."""
    from app.routers.zero import facts as zero_facts
    from labs.memory.lab import recompute_peak_bytes

    six = _step(client.get("/episodes/zero").text, 6)
    f = zero_facts()
    full, k16 = f["full"]["api"], f["full_16k"]
    peak16 = recompute_peak_bytes(k16["result"].ledger)
    assert f["full_16k_peak"] == peak16 > k16["api"]["total_bytes"]
    assert (f"to {full['total_bytes'] / 1e9:.1f} GB ({f['full_peak'] / 1e9:.1f} GB at the peak); "
            f"at 16,384 tokens to {k16['api']['total_bytes'] / 1e9:.1f} GB "
            f"({peak16 / 1e9:.1f} GB at the peak).") in six, six
