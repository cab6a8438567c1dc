"""EP08 The 3D recipe: audit a plan (TP x PP x DP, CP, EP, ZeRO) on a cluster, time its step,
export it, and re-plan it when the model or the cluster changes."""

from dataclasses import dataclass
from functools import cached_property, lru_cache, partial

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import Field

from app.charts.recipe import (
    SEGMENTS,
    causes_figure,
    layer_figure,
    memory_figure,
    step_figure,
    timeline_figure,
    two_d_figure,
)
from app.cluster_controls import (
    INTER,
    INTRA,
    Attention,
    ContextParallel,
    DpOverlap,
    DpShard,
    Dropout,
    EpDispatch,
    EpOverlap,
    ExpertParallel,
    Fp8Layers,
    FsdpPrefetch,
    GpusPerNode,
    GradAccumFusion,
    InterLink,
    IntraLink,
    Kernels,
    LinkFollowsGpu,
    MicroBatch,
    Microbatches,
    Nodes,
    PipelineStages,
    PrecisionRecipe,
    Recompute,
    ReshardAfterForward,
    Schedule,
    SeqLen,
    SequenceParallel,
    TensorParallel,
    TpOverlap,
    Virtual,
    ZeroStage,
    off_defaults,
)
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, lesson_state, register
from app.labkit.parsing import run_cached, single, validate
from app.labkit.routes import api_error, json_response, query_parameters
from app.lesson_drills import LESSON_DRILLS, MIXTRAL_64
from app.model_controls import (
    GpuChoice,
    ModelChoice,
    ModelGpuControls,
    gpu_field,
    model_choices,
    model_field,
)
from app.options import SEQ_LENGTHS, gpu_options, link_choices, model_options, with_value
from app.recipe_answer import (
    causes_of,
    hfu_of,
    hsdp_api,
    layer_api,
    micro_api,
    plan_api,
    result_api,
    timeline_api,
    two_d_api,
)
from app.routers.pipeline import SCHEDULE_LABELS
from app.schemas import RecipeAnswer
from labs.core.catalogue import RECIPES
from labs.core.errors import LabInputError
from labs.core.limits import (
    DEFAULT_MATMUL_EFFICIENCY,
    EXPORT_FORMATS,
    MAX_FAIL_STEP,
    MAX_JOB_NODES,
    MAX_MATMUL_EFFICIENCY,
    MAX_MODEL_CODE,
    MAX_PLAN_GPUS,
    MAX_STAGE_LAYERS,
    MIN_FAIL_STEP,
    MIN_MATMUL_EFFICIENCY,
)
from labs.hardware.gpus import get_gpu, gpus
from labs.hardware.kernels import SLOWEST_GPU
from labs.hardware.links import get_link, link_name, links, paired_cluster
from labs.model.presets import get_model
from labs.parallel.layout import divisors
from labs.recipe.export import Export, export
from labs.recipe.inputs import FSDP, SOFTWARE, Plan, RecipeResult
from labs.recipe.lab import evaluate
from labs.recipe.replan import Replan, nearest
from labs.recipe.runs import BY_ID, check, checks, summary, utilisation
from labs.recipe.two_d import TwoD, compare_cached, sweep_nodes

router = APIRouter()


class RecipeQuery(ModelGpuControls, LinkFollowsGpu):
    """The controls of the 3D recipe: a model, a cluster and a plan's every decision."""

    model: ModelChoice = model_field("gpt-3-175b")
    gpu: GpuChoice = gpu_field("a100-80gb")
    nodes: Nodes = 8
    gpus_per_node: GpusPerNode = 8
    intra_link: IntraLink = "nvlink-3"
    inter_link: InterLink = "ib-hdr"
    tp: TensorParallel = 8
    pp: PipelineStages = 4
    dp: int = Field(2, ge=1, le=MAX_PLAN_GPUS, description="Data-parallel "
                    "degree; TP x PP x CP x DP must equal the cluster's GPUs.")
    cp: ContextParallel = 1
    ep: ExpertParallel = 1
    zero: ZeroStage = 1
    recompute: Recompute = "selective"
    recipe: PrecisionRecipe = "adam16"
    schedule: Schedule = "1f1b"
    virtual: Virtual = 1
    first_stage_layers: int = Field(
        0, ge=0, le=MAX_STAGE_LAYERS, description="Layers on the first pipeline stage "
        "(Megatron's --decoder-first-pipeline-num-layers; 0: even stages). The middle stages "
        "split the rest evenly; the slowest stage sets the step's pace.")
    last_stage_layers: int = Field(
        0, ge=0, le=MAX_STAGE_LAYERS, description="Layers on the last pipeline stage "
        "(Megatron's --decoder-last-pipeline-num-layers; 0: even stages).")
    micro_batch: MicroBatch = 1
    microbatches: Microbatches = 16
    seq_len: SeqLen = 2048
    matmul_efficiency: float | None = Field(
        DEFAULT_MATMUL_EFFICIENCY, ge=MIN_MATMUL_EFFICIENCY, le=MAX_MATMUL_EFFICIENCY,
        description="An override of the fraction of the GPU's dense BF16 peak a full-wave "
                    "GEMM reaches (empty: the GPU's measured rate, e.g. 258 of 312 TFLOP/s "
                    "on an A100; each kernel is timed op by op at its shape's share of it). "
                    "Efficiency is measured against the kernels' own time; MFU against the "
                    "peak.")
    replan_model: str = Field("", max_length=MAX_MODEL_CODE, description="Re-plan: the model "
                              "the job changes to, a preset id or a model code (empty: "
                              "unchanged).")
    replan_nodes: int = Field(0, ge=0, le=MAX_JOB_NODES, description="Re-plan: the nodes the "
                              "job has now (0: unchanged).")
    # The run's software (labs.recipe.inputs.SOFTWARE), defaults Megatron Core's today: what
    # a published run's configuration sets (tests/labs/test_step_time.py's 2021 runs).
    attention: Attention = "auto"
    dropout: Dropout = False
    fp8: Fp8Layers = False
    sequence_parallel: SequenceParallel = True
    tp_overlap: TpOverlap = "backward"
    ep_overlap: EpOverlap = False
    ep_dispatch: EpDispatch = "alltoall"
    dp_overlap: DpOverlap = True
    grad_accum_fusion: GradAccumFusion = True
    kernels: Kernels = "fused"
    fsdp_prefetch: FsdpPrefetch = True
    reshard_after_forward: ReshardAfterForward = True
    dp_shard: DpShard = 0


@dataclass(frozen=True)
class RecipeState:
    result: RecipeResult
    replan: Replan | None
    exports: dict[str, Export]
    # Step 14's sweep (labs.recipe.two_d.compare_cached's arguments), run only when ``two_d``
    # is read: by the JSON answer and the chart's own route, never by the page or a control's
    # answer (its fourteen planner searches were a third of a class's CPU). None where no
    # sweep is drawn: a plan that cannot run, a mixture-of-experts model, the playground.
    sweep: tuple | None = None

    @cached_property
    def two_d(self) -> TwoD | None:
        """The best 2-D plan against the best 3-D as the cluster grows (step 14)."""
        return None if self.sweep is None else compare_cached(*self.sweep)


def run(query: RecipeQuery, two_d: bool = True) -> RecipeState:
    """The plan audited and timed, its exports, a re-plan if asked, and (``two_d``) what step
    14's comparison of the best 2-D and 3-D plans for its model, cluster and batch needs: two
    planner searches per cluster size, cached, run when it is read (RecipeState.two_d)."""
    gpu = get_gpu(query.gpu)
    cluster = paired_cluster(gpu, query.gpus_per_node, get_link(query.intra_link),
                           get_link(query.inter_link))
    plan = Plan(tp=query.tp, pp=query.pp, dp=query.dp, cp=query.cp, ep=query.ep,
                zero=query.zero, recompute=query.recompute, recipe=query.recipe,
                schedule=query.schedule,
                virtual=query.virtual, micro_batch=query.micro_batch,
                microbatches=query.microbatches, seq_len=query.seq_len,
                first_stage_layers=query.first_stage_layers,
                last_stage_layers=query.last_stage_layers,
                **{name: getattr(query, name) for name in (*SOFTWARE, *FSDP)})
    model = query.model_spec()
    result = evaluate(plan, model, cluster, query.nodes, query.matmul_efficiency)
    replan = None
    if query.replan_model or query.replan_nodes:
        try:
            new_model = get_model(query.replan_model) if query.replan_model else model
        except LabInputError as exc:
            raise LabInputError("replan_model", exc.message) from exc
        replan = nearest(plan, new_model, cluster, query.replan_nodes or query.nodes,
                         query.matmul_efficiency)
    exports = {f: export(plan, model, f) for f in EXPORT_FORMATS} if result.legal else {}
    sweep = (model, cluster, plan.seq_len, plan.global_batch,
             sweep_nodes(query.nodes, query.gpus_per_node), plan.recipe,
             query.matmul_efficiency, plan.software()) \
        if result.legal and two_d and not model.is_moe else None
    return RecipeState(result, replan, exports, sweep)


def to_api(state: RecipeState) -> dict:
    causes = causes_of(state.result)
    answer = result_api(state.result, causes)
    rp = state.replan
    answer["replan"] = None if rp is None else {
        "before": result_api(rp.before),
        "after": result_api(rp.after) if rp.after else None,
        "changed": list(rp.changed),
    }
    answer.update(micro_api(state.result, causes))
    answer["timeline"] = timeline_api(state.result)
    answer["layer"] = layer_api(state.result)
    answer["two_d"] = two_d_api(state.two_d, state.result)
    return answer


def figures(state: RecipeState) -> dict:
    r = state.result
    if not r.legal:
        return {}
    return {"step": step_figure(r, state.replan), "causes": causes_figure(r, micro_api(r)),
            "timeline": timeline_figure(timeline_api(r)), "layer": layer_figure(layer_api(r)),
            "memory": memory_figure(r)}


def lazy_figures(state: RecipeState) -> dict:
    """Step 14's chart, drawn on its own request (GET /episodes/recipe-3d/twod and its embed):
    left out where no sweep runs (a MoE model, a plan that cannot run)."""
    two = state.two_d
    return {} if two is None else {"twod": two_d_figure(two_d_api(two, state.result))}


def api_errors(state: RecipeState) -> dict[str, str]:
    """Every broken rule, by the control it names (several joined): the API's 422."""
    found: dict[str, list[str]] = {}
    for problem in state.result.problems:
        for field in (problem.field, *problem.also):  # both controls of a clash
            found.setdefault(field, []).append(problem.message)
    return {field: "; ".join(msgs) for field, msgs in found.items()}


def plan_query(r: RecipeResult, base: dict) -> dict:
    """The page query of a result's plan (for a re-plan's link)."""
    p = r.plan
    return {**base, "model": r.model.id, "nodes": r.nodes, "tp": p.tp, "pp": p.pp, "dp": p.dp,
            "cp": p.cp, "ep": p.ep, "zero": p.zero, "recompute": p.recompute,
            "schedule": p.schedule, "virtual": p.virtual, "microbatches": p.microbatches,
            "first_stage_layers": p.first_stage_layers, "last_stage_layers": p.last_stage_layers,
            "dp_shard": p.dp_shard}


SEED = {"model": "gpt-3-175b", "gpu": "a100-80gb", "nodes": 8, "gpus_per_node": 8,
        "intra_link": "nvlink-3", "inter_link": "ib-hdr", "seq_len": 2048, "zero": 1,
        "tp": 8, "pp": 4, "dp": 2, "microbatches": 16}
WORKED = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8,
          "intra_link": "nvlink-4", "inter_link": "ib-ndr", "seq_len": 8192, "zero": 1}


# Mixtral 8x7B on 8 H100 nodes, TP2 x EP8 x DP32: every overlap the lab times acts on it (the
# step's drill asks another state: EP across nodes on a slow network, app.lesson_drills.QWEN_EP16).
MIXTRAL = {**MIXTRAL_64, "microbatches": 4}
OVERLAPS = {"ov": {}, "ov_tp_none": {"tp_overlap": "none"}, "ov_tp_all": {"tp_overlap": "all"},
            "ov_dp_off": {"dp_overlap": False}, "ov_zero3": {"zero": 3},
            "ov_ep": {"ep_overlap": True}}


# One layer, op by op (step 13): Llama 3.1 70B on 8 H100 nodes as TP4 x FSDP16 (ZeRO-3 over
# the 16 data-parallel ranks), 128 sequences of 8,192 tokens a step, as torchtitan runs such a
# model; its TP overlap toggled (Mixtral's states of step 12 show the buckets and EP).
LAYER = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "nodes": 8, "gpus_per_node": 8,
         "intra_link": "nvlink-4", "inter_link": "ib-ndr", "seq_len": 8192, "tp": 4, "pp": 1,
         "dp": 16, "zero": 3, "recompute": "flash", "microbatches": 8}
LAYERS = {"lv": {}, "lv_tp_none": {"tp_overlap": "none"}, "lv_tp_all": {"tp_overlap": "all"},
          "lv_nopf": {"fsdp_prefetch": False}, "lv_keep": {"reshard_after_forward": False}}


# HSDP (step 15): Llama 3.1 8B on 8 H100 nodes as TP2 x DP32, 4 DP ranks a node; FSDP over all
# 32, then sharded over a node's 4 with 8 replicas (dp_shard, labs.recipe.dp_time); and step
# 13's 70B layout sharded inside a node, which does not fit.
HSDP = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "nodes": 8, "gpus_per_node": 8,
        "intra_link": "nvlink-4", "inter_link": "ib-ndr", "seq_len": 8192, "tp": 2, "pp": 1,
        "dp": 32, "zero": 3, "recompute": "flash", "microbatches": 4}
HSDPS = {"hs_fsdp": {}, "hs": {"dp_shard": 4}, "hs_off": {"dp_shard": 4, "dp_overlap": False}}


# Two dimensions before three (step 14): Llama 3.1 70B on 8 H100 nodes, 128 sequences of 8,192
# tokens a step; the step links to each family's best plan the lab finds (not typed in here).
TWO_D_JOB = {**WORKED, "nodes": 8}
TWO_D_ANY = {"tp": 8, "pp": 2, "dp": 4, "microbatches": 32}  # any plan of the batch: its two_d
PLAN_FIELDS = ("tp", "pp", "dp", "zero", "recompute", "schedule", "virtual", "micro_batch",
               "microbatches", "first_stage_layers", "last_stage_layers")


def best_params(answer: dict, nodes: int, key: str) -> dict | None:
    """The page's query for family ``key``'s best plan at ``nodes`` in an answer's two_d."""
    point = next(p for p in answer["two_d"]["points"] if p["nodes"] == nodes)
    best = point["best"][key]
    return None if best is None else {"nodes": nodes, **{k: best["plan"][k]
                                                         for k in PLAN_FIELDS}}


def two_d_facts(state) -> dict:
    """Step 13's states: each family's best plan on 8 nodes, the 3-D plan where the batch
    leaves 2-D none (the sweep's largest cluster with no 2-D plan), and 2 nodes' best."""
    any_plan = state(**TWO_D_JOB, **TWO_D_ANY)
    points = any_plan["api"]["two_d"]["points"]
    out = {"td": any_plan,
           **{f"td{k[0]}": state(**{**TWO_D_JOB, **best_params(any_plan["api"], 8, k)})
              for k in ("2d", "3d")}}
    past = [p["nodes"] for p in points if p["best"]["2d"] is None and p["best"]["3d"]
            and p["nodes"] > 8]
    if past:
        out["td_past"] = state(**{**TWO_D_JOB, **best_params(any_plan["api"], past[0], "3d")})
    return out


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson links to, each with the JSON its prose quotes (same query model,
    engine and to_api as GET /api/recipe; tests/app/test_prose.py follows every link)."""
    # The steps' states without the 2-D/3-D sweep (it is step 14's, and costs two planner
    # searches a cluster size on a cold start); step 14's own states run it.
    state = lesson_state(RecipeQuery, partial(run, two_d=False), to_api)

    return {
        "seed": state(**SEED),
        "dp64": state(**{**SEED, "tp": 1, "pp": 1, "dp": 64}),
        "tp16": state(**{**SEED, "tp": 16, "pp": 4, "dp": 1}),
        # The same TP16 with InfiniBand NDR (twice HDR) between the nodes: most of TP16's loss
        # is t's, not the network's (step 2; EP04 step 4).
        "tp16_ndr": state(**{**SEED, "tp": 16, "pp": 4, "dp": 1, "inter_link": "ib-ndr"}),
        "m4": state(**{**SEED, "microbatches": 4}),
        "w0": state(**WORKED, tp=1, pp=1, dp=32, microbatches=1),
        "w1": state(**WORKED, tp=8, pp=1, dp=4, microbatches=1),
        "w2": state(**WORKED, tp=8, pp=2, dp=2, microbatches=2),
        "w3": state(**WORKED, tp=8, pp=2, dp=2, microbatches=16),
        "lost": state(**{**SEED, "replan_nodes": 6}),
        "h100": state(**{**SEED, "gpu": "h100-sxm", "intra_link": "nvlink-4",
                         "inter_link": "ib-ndr"}),
        "e60": state(**{**SEED, "matmul_efficiency": 0.6}),
        "full": state(**{**SEED, "recompute": "full"}),
        # What hides behind what: one plan with TP, EP, DP and ZeRO to overlap.
        **{name: state(**{**MIXTRAL, **change}) for name, change in OVERLAPS.items()},
        # One layer, op by op.
        **{name: state(**{**LAYER, **change}) for name, change in LAYERS.items()},
        "lv_consts": layer_consts(),
        # HSDP (step 15): FSDP over all 32 DP ranks, then sharded inside each node.
        **{name: state(**{**HSDP, **change}) for name, change in HSDPS.items()},
        "hs_consts": hsdp_consts(),
        "hs70": state(**{**LAYER, "dp_shard": LAYER["gpus_per_node"] // LAYER["tp"]}),
        **(td := two_d_facts(lesson_state(RecipeQuery, run, to_api))),
        **two_d_aside(state, td),
    }


def hsdp_consts() -> dict:
    """What step 15's why names: the links' achieved bus bandwidths (NVLink inside a node,
    one NIC between nodes) and the 16 B recipe's bytes a parameter."""
    from labs.hardware.links import get_link

    recipe = RECIPES[RecipeQuery.model_fields["recipe"].default]
    return {"nvlink_busbw": get_link(HSDP["intra_link"]).ring_busbw,
            "nic_busbw": get_link(HSDP["inter_link"]).ring_busbw,
            "per_node": HSDP["gpus_per_node"] // HSDP["tp"],
            "state_bytes": recipe.weight_bytes + recipe.gradients + recipe.master_weights
            + recipe.optimizer_moments, "grad_bytes": recipe.gradients,
            "weight_bytes": recipe.gathered_bytes,
            "params_70b": get_model(LAYER["model"]).params}


def layer_consts() -> dict:
    """What step 13's predict and why name, for LAYER's cluster and recipe: one NIC's
    achieved bus bandwidth, the GPUs of each FSDP group on a node (each with its own NIC),
    the bytes a gathered and a reduce-scattered parameter carries, NCCL's channels and SMs;
    for TP's collectives, the tokens, hidden size and 16-bit activations each moves and
    NVLink's achieved bus bandwidth; for step 12's Mixtral plan, what its all-to-all sends
    (tokens a GPU after TP, experts a token, hidden size)."""
    from labs.core.catalogue import RECIPES
    from labs.hardware.gpus import get_gpu
    from labs.hardware.links import get_link
    from labs.hardware.nccl import RING_CTAS
    from labs.parallel.layer_time import ACT_BYTES
    from labs.recipe.dp_time import megatron_bucket_params

    recipe = RECIPES[RecipeQuery.model_fields["recipe"].default]
    micro = RecipeQuery.model_fields["micro_batch"].default
    moe = get_model(MIXTRAL["model"])
    return {"nic_busbw": get_link(LAYER["inter_link"]).ring_busbw,
            "per_node": LAYER["gpus_per_node"] // LAYER["tp"], "dp": LAYER["dp"],
            "weight_bytes": recipe.gathered_bytes, "grad_bytes": recipe.gradients,
            "channels": RING_CTAS, "sms": get_gpu(LAYER["gpu"]).kernels.sm_count,
            "tp": LAYER["tp"], "tokens": micro * LAYER["seq_len"],
            "hidden": get_model(LAYER["model"]).hidden, "act_bytes": ACT_BYTES,
            "nvlink_busbw": get_link(LAYER["intra_link"]).ring_busbw,
            "moe_tokens": micro * MIXTRAL["seq_len"] // MIXTRAL["tp"],
            "moe_top_k": moe.top_k, "moe_hidden": moe.hidden, "moe_ep": MIXTRAL["ep"],
            "moe_busbw": get_link(MIXTRAL["intra_link"]).ring_busbw,
            "moe_bucket_params": megatron_bucket_params(MIXTRAL["dp"])}


def two_d_aside(state, td: dict) -> dict:
    """What step 14's why derives beside its linked states (round-3 cold reading of EP08):
    both families' plans with fp32 gradients (the 18 B recipe: Megatron's and torchtitan's
    default reduction; the lab's default 16 B recipe is Megatron's --grad-reduce-in-bf16),
    the TP8 FSDP plan on the cluster where no 2-D plan passes, and the constants the why
    names: NCCL's channels over the GPU's SMs, one NIC's achieved bus bandwidth."""
    from labs.hardware.gpus import get_gpu
    from labs.hardware.links import get_link
    from labs.hardware.nccl import RING_CTAS
    from labs.model.presets import get_model
    from labs.recipe.audits import EXPOSED_LIMIT

    out = {f"{k}_fp32": state(**{**td[k]["params"], "recipe": "adam18"}) for k in ("td2", "td3")}
    if "td_past" in td:
        nodes = td["td_past"]["params"]["nodes"]
        tp = gpn = TWO_D_JOB["gpus_per_node"]  # TP across a whole node: one GPU a node left
        dp = nodes * gpn // tp
        out["td_fsdp_past"] = state(**{**td["td2"]["params"], "nodes": nodes, "tp": tp,
                                       "dp": dp, "microbatches": 1})
    params = td["td2"]["params"]
    gpu = get_gpu(params["gpu"])
    out["td_consts"] = {"channels": RING_CTAS, "sms": gpu.kernels.sm_count,
                        "nic_busbw": get_link(params["inter_link"]).ring_busbw,
                        "params": get_model(params["model"]).params,
                        "exposed_limit": EXPOSED_LIMIT}
    return out


# MegaScale (Jiang et al. 2024, arXiv:2402.15627, abstract): "55.2% Model FLOPs Utilization
# (MFU) when training a 175B LLM model on 12,288 GPUs".
MEGASCALE_MFU = 0.552
# Korthikanti et al. 2022 sec 6.3: 530B on 2,240 A100s with full recomputation, MFU.
KORTHIKANTI_FULL_MFU = 0.421


@lru_cache(maxsize=1)
def marks() -> dict:
    """The published runs EP08 quotes, MFU and HFU each from the run's own step
    (labs.recipe.runs.utilisation), beside the lab's for the same run, and which way the
    lab errs on every calibration run (labs.recipe.runs.summary)."""
    one_t, big = BY_ID["narayanan-1008b"], BY_ID["korthikanti-530b-dp8"]
    return {"one_t": one_t, "one_t_published": utilisation(one_t, one_t.published_step),
            "one_t_lab": utilisation(one_t, check(one_t).lab_step_s),
            "big": big, "big_published": utilisation(big, big.published_step),
            "megascale_mfu": MEGASCALE_MFU, "korthikanti_full_mfu": KORTHIKANTI_FULL_MFU,
            "errs": summary(checks())}


def planner_query(q: RecipeQuery) -> dict:
    """The auto-planner's query (app/routers/plan.py) for the page's model, cluster, global
    batch, precision recipe and software: the plans it ranks are timed as this one is."""
    out = {**q.model_controls(), "gpu": q.gpu, "gpus": q.nodes * q.gpus_per_node,
           "gpus_per_node": q.gpus_per_node, "intra_link": q.intra_link,
           "inter_link": q.inter_link, "seq_len": q.seq_len,
           "global_batch": q.micro_batch * q.microbatches * q.dp}
    if q.matmul_efficiency is not None:
        out["matmul_efficiency"] = q.matmul_efficiency
    return {**out, **off_defaults(q, ("recipe", *SOFTWARE))}  # as the page's own URL


def extra_context(state) -> dict:
    q = state.query
    base = {k: v for k, v in state.query.model_dump(exclude={"replan_model", "replan_nodes"})
            .items() if v is not None}
    rp = state.result.replan
    return {
        "facts": facts(),
        "marks": marks(),
        "gpus": gpus(), "links": links(),  # the presets step 10 compares
        "slowest_gpu": SLOWEST_GPU,  # the GEMM rate's slowest-GPU-of-a-node factor (steps 1, 10)
        # The worked plan's model: its vocabulary sizes the logits step 4 quotes.
        "worked_model": get_model(WORKED["model"]),
        "seed_model": get_model(SEED["model"]),  # its parameters, in steps 1 and 2
        "link_name": link_name,  # the traffic table names each part's link
        "model_options": model_choices(model_options(), q.model_value),
        "model_value": q.model_value,
        "model_controls": q.model_controls(),
        "gpu_options": gpu_options(),
        "intra_options": link_choices(INTRA),
        "inter_options": [(k, links()[k].name) for k in INTER],
        "schedules": SCHEDULE_LABELS,
        "recipe_options": [(k, r.label) for k, r in RECIPES.items() if r.mode == "train"],
        "segments": SEGMENTS,
        "micro_api": micro_api,
        "timeline_api": timeline_api,  # the timeline's table, by kind
        "hfu_of": hfu_of,  # the readout's HFU beside MFU (step 10)
        "hsdp_api": hsdp_api,  # HSDP's groups and collectives under the traffic (step 15)
        "seq_options": with_value(SEQ_LENGTHS, q.seq_len),
        "dp_shard_options": [(0, "all of DP (FSDP)")] + [
            (d, f"{d} ({q.dp // d} replicas)") for d in divisors(q.dp) if d < q.dp]
        + ([(q.dp_shard, str(q.dp_shard))] if q.dp_shard and q.dp % q.dp_shard else []),
        "replan_link": plan_query(rp.after, base) if rp and rp.after else None,
        "planner_query": planner_query(q),
        "failures_link": failures_link(q, state.result.result),
    }


def failures_link(q: RecipeQuery, r) -> dict | None:
    """EP11's state for this plan: its model, GPUs and step time, so the student sees how often
    this job stops and what checkpoints cost it (None while the plan cannot run, or its step
    is outside EP11's range)."""
    if not r.legal or not MIN_FAIL_STEP <= r.step_s <= MAX_FAIL_STEP:
        return None
    return {**q.model_controls(), "gpus": r.gpus, "step_s": float(f"{r.step_s:.4g}"),
            "step_gpus": r.gpus}


# The drill's plan: the seed with 32 micro-batches, a state the lesson does not print (its
# efficiency would otherwise be on the page before the drill is answered).
DRILL_PLAN = {**SEED, "microbatches": 32}


def drill_answer() -> float:
    """Efficiency (%) of the drill's plan, read off the lab: the product of its parts."""
    return 100 * run(RecipeQuery(**DRILL_PLAN)).result.efficiency


def _seed_parts() -> dict[str, float]:
    """The drill plan's TP and DP factors, quoted by the drill (from the lab, not typed in)."""
    return run(RecipeQuery(**DRILL_PLAN)).result.parts


SEED_PARTS = _seed_parts()


VIEW = LabView(
    name="recipe",
    episode=BY_SLUG["recipe-3d"],
    query_model=RecipeQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    lazy_figures=lazy_figures,
    diagrams=(
        Diagram("step", "One training step: compute, exposed communication, bubble",
                embed_height=420),
        Diagram("causes", "Why MFU falls short of the GEMM rate: one micro-batch on the "
                "slowest stage, by cause",
                embed_height=520),
        Diagram("timeline", "What hides behind what: one micro-batch's compute and "
                "communication streams", embed_height=420),
        Diagram("layer", "One layer, op by op: its kernels on the compute stream and each "
                "kind's collectives on its own", embed_height=460),
        Diagram("memory", "Memory per GPU on each pipeline stage", embed_height=440),
        # Drawn on its own request, as it comes into view: fourteen planner searches for each
        # model, cluster and global batch, which no other chart of a state needs.
        Diagram("twod", "Two dimensions before three: the best FSDP + TP plan against the "
                "best TP + PP + DP plan as the cluster grows", embed_height=460,
                lazy_template="partials/_recipe_twod.html"),
    ),
    labels={
        "model": "Model", "params": "Custom params", "gpu": "GPU", "nodes": "Nodes",
        "gpus_per_node": "GPUs per node",
        "intra_link": "Link inside a node", "inter_link": "Link between nodes",
        "tp": "TP (tensor)", "pp": "PP (stages)", "dp": "DP (data)", "cp": "CP (context)",
        "ep": "EP (experts)", "zero": "ZeRO stage", "recompute": "Recomputation",
        "recipe": "Precision recipe",
        "schedule": "Schedule", "virtual": "Chunks per rank", "micro_batch": "Micro-batch",
        "first_stage_layers": "First stage layers", "last_stage_layers": "Last stage layers",
        "microbatches": "Micro-batches per step", "seq_len": "Sequence length",
        "matmul_efficiency": "Matmul efficiency", "replan_model": "New model",
        "replan_nodes": "Nodes now", "attention": "Attention kernel",
        "sequence_parallel": "Sequence parallelism", "tp_overlap": "TP overlap",
        "ep_overlap": "EP overlap (DualPipe)", "ep_dispatch": "EP dispatch",
        "dp_overlap": "DP overlap",
        "grad_accum_fusion": "Gradient accumulation fusion", "dropout": "Dropout",
        "fp8": "FP8 linear layers", "kernels": "Kernels",
        "fsdp_prefetch": "FSDP backward prefetch",
        "reshard_after_forward": "Reshard after forward (ZeRO-3)",
        "dp_shard": "HSDP shard degree (ZeRO-3)",
    },
    response_model=RecipeAnswer,
    embed_height=1400,
    extra_context=extra_context,
    api_errors=api_errors,
    summary="Audit a 3D training plan on a cluster: memory, TP placement, bubble, traffic, "
            "step time, efficiency and MFU",
    good=Case("Good case: TP8 × PP4 × DP2 on 64 A100s", SEED,
              "TP inside each NVLink node, 4 stages to fit, DP across nodes: every audit passes."),
    # The setup only. Not step 2's DP64: its bench said which audit fails, step 2's answer,
    # one click before the guess (test_answers_hidden, the step's `reveals`).
    bad=Case("Bad case: TP8 × PP8, 2 micro-batches",
             {**SEED, "tp": 8, "pp": 8, "dp": 1, "microbatches": 2},
             "Eight pipeline stages of GPT-3 175B, one replica, two micro-batches a step."),
    drills=(
        Drill(
            id="recipe-efficiency",
            question=("GPT-3 175B on 64 A100s as TP8 × PP4 × DP2 with 32 micro-batches: the "
                      f"lab gives TP {SEED_PARTS['tp']:.4f}, DP {SEED_PARTS['dp']:.4f}, the uneven "
                      f"stages' extra work {SEED_PARTS['stages']:.4f}, the "
                      f"pipeline sends "
                      f"{SEED_PARTS['sends']:.4f} and the optimizer step "
                      f"{SEED_PARTS['optimizer']:.4f}. With the 1F1B bubble of 4 stages, what "
                      "efficiency (%) is the product of the parts?"),
            answer=drill_answer,
            unit="%",
            hint="The pipeline factor is m / (m + p − 1) = 32/35; multiply all six.",
            # The answer is the lab's efficiency, the product of every unrounded part (the
            # prose's figure); the rounded ones above multiply to the same tenth of a percent
            # (tests/app/test_recipe_routes.py).
            explanation=(f"{{answer}}%: {SEED_PARTS['tp']:.4f} × 32/35 × "
                         f"{SEED_PARTS['dp']:.4f} × {SEED_PARTS['stages']:.4f} × "
                         f"{SEED_PARTS['sends']:.4f} × {SEED_PARTS['optimizer']:.4f}."),
        ),
        *LESSON_DRILLS["recipe"],  # predict and decide (app/lesson_drills/recipe.py)
    ),
)


EXPORT_FORMAT = {
    "name": "format", "in": "query", "required": False,
    "description": "What to write: Megatron-LM's arguments, a DeepSpeed config or a PyTorch "
                   "FSDP2 snippet.",
    "schema": {"type": "string", "enum": list(EXPORT_FORMATS), "default": "megatron"}}


@router.get("/api/export", tags=["EP08"], summary="A plan as Megatron-LM arguments, a "
            "DeepSpeed config or a PyTorch FSDP2 snippet",
            responses={422: {"description": "Bad control, unknown format or broken rule"}},
            openapi_extra={"parameters": [EXPORT_FORMAT, *query_parameters(VIEW)]})
def export_route(request: Request) -> Response:
    """Takes the recipe's controls (see /api/recipe) and ``format``, parsed by the labs' rules
    (an empty value is not given)."""
    items = request.query_params.multi_items()
    query, errors, _ = validate(VIEW, items)
    fmt, refused = single(items, "format", "format")
    fmt = fmt or "megatron"
    if refused is None and fmt not in EXPORT_FORMATS:
        refused = f"format must be one of: {', '.join(EXPORT_FORMATS)}"
    if refused is not None:
        errors = {**errors, "format": refused}
    if errors or query is None:
        return api_error(request, errors)
    state, errors = run_cached(VIEW, query)
    if errors:
        return api_error(request, errors)
    refused = api_errors(state)
    if refused:
        return api_error(request, refused)
    done = state.exports[fmt]
    return json_response(request, {"format": fmt, "text": done.text,
                                   "notes": list(done.notes),
                                   "plan": plan_api(state.result)})


register(router, VIEW)
