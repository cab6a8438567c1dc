"""EP04's controls and answers: ``TPQuery`` and the option lists its controls offer (dense
models, the links a TP group can talk over), the topology a query names, ``run`` through
labs.tensor_parallel and ``to_api``, the JSON of GET /api/tp, and ``figures``, its charts
(app/charts/tensor_parallel_efficiency.py and tensor_parallel_cost.py); ``tensor_parallel.py``
holds the lesson, its page and its view."""

from functools import cache
from typing import Literal

from pydantic import Field

from app.charts.tensor_parallel_cost import cost_figure, crossover_figure, memory_figure
from app.charts.tensor_parallel_efficiency import efficiency_figure
from app.cluster_controls import LinkFollowsGpu
from app.model_controls import ModelChoice, ModelGpuControls, model_field
from app.options import link_choices
from labs.core.errors import LabInputError
from labs.core.limits import (
    MAX_GPUS_PER_NODE,
    MAX_MFU,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    MAX_TP,
    MIN_MFU,
    RECOMPUTE,
)
from labs.hardware.gpus import get_gpu, gpus
from labs.hardware.links import get_link, links, peer_links
from labs.model.presets import models
from labs.tensor_parallel.comm import LAYER_COLLECTIVES
from labs.tensor_parallel.crossover import crossover_degree, tp_crossover
from labs.tensor_parallel.inputs import Topology, TPInput, TPResult, check_model
from labs.tensor_parallel.lab import tensor_parallel, tp_cluster
from labs.tensor_parallel.notes import assumptions

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


def figures(result) -> dict:
    return {"efficiency": efficiency_figure(result), "cost": cost_figure(result),
            "memory": memory_figure(result), "crossover": crossover_figure(result)}


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
