"""EP07 Experts: a MoE layer under expert parallelism (routing, all-to-all, slowest GPU),
parameters total vs active, and the rank map of the whole job."""

from functools import lru_cache
from typing import Literal

from fastapi import APIRouter
from pydantic import Field

from app.charts.moe import (
    PHASES,
    balance_figure,
    crossover_figure,
    experts_figure,
    gemm_figure,
    gpus_figure,
    network_figure,
    params_figure,
)
from app.charts.rank_map import rank_map_figure
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, lesson_state, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import ModelChoice, ModelControls, model_choices, model_field
from app.options import model_options, with_value
from app.schemas import MoEAnswer
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
from labs.experts.lab import ACTIVATION_BYTES, block_hit, simulate_moe
from labs.hardware.links import clusters, get_cluster, get_link, with_network
from labs.hardware.nccl import simple_ring_latency
from labs.model.presets import models
from labs.parallel.layout import divisors
from labs.parallel.rank_map import GROUP_SHORT, GROUP_TITLES

router = APIRouter()
# A DGX SuperPOD H100 scalable unit: 32 nodes, one leaf switch per rail (NVIDIA's reference
# architecture); what the leaf control starts at.
LEAF_NODES = 32
# The leaf and spine choices the page offers (any value in range is taken from a URL).
LEAF_NAMES = {2: "2 (one rack's top-of-rack switch)", 4: "4", 8: "8", 16: "16",
              32: "32 (a DGX SuperPOD unit, a leaf per rail)", 64: "64",
              384: "384 (a Llama 3 pod of 3,072 GPUs)"}
SPINE_NAMES = {1.0: "1:1 (full fat tree)", 2.0: "2:1", 4.0: "4:1",
               7.0: "7:1 (Llama 3 between pods)", 8.0: "8:1"}


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
                    for k, loss, slow in result.balance_curve],
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
                     "leaves": g.leaves, "tier": g.tier} for g in result.network],
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


def figures(result: MoEResult) -> dict:
    out = {"experts": experts_figure(result), "gpus": gpus_figure(result),
           "params": params_figure(result), "network": network_figure(result),
           "gemm": gemm_figure(result), "crossover": crossover_figure(result)}
    if result.rank_map is not None:
        colouring = result.rank_map
        spans = colouring.nodes_spanned()
        notes = [("inside one node" if s == 1 else f"spans {s} nodes") for s in spans]
        out["ranks"] = rank_map_figure(colouring, notes, result.input.cluster.leaf_nodes)
    return out


def lazy_figures(result: MoEResult) -> dict:
    """The balance chart, drawn on its own request (Diagram.lazy_template): it plots the
    layer's slowdown at every skew, so at the opening state it would print step 4's answer
    (2.5x expert 0's share at skew 0.5 times the bench's balanced layer) before the guess;
    the lesson fetches it once step 10, the step it belongs to, is guessed (after_guess)."""
    return {"balance": balance_figure(result)}


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes.

    One ``params`` dict per state feeds both the step's try link and the numbers quoted next
    to it, run through the same query model, lab and ``to_api`` as GET /api/moe."""
    state = lesson_state(MoEQuery, run, to_api)

    # DeepSeek-V3 trained on H800 nodes (NVLink cut to 200 GB/s per direction; its report).
    v3 = {"model": "deepseek-v3", "nodes": 256, "pp": 16, "link": "hgx-h800"}
    mx = {"model": "mixtral-8x7b", "nodes": 2}
    return {
        "mixtral": state(**mx, ep=8),
        "mixtral_ep2": state(**mx, ep=2),
        "mixtral_ep4": state(**mx, ep=4),  # step 2's second link: the chart moves from EP 8
        "v3": state(**v3, ep=64),
        "v3_ep8": state(**v3, ep=8),
        "v3_deepep": state(**v3, ep=64, ep_dispatch="deepep"),
        # Step 11 quotes it, unlinked: a quarter of the tokens a GPU, the same ratio (a link
        # would only rescale the chart).
        "v3_t1k": state(**v3, ep=64, tokens=1024),
        "hot": state(**mx, ep=8, skew=0.5),
        "one_hot": state(**mx, ep=8, skew=1.0),
        "capped": state(**mx, ep=8, skew=0.5, capacity_factor=1.25),
        "balanced_capped": state(**mx, ep=8, capacity_factor=1.0),
        "v3_dp": state(**v3, ep=64, group="dp"),
        "tp2": state(**mx, ep=8, tp=2, group="tp"),
        "tp2_ep": state(**mx, ep=8, tp=2, group="ep"),
        # Step 7, the network's shape: DeepSeek-V3's layout under leaves and spines.
        "v3_tor4": state(**v3, ep=64, leaf_nodes=4, oversubscription=4.0),
        "v3_rail4": state(**v3, ep=64, oversubscription=4.0),
        "v3_tor2": state(**v3, ep=64, leaf_nodes=2, oversubscription=7.0),
        "v3_pod": state(**v3, ep=64, leaf_nodes=384, oversubscription=7.0),
        # Steps 8 and 9, few tokens per expert and the shared expert: 1,024 tokens a GPU.
        "v3_few_ep4": state(**v3, ep=4, tokens=1024),
        "v3_few_ep8": state(**v3, ep=8, tokens=1024),
        "v3_few": state(**v3, ep=64, tokens=1024),
        "v3_few_tp": state(**v3, ep=64, tokens=1024, tp=8, group="tp"),
        "mixtral_few": state(**mx, ep=8, tokens=1024),
        # Step 10, balancing the router: a loss or a bias.
        "v3_skew": state(**v3, ep=64, skew=0.1),
    }


@lru_cache(maxsize=1)
def deepep_legs() -> dict:
    """Step 3's DeepEP dispatch of DeepSeek-V3 (EP 64 over 8 H800 nodes), leg by leg, from
    the engine's own counts (labs.experts.lab.block_hit): the chance a token reaches another
    node under node-limited routing, the copies and bytes that cross a GPU's NIC, and what its
    node-mates relay to it on NVLink (the rest of what it receives)."""
    api, model = facts()["v3_deepep"]["api"], models()["deepseek-v3"]
    per_node = api["experts_per_gpu"] * api["ep_per_node"]
    nodes = api["ep"] // api["ep_per_node"]
    share = block_hit(model, model.top_k / model.experts, per_node, 2 * per_node)
    limit = model.route_group_limit
    tokens = MoEQuery.model_fields["tokens"].default  # the state's: 4,096 a GPU
    copies = (nodes - 1) * tokens * share
    net_bytes = copies * model.hidden * ACTIVATION_BYTES
    return {"nodes": nodes, "limit": limit, "per_node": per_node, "share": share,
            "miss": 1 - share * nodes / limit, "copies": copies, "net_bytes": net_bytes,
            "nvlink_bytes": api["dispatch_bytes_per_gpu"][0] - net_bytes}


def extra_context(state) -> dict:
    query = state.query
    spec = state.result.input.model
    from app.routers.validation import GOODPUT_BOUND
    from app.routers.validation import answer as validation  # its runs load EP08's lab

    return {
        "facts": facts(),
        "h800": get_link("nvlink-4-h800"),  # step 3 states its cut NVLink and NCCL's rate
        "nvlink4": get_cluster("dgx-h100").intra,  # Mixtral's node (step 11 times its sends)
        # An all-to-all's latency, one Simple send (labs.hardware.nccl.pairwise): NCCL's
        # start-up and one hop, on NVLink or across nodes; steps 3 and 11 add it to the bytes.
        "a2a": simple_ring_latency(),
        "deepep": deepep_legs(),  # step 3 derives DeepEP's 3.90 ms from these
        "crossover": ep_crossover(state.result),
        "validation": {g["group"]: g for g in validation()["groups"]},
        "goodput_bound": GOODPUT_BOUND,  # DeepSeek-V3's figure is a whole-run average
        # Total sizes only: step 1 asks the share of DeepSeek-V3's parameters a token uses,
        # which "37.6B active" beside "671B" answered (round-6 cold reading, item 1).
        "model_options": model_choices(
            [(m, label) for m, label in model_options("total") if models()[m].is_moe],
            query.model_value, custom=False),
        "v3_model": models()["deepseek-v3"],  # step 1 derives the report's 37B from the lab's count
        "model_value": query.model_value,
        "link_options": [(c.id, c.name) for c in clusters().values()],
        "degree_options": {
            "tp": with_value(divisors(spec.heads, 64), query.tp),
            "pp": with_value([d for d in (1, 2, 4, 8, 16, 32) if d <= spec.layers], query.pp),
            "cp": with_value([1, 2, 4, 8], query.cp),
            "ep": with_value(divisors(spec.experts), query.ep),
            "etp": with_value([1, 2, 4, 8], query.etp),
        },
        "capacity_options": [(v, "no limit (dropless)" if v == 0 else f"{v:g}")
                             for v in with_value((0.0, 1.0, 1.25, 1.5, 2.0, 4.0),
                                                 query.capacity_factor)],
        "mfu_options": [("", "measured")] + [
            (v, f"{v:g}") for v in sorted({0.2, 0.3, 0.4, 0.5, 0.6}
                                          | ({query.mfu} if query.mfu is not None else set()))],
        "token_options": with_value((1024, 2048, 4096, 8192, 16384, 32768), query.tokens),
        "group_options": [(k, f"{GROUP_SHORT[k]} ({GROUP_TITLES[k]})") for k in MOE_GROUP_KINDS],
        "leaf_options": [(v, LEAF_NAMES.get(v, f"{v:,}"))
                         for v in with_value(tuple(LEAF_NAMES), query.leaf_nodes)],
        "spine_options": [(v, SPINE_NAMES.get(v, f"{v:g}:1"))
                          for v in with_value(tuple(SPINE_NAMES), query.oversubscription)],
        "phases": PHASES,
        "group_short": GROUP_SHORT,
    }


# The drills' states: none a step links to (the steps' DeepSeek-V3 at PP16 x EP64 with 4,096
# tokens draws expert-DP 2 and 462 MB received, which the drills once asked: cold reading).
EXPERT_DP_DRILL = {"model": "deepseek-v3", "nodes": 256, "pp": 4, "ep": 64}
DISPATCH_DRILL = {"model": "deepseek-v3", "nodes": 256, "pp": 16, "ep": 32, "tokens": 8192}


def expert_dp_answer() -> float:
    """DeepSeek-V3's expert-DP degree on 2,048 GPUs with PP4, EP64, no TP."""
    return run(MoEQuery(**EXPERT_DP_DRILL)).layout.expert_dp


def dispatch_mb_answer() -> float:
    """MB each GPU receives in one dispatch: DeepSeek-V3, 8,192 tokens, EP32, uniform."""
    return max(run(MoEQuery(**DISPATCH_DRILL)).routing.received_bytes) / 1e6


_HOT = {"model": "mixtral-8x7b", "nodes": 2, "ep": 8, "skew": 1}  # the bad case's state

VIEW = LabView(
    name="moe",
    episode=BY_SLUG["experts"],
    query_model=MoEQuery,
    run=run,
    to_api=to_api,
    # The rank map's colouring is a view of the state, read from the query.
    figures=figures,
    lazy_figures=lazy_figures,
    diagrams=(
        Diagram("experts", "Tokens per expert, experts drawn GPU by GPU", embed_height=480),
        Diagram("gpus", "Time of one MoE layer on each GPU of the EP group", embed_height=480),
        Diagram("params", "Parameters: held in memory, used per token, held per GPU",
                embed_height=360),
        Diagram("ranks", "Rank map: every GPU coloured by its group", embed_height=520),
        Diagram("network", "The bandwidth each kind of group gets, and where it runs",
                embed_height=360),
        Diagram("gemm", "The experts' GEMMs: share of peak against tokens per expert",
                embed_height=360),
        Diagram("balance", "What the balance loss sees against what the layer pays, by skew",
                embed_height=360, lazy_template="partials/_moe_balance.html"),
        Diagram("crossover", "Expert GEMMs against the all-to-alls, by expert width",
                embed_height=440),
    ),
    labels={
        "model": "Model", "params": "Custom params", "link": "Cluster",
        "nodes": "Nodes", "tp": "TP", "pp": "PP",
        "cp": "CP", "ep": "EP", "etp": "Expert-TP", "skew": "Routing skew",
        "capacity_factor": "Capacity factor", "tokens": "Tokens per GPU",
        "mfu": "GEMM efficiency of the experts",
        "ep_dispatch": "EP dispatch",
        "group": "Rank map colours",
        "leaf_nodes": "Nodes per leaf switch", "oversubscription": "Spine oversubscription",
    },
    aliases={"gpus": "nodes", "cluster": "link"},
    response_model=MoEAnswer,
    embed_height=1900,
    extra_context=extra_context,
    summary="One MoE layer under expert parallelism: tokens per expert, all-to-all bytes and "
            "time, the slowest GPU, and the job's rank groups",
    good=Case(
        "Good case: balanced routing, EP inside one node",
        {"model": "mixtral-8x7b", "nodes": 2, "ep": 8, "skew": 0},
        "Mixtral's 8 experts on one node's 8 GPUs, tokens spread evenly: every GPU finishes "
        "together and the all-to-all stays on NVLink.",
    ),
    bad=Case(
        "Bad case: one hot expert", _HOT,
        "Skew 1: every token picks expert 0, on one GPU of the eight.",
    ),
    drills=(
        Drill(
            id="moe-expert-dp",
            question=(
                "DeepSeek-V3 on 2,048 GPUs with PP4, EP64, no TP and no CP (not the run step "
                "6 shows). Experts regroup each pipeline stage's GPUs as EP x expert-DP. What "
                "is expert-DP?"
            ),
            answer=expert_dp_answer,
            unit="",
            hint="A stage has 2,048 / 4 GPUs; EP takes 64 of them at a time.",
            explanation="{answer}: each stage's 512 GPUs are 64 (EP) x 8 (expert-DP); EP is "
                        "not multiplied on top of DP.",
            mistakes=(
                Mistake("no-pp", lambda: expert_dp_answer() * EXPERT_DP_DRILL["pp"],
                        "that divides all 2,048 GPUs by EP. Experts regroup one pipeline "
                        "stage's GPUs: divide by the 4 stages first."),
                Mistake("stage", lambda: expert_dp_answer() * EXPERT_DP_DRILL["ep"],
                        "that is a stage's GPUs; EP takes 64 of them at a time, and "
                        "expert-DP counts the copies of each EP group."),
            ),
        ),
        Drill(
            id="moe-dispatch-mb",
            question=(
                "DeepSeek-V3 (hidden 7,168, top-8 of 256 experts), EP32, 8,192 tokens per GPU, "
                "bf16, uniform routing. How many MB (10^6 bytes) does each GPU receive from "
                "the other 31 in one dispatch all-to-all?"
            ),
            answer=dispatch_mb_answer,
            unit="MB",
            hint="Each GPU sends 8,192 x 8 token copies of 7,168 x 2 bytes; 31/32 of them "
                 "leave it, and it receives as much as it sends.",
            explanation="{answer} MB: 8,192 x 8 x 7,168 x 2 bytes x 31/32. Without the 31/32 "
                        "(939.5 MB) you counted the copies a GPU keeps for its own experts.",
            rel_tol=0.01,
            mistakes=(
                Mistake("kept-home", lambda: dispatch_mb_answer() * 32 / 31,
                        "that counts the copies a GPU keeps for its own experts: uniform "
                        "routing sends 31/32 of them to the other GPUs."),
                Mistake("top-1", lambda: dispatch_mb_answer() / 8,
                        "each token goes to its top 8 experts: 8 copies, not one."),
                Mistake("fp32", lambda: dispatch_mb_answer() * 2,
                        "bf16 is 2 bytes a value, not 4."),
            ),
        ),
        *LESSON_DRILLS["moe"],  # predict and decide (app/lesson_drills/moe.py)
    ),
)

register(router, VIEW)
