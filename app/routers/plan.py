"""EP08's auto-planner: every valid plan for a model, a cluster and a sequence length, ranked
by throughput (labs.recipe.planner), as JSON (GET /api/plan) and as the lesson's plan diagram (a
scatter of memory per GPU against throughput and a table; each plan links to the recipe page
with its controls set)."""

from functools import lru_cache
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import Field

from app.charts.plan import plan_figure, plan_label
from app.cluster_controls import (
    GpusPerNode,
    InterLink,
    IntraLink,
    LinkFollowsGpu,
    PrecisionRecipe,
    SeqLen,
    SoftwareControls,
    off_defaults,
)
from app.episodes import BY_SLUG
from app.labkit.parsing import QueryForm, validate
from app.labkit.routes import api_error, json_response, query_parameters
from app.model_controls import GpuChoice, ModelChoice, ModelControls, gpu_field, model_field
from app.routers.recipe import VIEW as RECIPE_VIEW
from app.routers.recipe import planner_query
from app.settings import url
from app.templating import templates
from labs.core.errors import LabInputError
from labs.core.limits import (
    DEFAULT_MATMUL_EFFICIENCY,
    MAX_GLOBAL_BATCH,
    MAX_JOB_NODES,
    MAX_MATMUL_EFFICIENCY,
    MAX_PLAN_GPUS,
    MIN_MATMUL_EFFICIENCY,
)
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link, paired_cluster
from labs.recipe.inputs import SOFTWARE
from labs.recipe.plan_space import MAX_TOP, PlanRequest
from labs.recipe.planner import PlanSearch, search

router = APIRouter()
API_PATH = "/api/plan"
FRAGMENT_PATH = BY_SLUG["recipe-3d"].path + "/plan"
# The lesson's "Search again" button: the recipe form as it is now, sent to the planner.
CONTROLS_PATH = FRAGMENT_PATH + "-controls"
# Answers as pure as a lab's (a function of the request alone): cached and pooled like one.
PURE_ROUTES = (API_PATH, FRAGMENT_PATH)


class PlanSearchControls(ModelControls, LinkFollowsGpu):
    """The planner's controls before the run's software: a model, a cluster, a sequence
    length and a batch, and how many plans to return."""

    model: ModelChoice = model_field("gpt-3-175b")
    gpu: GpuChoice = gpu_field("a100-80gb")
    gpus: int = Field(64, ge=1, le=MAX_PLAN_GPUS, description="GPUs in the job (whole nodes).")
    gpus_per_node: GpusPerNode = 8
    intra_link: IntraLink = "nvlink-3"
    inter_link: InterLink = "ib-hdr"
    seq_len: SeqLen = 2048
    global_batch: int = Field(32, ge=1, le=MAX_GLOBAL_BATCH, description="Sequences per "
                              "step (micro-batch x micro-batches x DP); kept by every plan.")
    recipe: PrecisionRecipe = "adam16"
    top: int = Field(20, ge=1, le=MAX_TOP, description="Plans to return, fastest first.")
    matmul_efficiency: float | None = Field(
        DEFAULT_MATMUL_EFFICIENCY, ge=MIN_MATMUL_EFFICIENCY, le=MAX_MATMUL_EFFICIENCY,
        description="An override of the fraction of the dense BF16 peak a full-wave GEMM "
                    "reaches, as on the recipe page (GET /api/recipe; empty: measured).")


# The run's software is the recipe page's: every candidate is timed with it (a MoE plan whose
# all-to-all hides behind another micro-batch needs ep_overlap, one whose tokens cross the
# network once per node needs ep_dispatch=deepep). Its base first: its fields follow the
# search's and precede ``hsdp`` (SoftwareControls' docstring).
class PlanQuery(SoftwareControls, PlanSearchControls):
    """A model, a cluster and a sequence length: what the planner searches plans for."""

    hsdp: bool = Field(False, description="Also offer HSDP: each ZeRO-3 plan again, sharded "
                       "over the data-parallel ranks of a node (dp_shard = GPUs per node / "
                       "(TP x CP), where that divides DP) and replicated across nodes.")


# Parsed by the labs' own parser (app/labkit/parsing.py): an empty value is not given, numbers
# are plain digits, a message names the control.
FORM = QueryForm(PlanQuery, {
    "model": "Model", "params": "Custom params", "gpu": "GPU", "gpus": "GPUs",
    "gpus_per_node": "GPUs per node", "intra_link": "Link inside a node",
    "inter_link": "Link between nodes", "seq_len": "Sequence length",
    "global_batch": "Global batch", "top": "Plans to return",
    "matmul_efficiency": "Matmul efficiency", "attention": "Attention kernel",
    "dropout": "Dropout", "fp8": "FP8 linear layers",
    "sequence_parallel": "Sequence parallelism", "tp_overlap": "TP overlap",
    "ep_overlap": "EP overlap (DualPipe)", "ep_dispatch": "EP dispatch",
    "dp_overlap": "DP overlap", "grad_accum_fusion": "Gradient accumulation fusion",
    "kernels": "Kernels", "hsdp": "HSDP plans too"})


@lru_cache(maxsize=32)
def _search(query: tuple) -> PlanSearch:
    q = PlanQuery(**dict(query))
    cluster = paired_cluster(get_gpu(q.gpu), q.gpus_per_node, get_link(q.intra_link),
                           get_link(q.inter_link))
    return search(PlanRequest(q.model_spec(), cluster, q.gpus, q.seq_len, q.global_batch,
                              recipe=q.recipe, top=q.top,
                              matmul_efficiency=q.matmul_efficiency, software=q.software(),
                              hsdp=q.hsdp))


def run(q: PlanQuery) -> PlanSearch:
    return _search(tuple(sorted({**q.model_dump(), **q.model_controls()}.items())))


def plan_links(q: PlanQuery, found: PlanSearch) -> list[str | None]:
    """The recipe page with each plan's controls (None when the page cannot take the
    cluster: more than its node bound)."""
    nodes = q.gpus // q.gpus_per_node
    if nodes > MAX_JOB_NODES:
        return [None] * len(found.plans)
    base = {**q.model_controls(), "gpu": q.gpu, "nodes": nodes, "gpus_per_node": q.gpus_per_node,
            "intra_link": q.intra_link, "inter_link": q.inter_link, "seq_len": q.seq_len,
            **off_defaults(q, ("recipe", *SOFTWARE))}  # as the recipe page's own URL
    if q.matmul_efficiency is not None:
        base["matmul_efficiency"] = q.matmul_efficiency
    url = BY_SLUG["recipe-3d"].url
    return [f"{url}?" + urlencode({**base, **{k: getattr(r.plan, k) for k in (
        "tp", "pp", "dp", "cp", "ep", "zero", "recompute", "schedule", "virtual",
        "micro_batch", "microbatches", "first_stage_layers", "last_stage_layers")},
        **({"dp_shard": r.plan.dp_shard} if r.plan.dp_shard else {})})
        for r in found.plans]


def to_api(q: PlanQuery, found: PlanSearch) -> dict:
    links = plan_links(q, found)
    return {
        "gpus": q.gpus,
        "nodes": q.gpus // q.gpus_per_node,
        "candidates": found.candidates,
        "legal": found.legal,
        "hopeful": found.hopeful,
        "evaluated": found.evaluated,
        "complete": found.complete,
        "failed_audits": [{"audit": name, "plans": n} for name, n in found.failed],
        "plans": [{
            "rank": i + 1,
            "label": plan_label(r.plan),
            **{k: getattr(r.plan, k) for k in ("tp", "pp", "dp", "cp", "ep", "zero",
                                                "recompute", "schedule", "virtual",
                                                "micro_batch", "microbatches",
                                                "first_stage_layers", "last_stage_layers",
                                                "dp_shard")},
            "global_batch": r.plan.global_batch,
            "memory_per_gpu_bytes": r.memory_per_gpu_bytes,
            "step_s": r.step_s,
            "tokens_per_s": r.tokens_per_s,
            "mfu": r.mfu,
            "bubble_fraction": r.bubble_fraction,
            "exact": r.exact,
            "passes": r.passes if r.exact else None,
            "pareto": r.pareto,
            "link": links[i],
        } for i, r in enumerate(found.plans)],
    }


def _parse(request: Request) -> tuple[PlanQuery | None, PlanSearch | None, Response | None]:
    q, errors, _ = validate(FORM, request.query_params.multi_items())
    if q is None:
        return None, None, api_error(request, errors)
    try:
        return q, run(q), None
    except LabInputError as exc:  # a clash of two controls (GPU and link) is said by both
        return None, None, api_error(request, dict.fromkeys((exc.field, *exc.also),
                                                            exc.message))


@router.get(API_PATH, tags=["EP08"], summary="Auto-planner: every valid plan for a model "
            "and a cluster, ranked by throughput, with memory per GPU and the Pareto front",
            responses={422: {"description": "Bad control, or a search too big"}},
            openapi_extra={"parameters": query_parameters(FORM)})
def plan_api(request: Request) -> Response:
    q, found, error = _parse(request)
    if error is not None:
        return error
    return json_response(request, to_api(q, found))


@router.get(FRAGMENT_PATH, include_in_schema=False)
def plan_fragment(request: Request) -> Response:
    """The plan diagram (scatter and table) for the lesson page, loaded when it comes into
    view: a search takes a moment, the page does not wait for it. A search the planner
    refuses (too many candidate plans) is said in its place, not failed: htmx swaps in only
    a 2xx answer."""
    q, errors, _ = validate(FORM, request.query_params.multi_items())
    if q is None:
        return api_error(request, errors)
    try:
        found = run(q)
    except LabInputError as exc:
        return templates.TemplateResponse(request, "partials/_plan_refused.html",
                                          {"field": exc.field, "message": exc.message})
    links = plan_links(q, found)
    gpu = get_gpu(q.gpu)
    figure = plan_figure(found.plans, [u or "" for u in links], gpu.memory_bytes)
    return templates.TemplateResponse(request, "partials/_plan.html", {
        "q": q, "found": found, "links": links, "figure": figure,
        # What lab.js marks the chart as drawn with, as for every other figure of the lab.
        "state_query": urlencode(q.model_dump()),
        "gpu_memory_bytes": gpu.memory_bytes, "label": plan_label})


@router.get(CONTROLS_PATH, include_in_schema=False)
def plan_for_controls(request: Request) -> Response:
    """The plan diagram for the recipe page's controls as they are now (the lesson's "Search
    again" button sends the recipe form): a redirect to the fragment for that form's model,
    cluster, global batch, precision and software (``planner_query``), which htmx follows;
    a bad control is said where the diagram would be."""
    q, errors, _ = validate(RECIPE_VIEW, request.query_params.multi_items())
    if q is None:
        field, message = next(iter(errors.items()))
        return templates.TemplateResponse(request, "partials/_plan_refused.html",
                                          {"field": field, "message": message,
                                           "bad_control": True})
    return RedirectResponse(f"{url(FRAGMENT_PATH)}?{urlencode(planner_query(q))}",
                            status_code=303)
