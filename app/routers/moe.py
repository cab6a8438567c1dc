"""EP07 Experts: a MoE layer under expert parallelism (routing, all-to-all, slowest GPU),
parameters total vs active, and the rank map of the whole job. Its controls, ``run`` and
answers are ``app.routers.moe_state``'s; here are the lesson's states, the page context, the
cases, the drills and the view."""

import math
from fractions import Fraction
from functools import lru_cache

from fastapi import APIRouter

from app.charts.moe import PHASES
from app.charts.units import fmt_ms, worked_digits
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, lesson_state, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import model_options, with_value
from app.routers.moe_state import MoEQuery, answer_keys, figures, lazy_figures, run, to_api
from app.schemas import MoEAnswer
from labs.core.limits import MOE_GROUP_KINDS
from labs.experts.crossover import ep_crossover
from labs.experts.layer import ACTIVATION_BYTES
from labs.experts.routing import block_hit
from labs.hardware.gpus import get_gpu
from labs.hardware.kernels import SLOWEST_GPU, TILES, matmul_rate, wave
from labs.hardware.links import clusters, get_cluster, get_link
from labs.hardware.nccl import current_nccl, current_ring_latency, simple_ring_latency
from labs.model.presets import models
from labs.parallel.layout import divisors
from labs.parallel.rank_map import GROUP_SHORT, GROUP_TITLES

router = APIRouter()

# BabelStream 5.0's copy on an H100 NVL against its datasheet (labs/presets/gpus.json's
# hbm_efficiency source), whose quotient the lab rounds to 0.78: step 8 prints both, so
# 0.78 × 3.35 TB/s = 2.61 TB/s redoes the page's rate (round-29 cold reading B, finding 13:
# 3,056 ÷ 3,900 × 3.35 gave 2.63).
BABELSTREAM_NVL = {"copy": 3055.6e9, "datasheet": 3.9e12}


# The leaf and spine choices the page offers (any value in range is taken from a URL).
LEAF_NAMES = {2: "2 (one rack's top-of-rack switch)", 4: "4", 8: "8", 16: "16",
              32: "32 (a DGX SuperPOD unit, a leaf per rail)", 64: "64",
              384: "384 (a Llama 3 pod of 3,072 GPUs)"}
SPINE_NAMES = {1.0: "1:1 (full fat tree)", 2.0: "2:1", 4.0: "4:1",
               7.0: "7:1 (Llama 3 between pods)", 8.0: "8:1"}


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
        # Step 9's own state (no other step or case sets it): 64 tokens a routed expert.
        "v3_few_ep2": state(**v3, ep=2, tokens=1024),
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
    the engine's own counts (labs.experts.routing.block_hit): the chance a token reaches another
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


@lru_cache(maxsize=4)
def gemm_rate(key: str = "mixtral") -> dict:
    """The expert GEMMs of two states (Mixtral, EP 8: one expert a GPU, step 4's note;
    DeepSeek-V3, EP 64: four, one grouped GEMM, step 8's), their rate from its source: the
    GPU preset's dense peak times each factor the engine applies
    (labs.hardware.kernels.matmul_rate: the measured full-wave share, what a power-limited GPU
    keeps of it, a node's slowest GPU;
    then each GEMM's wave fill, the share of SM slots its tiles, the GPU's experts' together,
    fill over its waves), so the time follows from the rate."""
    result = facts()[key]["result"]
    inp, gpu = result.input, result.input.cluster.gpu
    k, m = gpu.kernels, inp.model
    local = m.experts // inp.ep  # the GPU's experts, one grouped GEMM
    rows = inp.tokens * m.top_k * inp.ep // m.experts  # the copies each expert gets
    up = (2 if m.gated_mlp else 1) * m.expert_ffn
    gemms = []
    for n, depth in ((up, m.hidden), (m.hidden, m.expert_ffn)):
        fill = wave(k.sm_count, rows, n, local)  # the better of cuBLAS's two tiles, as timed
        # The tile that fill came from, named where step 4 first counts tiles (round-19
        # cold reading Y, finding 9).
        tiles, tile = next((t, (tm, tn)) for tm, tn in TILES
                           for t in [local * math.ceil(rows / tm) * math.ceil(n / tn)]
                           if t / (math.ceil(t / k.sm_count) * k.sm_count) == fill)
        gemms.append({"flops": 2.0 * local * rows * n * depth, "tiles": tiles, "tile": tile,
                      "cols": n, "waves": math.ceil(tiles / k.sm_count), "fill": fill})
    flops = sum(g["flops"] for g in gemms)
    for g in gemms:  # its share of the FLOPs, as the page writes it ("2/3": gate and up)
        g["share"] = str(Fraction(g["flops"] / flops).limit_denominator(12))
    full = matmul_rate(gpu)
    # The fill over both, each GEMM's weighted by its FLOPs (the time at the full rate).
    fill = flops / sum(g["flops"] / g["fill"] for g in gemms)
    out = {"peak": gpu.bf16_flops, "mamf": k.matmul_efficiency, "sustain": k.matmul_sustain,
           "slowest": SLOWEST_GPU, "full": full, "sms": k.sm_count, "rows": rows,
           "local": local, "expert_params": 3 * m.hidden * m.expert_ffn,
           "gemms": gemms, "fill": fill, "rate": full * fill, "flops": flops,
           "seconds": flops / (full * fill), "tokens": inp.tokens, "copies": m.top_k}
    out["printed"] = rate_digits(out)
    return out


def rate_digits(r: dict) -> dict[str, str]:
    """The figures of a note's "1/(2/3 ÷ f1 + 1/3 ÷ f2) = fill: full × fill = rate TFLOP/s,
    and FLOP ÷ rate = time", printed to the fewest places at which each sum, redone from
    what it prints, gives the printed result (round-25 reading F, finding 3: step 8's
    "666 × 0.976 = 649 TFLOP/s" where 666 × 0.976 = 650.0; the engine's 665.5 × 0.9755 =
    649.2; step 4's "2.89 TFLOP ÷ 653 TFLOP/s = 4.42 ms", 4.43). The rate and the full rate
    print to the same places, the fills to three more; the time is the page's own ``fmt_ms``
    of the engine's seconds, the FLOPs to the places that give it, and an expert's
    parameters to the places that give the FLOPs (tokens × copies × 2 × parameters)."""
    shares = [float(Fraction(g["share"])) for g in r["gemms"]]
    for extra in range(4):
        full = round(r["full"] / 1e12, extra)
        rate = f"{r['rate'] / 1e12:,.{extra}f}"
        fills = [round(g["fill"], 3 + extra) for g in r["gemms"]]
        fill = round(r["fill"], 3 + extra)
        weighted = 1 / sum(s / f for s, f in zip(shares, fills, strict=True))
        if (f"{weighted:.{3 + extra}f}" == f"{fill:.{3 + extra}f}"
                and f"{full * fill:,.{extra}f}" == rate):
            break
    else:
        raise ValueError(f"no printing of {r['full']} × {r['fill']} gives {r['rate']}")
    time = fmt_ms(r["seconds"])
    flops = next(f"{r['flops'] / 1e12:.{p}f}" for p in range(2, 7)
                 if fmt_ms(float(f"{r['flops'] / 1e12:.{p}f}") / float(rate.replace(",", ""))
                           ) == time)
    places = len(flops.split(".")[1])
    per_token = 2 * r["tokens"] * r["copies"] / 1e6  # TFLOP a million parameters
    params = next(text for p in range(4) for text in [f"{r['expert_params'] / 1e6:.{p}f}"]
                  if f"{per_token * float(text):.{places}f}" == flops)
    return {"full": f"{full:,.{extra}f}", "fill": f"{fill:.{3 + extra}f}", "rate": rate,
            "fills": [f"{f:.{3 + extra}f}" for f in fills], "flops": flops, "time": time,
            "params": params}


def mixtral_gemm_rate() -> dict:
    """Step 4's Mixtral GEMMs (gemm_rate's first state)."""
    return gemm_rate("mixtral")


@lru_cache(maxsize=1)
def f_star_inputs() -> dict[str, tuple[str, str]]:
    """Step 11's figures for each f* it works, printed to the places its sums need, so that
    each, redone from what is printed, gives the page's f* and ratio (round-22 cold reading
    Q, finding 12: ⅔ × 7/8 × 649 TFLOP/s ÷ 159.3 GB/s = 2,377 against the page's 2,378).
    All-to-all states: the experts' rate (TFLOP/s) and the effective rate B (GB/s), f* =
    ⅔ × (EP − 1)/EP × rate ÷ B; DeepEP's: the all-to-alls' and the GEMMs' ms, f* = f ×
    all-to-alls ÷ GEMMs, in µs. The ratio is f ÷ f* (compute ÷ communication)."""
    whole, three = "{:,.0f}".format, "{:.3g}".format
    out = {}
    for name in ("v3_ep8", "v3", "mixtral", "v3_deepep"):
        api = facts()[name]["api"]
        x, ep = api["crossover"], api["ep"]
        if name == "v3_deepep":
            values, places = (x["comm_s"] * 1e6, x["compute_s"] * 1e6), (0, 0)

            def f_star(a, b, x=x):
                return x["width"] * a / b
        else:
            values, places = (x["rate"] / 1e12, x["busbw"] / 1e9), (0, 1)
            share = (2 / 3 if x["matrices"] == 3 else 1.0) * (ep - 1) / ep

            def f_star(r, b, share=share):
                return share * r * 1e12 / (b * 1e9)
        out[name] = worked_digits(values, places, (
            (f_star, x["crossover"], whole),
            (lambda a, b, f=f_star, w=x["width"]: w / f(a, b), x["ratio"], three)))
    return out


def extra_context(state) -> dict:
    query = state.query
    spec = state.result.input.model
    from app.routers.validation import GOODPUT_BOUND
    from app.routers.validation import answer as validation  # its runs load EP08's lab

    return {
        "facts": facts(),
        "h800": get_link("nvlink-4-h800"),  # step 3 states its cut NVLink and NCCL's rate
        "nvlink4": get_cluster("dgx-h100").intra,  # Mixtral's node (step 11 times its sends)
        "ndr": get_cluster("dgx-h100").inter,  # and its NICs (step 3 and the note state both)
        # An all-to-all's latency, one Simple send (labs.hardware.nccl.pairwise): NCCL's
        # start-up and one hop, on NVLink or across nodes; steps 3 and 11 add it to the bytes.
        "a2a": simple_ring_latency(),
        # Step 7: current NCCL's ring latency (all three of its changes), by which the lab errs
        "nccl_now": current_nccl(), "nccl_now_ring": current_ring_latency,
        "deepep": deepep_legs(),  # step 3 derives DeepEP's 3.90 ms from these
        "mixtral_rate": mixtral_gemm_rate(),  # step 4 times Mixtral's experts from its rate
        "v3_rate": gemm_rate("v3"),  # step 8 DeepSeek-V3's at EP 64 (the flat end)
        # Step 8 states the H800's achieved rates, and where they come from, before its guess
        # (round-17 cold reading, finding 9).
        "h800_gpu": get_gpu("h800"), "slowest_gpu": SLOWEST_GPU,
        "babelstream": BABELSTREAM_NVL,  # and the measurement its HBM share rounds
        "crossover": ep_crossover(state.result),
        "f_star": f_star_inputs(),  # step 11's rates and times, to the places its f* needs
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
        # What each of the bench's figures waits for (the steps and drills it answers here).
        "answer_keys": answer_keys,
    }


# The dispatch drill's state: none a step links to (the steps' DeepSeek-V3 at PP16 x EP64 with
# 4,096 tokens draws 462 MB received, which the drill once asked: cold reading).
DISPATCH_DRILL = {"model": "deepseek-v3", "nodes": 256, "pp": 16, "ep": 32, "tokens": 8192}


def dispatch_mb_answer() -> float:
    """MB each GPU receives in one dispatch: DeepSeek-V3, 8,192 tokens, EP32, uniform."""
    return max(run(MoEQuery(**DISPATCH_DRILL)).routing.received_bytes) / 1e6


_HOT = {"model": "mixtral-8x7b", "nodes": 2, "ep": 8, "skew": 1}  # the bad case's state

def _waits(query: dict) -> dict:
    """What a case's headline (its layer time, ``answer_keys``' layer at its state) waits for
    on the lesson page (round 17, as EP11's cases)."""
    return {"waiting": "Its layer time shows",
            "waits_for": answer_keys(run(MoEQuery(**query)).input)["layer"]}


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
        **_waits({"model": "mixtral-8x7b", "nodes": 2, "ep": 8, "skew": 0}),
    ),
    bad=Case(
        "Bad case: one hot expert", _HOT,
        "Skew 1: every token picks expert 0, on one GPU of the eight.",
        **_waits(_HOT),
    ),
    drills=(
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
