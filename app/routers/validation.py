"""EP08's "Checked against real runs": every published run the step model is checked against
(labs/presets/runs.json through labs.recipe.runs, the data tests/labs/test_step_time.py pins),
its citation, layout, published throughput, the lab's and their ratio, a scatter with ±10% and
±25% bands, and each run's plan opened in EP08. JSON at /api/validation."""

from functools import lru_cache
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.charts.validation import ratio_figure, validation_figure
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
    RUNS_USE,
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
    "narayanan-2021-table1": "Megatron-LM on up to 3,072 A100s (2021). Not measured; likely "
                             "the losses listed at the end of this page, launch gaps and "
                             "stragglers above all.",
    "korthikanti-2022-table5": "The same software a year on, each model run twice: full "
                               "recomputation without sequence parallelism, and selective "
                               "recomputation with it. Not measured; likely the same losses.",
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
    "nemo-h100-fp8": "The table publishes layouts, not flags: every row is timed with "
                     "NeMo 24.07's performance defaults (FP8 with Transformer Engine's "
                     "delayed scaling), and the lab errs either way.",
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
            "The A100 rows are the model's error on matched hardware. torchtitan's H100s ran "
            "at 500 W with HBM2e (2.4 TB/s), which has no datasheet peak (performance.md "
            "footnote 2): the lab times them as its 700 W H100 SXM (HBM3, 3.35 TB/s), so on "
            "the H100 rows it is also fast by clocks and bandwidth.")
    for c in extra:
        if c.run.group == "deepseek-v3":
            out.setdefault("deepseek-v3", []).append(
                f"At a {GOODPUT_BOUND:.0%} goodput the step-time ratio would be "
                f"{c.ratio:.2f} × {GOODPUT_BOUND:.2f} = {c.ratio * GOODPUT_BOUND:.2f}.")
    return out


def _x(a: float, b: float) -> str:
    return f"{a / b:.2f}×"


def _sends_why(c: RunCheck, _: dict[str, RunCheck]) -> str:
    """A NeMo row where the lab is slow: the pipeline sends it leaves exposed, which NeMo
    overlaps (overlap_p2p_comm, NVIDIA/NeMo docs/source/features/optimizations/
    communication_overlap.rst: with virtual pipelining, the 1F1B steady state's sends overlap
    compute). The lab has no P2P-overlap mode."""
    sends, lab = c.result.segments["sends"], c.lab_step_s
    if c.ratio >= 1 or sends <= 0:
        return ""
    return (f"The lab is slow here ({c.ratio:.3f}): {sends:.2f} s of its {lab:.2f} s step "
            f"are exposed pipeline sends (VP {c.result.plan.virtual}: a send at each chunk's "
            "edge). NeMo overlaps these sends with compute in the 1F1B "
            "steady state when virtual pipelining is on (overlap_p2p_comm); the lab has no "
            f"such mode. Without them the lab's step would be {lab - sends:.2f} s "
            f"({c.run.published_step / (lab - sends):.3f}). Likely the cause; not measured.")


def _cp_why(c: RunCheck, rows: dict[str, RunCheck]) -> str:
    """A context-parallel row far further off than the group's closest CP row: how much faster
    the published throughput falls from that row's sequence than the lab's."""
    cp = [o for o in rows.values() if o.run.group == c.run.group and o.result.plan.cp > 1]
    half = min(cp, key=lambda o: o.ratio, default=None)
    if c.result.plan.cp == 1 or half is None or half.ratio * 1.2 > c.ratio:
        return ""
    return (f"The lab is further off here ({c.ratio:.2f}, against {half.ratio:.2f} at "
            f"{half.run.seq_len:,} tokens): from {half.run.seq_len:,} to {c.run.seq_len:,} "
            f"tokens the published throughput falls "
            f"{_x(half.published_tokens, c.published_tokens)}, the lab's "
            f"{_x(half.lab_tokens, c.lab_tokens)}. Nothing the lab times accounts for the "
            "difference; allocator fragmentation and launch gaps (left out, below) are likely. "
            "Not measured.")


def _blocking_tp_why(c: RunCheck, rows: dict[str, RunCheck]) -> str:
    """torchtitan's 70B with blocking TP, beside the same run with AsyncTP and the group's
    other H100 rows."""
    async_tp = rows[c.run.id + "-asynctp"]
    others = sorted(o.ratio for o in rows.values() if o.run.group == c.run.group
                    and o is not c and "H100" in o.run.cluster.gpu.name
                    and o.result.plan.cp == 1)
    tp, lab = c.result.segments["tp"], c.lab_step_s
    return (f"Only {c.ratio:.2f} fast, where the group's other H100 rows without context "
            f"parallelism are {others[0]:.2f} "
            f"to {others[-1]:.2f}: on matched hardware the lab would likely be slow here. It "
            f"charges DTensor's blocking TP collectives {tp:.2f} s of its {lab:.2f} s step. "
            "AsyncTP, which hides them, gains "
            f"{_x(c.run.published_step, async_tp.run.published_step)} in the published runs "
            f"and {_x(lab, async_tp.lab_step_s)} in the lab. Not measured; likely the lab prices "
            "the blocking collectives too high, or AsyncTP hides less than the lab's ideal "
            "overlap.")


def _expert_tp_why(c: RunCheck, rows: dict[str, RunCheck]) -> str:
    """Megatron's Qwen3 at TP 4 EP 8, beside the same model at EP 32 with DeepEP."""
    ep32 = rows["mcore-qwen3-235b-ep32-deepep"]
    experts = c.run.model.experts // c.result.plan.ep
    return (f"The lab is far fast here ({c.ratio:.2f}). The run takes "
            f"{c.run.published_step:.1f} s a step against {ep32.run.published_step:.1f} s at "
            f"EP 32 ({_x(c.run.published_step, ep32.run.published_step)}); the lab "
            f"{c.lab_step_s:.1f} s against {ep32.lab_step_s:.1f} s "
            f"({_x(c.lab_step_s, ep32.lab_step_s)}). The lab counts the weight-gradient GEMMs "
            f"of each GPU's {experts} experts, which run memory-bound; what else slows the run "
            "is not known.")


# A row's own why, computed from the checks (never typed): by group or by run id.
ROW_WHY = {"nemo-h100-fp8": _sends_why, "torchtitan-fsdp2": _cp_why,
           "torchtitan-llama31-70b-h100x256": _blocking_tp_why,
           "mcore-qwen3-235b-tp4-ep8": _expert_tp_why}


def row_whys(extra: tuple[RunCheck, ...]) -> dict[str, str]:
    """Each validation row's own why (empty where none is known)."""
    rows = {c.run.id: c for c in extra}
    out = {}
    for c in extra:
        why = ROW_WHY.get(c.run.id) or ROW_WHY.get(c.run.group)
        out[c.run.id] = why(c, rows) if why else ""
    return out


def row_notes(extra: tuple[RunCheck, ...]) -> dict[str, str]:
    """Each validation row's note: what the lab timed instead (runs.json), then its why."""
    whys = row_whys(extra)
    return {c.run.id: " ".join(t for t in (c.run.note, whys[c.run.id]) if t) for c in extra}


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


def run_api(c: RunCheck, note: str = "") -> dict:
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
        "note": note,
    }


@lru_cache(maxsize=1)
def answer() -> dict:
    """The whole answer (the runs are fixed data: one cached answer)."""
    found, extra = checks(), validation_checks()
    notes = row_notes(extra)

    def rounded(s: dict) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.items()}

    return {"runs": [run_api(c) for c in found], "summary": rounded(summary(found)),
            "left_out": list(LEFT_OUT),
            "validation_runs": [run_api(c, notes[c.run.id]) for c in extra],
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
        "group_split": group_split(extra), "notes": row_notes(extra), "whys": row_whys(extra),
        "utilisation": utilisation,  # MFU and HFU of a run's step (Narayanan's rows)
        "charts": {"validation": Chart("validation", "Lab against published throughput",
                                       "validation-chart", figure, "", 520),
                   "ratio": Chart("ratio", "Which way the lab errs, run by run", "ratio-chart",
                                  ratio_figure((*found, *extra), {**GROUPS,
                                                                  **VALIDATION_GROUPS},
                                               urls + [recipe_url(c) for c in extra]),
                                  "", 360)},
        "state_query": "", "runs_use": RUNS_USE,
    }
    return templates.TemplateResponse(request, "validation.html", ctx, headers=VARY)
