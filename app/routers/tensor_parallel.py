"""EP04 Tensor parallelism: the split of every matrix, its cost against TP degree and link,
and the memory it saves (the EP01 ledger)."""

from functools import cache, lru_cache
from typing import Literal

from fastapi import APIRouter
from pydantic import Field

from app.charts.tensor_parallel import (
    MODEL_70B,
    SLOW_LINK,
    STEP_4,
    drill_key,
    figures,
    held_keys,
    row_keys,
    step_keys,
    waits,
)
from app.charts.tp_split import split_view
from app.charts.units import fmt_bytes, fmt_pct
from app.cluster_controls import LinkFollowsGpu
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, lesson_state, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import ModelChoice, ModelGpuControls, model_choices, model_field
from app.options import SEQ_LENGTHS, gpu_options, link_choices, with_value
from app.schemas import TensorParallelAnswer
from labs.core.errors import LabInputError
from labs.core.limits import (
    MAX_GPUS_PER_NODE,
    MAX_MFU,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    MAX_TP,
    MIN_MFU,
    RECOMPUTE,
    TP_DEGREES,
)
from labs.hardware.gpus import get_gpu, gpus
from labs.hardware.kernels import rates
from labs.hardware.links import get_cluster, get_link, link_name, links, peer_links
from labs.hardware.nccl import current_nccl, nvls_latency_check, simple_ring_latency
from labs.model.presets import models
from labs.tensor_parallel.comm import LAYER_COLLECTIVES
from labs.tensor_parallel.crossover import crossover_degree, tp_crossover
from labs.tensor_parallel.inputs import Topology, TPInput, TPResult, check_model
from labs.tensor_parallel.lab import tensor_parallel, tp_cluster
from labs.tensor_parallel.notes import assumptions

router = APIRouter()

# Llama 3.1 405B: Meta trained it with TP = 8 inside each 8-GPU node (arXiv:2407.21783, Table 4).
DEFAULT_MODEL = "llama-3.1-405b"


class TPQuery(ModelGpuControls, LinkFollowsGpu):
    """The controls of the tensor-parallel lab; every size is bounded."""

    # Dense models only: MoE and MLA models are split differently and refused (check_model).
    model: ModelChoice = model_field(DEFAULT_MODEL, "Dense model")
    tp: int = Field(8, ge=1, le=MAX_TP, description="Tensor-parallel degree t.")
    # Off by default: the lesson teaches one all-reduce per matrix pair first (steps 1-4) and
    # sequence parallelism in step 5, so the diagram shows from the first step what it reads.
    sp: bool = Field(False, description="Sequence parallelism (Korthikanti et al. 2022); off "
                                        "by default, as the lesson introduces it last.")
    link: str | None = Field(
        None, max_length=64,
        description="One link carrying the whole TP group, one of: "
                    f"{', '.join(links())}; a scale-out link puts each GPU in its own node. "
                    "Empty: the cluster of gpus_per_node, intra_link and inter_link.")
    gpus_per_node: int = Field(8, ge=1, le=MAX_GPUS_PER_NODE,
                               description="GPUs per node of the cluster (TP packs into nodes).")
    intra_link: str = Field("nvlink-4", max_length=64,
                            description="The cluster's link inside a node (scale-up), one of: "
                                        + ", ".join(k for k, x in links().items()
                                                    if x.kind == "scale-up"))
    inter_link: str = Field("ib-ndr", max_length=64,
                            description="The cluster's link between nodes (scale-out), one "
                                        "port per GPU, one of: "
                                        + ", ".join(k for k, x in links().items()
                                                    if x.kind == "scale-out"))
    seq_len: int = Field(4096, ge=1, le=MAX_SEQ_LEN, description="Tokens per sequence, s.")
    micro_batch: int = Field(1, ge=1, le=MAX_MICRO_BATCH,
                             description="Sequences per micro-batch, b.")
    mfu: float | None = Field(None, ge=MIN_MFU, le=MAX_MFU,
                              description="An override of the fraction of the GPU's dense "
                                          "BF16 peak a full-wave GEMM reaches (empty: the "
                                          "layer's kernels at the GPU's measured rates).")
    recompute: Literal[RECOMPUTE] = Field(
        "selective", description="Activation recomputation, for the memory ledger.")


def topology(query: TPQuery) -> Topology:
    gpu = get_gpu(query.gpu)
    if query.link:
        link = get_link(query.link)
        return Topology(link.name, link=link)
    cluster = tp_cluster(gpu, query.gpus_per_node, query.intra_link, query.inter_link)
    name = (f"{cluster.intra.name} in nodes of {cluster.gpus_per_node}, "
            f"{cluster.inter.name} between" if cluster.gpus_per_node > 1
            else f"one GPU per node, {cluster.inter.name}")
    return Topology(name, cluster=cluster)


def run(query: TPQuery) -> TPResult:
    return tensor_parallel(TPInput(
        model=query.model_spec(), gpu=get_gpu(query.gpu), topology=topology(query),
        tp=query.tp, sp=query.sp, seq_len=query.seq_len, micro_batch=query.micro_batch,
        mfu=query.mfu, recompute=query.recompute))


def _cost_row(c) -> dict:
    return {"tp": c.tp, "efficiency": c.efficiency, "speedup": c.speedup,
            "gemm_rate": c.gemm_rate,
            "step_efficiency": c.step_efficiency, "compute_s": c.compute_s,
            "comm_s": c.comm_s, "comm_bytes": c.comm_bytes, "bottleneck": c.bottleneck}


def to_api(result: TPResult) -> dict:
    inp, cost, shapes, memory = result.input, result.cost, result.shapes, result.memory
    # None where the ledger refuses that t (more GPUs than KV heads).
    memory_by_tp = {m.tp: round(m.memory.total_bytes) if m.memory else None
                    for m in result.memory_sweep}
    return {
        "model": inp.model.id,
        "gpu": inp.gpu.id,
        "tp": inp.tp,
        "sp": inp.sp,
        "topology": inp.topology.name,
        "efficiency": cost.efficiency,
        "speedup": cost.speedup,
        "compute_s": cost.compute_s,
        "comm_s": cost.comm_s,
        "comm_bytes": cost.comm_bytes,
        "collective_s": cost.collective_s,
        "collective_sent_bytes": cost.collective_sent,
        "bus_bandwidth": cost.bus_bandwidth,
        "forward_comm_s": cost.forward_comm_s,
        "forward_compute_s": cost.forward_compute_s,
        "backward_comm_s": cost.backward_comm_s,
        "backward_beside": [{"gemm": name, "seconds": seconds}
                            for name, seconds in cost.backward_beside],
        "seq_split_bytes": cost.seq_split_bytes,
        "seq_split_s": cost.seq_split_s,
        "seq_split_kernels": [{"kernel": name, "forward_bytes": fwd, "backward_bytes": bwd}
                              for name, fwd, bwd in cost.seq_split_kernels],
        "single_gpu_s": cost.single_gpu_s,
        "step_efficiency": cost.step_efficiency,
        "step_speedup": cost.step_speedup,
        "step_compute_s": cost.step_compute_s,
        "gemm_rate": cost.gemm_rate,
        "gemm_tflops": round(cost.gemm_rate / 1e12),
        "step_comm_s": cost.step_comm_s,
        "step_comm_bytes": cost.step_comm_bytes,
        "single_gpu_step_s": cost.single_gpu_step_s,
        "collective_bytes": result.collective_bytes,
        "collectives_per_layer": result.collectives_per_layer,
        "collectives": [
            {"pass": phase, "at": where, "ops": list(with_sp) if inp.sp else [plain]}
            for phase, where, plain, with_sp in LAYER_COLLECTIVES
        ],
        "algorithm": cost.algorithm,
        "bottleneck": cost.bottleneck,
        "memory_per_gpu_bytes": round(memory.total_bytes),
        "memory_breakdown": {k: round(v) for k, v in memory.breakdown.items()},
        "gpu_memory_bytes": round(memory.gpu_memory_bytes),
        "fits": memory.fits,
        "shapes": {
            "hidden": shapes.hidden, "heads": shapes.heads, "kv_heads": shapes.kv_heads,
            "head_dim": shapes.head_dim, "ffn": shapes.ffn, "gated_mlp": shapes.gated,
            "heads_per_gpu": shapes.heads_per_gpu, "kv_heads_per_gpu": shapes.kv_heads_per_gpu,
            "ffn_per_gpu": shapes.ffn_per_gpu, "qkv_columns": shapes.qkv_columns,
            "qkv_columns_per_gpu": shapes.qkv_columns_per_gpu,
        },
        "sweep": [{**_cost_row(c), "memory_per_gpu_bytes": memory_by_tp.get(c.tp)}
                  for c in result.sweep],
        "links": {link_id: [_cost_row(c) for c in costs]
                  for link_id, costs in result.by_link.items()},
        "crossover": _crossover(result),
        "assumptions": list(assumptions(result)),
    }


def _crossover(result: TPResult) -> dict:
    c = tp_crossover(result)
    return {"per_gpu": c.per_gpu, "tokens": c.tokens, "compute_s": c.compute_s,
            "comm_s": c.comm_s, "comm_bytes": round(c.comm_bytes), "flops": c.flops,
            "rate": round(c.rate), "busbw": round(c.busbw), "k": round(c.k, 4),
            "k_scores": round(c.k_scores, 4), "seq_len": result.input.seq_len,
            "beta": round(c.beta, 6), "crossover": round(c.crossover, 1),
            "crossover_degree": round(crossover_degree(c), 2) if c.crossover else None,
            "ratio": c.ratio,
            "points": [[t, x, round(cs, 9), round(cm, 9)] for t, x, cs, cm in c.points]}


@cache
def dense_model_options() -> tuple[tuple[str, str], ...]:
    """The presets this lab draws (dense, Q/K/V attention)."""
    out = []
    for id_, spec in models().items():
        try:
            check_model(spec)
        except LabInputError:
            continue
        out.append((id_, f"{spec.name} (h {spec.hidden:,}, {spec.heads} heads, "
                         f"{spec.kv_heads} KV)"))
    return tuple(out)


def peer_choices(ids, label=lambda link: link.name) -> tuple[tuple[str, str, str], ...]:
    """``link_choices`` for a TP group: a scale-up link names the GPUs that talk to each other
    over it (``labs.hardware.links.peer_links``: its vendor's GPUs, PCIe 4.0 the RTX 4090), so
    choosing an H100 hides PCIe (issue 36, error 6); one no GPU preset talks over (PCIe 5.0) is
    not offered. A scale-out link takes any GPU."""
    out = []
    for key, text, when in link_choices(ids, label):
        if links()[key].kind == "scale-out":
            out.append((key, text, when))
            continue
        who = " ".join(g.id for g in gpus().values() if key in peer_links(g))
        if who:
            out.append((key, text, who))
    return tuple(out)


@cache
def link_options() -> dict[str, tuple[tuple[str, str], ...]]:
    every = links().values()
    return {
        "link": (("", "The cluster below", ""),
                 *peer_choices(links(), lambda x: f"{x.name} alone")),
        "intra": peer_choices(x.id for x in every if x.kind == "scale-up"),
        "inter": tuple((x.id, x.name) for x in every if x.kind == "scale-out"),
    }


GOOD = {"tp": 8}  # the good case: TP = 8 inside an NVLink 4 node


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes (the same
    query model, lab and to_api as GET /api/tp; tests/app/test_prose.py)."""
    state = lesson_state(TPQuery, run, to_api)

    return {
        "good": state(**GOOD),
        # The rough estimate's flat MFU: a GPU that slow hides the same bytes better.
        "flat": state(**GOOD, mfu=0.4),
        "t1": state(tp=1),
        "t2": state(tp=2),
        "t4": state(tp=4),  # step 2 asks t = 4's heads, which the opening bench (t = 8) omits
        "sp_off": state(tp=8, sp=False),
        "sp_on": state(tp=8, sp=True),
        "eth100": state(tp=8, gpus_per_node=1, inter_link="eth-100g"),
        "bad": state(tp=8, gpus_per_node=1, inter_link=SLOW_LINK),  # step 4's
        "gpt3_t8": state(model="gpt-3-175b", tp=8),
        "gpt3_t16": state(model="gpt-3-175b", tp=16),
        # t = 16 across two nodes on a network twice as fast: the same efficiency, so the drop
        # from t = 8 is not the network's (half the compute per GPU, and NCCL's ring across
        # the nodes instead of NVLS inside one).
        "gpt3_t16_xdr": state(model="gpt-3-175b", tp=16, inter_link="ib-xdr"),
        # Where the crossing hop is the bottleneck.
        "gpt3_t16_eth": state(model="gpt-3-175b", tp=16, inter_link="eth-100g"),
        # An NVL72 rack holds only Blackwell GPUs: its state times B200s.
        "gpt3_nvl72": state(model="gpt-3-175b", tp=32, link="nvl72", gpu="b200"),
        "gpt3_nvl72_t8": state(model="gpt-3-175b", tp=8, link="nvl72", gpu="b200"),
        "l70": state(model="llama-3.1-70b", tp=8, sp=False),
        # Step 6: the crossover across InfiniBand NDR, one GPU per node (not the bad case's
        # Ethernet, which step 4 links).
        "ib": state(tp=8, gpus_per_node=1, inter_link="ib-ndr"),
    }


def extra_context(state) -> dict:
    query = state.query
    return {
        "facts": facts(),
        "model_options": model_choices(dense_model_options(), query.model_value),
        "model_value": query.model_value,
        "gpu_options": gpu_options(),
        "link_options": link_options(),
        "links": links(),  # the presets the prose quotes (bandwidth, NVL72's domain)
        "link_name": link_name,  # the tables name each link, never its id
        "tp_options": with_value(TP_DEGREES, query.tp),
        "seq_options": with_value(SEQ_LENGTHS, query.seq_len),
        "notes": assumptions(state.result),
        "split": split_view(state.result),
        "tp_drill_key": drill_key,  # the drill whose answer a state's efficiency gives
        "tp_crossover_key": crossover_key,
        # What the state's time figures wait for (steps 4 and 5 and the 70B drill).
        "tp_held_keys": held_keys, "tp_step_keys": step_keys, "tp_waits": waits,
        "tp_row_keys": row_keys,  # a sweep row's: step 4's t = 8 at the bad case
        "tp_bytes_key": bytes_key,
        "crossover": tp_crossover(state.result),
        "gpu_peak": lambda gpu_id: get_gpu(gpu_id).bf16_flops,  # step 6 names the peak
        "gpu_hbm": lambda gpu_id: rates(get_gpu(gpu_id)),  # step 5 times the norms' bytes
        "ring_lat": simple_ring_latency(),  # step 4 sums a two-node ring's latency (EP02's)
        # Step 3's note: NVLS charged a ring's latency against NCCL's own model, measured.
        "nccl_now": current_nccl(),  # current NCCL's NVLS latency, steps 3 and 4 name
        "nvls_check": nvls_latency_check(get_cluster("dgx-h100")),
    }


def crossover_key(result: TPResult) -> str:
    """'tp-crossover' where the state's collectives cross the link of step 6's prediction (its
    bottleneck): there the readout's collective times, beside its compute, give that step's
    (h/t)* by one division, so lab.js holds them until its guess; '' elsewhere."""
    return "tp-crossover" if result.cost.bottleneck == facts()["ib"]["api"]["bottleneck"] else ""


def bytes_key(result: TPResult) -> str:
    """The derive drill's form where the readout's one collective gives its answer: held
    until it is answered. At every state of the drill's model, Llama 3.1 70B (round-13 cold
    reading of EP04, finding 4: its all-reduce at t = 8; round 16, finding 5: with SP one
    reduce-scatter's 58.7 MB is half of it, at t = 4 its 101 MB 3/4 ÷ 7/8 of it), and
    wherever the figure printed is the drill's (with SP at 405B's t = 8, 117 MB)."""
    halves = 2 if result.input.sp and result.input.tp > 1 else 1
    at_70b = result.input.model.id == MODEL_70B
    return "drill-tp-allreduce-bytes" if at_70b or fmt_bytes(
        result.cost.collective_sent / halves) == printed_drill_answer() else ""


@cache
def printed_drill_answer() -> str:
    return fmt_bytes(drill_answer() * 1e6)


def drill_answer() -> float:
    """MB one GPU sends in one ring all-reduce of Llama 3.1 70B's layer at t = 8, s = 4096."""
    result = run(TPQuery(model=MODEL_70B, tp=8, sp=False))
    return result.cost.comm_bytes / len(LAYER_COLLECTIVES) / 1e6


VIEW = LabView(
    name="tp",
    episode=BY_SLUG["tensor-parallel"],
    query_model=TPQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=(
        Diagram("split", "Where Megatron cuts each matrix, one colour per GPU",
                element_id="tp-split", embed_height=900, template="partials/_tp_split.html"),
        Diagram("efficiency", "Efficiency against TP degree, per link", embed_height=520),
        Diagram("cost", "Time per layer: compute ÷ t plus the collectives", embed_height=480),
        Diagram("memory", "Memory per GPU against TP degree (EP01 ledger)", embed_height=480),
        Diagram("crossover", "Compute against the collectives, by hidden size per GPU",
                embed_height=440),
    ),
    labels={
        "model": "Model", "params": "Custom params", "gpu": "GPU", "tp": "TP degree t",
        "sp": "Sequence parallelism",
        "link": "Link for the whole group", "gpus_per_node": "GPUs per node",
        "intra_link": "Link inside a node", "inter_link": "Link between nodes",
        "seq_len": "Sequence length s", "micro_batch": "Micro-batch b",
        "mfu": "Matmul rate override",
        "recompute": "Recomputation",
    },
    response_model=TensorParallelAnswer,
    embed_height=1900,
    extra_context=extra_context,
    summary="Tensor parallelism: the split, time per layer and per step against TP degree and "
            "link, and memory per GPU (bytes, seconds)",
    good=Case(
        "Good case: TP = 8 inside an NVLink node",
        GOOD,
        lambda: "Eight GPUs on NVLink 4 share every matrix: "
                f"{fmt_pct(facts()['good']['api']['step_efficiency'])} efficient.",
        diagram="tp-efficiency",
    ),
    bad=Case(
        "Bad case: TP = 4 across Ethernet nodes",
        # TP = 4, not step 4's 8: at 8 the bench drew that step's all-reduce time one click
        # before its guess (test_answers_hidden).
        {"tp": 4, "gpus_per_node": 1, "inter_link": "eth-25g"},
        # The setup only: what it gives shows once clicked.
        "A four-way split, one GPU per node, joined by 25 Gb/s Ethernet.",
        diagram="tp-efficiency",  # the split does not change; the efficiency does
        # Its figures land beside step 4's answer: they wait for its guess (step_keys).
        waiting="Its efficiency and speed-up show",
        waits_for=(STEP_4,),
    ),
    drills=(
        Drill(
            id="tp-allreduce-bytes",
            question=(
                "Llama 3.1 70B (hidden size h = 8,192) runs with TP = 8, no sequence "
                "parallelism, one sequence of s = 4,096 tokens (b = 1), bf16 activations. "
                "How many MB (10⁶ bytes) does each GPU send in one ring all-reduce of a "
                "layer's output?"
            ),
            answer=drill_answer,
            unit="MB",
            hint="The all-reduced tensor is s·b·h values of 2 bytes; a ring all-reduce sends "
                 "2(t − 1)/t of it from every GPU.",
            explanation=(
                "{answer} MB: the tensor is 4,096 × 8,192 × 2 B = 67.1 MB, and a ring "
                "all-reduce sends 2 × 7/8 of it from each GPU."
            ),
            mistakes=(
                Mistake("tensor", lambda: drill_answer() / (2 * 7 / 8),
                        "that is the tensor itself. A ring all-reduce is a reduce-scatter "
                        "then an all-gather: each GPU sends 2(t − 1)/t of it."),
                Mistake("one-pass", lambda: drill_answer() / 2,
                        "that is one pass of the ring. The all-reduce is a reduce-scatter "
                        "and an all-gather, (t − 1)/t of the tensor each."),
                Mistake("whole-twice", lambda: drill_answer() / (7 / 8),
                        "each of the ring's two passes sends (t − 1)/t of the tensor, not "
                        "all of it: a GPU keeps its own share."),
                Mistake("split", lambda: drill_answer() / (2 * 7 / 8) / 8,
                        "the layer's output is not split over the GPUs: each holds a partial "
                        "sum of the whole s·b·h tensor, and the all-reduce adds them."),
                Mistake("fp32", lambda: drill_answer() * 2,
                        "bf16 activations are 2 bytes a value, not 4."),
            ),
        ),
        *LESSON_DRILLS["tp"],  # predict and decide (app/lesson_drills/tensor_parallel.py)
    ),
)

register(router, VIEW)
