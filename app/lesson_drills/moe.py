"""EP07's predict and decide drills (``LESSON_DRILLS["moe"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.view import Option
from app.lesson_drills.units import ms, pct
from labs.core.errors import LabInputError
from labs.model.presets import get_model

V3 = get_model("deepseek-v3")  # the drill states its shape (config.json) in the question
MIXTRAL = get_model("mixtral-8x7b")
ROUTED = (V3.layers - V3.dense_layers) * V3.experts * 3 * V3.hidden * V3.expert_ffn

# EP07's network drill: DeepSeek-V3's step-6 layout under leaves of 4 nodes and a 4:1 spine.
V3_NET = {"model": "deepseek-v3", "nodes": 256, "pp": 16, "ep": 64, "link": "hgx-h800",
          "leaf_nodes": 4, "oversubscription": 4.0}


# moe-decide-expert-dp (round-17 cold reading of EP07, finding 15: moe-expert-dp was step 6's
# "2,048 ÷ (16 × 64)" again with PP 4). DeepSeek-V3's step-6 plan, PP 16 and EP 64 with no TP,
# on other clusters: each choice keeps DP whole (its GPUs divide by PP), and only one keeps
# expert-DP whole. The engine says which: it runs that plan and refuses the others.
EXPERT_DP_PLAN = {"model": "deepseek-v3", "pp": 16, "ep": 64, "link": "hgx-h800"}
EXPERT_DP_GPUS = {"small": 512, "left": 1536, "half": 2560, "whole": 3072}
_EDP_WHY = {
    "small": "a stage of {stage} GPUs is smaller than one EP group of 64: expert-DP would be "
             "{edp}, half an EP group.",
    "left": "a stage of {stage} GPUs holds one EP group of 64 and 32 GPUs left over: expert-DP "
            "would be {edp}.",
    "half": "a stage of {stage} GPUs is two and a half EP groups of 64: expert-DP would be "
            "{edp}, and the half group would hold only half of each layer's experts.",
    "whole": "a stage of {stage} GPUs is exactly {edp} EP groups of 64: expert-DP would be "
             "{edp}, so each EP group has {edp} copies; the lab runs it, with DP {dp}.",
}


def _expert_dp(key: str) -> tuple[bool, str, str]:
    """(whether the lab runs the plan on this choice's GPUs, the why, its figure): the engine
    builds the layout or refuses it (labs.parallel.layout, 'so expert-DP would not be
    whole'); the figure is expert-DP = GPUs ÷ (PP × EP), whole or not."""
    from app.labkit.drills import lab_value

    gpus = EXPERT_DP_GPUS[key]
    stage = gpus // EXPERT_DP_PLAN["pp"]
    params = {**EXPERT_DP_PLAN, "nodes": gpus // 8}
    try:
        dp, edp = lab_value("moe", params, lambda a: (a["dp"], a["expert_dp"]))
        runs = True
    except LabInputError:
        dp, edp, runs = None, stage / EXPERT_DP_PLAN["ep"], False
    figure = f"expert-DP {edp:g}"
    why = f"{gpus:,} GPUs ÷ PP 16: " + _EDP_WHY[key].format(stage=f"{stage:,}", edp=f"{edp:g}",
                                                           dp=dp)
    return runs, why.replace(f"expert-DP would be {edp:g}", figure), figure


def _expert_dp_judge() -> tuple[Option, ...]:
    return tuple(Option(key, *_expert_dp(key)) for key in EXPERT_DP_GPUS)


def _expert_dp_solution() -> str:
    right = next(o for o in _expert_dp_judge() if o.right)
    figures = "; ".join(f"{EXPERT_DP_GPUS[o.key]:,} GPUs, {o.figure}"
                        for o in _expert_dp_judge())
    return (f"{EXPERT_DP_GPUS[right.key]:,} GPUs. The experts regroup each stage's GPUs as EP "
            f"× expert-DP, so the GPUs must divide by PP × EP = 16 × 64 = 1,024, not only by "
            f"PP: {figures}. The lab refuses the rest: expert-DP would not be whole.")


# moe-decide-skew's states beside its question's (Mixtral, EP 8 in a node, 2 nodes, skew 0.8).
SKEW = {"nodes": 2, "ep": 8, "skew": 0.8}
SKEW_CHOICES = {"ep4": {**SKEW, "ep": 4}, "etp": {**SKEW, "etp": 2}}


def _p0(skew: float) -> float:
    """Expert 0's chance of being picked, step 4's p₀ = k/E + skew · (1 − k/E)."""
    share = MIXTRAL.top_k / MIXTRAL.experts
    return share + skew * (1 - share)


def _skew_ep4_why(a: dict) -> str:
    """EP 4's hot GPU: expert 0 and a cold neighbour, each serving 4 GPUs' tokens."""
    from app.labkit.drills import lab_value

    base = lab_value("moe", SKEW, lambda answer: answer)
    k, e = MIXTRAL.top_k, MIXTRAL.experts
    t = round(sum(a["tokens_per_gpu"]) / (a["ep"] * k))  # each GPU's tokens, k copies each
    p0 = _p0(SKEW["skew"])
    cold = (k - p0) / (e - 1)
    fair = t * k
    return (f"Each group of {a['ep']} GPUs routes its own tokens, so expert 0's copy there "
            f"serves {a['ep']} GPUs, not {base['ep']}. But its GPU holds a second expert: of "
            f"each GPU's {t:,} tokens, expert 0 takes {p0:.2f} and its neighbour "
            f"({k} − {p0:.2f})/{e - 1} = {cold:.3f}, so {a['ep']} × {t:,} × ({p0:.2f} + "
            f"{cold:.3f}) ≈ {a['tokens_per_gpu'][a['slowest_gpu']]:,} copies, against "
            f"{base['ep']} × {t:,} × {p0:.2f} ≈ {base['tokens_per_gpu'][base['slowest_gpu']]:,} "
            f"at EP {base['ep']}: {a['gpu_max_over_mean']:.2f} times a GPU's balanced "
            f"{fair:,}. No token drops: {{value}}.")


def _skew_etp_why(a: dict) -> str:
    """Expert TP 2: the hot expert's GEMMs halve, and the EP group crosses the network."""
    from app.labkit.drills import lab_value

    base = lab_value("moe", SKEW, lambda answer: answer)
    def two(seconds: float) -> str:
        return f"{seconds * 1e3:.2f} ms"

    def three(seconds: float) -> str:  # the sum's parts, as step 5 prints them
        return f"{seconds * 1e3:.3f} ms"

    return (f"Two GPUs share each expert's GEMMs, so the hot expert's compute halves, "
            f"{two(base['compute_s'])} → {two(a['compute_s'])}: "
            f"{a['gpu_max_over_mean']:.2f} ÷ 2 = {a['gpu_max_over_mean'] / 2:.2f} times the "
            f"balanced work of EP 8 in one node. But the 16 GPUs of an EP 8 × expert-TP 2 "
            f"group span both nodes, so the dispatch and the combine cross the network: "
            f"{three(a['dispatch_s'])} each, against {three(base['dispatch_s'])} on NVLink. "
            f"2 × {three(a['dispatch_s'])} + {three(a['compute_s'])} = {{value}}.")


def _etp_why(a: dict) -> str:
    """moe-decide-network's expert TP 2: the GEMMs halve, and the EP group spans twice the
    nodes, so more of its dispatch climbs to the spine (the question's own state beside it,
    not another choice's)."""
    from app.labkit.drills import lab_value

    was = lab_value("moe", V3_NET, lambda answer: answer)
    span = {g["kind"]: g["nodes_spanned"] for g in a["groups"]}["ep"]
    was_span = {g["kind"]: g["nodes_spanned"] for g in was["groups"]}["ep"]
    return (f"Two GPUs share each expert's GEMMs, so the compute halves, "
            f"{ms(was['compute_s'])} → {ms(a['compute_s'])}. But an EP group of 64 now spans "
            f"{span} nodes, not {was_span}, so more of its dispatch climbs to the spine: "
            f"{ms(a['dispatch_s'])} each way instead of {ms(was['dispatch_s'])}. "
            f"2 × {ms(a['dispatch_s'])} + {ms(a['compute_s'])} = {{value}}.")


DRILLS: tuple[Drill | Decide, ...] = (
    Decide(
        id="moe-decide-expert-dp",
        # Round-29 cold reading B, finding 2: "each size divides by 16, so DP stays whole"
        # stated DP = GPUs ÷ 16 beside step 6's predict (DP at 2,048 GPUs); the stem no
        # longer says how DP is counted.
        question="DeepSeek-V3's plan from step 6, PP 16 and EP 64 with no TP, CP or "
                 "expert-TP, moves to another cluster of 8-GPU nodes. On which of these "
                 "cluster sizes can the plan run?",
        choices=tuple((key, f"{gpus:,} GPUs") for key, gpus in EXPERT_DP_GPUS.items()),
        judge=_expert_dp_judge, solution=_expert_dp_solution,
        reveals=("must divide by PP × EP", "exactly 3 EP groups")),
    predict(
        "moe-predict-params-dsv3",
        f"DeepSeek-V3 (671B parameters; hidden size {V3.hidden:,}; 256 routed experts in each "
        f"of its {V3.layers - V3.dense_layers} MoE layers, the first {V3.dense_layers} of its "
        f"{V3.layers} being dense; each routed expert is 3 matrices of {V3.hidden:,} × "
        f"{V3.expert_ffn:,}) on 8 nodes with EP = 64 and no TP or PP: each GPU keeps 4 of "
        "each layer's routed experts. Predict the parameters each GPU holds, in billions.",
        "moe", {"model": "deepseek-v3", "nodes": 8, "ep": 64}, "params_per_gpu",
        unit="B params", scale=1e-9,
        # Every input is stated to three figures: 2% takes the derivation from them (27.3B)
        # and refuses 26 (round-6 cold reading, item 9), where 10% took it.
        rel_tol=0.02,
        hint="Each GPU keeps all the shared weights (attention, embeddings, routers, the "
             "shared expert and the dense layers) and 1/EP of the routed experts.",
        explanation=f"{{answer}} billion. Each routed expert is 3 × {V3.hidden:,} × "
                    f"{V3.expert_ffn:,} = {3 * V3.hidden * V3.expert_ffn / 1e6:.1f}M "
                    f"parameters; {V3.layers - V3.dense_layers} MoE layers × 256 × that = "
                    f"{ROUTED / 1e9:.1f}B are routed experts, so the other "
                    f"{(V3.params - ROUTED) / 1e9:.1f}B (attention, the embeddings and "
                    f"output head, the routers, the {V3.dense_layers} dense layers and the "
                    "shared experts) sit whole on every GPU: "
                    f"{ROUTED / 1e9:.1f} / 64 + {(V3.params - ROUTED) / 1e9:.1f} = {{answer}}.",
        mistakes=(
            Mistake("even-split", lambda: V3.params / 64 / 1e9,
                    "that splits all 671B over the 64 GPUs. Only the routed experts are "
                    "split; the shared weights sit whole on every GPU."),
            Mistake("routed-only", lambda: ROUTED / 64 / 1e9,
                    "that is the GPU's routed experts alone. It also keeps all the shared "
                    "weights: attention, embeddings, routers, the shared expert and the "
                    "dense layers."),
            Mistake("whole", lambda: V3.params / 1e9,
                    "that is the whole model. Each GPU keeps only 4 of each layer's 256 "
                    "routed experts."),
        )),
    decide(
        "moe-decide-skew",
        # Round-10 cold reading of EP07, item 7: "EP8 on 2 nodes" read as one EP group across
        # two nodes; the group sits in one node, the second node holds a copy.
        "Mixtral 8×7B, EP 8 inside one node; the job runs on 2 nodes of 8 GPUs, the second "
        "holding a copy of every expert; routing skew 0.8: one MoE layer takes far longer "
        "than with uniform routing. Which change cuts the layer's time most?",
        "moe", "layer_s",
        # Round-8 cold reading of EP07, item 9: "balance the router perfectly" won by removing
        # the cause the question names. Each option is now a lever a run pulls; the right one
        # needs step 4's rule (the layer follows its busiest GPU) against step 5's cap.
        # Round-17 cold reading of EP07, finding 14: "until the skew falls to 0.2" put the
        # option's outcome in it; it is a lever with its price now. Round-19 cold reading Y,
        # finding 2: with the skew only in the feedback, no page maps a tenfold weight to a
        # skew, so either answer could be reasoned to; the option states the skew it assumes
        # (the lab does not model how far training moves the router), and the student still
        # derives its 1.6x against the cap's 2x.
        (("loss", "Raise the auxiliary balance loss's weight tenfold, which in this run "
                  "brings the skew from 0.8 to 0.2, at a cost in model quality",
          {"nodes": 2, "ep": 8, "skew": 0.2},
          lambda a: "The heavier loss pulls the router's skew down to 0.2. Expert 0's "
                    "chance falls to 0.25 + 0.2 × 0.75 = 0.4, "
                    f"{a['gpu_max_over_mean']:.2f}× its fair share, so the busiest GPU does "
                    "1.6 times the balanced work, and no token drops: {value}, still uneven. "
                    "It comes at a price in model quality: the loss's gradients fight the "
                    "language-modelling loss (step 10)."),
         ("capacity", "Cap each expert at 2 × its fair share of tokens (capacity factor 2)",
          {"nodes": 2, "ep": 8, "skew": 0.8, "capacity_factor": 2.0},
          lambda a: "The cap lets the hot expert keep twice its fair share, so its GPU "
                    "still does about twice the balanced work, and it drops "
                    f"{pct(a['dropped_fraction'])} of the token copies besides: {{value}}, "
                    f"{a['layer_s'] / a['balanced_layer_s']:.2f} times the balanced layer."),
         # Round-24 cold reading B, finding 15: "DeepEP" and "Run on 4 nodes" were no-ops by
         # the question's own "EP 8 inside one node" (16.0 ms, the unchanged layer). Each
         # option now moves the busiest GPU's work, by a mechanism steps 3 to 5 teach.
         ("ep4", "EP 4: two experts a GPU, so each node holds two copies of every expert",
          SKEW_CHOICES["ep4"], _skew_ep4_why),
         ("etp", "Split each expert's matrices over 2 GPUs (expert TP 2), so each EP group of "
                 "8 spans both nodes",
          SKEW_CHOICES["etp"], _skew_etp_why)),
        # Two decimals: EP 4 (9.38 ms) and the cap (9.45 ms) both print 9.4 to one.
        best="min", fmt=lambda seconds: f"{seconds * 1e3:.2f} ms",
        solution="{best}. Layer time: balance loss {loss}, factor 2 {capacity}, EP 4 "
                 "{ep4}, expert TP 2 {etp}. The layer follows its busiest GPU: the loss "
                 "leaves it 1.6 times the balanced work, at a price in model quality (step 10), "
                 "the cap 2 times, and only the cap drops tokens. EP 4 serves the hot expert "
                 "from a copy in each group of 4, but its GPU takes a second expert's tokens "
                 "too; expert TP halves the hot GEMM and sends the dispatch over the network.",
        reveals=("layer follows its busiest GPU",)),
    decide(
        "moe-decide-network",
        # Round-29 cold reading B, finding 9: "its dispatch crosses the spine" and "cuts",
        # in sight before step 7's guess, said the EP dispatch slows (its predict asks what
        # slows); the stem now states the network only and asks for the fastest layer.
        "DeepSeek-V3 on 256 H800 nodes as PP16 × EP64, on a network whose leaf switches "
        "hold 4 nodes each with a 4:1 spine. Which one change gives the fastest MoE layer?",
        "moe", "layer_s",
        tuple((key, label, {**V3_NET, **change}, why) for key, label, change, why in (
            ("ep32", "EP 32: each EP group on 4 nodes, under one leaf",
             {"ep": 32},
             "Nothing of the dispatch climbs to the spine, and fewer of its bytes leave "
             "the node's NVLink: {value}. Each GPU now holds 8 experts a layer, not 4."),
            ("leaf8", "Place the job on leaves of 8 nodes (same 4:1 spine)",
             {"leaf_nodes": 8},
             "Each EP group now sits under one leaf, so the spine carries none of it; "
             "the dispatch still crosses 8 nodes' NICs: {value}."),
            # Round-29 cold reading B, finding 8: "a 2:1 spine" only halved the penalty
            # that leaves of 8 remove, so it could not win. Round-31 reading B, finding 2: its
            # 1:1 replacement tied leaves of 8 exactly, so neither could be the one answer.
            # Expert TP 2 is a lever whose outcome differs: it halves the GEMMs and spreads
            # each EP group over twice the nodes.
            ("etp2", "Split each expert's matrices over 2 GPUs (expert TP 2)", {"etp": 2},
             _etp_why),
            ("deepep", "Dispatch with DeepEP instead of NCCL's all-to-all",
             {"ep_dispatch": "deepep"},
             "One copy per destination node instead of one per expert, but half of "
             "those nodes are still across the spine: {value}."))),
        best="min", fmt=ms,
        solution="{best}. Layer time: EP 32 {ep32}, leaves of 8 {leaf8}, expert TP 2 "
                 "{etp2}, DeepEP {deepep}. A leaf that holds the whole group takes the spine "
                 "out of the dispatch, leaving the NICs the limit; a group of 4 nodes also "
                 "sends fewer of its bytes over them. Expert TP halves the GEMMs but spreads "
                 "each group over twice the nodes, and the dispatch outweighs the GEMMs.",
        reveals=("fewer of its bytes over them",)),
)
