"""EP07's state: the experts lab's controls (``MoEQuery``), the state they describe run
through labs.experts (``run``), and its answers (``to_api``, the figures, the balance chart
drawn on its own request). ``app.routers.moe`` serves them, with the lesson's states, page
context, cases and drills."""

from typing import Literal

from pydantic import Field

from app.charts.moe import balance_figure, experts_figure, gpus_figure, params_figure
from app.charts.moe_cost import crossover_figure, gemm_figure, hold_rank_counts, network_figure
from app.charts.rank_map import rank_map_figure
from app.model_controls import ModelChoice, ModelControls, model_field
from labs.core.limits import (
    MAX_CAPACITY_FACTOR,
    MAX_DEGREE,
    MAX_MFU,
    MAX_MOE_TOKENS,
    MAX_NODES,
    MAX_OVERSUBSCRIPTION,
    MAX_SKEW,
    MIN_MFU,
    MOE_GROUP_KINDS,
)
from labs.experts.crossover import ep_crossover
from labs.experts.inputs import MoEInput, MoEResult
from labs.experts.lab import balance_of, simulate_moe
from labs.hardware.links import clusters, get_cluster, with_network

# A DGX SuperPOD H100 scalable unit: 32 nodes, one leaf switch per rail (NVIDIA's reference
# architecture); what the leaf control starts at.
LEAF_NODES = 32


class MoEQuery(ModelControls):
    """The controls of the experts lab: a model, the cluster, the parallel degrees (DP is
    what divides the rest), routing skew and capacity. Sizes come back in bytes, times in s."""

    model: ModelChoice = model_field("mixtral-8x7b", "Mixture-of-experts model")
    link: str = Field("dgx-h100", max_length=64, description="Cluster preset (GPUs per node, "
                      "the link inside a node, the network between nodes): "
                      + ", ".join(clusters()) + ".")
    nodes: int = Field(2, ge=1, le=MAX_NODES, description="Nodes; GPUs = nodes x GPUs per node.")
    tp: int = Field(1, ge=1, le=MAX_DEGREE, description="Tensor-parallel degree (dense layers).")
    pp: int = Field(1, ge=1, le=MAX_DEGREE, description="Pipeline stages.")
    cp: int = Field(1, ge=1, le=MAX_DEGREE, description="Context-parallel degree.")
    ep: int = Field(8, ge=1, le=MAX_DEGREE, description="Expert-parallel degree: experts are "
                    "split over EP GPUs of each stage.")
    etp: int = Field(1, ge=1, le=MAX_DEGREE, description="Expert tensor-parallel degree.")
    skew: float = Field(0.0, ge=0, le=MAX_SKEW, description="Routing skew: 0 uniform, 1 every "
                        "token picks expert 0 (deterministic, no sampling).")
    capacity_factor: float = Field(0.0, ge=0, le=MAX_CAPACITY_FACTOR, description="Expert "
                                   "capacity factor; 0 = no limit (dropless).")
    tokens: int = Field(4096, ge=1, le=MAX_MOE_TOKENS,
                        description="Tokens per GPU entering each MoE layer.")
    ep_dispatch: Literal["alltoall", "deepep"] = Field(
        "alltoall", description="How the tokens travel: alltoall (NCCL's all-to-all, a copy "
                                "per routed expert) or deepep (DeepEP: a copy per "
                                "destination node over the network, forwarded on NVLink to "
                                "each destination GPU).")
    mfu: float | None = Field(None, ge=MIN_MFU, le=MAX_MFU,
                              description="An override of the share of the GPU's BF16 peak a "
                                          "full-wave expert GEMM reaches (empty: each "
                                          "expert's GEMMs at their shapes' measured rates).")
    group: Literal[MOE_GROUP_KINDS] = Field("ep", description="Which groups the rank map "
                                            "colours.")
    leaf_nodes: int = Field(LEAF_NODES, ge=1, le=MAX_NODES, description="Nodes under one leaf "
                            "switch: 32, a DGX SuperPOD scalable unit with one leaf per rail.")
    oversubscription: float = Field(1.0, ge=1, le=MAX_OVERSUBSCRIPTION, description="Leaf-to-"
                                    "spine oversubscription r (r:1 downlink to uplink "
                                    "bandwidth); 1 = a full fat tree.")


def run(query: MoEQuery) -> MoEResult:
    return simulate_moe(MoEInput(
        model=query.model_spec(),
        cluster=with_network(get_cluster(query.link), query.leaf_nodes, query.oversubscription),
        nodes=query.nodes,
        tp=query.tp, pp=query.pp, cp=query.cp, ep=query.ep, etp=query.etp, skew=query.skew,
        capacity_factor=query.capacity_factor, tokens=query.tokens,
        ep_dispatch=query.ep_dispatch, mfu=query.mfu, group=query.group))


def to_api(result: MoEResult) -> dict:
    inp, r, lay = result.input, result.routing, result.layout
    return {
        "model": inp.model.id,
        "link": inp.cluster.id,
        "ep_dispatch": inp.ep_dispatch,
        "world_size": lay.world_size,
        "tp": lay.tp, "pp": lay.pp, "cp": lay.cp, "dp": lay.dp, "ep": lay.ep, "etp": lay.etp,
        "expert_dp": lay.expert_dp,
        "params": result.params,
        "active_params": result.active_params,
        "params_per_gpu": round(result.params_per_gpu),
        "experts_per_gpu": result.experts_per_gpu,
        "ep_group": list(result.ep_group),
        "ep_per_node": result.ep_per_node,
        "tokens_per_expert": list(r.routed_per_expert),
        "dropped_per_expert": list(r.dropped_per_expert),
        "capacity": r.capacity,
        "dropped_fraction": result.dropped_fraction,
        "max_over_mean": result.max_over_mean,
        "tokens_per_gpu": list(r.tokens_per_gpu),
        "gpu_max_over_mean": result.gpu_max_over_mean,
        "dispatch_bytes_per_gpu": [round(b) for b in r.received_bytes],
        "dispatch_sent_bytes_per_gpu": [round(b) for b in r.sent_bytes],
        "dispatch_s_per_gpu": list(r.dispatch_s),
        "compute_s_per_gpu": list(r.compute_s),
        "dispatch_s": result.dispatch_s,
        "combine_s": result.dispatch_s,
        "compute_s": result.compute_s,
        "layer_s": result.layer_s,
        "balanced_layer_s": result.balanced.layer_s,
        "slowdown": result.slowdown,
        "slowest_gpu": result.slowest_gpu,
        "groups": [{"kind": s.kind, "size": s.size, "count": s.count,
                    "nodes_spanned": s.nodes_spanned, "inside_node": s.inside_node}
                   for s in result.groups],
        "balance_loss": result.balance_loss,
        "crossover": _crossover(result),
        "balance": [{"skew": k, "loss": loss, "slowdown": slow}
                    for k, loss, slow in balance_of(result)],
        "gemm": {"curve": [{"tokens": t, "efficiency": e} for t, e in result.gemm_curve],
                 "tokens_per_expert": result.tokens_per_expert,
                 "efficiency": result.gemm_efficiency,
                 "shared_tokens": result.shared_tokens,
                 "shared_efficiency": result.shared_efficiency,
                 "shared_s": result.shared_s,
                 "alone": [{"tokens": t, "efficiency": e} for t, e in result.gemm_curve_alone],
                 "alone_efficiency": result.alone_efficiency,
                 "matmul_rate": result.matmul_rate, "hbm_rate": result.hbm_rate},
        "leaf_nodes": inp.cluster.leaf_nodes,
        "oversubscription": inp.cluster.oversubscription,
        "network": [{"kind": g.kind, "collective": g.collective, "what": g.what,
                     "bytes_per_gpu": g.bytes_per_gpu, "seconds": g.seconds,
                     "bandwidth": g.bandwidth, "per_node": g.per_node, "nodes": g.nodes,
                     "leaves": g.leaves, "tier": g.tier, "seconds_nonblocking": full.seconds}
                    for g, full in zip(result.network, result.network_nonblocking,
                                       strict=True)],
        "rank_map": None if result.rank_map is None else {
            "group": inp.group, "gpus_per_node": result.rank_map.gpus_per_node,
            "group_of_rank": list(result.rank_map.category)},
    }


def _crossover(result: MoEResult) -> dict:
    c = ep_crossover(result)
    return {"width": c.width, "copies": c.copies, "compute_s": c.compute_s,
            "comm_s": c.comm_s, "comm_bytes": c.comm_bytes, "rate": c.rate,
            "busbw": c.busbw, "matrices": c.matrices, "crossover": round(c.crossover, 1),
            "ratio": c.ratio, "points": [[f, round(a, 9), round(m, 9)] for f, a, m in c.points]}


# ---- What of the bench waits for a guess (issue 36, round-14 cold reading of EP04-EP07,
# finding 1: one move of the bench's controls printed nearly every step's answer). Each
# figure is keyed, as an .answer-mask's data-after-guess (static/js/lab.js), to the steps and
# drills whose answer it gives at this state, read off the state's properties, not its URL:
# DeepSeek-V3's active parameters answer step 1 (a share of its 671B); another EP than the
# opening 8 on Mixtral, one GPU's parameters step 2 (EP 2), and DeepSeek-V3 without PP the
# params drill's; DeepSeek-V3's all-to-alls step 3 (8.58 ms at EP 64 against EP 8's 2.58);
# a skew, the layer's time and the busiest GPU step 4, DeepSeek-V3's busiest expert step 10;
# a capacity, what is dropped step 5; DeepSeek-V3's degrees, DP and expert-DP step 6;
# another leaf or spine, each group's bandwidth and time step 7; another number of tokens,
# the experts' time step 8, and DeepSeek-V3's bytes received the dispatch drill's;
# DeepSeek-V3 inside a node, the crossover f* and the ratio step 11. Mixtral's opening state
# keys nothing: each step's first move changes a live diagram. ----
def answer_keys(inp: MoEInput) -> dict[str, tuple[str, ...]]:
    """The steps and drills each kind of figure answers at this state."""
    opening = MoEQuery.model_fields
    v3 = inp.model.id == "deepseek-v3"
    skewed = inp.skew > 0
    few = inp.tokens != opening["tokens"].default
    a2a = ("step-3",) if v3 else ()
    across = inp.ep > inp.cluster.gpus_per_node
    compute = (*(("step-4",) if skewed else ()), *(("step-8",) if few else ()))
    network = (inp.cluster.leaf_nodes != LEAF_NODES
               or inp.cluster.oversubscription != opening["oversubscription"].default)
    return {
        "active": ("step-1",) if v3 else (),
        "per_gpu": (*(("step-2",) if not v3 and inp.ep != opening["ep"].default else ()),
                    *(("drill-moe-predict-params-dsv3",) if v3 and inp.pp == 1 else ())),
        "a2a": a2a,
        "compute": compute,
        "layer": (*a2a, *compute),
        "busiest": (*(("step-4",) if skewed else ()), *(("step-10",) if v3 and skewed else ())),
        "dropped": ("step-5",) if inp.capacity_factor > 0 else (),
        # The total bar's split, routed experts against the rest (654B and 17.1B), is the
        # params derive's first product (round-21 cold reading Q, finding 4): held until it
        # is answered, at every DeepSeek-V3 state.
        "routed": ("drill-moe-predict-params-dsv3",) if v3 else (),
        "dp": ("step-6",) if v3 else (),
        "expert_dp": ("step-6",) if v3 else (),
        "network": ("step-7",) if network else (),
        "received": ("drill-moe-dispatch-mb",) if v3 and few else (),
        # Inside a node its f* answers step 11. Across nodes its all-to-all time and rate are
        # step 3's EP 64 dispatch doubled and EP 64's effective rate (round-21 cold reading Q,
        # finding 2: 17.2 ms and 53.9 GB/s), and f* and the ratio give them back from the
        # rate and the GEMMs' time: those readouts and the chart's all-to-all parts wait for
        # step 3's guess, the GEMMs stay drawn (app.charts.moe_cost._comm_held).
        "crossover": ("step-11",) if v3 and not across else (),
        "crossover_a2a": a2a if across else (),
    }


def figures(result: MoEResult) -> dict:
    """The charts, their figures owned by the steps they answer at this state
    (``answer_keys``)."""
    keys = answer_keys(result.input)
    out = {"experts": experts_figure(result, keys), "gpus": gpus_figure(result, keys),
           "params": params_figure(result, keys), "network": network_figure(result, keys),
           "gemm": gemm_figure(result), "crossover": crossover_figure(result, keys)}
    if result.rank_map is not None:
        colouring = result.rank_map
        spans = colouring.nodes_spanned()
        notes = [("inside one node" if s == 1 else f"spans {s} nodes") for s in spans]
        out["ranks"] = rank_map_figure(colouring, notes, result.input.cluster.leaf_nodes)
        if keys["dp"] and result.input.group in ("dp", "edp", "pp"):
            hold_rank_counts(out["ranks"], keys["dp"])
    return out


def lazy_figures(result: MoEResult) -> dict:
    """The balance chart, drawn on its own request (Diagram.lazy_template): it plots the
    layer's slowdown at every skew, so at the opening state it would print step 4's answer
    (2.5x expert 0's share at skew 0.5 times the bench's balanced layer) before the guess;
    the lesson fetches it once step 10, the step it belongs to, is guessed (after_guess)."""
    return {"balance": balance_figure(result, balance_of(result))}
