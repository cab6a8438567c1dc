"""EP09's state: the placement lab's controls (``RLQuery``: a recipe preset and overrides),
the state they describe run through labs.rl (``rl_input``, ``run``), and its answers
(``to_api``, the figures). ``app.routers.rl`` serves them, with the page context, cases,
drills and the recipe presets' list; the lesson's states are ``app.routers.rl_lesson``'s."""

from typing import Literal

from pydantic import Field

from app.charts.rl import cluster_figure, memory_figure, timeline_figure
from app.model_controls import ModelChoice
from app.options import LabQuery
from labs.core.limits import (
    KV_DTYPES,
    MAX_DEGREE,
    MAX_ENGINES,
    MAX_PROMPT_LEN,
    MAX_PROMPTS,
    MAX_RESPONSE_LEN,
    MAX_RESPONSES,
    MAX_TRAIN_GPUS,
    PLACEMENTS,
    RECOMPUTE,
)
from labs.hardware.gpus import get_gpu
from labs.model.presets import get_model
from labs.rl.inputs import RLPlacementInput, RLPlacementResult
from labs.rl.lab import compute_rl_placement
from labs.rl.recipes import experiment, get_recipe, recipes

PRESETS = tuple(recipes())
EXP = experiment()


class RLQuery(LabQuery):
    """A recipe preset and overrides; an unset override takes the preset's value."""

    preset: Literal[PRESETS] = Field("glm-4-9b", description="Recipe preset (GET "
                                     "/api/presets/recipes): model, training GPUs, degrees.")
    gpu: str = Field("h100-sxm", max_length=64, description="GPU preset id (GET /api/gpus).")
    placement: Literal[PLACEMENTS] = Field("colocated", description="Colocated, separate "
                                           "pools, or separate with prefill/decode engines.")
    train_gpus: int | None = Field(None, ge=1, le=MAX_TRAIN_GPUS,
                                   description="Training GPUs (default: the recipe's).")
    tp: int | None = Field(None, ge=1, le=MAX_DEGREE, description="Tensor-parallel degree.")
    pp: int | None = Field(None, ge=1, le=MAX_DEGREE, description="Pipeline stages.")
    cp: int | None = Field(None, ge=1, le=MAX_DEGREE, description="Context-parallel degree.")
    ep: int | None = Field(None, ge=1, le=MAX_DEGREE, description="Expert-parallel degree.")
    engine_gpus: int | None = Field(None, ge=1, le=MAX_DEGREE,
                                    description="GPUs per rollout engine (default: recipe's).")
    engines: int | None = Field(None, ge=1, le=MAX_ENGINES, description="Rollout engines in "
                                "separate placements (default: as many GPUs as training).")
    prefill_engines: int | None = Field(None, ge=1, le=MAX_ENGINES,
                                        description="Of those, prefill engines (separate-pd).")
    response_len: int = Field(EXP.response_len, ge=1, le=MAX_RESPONSE_LEN,
                              description="Response length limit, tokens.")
    prompt_len: int = Field(EXP.prompt_len, ge=1, le=MAX_PROMPT_LEN,
                            description="Prompt length, tokens.")
    prompts: int = Field(EXP.prompts, ge=1, le=MAX_PROMPTS, description="Prompts per step.")
    responses_per_prompt: int = Field(EXP.responses_per_prompt, ge=1, le=MAX_RESPONSES,
                                      description="Responses sampled per prompt.")
    cpu_adam: bool | None = Field(None, description="Optimizer state and update on the CPU "
                                  "(default: the recipe's).")
    ref_model: bool | None = Field(None, description="A KL loss against a reference model "
                                   "(slime's --use-kl-loss): one more forward a step "
                                   "(default: the recipe's).")
    recompute: Literal[RECOMPUTE] | None = Field(None, description="Activation recomputation "
                                                 "(default: the recipe's).")
    kv_dtype: Literal[KV_DTYPES] = Field("bf16", description="KV cache dtype of the engines.")
    model: ModelChoice | None = Field(None, description="Model preset id (GET /api/models) "
                                      "or a model code (POST /api/models/parse) in place of "
                                      "the recipe's model, on the recipe's degrees: a what-if "
                                      "shape (EP09 step 9 puts another shape under GLM-5.3's "
                                      "stand-in). Unset: the recipe's.")
    external_engines: int = Field(0, ge=0, le=MAX_ENGINES, description="Extra rollout engines "
                                  "served outside the cluster (external serving capacity).")


def rl_input(q: RLQuery) -> RLPlacementInput:
    r = get_recipe(q.preset)
    pick = lambda value, default: default if value is None else value  # noqa: E731
    return RLPlacementInput(
        model=get_model(q.model) if q.model else r.spec, gpu=get_gpu(q.gpu),
        train_gpus=pick(q.train_gpus, r.train_gpus),
        tp=pick(q.tp, r.tp), pp=pick(q.pp, r.pp), cp=pick(q.cp, r.cp), ep=pick(q.ep, r.ep),
        placement=q.placement, engine_gpus=pick(q.engine_gpus, r.engine_gpus),
        engines=q.engines, prefill_engines=q.prefill_engines, response_len=q.response_len,
        prompt_len=q.prompt_len, prompts=q.prompts,
        responses_per_prompt=q.responses_per_prompt, cpu_adam=pick(q.cpu_adam, r.cpu_adam),
        ref_model=pick(q.ref_model, r.kl_loss),
        recompute=pick(q.recompute, r.recompute), kv_dtype=q.kv_dtype,
        external_engines=q.external_engines, serving=r.serving,
    )


def run(query: RLQuery) -> RLPlacementResult:
    return compute_rl_placement(rl_input(query))


def to_api(result: RLPlacementResult) -> dict:
    inp = result.input
    return {
        "preset": next((k for k, r in recipes().items() if r.model == inp.model.id), ""),
        "model": inp.model.id,
        "model_name": inp.model.name,
        "stand_in": inp.model.stand_in,
        "placement": inp.placement,
        "gpu": inp.gpu.id,
        "train_gpus": inp.train_gpus,
        "tp": inp.tp, "pp": inp.pp, "cp": inp.cp, "ep": inp.ep, "dp": result.dp,
        "engine_gpus": inp.engine_gpus,
        "engines": inp.engine_count,
        "prefill_engines": inp.prefill_count,
        "samples": inp.samples,
        "stage_layers": list(result.stage_layers),
        "pools": [{
            "role": p.role, "gpus": p.gpus, "engines": p.engines,
            "memory_per_gpu_bytes": round(p.memory_per_gpu_bytes)
            if p.memory_per_gpu_bytes < 1e30 else None,
            "gpu_memory_bytes": round(p.gpu_memory_bytes), "fits": p.fits,
            "host_bytes_per_gpu": round(p.host_bytes_per_gpu),
            "breakdown": {k: round(v) for k, v in p.breakdown.items()}, "detail": p.detail,
        } for p in result.pools],
        "train_memory_bytes": None if result.train_memory_bytes is None
        else round(result.train_memory_bytes),
        "rollout_memory_bytes": round(result.rollout_memory_bytes),
        "colocated_bytes": None if result.colocated_bytes is None
        else round(result.colocated_bytes),
        "transition_overhead_bytes": round(result.transition_overhead_bytes),
        "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in result.checks],
        "all_ok": result.all_ok,
        "gpus": [dict(g) for g in result.gpus],
        "timeline": [{"lane": p.lane, "phase": p.phase, "step": p.step, "start": p.start,
                      "end": p.end} for p in result.timeline],
        "rollout_seconds": result.rollout_seconds,
        "train_seconds": result.train_seconds,
        "sync_seconds": result.sync_seconds,
        "sync_bytes_per_gpu": round(result.sync_bytes_per_gpu),
        "sync_link": result.sync_link,
        "sync_rate": result.sync_rate,
        "sync_switch_seconds": result.sync_switch_seconds,
        "sync_switch_bytes": [round(b) for b in result.sync_switch_bytes],
        "sync_switch_link": result.sync_switch_link,
        "sync_switch_rate": result.sync_switch_rate,
        "rollout_parts": result.rollout_parts,
        "train_parts": result.train_parts,
        "step_seconds": result.step_seconds,
        "samples_per_second": result.samples_per_second,
        "serving_weights": result.serving_weights,
        "train_stage": result.train_stage,
        "replicas": result.replicas,
        "notes": list(result.notes),
    }


def figures(result: RLPlacementResult) -> dict:
    return {"cluster": cluster_figure(result), "memory": memory_figure(result),
            "timeline": timeline_figure(result)}
