"""EP08 The 3D recipe: audit a plan (TP x PP x DP, CP, EP, ZeRO) on a cluster, time its step,
export it, and re-plan it when the model or the cluster changes."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.charts.recipe import SEGMENTS
from app.cluster_controls import INTER, INTRA, off_defaults
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, register
from app.labkit.parsing import run_cached, single, validate
from app.labkit.routes import api_error, json_response, query_parameters
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import SEQ_LENGTHS, gpu_options, link_choices, model_options, with_value
from app.recipe_answer import hfu_of, hsdp_api, micro_api, plan_api, timeline_api
from app.routers.pipeline import SCHEDULE_LABELS
from app.routers.recipe_keys import bench_keys, part_keys, veiled_figures, waits_for
from app.routers.recipe_lesson import (  # noqa: F401  (the lesson's states, imported from here)
    HSDP,
    LAYER,
    MIXTRAL,
    SEED,
    TWO_D_ANY,
    TWO_D_JOB,
    WORKED,
    facts,
    hsdp_consts,
    layer_consts,
    marks,
    twod_verdict,
)
from app.routers.recipe_state import (  # noqa: F401  (the state, imported from here)
    RecipeQuery,
    RecipeState,
    api_errors,
    compare_cached,
    drawn_figures,
    lazy_figures,
    plan_query,
    run,
    to_api,
)
from app.schemas import RecipeAnswer
from labs.core.catalogue import RECIPES
from labs.core.limits import EXPORT_FORMATS, MAX_FAIL_STEP, MIN_FAIL_STEP
from labs.hardware.gpus import gpus
from labs.hardware.kernels import SLOWEST_GPU
from labs.hardware.links import link_name, links
from labs.model.presets import get_model
from labs.parallel.layout import divisors
from labs.recipe.inputs import SOFTWARE

router = APIRouter()


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


def compute_end(timeline: dict) -> float:
    """Where a drawn micro-batch's compute stream ends (its last kernel or wait), as
    /api/recipe's timeline gives it (its caption says the same): step 12 compares it with
    DP overlap on and off (round-21 cold reading Q, finding 6: it quoted the timeline's
    whole length, which with overlap on ends at the comm lane's DP bar, 443 ms, against a
    compute stream ending at 435 ms)."""
    return timeline["compute_end_s"]  # labs.recipe.overlap.Timeline.compute_end


def extra_context(state) -> dict:
    q = state.query
    base = {k: v for k, v in state.query.model_dump(exclude={"replan_model", "replan_nodes"})
            .items() if v is not None}
    rp = state.result.replan
    return {
        "facts": facts(),
        "marks": marks(),
        "twod_verdict": twod_verdict(),  # step 14: a winner only outside the lab's error
        "compute_end": compute_end,  # step 12: the compute stream's end, overlap on and off
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
        # Step 2 says what the default recipe assumes against Megatron's and NeMo's default
        # (fp32 gradient reduction: the adam18 recipe).
        "grads": (RECIPES[RecipeQuery.model_fields["recipe"].default], RECIPES["adam18"]),
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
        # What each figure waits for (its steps' and drills' answers: recipe_keys).
        "bench_keys": bench_keys, "part_keys": part_keys, "waits_for": waits_for,
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


def figures(state: RecipeState) -> dict:
    """The bench's charts, each answering part owned by the step or drill it answers."""
    return veiled_figures(state, drawn_figures(state))


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
                      "stages' wait (the last stage also runs the output layer and the "
                      f"loss, and the others wait for it) {SEED_PARTS['stages']:.4f}, the "
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
            # Within 0.3 points (round-5b cold reading of EP08, item 10): at 2% it took 81.1,
            # the product without the uneven stages' factor, and 81.0, without the sends and
            # the optimizer; the six factors as printed multiply to within 0.01 points.
            rel_tol=0.003,
            explanation=(f"{{answer}}%: {SEED_PARTS['tp']:.4f} × 32/35 × "
                         f"{SEED_PARTS['dp']:.4f} × {SEED_PARTS['stages']:.4f} × "
                         f"{SEED_PARTS['sends']:.4f} × {SEED_PARTS['optimizer']:.4f}."),
            mistakes=(
                Mistake("papers-bubble", lambda: drill_answer() * (1 - 3 / 32) / (32 / 35),
                        "that takes the bubble as 1 − (p − 1)/m, the papers' idle over busy "
                        "time. The step's busy share is m / (m + p − 1)."),
                Mistake("no-bubble", lambda: drill_answer() / (32 / 35),
                        "the pipeline's bubble is a factor too: of m + p − 1 stage-steps, "
                        "only m are busy."),
            ),
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
