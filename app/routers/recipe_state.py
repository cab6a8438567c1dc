"""EP08's state: the recipe's controls (``RecipeQuery``), the plan they make audited and timed
(``run``: ``labs.recipe.lab.evaluate``, its exports, a re-plan, step 14's sweep when read) and
its answers (``to_api``, the charts, the API's 422s by control). ``app.routers.recipe`` serves
them; ``app.routers.recipe_lesson`` runs the lesson's states through them."""

from dataclasses import dataclass
from functools import cached_property

from pydantic import Field

from app.charts.recipe import causes_figure, memory_figure, step_figure, two_d_figure
from app.charts.recipe_overlap import layer_figure, timeline_figure
from app.cluster_controls import (
    ContextParallel,
    DpShard,
    ExpertParallel,
    FsdpPrefetch,
    GpusPerNode,
    InterLink,
    IntraLink,
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
    SoftwareControls,
    TensorParallel,
    Virtual,
    ZeroStage,
)
from app.model_controls import GpuChoice, ModelChoice, ModelGpuControls, gpu_field, model_field
from app.recipe_answer import layer_api, micro_api, result_api, timeline_api, two_d_api
from labs.core.errors import LabInputError
from labs.core.limits import (
    DEFAULT_MATMUL_EFFICIENCY,
    EXPORT_FORMATS,
    MAX_JOB_NODES,
    MAX_MATMUL_EFFICIENCY,
    MAX_MODEL_CODE,
    MAX_PLAN_GPUS,
    MAX_STAGE_LAYERS,
    MIN_MATMUL_EFFICIENCY,
)
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link, paired_cluster
from labs.model.presets import get_model
from labs.recipe.export import Export, export
from labs.recipe.inputs import FSDP, SOFTWARE, Plan, RecipeResult
from labs.recipe.lab import evaluate
from labs.recipe.replan import Replan, nearest
from labs.recipe.two_d import TwoD, compare_cached, sweep_nodes


class RecipePlanControls(ModelGpuControls, LinkFollowsGpu):
    """The recipe's controls before the run's software: a model, a cluster, a plan's layout
    and batch, and a re-plan."""

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


# The software's base first: its fields follow the plan's and precede ZeRO-3's own
# (SoftwareControls' docstring).
class RecipeQuery(SoftwareControls, RecipePlanControls):
    """The controls of the 3D recipe: a model, a cluster and a plan's every decision."""

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
    answer = result_api(state.result)
    rp = state.replan
    answer["replan"] = None if rp is None else {
        "before": result_api(rp.before),
        "after": result_api(rp.after) if rp.after else None,
        "changed": list(rp.changed),
    }
    answer.update(micro_api(state.result))
    answer["timeline"] = timeline_api(state.result)
    answer["layer"] = layer_api(state.result)
    answer["two_d"] = two_d_api(state.two_d, state.result)
    return answer


def drawn_figures(state: RecipeState) -> dict:
    """The bench's charts drawn whole; app.routers.recipe.figures owns their answering parts
    to the lesson's steps (recipe_keys, which reads the lesson's states, built on this module)."""
    r = state.result
    if not r.legal:
        return {}
    return {
        "step": step_figure(r, state.replan), "causes": causes_figure(r, micro_api(r)),
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

