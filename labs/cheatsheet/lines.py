"""EP12's cheat sheet, its lines of EP01-EP07 (EP08-EP11's, a whole run's, are run_lines.py and
failure_lines.py): one function per formula, each returning the worked example's inputs and
result as the lab that teaches the formula computes them (never re-derived here). Each group
cites the paper its formulas come from; labs/cheatsheet/lab.py lists them in order."""

from collections.abc import Callable

from labs.cheatsheet.inputs import CheatInput, Term
from labs.context_parallel.lab import cp_cost, mask_layout
from labs.core.errors import LabInputError
from labs.core.recomputation import RECOMPUTATION
from labs.data_parallel.inputs import DataParallelInput
from labs.data_parallel.lab import nccl_all_reduce
from labs.data_parallel.lab import simulate as simulate_dp
from labs.experts.inputs import MoEInput
from labs.experts.lab import simulate_moe
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_cluster, get_link
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory, kv_cache_bytes
from labs.model.activations import activation_bytes_per_layer, score_bytes_per_element
from labs.model.presets import get_model
from labs.model.spec import ModelSpec
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate as simulate_pipeline
from labs.tensor_parallel.comm import LAYER_COLLECTIVES
from labs.tensor_parallel.inputs import Topology, TPInput
from labs.tensor_parallel.lab import tensor_parallel
from labs.zero.inputs import ZeroInput
from labs.zero.lab import simulate_zero

MOE_EXAMPLE = "mixtral-8x7b"  # EP07's lines need experts: a dense model borrows this one


# ---- EP01 the ledger (Korthikanti et al. 2022; ZeRO paper sec 3.1) ----

def ledger_of(inp: CheatInput, recipe: str = "adam16", mode: str = "train"):
    return compute_memory(MemoryInput(inp.model, inp.gpu, mode=mode, recipe=recipe,
                                      seq_len=inp.seq_len, micro_batch=inp.micro_batch))


def state16(inp):
    r = ledger_of(inp)
    return ((Term("P", r.params, "count", "parameters"),
             Term("B", r.bytes_per_param, "bytes", "per parameter: 2 + 2 + 4 + 8")),
            Term("P·B", r.state_bytes, "bytes", "weights, gradients, master, moments"))


def state18(inp):
    r = ledger_of(inp, "adam18")
    return ((Term("P", r.params, "count", "parameters"),
             Term("B", r.bytes_per_param, "bytes", "per parameter: 2 + 4 + 4 + 8")),
            Term("P·B", r.state_bytes, "bytes", "with fp32 gradients"))


def _act(inp, recompute):
    m = inp.model
    per = activation_bytes_per_layer(m, inp.seq_len, inp.micro_batch, recompute=recompute)
    terms = (Term("s", inp.seq_len, "", "tokens"), Term("b", inp.micro_batch, "", "sequences"),
             Term("h", m.hidden, "", "hidden size"), Term("L", m.layers, "", "layers"))
    return terms, Term("L × per layer", m.layers * per, "bytes", RECOMPUTATION[recompute].phrase)


def activations_selective(inp):
    return _act(inp, "selective")


def activations_none(inp):
    terms, result = _act(inp, "none")
    k = score_bytes_per_element(inp.model)
    return (*terms, Term("a", inp.model.heads, "", "heads"),
            Term("k", k, "", "bytes a score keeps: softmax output, dropout mask and output"
                 if inp.model.dropout else "bytes a score keeps: the softmax output, no "
                 "dropout (the 34 stays GPT's count, its dropout masks included, as EP01 "
                 "charges Llama)")), result


def activations_flash(inp):
    return _act(inp, "flash")


def activations_full(inp):
    return _act(inp, "full")


def inference(inp):
    r = ledger_of(inp, "bf16", "infer")
    return ((Term("P", r.params, "count", "parameters"),
             Term("B", r.bytes_per_param, "bytes", "bf16 weights")),
            Term("2·P", r.state_bytes, "bytes", "weights to serve"))


def kv_cache(inp):
    m = inp.model
    kv = kv_cache_bytes(m, inp.seq_len, inp.micro_batch)
    # Every factor of the formula is a term (issue 36: kv_heads and d_head were left out, so
    # the printed result could not be worked out from the line); MLA caches a latent instead.
    heads = () if m.uses_mla else (Term("kv_heads", m.kv_heads, "", "key/value heads"),
                                   Term("d_head", m.head_dim, "", "per head"))
    return ((Term("L", m.layers, "", "layers"), *heads,
             Term("s·b", inp.seq_len * inp.micro_batch, "", "tokens cached")),
            Term("KV", kv, "bytes", "bf16 keys and values"))


def min_gpus(inp):
    r = ledger_of(inp)
    # Round-18 cold reading C, finding 27: M is the datasheet's figure; say which way it errs.
    note = f" ({inp.gpu.memory_note.rstrip('.')})" if inp.gpu.memory_note else ""
    return ((Term("16·P", r.state_bytes, "bytes", "state"),
             Term("M", r.gpu_memory_bytes, "bytes", f"one {inp.gpu.name} at its datasheet "
                  f"GB{note}: fewer bytes than the card holds, so the count errs high, as "
                  "EP01 step 5 says")),
            Term("⌈16P / M⌉", r.min_gpus, "", "GPUs for the state alone"))


# ---- EP02 data parallelism (Patarasuk & Yuan 2009, ring all-reduce) ----

DP_CLUSTER = "dgx-h100"  # the servers EP02's lab joins (labs.data_parallel.lab.SERVER_GPU)

def dp_link(inp) -> str:
    """EP02's link for the line's N replicas. EP02's lab times H100 servers (NVLink 4 inside
    a board, NDR InfiniBand between), whatever GPU the sheet is set to: its lines are pinned
    to that hardware and say so (round-18 cold reading C, finding 2: an A100 was given an
    H100's 674 TFLOP/s on its own NVLink 3)."""
    c = get_cluster(DP_CLUSTER)
    return c.inter.id if inp.dp > c.gpus_per_node else c.intra.id


def _dp(inp):
    link = dp_link(inp)
    return simulate_dp(DataParallelInput(inp.model, 2 * inp.model.params, gpus=inp.dp,
                                         link=link, seq_len=inp.seq_len,
                                         micro_batch=inp.micro_batch,
                                         microbatches=inp.microbatches)), get_link(link).name


def ring(inp):
    r, link = _dp(inp)
    return ((Term("N", inp.dp, "", "DP replicas"),
             Term("G", r.input.grad_bytes, "bytes", "bf16 gradients, 2·P")),
            Term("2(N−1)/N · G", r.point.allreduce_bytes_per_gpu, "bytes",
                 f"sent per GPU per step ({link})"))


def _allreduce(r):
    """The gradients' all-reduce of EP02's result ``r`` as NCCL prices it: its busBW is the
    link preset's own figure (one physical link, one number: labs.hardware.links)."""
    i = r.input
    return nccl_all_reduce(i.grad_bytes, i.gpus, get_link(i.link), i.nics_per_node)


def dp_speedup(inp):
    r, link = _dp(inp)
    p, c, ar = r.point, r.ratio, _allreduce(r)
    k = get_gpu(p.gpu).kernels  # the GPU EP02 times the line on, whose rate it is
    return ((Term("N", inp.dp, "", "GPUs"),
             Term("T", c.tokens_per_gpu, "", "tokens per GPU per step: b·m·s"),
             Term("rate", c.rate, "flop/s", f"EP02's {c.gpu_name}, whatever GPU is chosen "
                                            "above (this line times HGX H100 servers): "
                                            f"{c.achieved_share:.1%} of its "
                                            f"{c.peak_flops / 1e12:,.0f} TFLOP/s dense peak, "
                                            f"achieved: its MAMF share, "
                                            f"{k.matmul_efficiency:.1%}, × {k.matmul_sustain:.2%}"
                                            " sustained over burst"),
             Term("c", p.compute_s, "s", "6·P·T ÷ rate"
                  + (f", P here the {inp.model.active_params / 1e9:.1f}B active parameters"
                     if inp.model.is_moe else
                     f", P = {inp.model.params / 1e9:.1f}B parameters")),
             Term("B_bus", ar.busbw, "B/s",
                  f"NCCL's bus bandwidth on {link}, the H100 servers' link, for the algorithm "
                  "it picks (EP02 step 2: the ring's or NVLS's), measured (nccl-tests), not "
                  "the link's datasheet rate"),
             Term("α", ar.latency, "s", "NCCL's latency: its start-up and a time a hop "
                                        "(EP02 step 4)"),
             Term("t", p.exposed_comm_s, "s", "2(N−1)/N · 2·P ÷ B_bus + α, no overlap"
                  + (f", P here all {inp.model.params / 1e9:.1f}B: every expert has a gradient"
                     if inp.model.is_moe else ""))),
            Term("N·c/(c+t)", p.speedup, "", "weak-scaling speedup"))


# ---- EP03 ZeRO (Rajbhandari et al. 2020, sec 5) ----

def _zero(inp, stage):
    r = simulate_zero(ZeroInput(inp.model, inp.gpu, dp=inp.dp, zero=stage,
                                seq_len=inp.seq_len, micro_batch=inp.micro_batch))
    return ((Term("P", r.params, "count", "parameters"),
             Term("D", inp.dp, "", "DP replicas, DP alone: the TP and PP above are not "
                                   "applied (EP03's lab)")),
            Term(f"ZeRO-{stage}", r.state_bytes, "bytes", "state per GPU"))


def zero_stage(stage: int) -> Callable:
    return lambda inp: _zero(inp, stage)


def zero_traffic(inp):
    r = simulate_zero(ZeroInput(inp.model, inp.gpu, dp=inp.dp, zero=3, seq_len=inp.seq_len))
    plain, full = r.traffic[0].bytes_per_gpu, r.traffic[3].bytes_per_gpu
    if plain == 0:  # one replica: nothing is all-reduced, so there is no ratio to show
        raise LabInputError("dp", "one DP replica sends no gradients: the ratio needs DP ≥ 2")
    return ((Term("DP", plain, "bytes", "all-reduce per GPU"),
             Term("ZeRO-3", full, "bytes", "reduce-scatter of the gradients + two weight "
                                           "all-gathers (forward and backward), all of it")),
            Term("ratio", full / plain, "", "ZeRO-3 over plain DP"))


# ---- EP04 tensor parallelism (Shoeybi et al. 2019; Korthikanti et al. 2022 for SP) ----

def tp_layer(inp):
    """Bytes one GPU sends per layer: (n + r) collectives of s·b·h·2 B, each a ring over t GPUs
    sending 2(t−1)/t of it (an all-reduce, or with SP its all-gather + reduce-scatter pair);
    r is what the step's recomputation runs again (EP04's lab: with SP and selective
    recomputation the forward's two all-gathers, half a pair each), read off the lab's own
    bytes so the terms multiply to the printed result (issue 36: they gave 470 MB, it 587)."""
    c = inp.cluster
    r = tensor_parallel(TPInput(inp.model, inp.gpu, Topology(c.name, cluster=c), tp=inp.tp,
                                seq_len=inp.seq_len, micro_batch=inp.micro_batch))
    n = len(LAYER_COLLECTIVES)
    per = 2 * (inp.tp - 1) / inp.tp * r.collective_bytes  # one collective's bytes per GPU
    again = r.cost.comm_bytes / per - n if per else 0.0
    return ((Term("n", n, "", "collectives per layer per micro-batch (2 forward, 2 backward)"),
             Term("r", round(again, 3), "", "sent again in the backward: with sequence "
                  "parallelism (on here) each column-parallel layer's input is all-gathered "
                  "again for its weight gradient, two all-gathers = one all-reduce's bytes"
                  if again else "nothing sent again (no sequence parallelism)"),
             Term("s·b·h·2", r.collective_bytes, "bytes", "each one's tensor"),
             Term("t", inp.tp, "", "TP degree")),
            Term("sent per layer", r.cost.comm_bytes, "bytes", "per GPU, forward + backward"))


# ---- EP05 pipelines (Huang et al. 2019 GPipe; Narayanan et al. 2021; Qi et al. 2024) ----

def _bubble(inp, schedule, virtual=1):
    r = simulate_pipeline(PipelineInput(schedule=schedule, stages=inp.pp,
                                        microbatches=inp.microbatches, virtual=virtual))
    return ((Term("p", inp.pp, "", "stages"), Term("m", inp.microbatches, "", "micro-batches")),
            Term("bubble", r.bubble_fraction, "fraction", f"measured on {schedule}'s chart"))


def bubble(inp):
    return _bubble(inp, "1f1b")


def bubble_interleaved(inp):
    terms, result = _bubble(inp, "interleaved-1f1b", 2)
    return (*terms, Term("v", 2, "", "chunks per rank")), result


def bubble_zb(inp):
    return _bubble(inp, "zb-h1")


# ---- EP06 context parallelism (Liu et al. 2023 ring attention; zigzag as in Megatron CP) ----

def _rows(rank) -> str:
    """A rank's rows of the causal mask as the pairs each adds (row q sees q + 1 keys), so the
    busiest rank's count can be added up from the line (round-18 cold reading C, finding 15)."""
    return "= " + " + ".join(str(q + 1) for q in rank.tokens)


def cp_pairs(layout: str) -> Callable:
    def line(inp):
        tokens = 4 * inp.cp
        mask = mask_layout(tokens, inp.cp, layout)
        return ((Term("s", tokens, "", "tokens drawn"), Term("c", inp.cp, "", "CP ranks"),
                 Term("s(s+1)/2", mask.total_pairs, "", "causal pairs in all")),
                Term("busiest", mask.busiest.causal_pairs, "",
                     f"pairs of rank {mask.busiest.rank}, the busiest rank, {layout}: "
                     f"Σ of its rows {_rows(mask.busiest)}"))
    return line


def cp_kv(inp):
    link = inp.cluster.intra if inp.tp * inp.cp <= inp.cluster.gpus_per_node else \
        inp.cluster.inter
    cost = cp_cost(inp.model, inp.seq_len, inp.cp, "zigzag", link, inp.gpu)
    return ((Term("c", inp.cp, "", "CP ranks"), Term("steps", cost.steps, "", "ring steps"),
             Term("s/c", inp.seq_len / inp.cp, "", "tokens in one rank's K/V block"),
             Term("K,V per token", cost.kv_bytes_per_token, "bytes", "one layer")),
            Term("sent", cost.comm_bytes_per_gpu, "bytes", "per GPU per layer"))


# ---- EP07 experts (Shazeer et al. 2017; Lepikhin et al. 2020 GShard) ----

def _moe_model(inp) -> ModelSpec:
    return inp.model if inp.model.is_moe else get_model(MOE_EXAMPLE)


def _borrowed(inp, m: ModelSpec) -> str:
    """Said on an EP07 line when the chosen model is dense and the line shows MOE_EXAMPLE."""
    return "" if m is inp.model else f" ({m.name}: {inp.model.name} is dense)"


def moe_params(inp):
    m = _moe_model(inp)
    return ((Term("experts", m.experts, "", f"{m.name}, top-{m.top_k}{_borrowed(inp, m)}"),),
            Term("total / active", m.params / m.active_params, "",
                 f"{m.params / 1e9:.1f}B held, {m.active_params / 1e9:.1f}B per token"))


def moe_a2a(inp):
    m = _moe_model(inp)
    ep = min(8, m.experts)
    r = simulate_moe(MoEInput(m, get_cluster("dgx-h100"), nodes=1, ep=ep,
                              tokens=inp.seq_len * inp.micro_batch))
    return ((Term("T", r.input.tokens, "", f"tokens per GPU{_borrowed(inp, m)}"),
             Term("k", m.top_k, "", "experts per token"),
             Term("h·2", m.hidden * 2, "bytes", "one token"),
             Term("EP", ep, "", "expert-parallel GPUs")),
            Term("dispatch", max(r.routing.received_bytes), "bytes",
                 "received per GPU, one all-to-all (combine sends it back)"))
