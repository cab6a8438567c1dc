"""EP08's "Checked against real runs": every published run the step model is calibrated on
(labs/presets/runs.json through labs.recipe.runs, the data tests/labs/test_step_time.py pins),
its citation, layout, published throughput, the lab's and their ratio, a scatter with ±10% and
±25% bands, and each run's plan opened in EP08. JSON at /api/validation."""

from functools import lru_cache
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.charts.validation import validation_figure
from app.episodes import BY_SLUG
from app.labkit.render import VARY, Chart
from app.labkit.routes import json_response
from app.routers.recipe import RecipeQuery
from app.schemas import ValidationAnswer
from app.templating import templates
from labs.model.code import encode
from labs.recipe.inputs import SOFTWARE
from labs.recipe.runs import (
    GROUPS,
    VALIDATION_GROUPS,
    RunCheck,
    checks,
    group_summaries,
    summary,
    utilisation,
    validation_checks,
)

router = APIRouter()
EPISODE = BY_SLUG["recipe-3d"]
PATH = EPISODE.path + "/validation"
API_PATH = "/api/validation"
PURE_ROUTES = (API_PATH, PATH)  # cached and pooled like a lab's answers (app/main.py)

# What the step model does not count, each a reason a real run is slower than the lab.
LEFT_OUT = (
    "Kernel launch gaps: the CPU's time to launch each of thousands of small kernels a step, "
    "and the idle gaps between them (CUDA graphs remove some).",
    "Allocator fragmentation: PyTorch's caching allocator holding freed blocks it cannot "
    "reuse, and the synchronising frees when memory runs short.",
    "Stragglers: a step waits for the slowest of thousands of GPUs (thermal throttling, a "
    "slow host, a bad link); the model times one GPU of each kind.",
    "Network congestion: collectives of different groups sharing switches and links on the "
    "fat tree; the model prices each at its nccl-tests bus bandwidth alone.",
    "Data loading, checkpointing and logging between steps, and restarts after failures.",
    "Routing imbalance: a MoE layer waits for its busiest expert-parallel rank; the model "
    "routes every token uniformly (node-limited where the model's config limits it).",
)

# Why each group's runs are slower than the lab, where the source or the runs' notes say.
GROUP_WHY = {
    "narayanan-2021-table1": "Megatron-LM on up to 3,072 A100s (2021): the losses listed at "
                             "the end of this page, launch gaps and stragglers above all.",
    "korthikanti-2022-table5": "The same software a year on, with sequence parallelism and "
                               "selective recomputation: the same losses.",
    "korthikanti-2022-dp": "The same software and losses, with data parallelism across nodes.",
    "torchtitan-fsdp2": "FSDP2 and DTensor launch many small kernels and copies per layer, "
                        "which the lab does not charge. The rows furthest off overlap most: "
                        "ring attention at 131K-262K tokens and AsyncTP, where the lab's "
                        "overlap is ideal.",
    "deepseek-v3": "Published as a whole pre-training's average (GPU hours per trillion "
                   "tokens): restarts, evaluation and everything between steps are in it; the "
                   "lab times steps alone.",
    "megatron-moe": "The lab routes every token uniformly, so no expert rank waits for the "
                    "busiest; its overlap of the all-to-all with compute is ideal; and it runs "
                    "a GPU's experts as one grouped GEMM (--moe-grouped-gemm) whose equal "
                    "groups share the waves perfectly, with no cost per expert.",
    "nemo-h100-fp8": "The table publishes layouts, not flags: the lab times NeMo's "
                     "performance defaults, and errs either way.",
}


# Llama 3's effective training time, "above 90%" (arXiv:2407.21783 sec 3.3.4): a bound on
# how much of a whole pre-training's average a step-time model cannot see.
GOODPUT_BOUND = 0.90


def group_split(extra: tuple[RunCheck, ...]) -> dict[str, list[str]]:
    """What a group's one ratio pools, said apart (cold reading, issue 36): torchtitan's runs by
    GPU, since its H100s ran at 500 W with HBM2e where the lab prices a 700 W H100 SXM, and
    DeepSeek-V3's whole-run average against the step time a 90% goodput would leave."""
    out: dict[str, list[str]] = {}
    titan = [c for c in extra if c.run.group == "torchtitan-fsdp2"]
    for gpu in sorted({c.run.cluster.gpu.name for c in titan}):
        ratios = sorted(c.ratio for c in titan if c.run.cluster.gpu.name == gpu)
        out.setdefault("torchtitan-fsdp2", []).append(
            f"On the {gpu} rows: {ratios[0]:.2f} to {ratios[-1]:.2f} ({len(ratios)} runs).")
    if titan:
        out["torchtitan-fsdp2"].append(
            "The A100 rows are the model's error on matched hardware; the H100 rows add the "
            "gap between the lab's 700 W H100 and torchtitan's 500 W HBM2e ones.")
    for c in extra:
        if c.run.group == "deepseek-v3":
            out.setdefault("deepseek-v3", []).append(
                f"At a {GOODPUT_BOUND:.0%} goodput the step-time ratio would be "
                f"{c.ratio:.2f} × {GOODPUT_BOUND:.2f} = {c.ratio * GOODPUT_BOUND:.2f}.")
    return out


def recipe_params(c: RunCheck) -> dict[str, str]:
    """The EP08 query of a run: its model code, cluster, plan and software, non-defaults only."""
    run, plan = c.run, c.result.plan
    cluster = run.cluster
    given = {"model": encode(run.model), "gpu": cluster.gpu.id, "nodes": run.nodes,
             "gpus_per_node": cluster.gpus_per_node, "intra_link": cluster.intra.id,
             "inter_link": cluster.inter.id,
             **{k: getattr(plan, k) for k in ("tp", "pp", "dp", "cp", "ep", "zero",
                                              "recompute", "recipe", "schedule", "virtual",
                                              "micro_batch", "microbatches", "seq_len",
                                              "first_stage_layers", "last_stage_layers")},
             **{k: getattr(plan, k) for k in SOFTWARE}}
    defaults = RecipeQuery().model_dump()
    return {k: ("true" if v else "false") if isinstance(v, bool) else str(v)
            for k, v in given.items() if defaults.get(k) != v}


def recipe_url(c: RunCheck) -> str:
    return EPISODE.url + "?" + urlencode(recipe_params(c))


def run_api(c: RunCheck) -> dict:
    run, plan = c.run, c.result.plan
    return {
        "id": run.id, "name": run.name, "source": run.source, "group": run.group,
        "gpus": run.gpus, "params_b": run.params_b,
        "layout": {"tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep,
                   "zero": plan.zero, "virtual": plan.virtual,
                   "micro_batch": plan.micro_batch, "microbatches": plan.microbatches,
                   "global_batch": run.global_batch, "recompute": plan.recompute,
                   "sequence_parallel": plan.sequence_parallel and plan.tp > 1,
                   "schedule": plan.schedule},
        "published_tflops_per_gpu": run.published_tflops,
        "lab_tflops_per_gpu": None if run.model_id else round(run.tflops(c.lab_step_s), 2),
        "published_step_s": round(run.published_step, 4),
        "lab_step_s": round(c.lab_step_s, 4),
        "published_tokens_per_s_per_gpu": round(c.published_tokens, 2),
        "lab_tokens_per_s_per_gpu": round(c.lab_tokens, 2),
        "ratio": round(c.ratio, 4),
        "recipe_url": recipe_url(c),
        "note": run.note,
    }


@lru_cache(maxsize=1)
def answer() -> dict:
    """The whole answer (the runs are fixed data: one cached answer)."""
    found, extra = checks(), validation_checks()

    def rounded(s: dict) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.items()}

    return {"runs": [run_api(c) for c in found], "summary": rounded(summary(found)),
            "left_out": list(LEFT_OUT),
            "validation_runs": [run_api(c) for c in extra],
            "validation_summary": rounded(summary(extra)),
            "groups": [rounded(g) for g in by_group(found, extra)]}


def by_group(found: tuple[RunCheck, ...], extra: tuple[RunCheck, ...]) -> list[dict]:
    """The calibration groups, then the validation groups, each summarised alone."""
    return group_summaries(found, GROUPS) + group_summaries(extra, VALIDATION_GROUPS)


@router.get(API_PATH, tags=["EP08"], response_model=ValidationAnswer,
            summary="The published runs the step model is checked against: each run's "
                    "layout, published and lab throughput, their ratio, and its EP08 link")
def validation_json(request: Request) -> Response:
    return json_response(request, answer())


@router.get(PATH, response_class=HTMLResponse, include_in_schema=False)
def validation_page(request: Request) -> Response:
    found, extra = checks(), validation_checks()
    urls = [recipe_url(c) for c in found]
    figure = validation_figure(found, GROUPS, urls, extra, VALIDATION_GROUPS,
                               [recipe_url(c) for c in extra])
    ctx = {
        "episode": EPISODE, "rows": list(zip(found, urls, strict=True)), "groups": GROUPS,
        "summary": summary(found), "left_out": LEFT_OUT,
        "validation_rows": [(c, recipe_url(c)) for c in extra],
        "validation_groups": VALIDATION_GROUPS, "validation_summary": summary(extra),
        "by_group": by_group(found, extra), "group_why": GROUP_WHY,
        "group_split": group_split(extra),
        "utilisation": utilisation,  # MFU and HFU of a run's step (Narayanan's rows)
        "charts": {"validation": Chart("validation", "Lab against published throughput",
                                       "validation-chart", figure, "", 520)},
        "state_query": "",
    }
    return templates.TemplateResponse(request, "validation.html", ctx, headers=VARY)
