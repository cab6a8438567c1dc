"""One layer on a layout (labs.parallel.layer_time): the TP, CP and EP collectives of Megatron's
schedule, exposed or hidden as its overlap settings allow."""

import pytest

from labs.core.errors import LabInputError
from labs.hardware.kernels import gemm_time
from labs.hardware.links import get_cluster
from labs.hardware.nccl import nccl_time
from labs.model.ops import ComputeOptions
from labs.model.passes import PassBuilder
from labs.model.presets import get_model
from labs.parallel.layer_time import COMM_SMS, Group, decomposed_exposed, layer_time

DGX_H100, HGX_H800 = get_cluster("dgx-h100"), get_cluster("hgx-h800")
LLAMA = get_model("llama-3.1-70b")


def run(model=LLAMA, cluster=DGX_H100, tp=8, cp=1, ep=1, sp=True, recompute="none", **kw):
    return layer_time(model, cluster, tp=Group(tp, min(tp, 8)), cp=Group(cp, min(cp, 8)),
                      ep=Group(ep, min(ep, 8)), micro_batch=1, seq_len=8192, sp=sp,
                      recompute=recompute, **kw)


def test_tp_counts_megatrons_collectives():
    act = 8192 * LLAMA.hidden * 2
    ag = nccl_time("all_gather", act, 8, DGX_H100, 8).seconds
    rs = nccl_time("reduce_scatter", act, 8, DGX_H100, 8).seconds
    lt = run(tp_overlap="none")
    tp_f, tp_b = lt.forward.comm("tp"), lt.backward.comm("tp")
    assert tp_f.seconds == pytest.approx(2 * (ag + rs))  # AG + RS around each half
    assert tp_b.seconds == pytest.approx(4 * ag + 2 * rs)  # 2 AG of dY, 2 AG of x, 2 RS
    assert tp_f.exposed == tp_f.seconds and tp_b.exposed == tp_b.seconds
    ar = nccl_time("all_reduce", act, 8, DGX_H100, 8).seconds
    no_sp = run(sp=False, tp_overlap="none")
    assert no_sp.forward.comm("tp").seconds == pytest.approx(2 * ar)


def test_tp_overlap_hides_what_fits_beside_the_gemms():
    none, backward, full = (run(tp_overlap=o) for o in ("none", "backward", "all"))
    assert none.forward.exposed == backward.forward.exposed > full.forward.exposed
    assert none.backward.exposed > backward.backward.exposed >= full.backward.exposed
    # the collectives themselves are the same: only what is exposed changes
    assert none.backward.comm("tp").seconds == full.backward.comm("tp").seconds
    with pytest.raises(LabInputError):
        run(tp_overlap="sometimes")


def test_full_recomputation_runs_the_forward_and_its_collectives_again():
    none, full = run(recompute="none"), run(recompute="full")
    assert full.backward.compute == pytest.approx(none.backward.compute + none.forward.compute)
    assert full.backward.comm("tp").seconds == pytest.approx(
        none.backward.comm("tp").seconds + none.forward.comm("tp").seconds)
    selective = run(recompute="selective")
    assert selective.backward.attention == pytest.approx(
        none.backward.attention + none.forward.attention)


def test_cp_ring_hides_behind_attention_until_it_cannot():
    long = layer_time(LLAMA, DGX_H100, tp=Group(8, 8), cp=Group(2, 1), ep=Group(),
                      micro_batch=1, seq_len=131072, sp=True, recompute="none")
    short = layer_time(LLAMA, DGX_H100, tp=Group(8, 8), cp=Group(16, 1), ep=Group(),
                       micro_batch=1, seq_len=8192, sp=True, recompute="none")
    assert long.forward.comm("cp").exposed == 0  # 64k tokens per rank: attention dwarfs it
    assert short.forward.comm("cp").exposed > 0  # 512 tokens per rank: the ring shows


def test_cp_ring_is_exposed_round_by_round_as_ep06_times_it():
    """The step model's ring (labs.parallel.ring.cp_comms) exposes (c − 1)·max(0, t_send −
    t_block), t_block the pass's attention ÷ c, as EP06's cp_cost does (Liu et al. 2023,
    sec 3); backward sends two blocks a round (K and V, their gradients back). Comparing
    totals (the old max(0, total − attention)) let a slow send hide behind other rounds'
    compute: here, 70B at TP 8, CP 4 across nodes, 8k tokens, it is short in both passes."""
    c = 4
    lt = layer_time(LLAMA, DGX_H100, tp=Group(8, 8), cp=Group(c, 1), ep=Group(),
                    micro_batch=1, seq_len=8192, sp=True, recompute="none")
    for pass_, comm, blocks in ((lt.ops.forward, lt.forward.comm("cp"), 1),
                                (lt.ops.backward, lt.backward.comm("cp"), 2)):
        attention = pass_.of("attention")
        send = comm.seconds / (c - 1)  # one round's send: blocks × one K, V chunk's hop
        assert send == pytest.approx(blocks * lt.forward.comm("cp").seconds / (c - 1))
        per_round = (c - 1) * max(0.0, send - attention / c)
        assert comm.exposed == pytest.approx(per_round, rel=1e-12)
        assert comm.exposed > max(0.0, comm.seconds - attention) * 1.2


def test_cp_ring_exposure_is_ep06s_cp_cost_formula():
    """EP06's cp_cost and the step model share labs.parallel.ring.ring_exposed: fed the same
    rounds, send and block, the planner's figure is cp_cost's."""
    from labs.context_parallel.lab import cp_cost
    from labs.hardware.gpus import get_gpu
    from labs.hardware.links import get_link
    from labs.parallel.ring import ring_exposed

    cost = cp_cost(LLAMA, 16384, 8, "zigzag", get_link("ib-ndr"), get_gpu("h100-sxm"))
    assert cost.exposed_s > 0
    assert cost.exposed_s == pytest.approx(
        ring_exposed(cost.steps, cost.comm_s / cost.steps, cost.attention_s / 8), rel=1e-12)
    lt = layer_time(LLAMA, DGX_H100, tp=Group(8, 8), cp=Group(8, 1), ep=Group(),
                    micro_batch=1, seq_len=16384, sp=True, recompute="none")
    f = lt.forward.comm("cp")
    assert f.exposed == pytest.approx(
        ring_exposed(7, f.seconds / 7, lt.ops.forward.of("attention") / 8), rel=1e-12)


def test_ep_all_to_all_is_exposed_unless_overlapped():
    v3 = get_model("deepseek-v3")
    kw = dict(model=v3, cluster=HGX_H800, tp=1, ep=64, sp=False, moe=True,
              options=ComputeOptions(fp8=True))
    plain, overlapped = run(**kw), run(ep_overlap=True, **kw)
    a2a = plain.forward.comm("ep")
    assert a2a.exposed == a2a.seconds > 0
    o = overlapped.forward.comm("ep")
    share = COMM_SMS / 132
    assert o.exposed == pytest.approx(max(a2a.seconds - plain.forward.compute,
                                          share * a2a.seconds))
    assert o.exposed < a2a.exposed


def test_decomposed_overlap_exposes_one_chunk_and_the_chunks_lost_waves():
    """Wang et al. 2023's decomposition (TE's ring-exchange overlap, PyTorch's async TP): the
    pair of a collective A and its GEMM C in t chunks takes max(t·g, g + A), g one chunk's
    GEMM at its own shape; never more than the collective run whole."""
    gpu = DGX_H100.gpu
    # A 2,048-row GEMM in 8 chunks of 256 rows: each chunk's waves are part empty.
    qkv = PassBuilder(gpu, False)
    qkv.gemm("qkv", 2048, 1280, 8192)
    gemm = qkv.done().kernels[0]
    g = gemm_time(gpu, 256, 1280, 8192)
    assert 8 * g > gemm.seconds  # chunking costs
    long_comm = 4 * gemm.seconds
    assert decomposed_exposed(gemm, long_comm, 8, gpu, False) == pytest.approx(
        g + long_comm - gemm.seconds)  # one chunk's GEMM waits for nothing to hide behind
    short = 1e-7
    assert decomposed_exposed(gemm, short, 8, gpu, False) == short  # whole, blocking: cheaper
    # Wide chunks lose nothing: what is exposed is at most one chunk's GEMM.
    big = PassBuilder(gpu, False)
    big.gemm("fc1", 65536, 7168, 8192)
    wide = big.done().kernels[0]
    mid = 0.5 * wide.seconds
    assert decomposed_exposed(wide, mid, 8, gpu, False) <= wide.seconds / 8 * 1.01
    # On a layer: "all" hides the forward's TP traffic, less one chunk per collective.
    full, none = run(tp_overlap="all"), run(tp_overlap="none")
    assert 0 < full.forward.exposed < none.forward.exposed


@pytest.mark.parametrize(("name", "shared"), [("mixtral-8x7b", False), ("qwen3-235b-a22b", False),
                                              ("deepseek-v3", True)])
def test_a_moe_layers_mlp_collectives_overlap_only_beside_its_shared_experts(name, shared):
    """TP overlap "all" on a MoE layer (issue 31: Mixtral at TP 2 was a StopIteration, a 500):
    the attention's collectives decompose with their GEMMs as a dense layer's do; the MLP's
    decompose with the shared experts' GEMMs, and with none (the routed experts' grouped GEMMs
    take no TP overlap in Megatron Core) they block, as under "backward"."""
    model = get_model(name)
    kw = dict(model=model, tp=2, ep=8, moe=True)
    full, backward = run(tp_overlap="all", **kw), run(tp_overlap="backward", **kw)
    act = 8192 * model.hidden * 2
    ag = nccl_time("all_gather", act, 2, DGX_H100, 2).seconds
    rs = nccl_time("reduce_scatter", act, 2, DGX_H100, 2).seconds
    f = full.ops.forward
    attn = next(k for k in f.kernels if k.name in ("qkv", "q-up", "q"))
    proj = next(k for k in f.kernels if k.name == "proj")
    attention = (decomposed_exposed(attn, ag, 2, DGX_H100.gpu, False)
                 + decomposed_exposed(proj, rs, 2, DGX_H100.gpu, False))
    tp_f = full.forward.comm("tp")
    assert tp_f.seconds == pytest.approx(2 * (ag + rs))
    if shared:
        assert tp_f.exposed < attention + ag + rs
    else:
        assert tp_f.exposed == pytest.approx(attention + ag + rs)
    assert tp_f.exposed < backward.forward.comm("tp").exposed
    assert full.backward.exposed <= backward.backward.exposed
