"""EP01 The memory ledger's state: its controls (``MemoryQuery``), run and answer, the recipe
labels its selects show and the degree selects EP10 shows too (``degree_selects``)."""

import math
import re
from typing import Literal

from jinja2 import pass_context
from markupsafe import Markup
from pydantic import Field

from app.cluster_controls import Schedule, Virtual
from app.model_controls import ModelChoice, ModelGpuControls, model_field
from app.options import with_value
from app.templating import kept, templates
from labs.core.catalogue import ACTIVATION_MODEL_HELP, DEFAULT_RECIPE, RECIPES
from labs.core.limits import (
    ACTIVATION_MODELS,
    MAX_DEGREE,
    MAX_DP,
    MAX_MICRO_BATCH,
    MAX_MICROBATCHES,
    MAX_SEQ_LEN,
    MODES,
    RECIPE_IDS,
    RECOMPUTE,
)
from labs.core.recomputation import RECOMPUTATION
from labs.hardware.gpus import get_gpu
from labs.memory.inputs import STATE_KEYS, MemoryInput
from labs.memory.lab import compute_memory

DEFAULT_MODEL = "llama-3.1-70b"
RECIPE_LABELS = {k: r.label for k, r in RECIPES.items()}  # the records of labs.core.catalogue


def unbilled(label: str) -> str:
    """A recipe's label without its bytes per parameter ("FP8, …, 18 B/param" -> "FP8, …")."""
    return re.sub(r",? [\d.]+ B/param", "", label)


# The Recipe selects of EP01 and EP03: the FP8 and MXFP8 recipes' bytes a parameter are what
# EP10's steps 1, 3, 5 and 6 ask, so no select prints them (round-17 cold reading of EP01,
# finding 5; EP10's own select strips them too).
LESSON_RECIPE_LABELS = {k: unbilled(label) if "fp8" in k else label
                        for k, label in RECIPE_LABELS.items()}
# What EP01 teaches of its Recipe and Recomputation menus (round-5 cold reading, item 5): the
# other options sit in a group of their own, named for the lesson that teaches them (EP10's
# low-precision recipes, and torchtitan's op policy, which EP10's measured run keeps) or
# marked as taught by none (torchtitan's every-2nd-layer policy, UNTAUGHT_RECOMPUTE), each with
# its record's phrase as a one-line title (partials/_memory_controls.html).
EP01_RECIPES = ("adam16", "adam18", "fp8-blockwise", "bf16", "int8", "int4")
EP01_RECOMPUTE = ("none", "flash", "selective", "full")
EP10_RECOMPUTE = ("op",)
UNTAUGHT_RECOMPUTE = tuple(k for k in RECOMPUTATION if k not in EP01_RECOMPUTE + EP10_RECOMPUTE)


class MemoryQuery(ModelGpuControls):
    """The controls of the memory ledger; every size is bounded so no request is costly."""

    model: ModelChoice = model_field(DEFAULT_MODEL)
    mode: Literal[MODES] = Field("train", description="Training step or inference.")
    recipe: Literal[RECIPE_IDS] | None = Field(
        None, description="Precision recipe; default adam16 for train, bf16 for infer.",
    )
    seq_len: int = Field(4096, ge=1, le=MAX_SEQ_LEN, description="Tokens per sequence.")
    micro_batch: int = Field(1, ge=1, le=MAX_MICRO_BATCH, description="Sequences per micro-batch.")
    recompute: Literal[RECOMPUTE] = Field(
        "selective", description="Activation recomputation (Korthikanti et al. 2022).",
    )
    activation_model: Literal[ACTIVATION_MODELS] = Field(
        "classic", description=ACTIVATION_MODEL_HELP,
    )
    tp: int = Field(1, ge=1, le=MAX_DEGREE, description="Tensor-parallel degree.")
    pp: int = Field(1, ge=1, le=MAX_DEGREE, description="Pipeline-parallel degree (stages).")
    cp: int = Field(1, ge=1, le=MAX_DEGREE, description="Context-parallel degree.")
    dp: int = Field(1, ge=1, le=MAX_DP, description="Data-parallel degree.")
    ep: int = Field(1, ge=1, le=MAX_DEGREE, description="Expert-parallel degree (MoE only).")
    zero: int = Field(0, ge=0, le=3, description="ZeRO stage over the data-parallel group.")
    offload: bool = Field(False, description="Optimizer (CPU Adam) offload to host memory.")
    uneven_pp: bool = Field(False, description="Allow pipeline stages of unequal layer counts "
                            "(the first L mod PP stages hold one more layer).")
    sp: bool | None = Field(None, description="Sequence parallelism; default on whenever "
                            "TP > 1 (Megatron's advice, Korthikanti et al. 2022).")
    schedule: Schedule = "1f1b"
    virtual: Virtual = 1
    microbatches: int | None = Field(
        None, ge=1, le=MAX_MICROBATCHES,
        description="Micro-batches per step; unset, as few as fill the pipeline (PP, or 2·PP "
                    "for DualPipeV). With fewer than PP, 1F1B holds min(m, PP) in flight.")


def memory_input(query: MemoryQuery) -> MemoryInput:
    model = query.model_spec()
    recipe = query.recipe or DEFAULT_RECIPE[query.mode]
    return MemoryInput(
        model=model, gpu=get_gpu(query.gpu), mode=query.mode, recipe=recipe,
        seq_len=query.seq_len, micro_batch=query.micro_batch, recompute=query.recompute,
        tp=query.tp, pp=query.pp, cp=query.cp, dp=query.dp, ep=query.ep, zero=query.zero,
        offload=query.offload, uneven_pp=query.uneven_pp,
        activation_model=query.activation_model,
        sp=query.sp, schedule=query.schedule, virtual=query.virtual,
        microbatches=query.microbatches,
    )


def run(query: MemoryQuery):
    return compute_memory(memory_input(query))


def to_api(result) -> dict:
    inp = result.input
    return {
        "model": inp.model.id,
        "model_name": inp.model.name,
        "gpu": inp.gpu.id,
        "mode": inp.mode,
        "recipe": inp.recipe,
        "recipe_description": result.recipe_description,
        "params": result.params,
        "active_params": result.active_params,
        "bytes_per_param": result.bytes_per_param,
        # Bytes are whole numbers in the API (int4 weights may be fractional in the lab).
        "breakdown": {k: round(v) for k, v in result.breakdown.items()},
        "total_bytes": round(result.total_bytes),
        "gpu_memory_bytes": round(result.gpu_memory_bytes),
        "headroom_bytes": round(result.headroom_bytes),
        "fits": result.fits,
        "state_bytes": result.state_bytes,
        "state_bytes_per_gpu": sum(round(result.breakdown[k]) for k in STATE_KEYS),
        "min_gpus": result.min_gpus,
        "world_size": result.world_size,
        "host_bytes": round(result.host_bytes),
        "activation_model": inp.activation_model,
        "stage_layers": list(result.stage_layers),
        "heaviest_stage": result.heaviest_stage,
        "stage_total_bytes": [round(s.total_bytes) for s in result.stages],
        "schedule": inp.schedule,
        "microbatches": inp.pipeline_microbatches,
        "virtual": inp.pipeline_chunks,
        "stage_in_flight": [s.in_flight for s in result.stages],
        "assumptions": list(result.assumptions),
    }


def divisors(n: int, limit: int = 256) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def degree_options(spec, query, *, infer: bool = False, uneven_pp: bool = False) -> dict:
    """The TP, PP, CP and EP choices of EP01's degree selects (partials/_memory_degrees.html)
    for model ``spec``, each with the query's value: TP divides the heads (training: Megatron
    needs it to divide the KV heads, its query groups, as well), PP the layers (any count up
    to 128 with ``uneven_pp``), EP the experts. EP10 shows and refreshes the same selects."""
    return {
        "tp": with_value(divisors(spec.heads if spec.uses_mla or infer
                                  else math.gcd(spec.heads, spec.kv_heads), 128), query.tp),
        "pp": with_value(list(range(1, min(spec.layers, 128) + 1)) if uneven_pp
                         else divisors(spec.layers), query.pp),
        "cp": with_value([1, 2, 4, 8, 16, 32], query.cp),
        "ep": with_value(divisors(spec.experts) if spec.experts else [1], query.ep),
    }


DEGREES = ("tp", "pp", "cp", "ep")  # the selects of partials/_memory_degrees.html


@pass_context
def degree_selects(ctx, oob: bool = False) -> Markup:
    """EP01's degree selects (EP10 shows them too), drawn once per distinct input (``kept``):
    every one the partial reads, its options, the four values, their error slots and whether
    it is sent out of band. Each control answer of either lab sends them (issue 31: up to 128
    pipeline options a select, 1.4% of a class's misses)."""
    errors = ctx["errors"]
    return kept("partials/_memory_degrees.html", degree_options=ctx["degree_options"],
                query={name: ctx["query"][name] for name in DEGREES},
                errors={name: errors[name] for name in DEGREES if name in errors}, oob=oob)


templates.env.globals["degree_selects"] = degree_selects
