"""Round-29 cold reading A (r29A) of EP01-EP04: EP04 step 6's question (finding 7), EP02 step
6's latency clause (finding 8), EP01's 405B derive's printed terms (finding 9) and the H100's
two memory figures (finding 10). Findings 1-3 are in test_answers_hidden.py, 5-6 in
test_glossary.py."""

import re

from tests.app.test_recipe_routes import _prose


def _step(client, path: str, step: int) -> str:
    html = client.get(path).text
    return _prose(html.split(f'id="step-{step}"')[1].split(f'id="step-{step + 1}"')[0])


def test_finding_7_ep04_step_6_says_each_gpu_computes_a_t_th_of_every_matrix(client):
    """In Megatron's TP without SP the hidden vectors between blocks are whole on every GPU:
    what a GPU holds is h/t of attention's width (its heads) and a t-th of the MLP's."""
    step = _step(client, "/episodes/tensor-parallel", 6)
    assert "holds h/t of every hidden vector" not in step
    assert ("Each GPU computes a t-th of every matrix: h/t of attention's width (its heads) "
            "and a t-th of the MLP's.") in step


def test_finding_8_ep02_step_6_says_latency_picks_the_algorithm(client):
    """On the tree the bytes take longer than the latency: what the latency decides at 1 MiB
    is which algorithm wins (the ring's latency steps against the tree's)."""
    from app.routers.data_parallel import facts

    step = _step(client, "/episodes/data-parallel", 6)
    assert "the latency decides, not the bytes" not in step
    assert "at 1 MiB the ring's latency, not the bytes, decides which wins" in step
    tiny = facts()["ib1024_tiny"]["result"].point
    assert tiny.bucket_algorithm == "tree", tiny.bucket_algorithm


def test_finding_9_ep01_405b_derive_prints_terms_that_redo(client):
    """16 B x 405.9B / 64 is 101.475, not the 101.46 printed: the parameter count is printed
    to the digits the term is worked from, and the three terms add to the printed total."""
    from app.labkit import VIEWS

    drill = next(d for d in VIEWS["memory"].drills if d.id == "memory-predict-405b-h200")
    text = drill.explanation() if callable(drill.explanation) else drill.explanation
    p, shards, state = re.search(r"16 B × ([\d.]+)B ÷ (\d+) = ([\d.]+) GB", text).groups()
    assert f"{16 * float(p) / int(shards):.2f}" == state, (p, shards, state)
    terms, total = re.search(r"([\d.]+ \+ [\d.]+ \+ [\d.]+) = ([\d.]+) GB", text).groups()
    assert f"{sum(float(t) for t in terms.split(' + ')):.2f}" == total, (terms, total)
    assert terms.startswith(state)


def test_finding_10_ep01_step_1_says_which_h100_figure_is_which(client):
    """EP01 step 1's limit gave the driver's 85.5 GB and the HBM tip CUDA's 84.9 GB, each as
    the H100's memory: the limit names nvidia-smi's total and the share CUDA hands a process,
    the tip's figure, from the GPU preset."""
    from app.charts.units import fmt_bytes
    from app.routers.memory_lesson import H100_DRIVER_MIB
    from labs.hardware.gpus import GIB, get_gpu

    h100 = get_gpu("h100-sxm")
    cuda = h100.cuda_memory_gib * GIB
    step = _step(client, "/episodes/memory", 1)
    assert (f"{H100_DRIVER_MIB:,} MiB, {fmt_bytes(H100_DRIVER_MIB * 2**20)} (nvidia-smi's "
            f"total; CUDA hands a process {fmt_bytes(cuda)} of it)") in step, step
    assert f"({cuda / 1e9:.1f} GB)" in client.get("/glossary").text


def test_finding_11_jargon_is_glossed_where_first_met(client):
    """EP02's "How this is computed" named the α–β link model with no gloss, EP02 step 1's
    note named the DGX H100 three steps before step 4 says what it is, and EP04's bench notes
    used "micro-batch" with no tip on that page: each is said where it is first met."""
    from app.routers.data_parallel import facts as dp_facts
    from app.routers.tensor_parallel import facts as tp_facts

    assert any("α–β link model (a message takes a fixed latency α plus its bytes ÷ the "
               "bandwidth β)" in a for a in dp_facts()["l8_1024"]["api"]["assumptions"])
    html = client.get("/episodes/data-parallel").text
    one = html.split('id="step-1"')[1].split('id="step-2"')[0]
    assert 'id="term-dgx-h100"' in one and "own 8-GPU H100 server" in one
    assert any("one micro-batch (the sequences a GPU runs through one forward and backward "
               "pass)" in a for a in tp_facts()["good"]["api"]["assumptions"])
    assert "one micro-batch (the sequences a GPU runs" in client.get(
        "/episodes/tensor-parallel").text


def test_finding_4_ep03_step_7_times_the_dgx_h100_host_at_two_dimms_a_channel(client):
    """A DGX H100's 2 TB is 32 x 64 GB DIMMs on 2 sockets x 8 channels: two a channel, where
    Sapphire Rapids runs DDR5-4800 at 4,400 MT/s. The host's peak is 2 x 8 x 4,400 x 8 B, not
    the 4,800 MT/s of one DIMM a channel, and step 7 says why; the offload times follow."""
    from app.routers.zero import facts
    from labs.zero.inputs import (
        HOST_CHANNELS,
        HOST_DIMMS,
        HOST_MEMORY_BANDWIDTH,
        HOST_MT_S,
        HOST_SOCKETS,
    )
    from labs.zero.lab import ADAM_HOST_BYTES

    assert HOST_DIMMS // (HOST_SOCKETS * HOST_CHANNELS) == 2 and HOST_MT_S == 4400e6
    assert HOST_MEMORY_BANDWIDTH == HOST_SOCKETS * HOST_CHANNELS * HOST_MT_S * 8
    step = _step(client, "/episodes/zero", 7)
    assert (f"{HOST_MEMORY_BANDWIDTH / 1e9:g} GB/s of DDR5 between them ({HOST_SOCKETS} "
            f"sockets × {HOST_CHANNELS} channels × {HOST_MT_S / 1e6:,.0f} MT/s × 8 B, the peak: "
            f"its {HOST_DIMMS} memory modules fill 2 a channel, where DDR5-4800 runs at "
            "4,400)") in step
    assert "4,800 MT/s × 8 B" not in step
    one = facts()["offload_one"]["result"]
    assert one.offload.adam_seconds == (ADAM_HOST_BYTES * one.input.model.params
                                        / HOST_MEMORY_BANDWIDTH)
