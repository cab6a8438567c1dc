"""EP10's state: the precision lab's controls (``PrecisionQuery``), the state they describe
run through labs.precision (``run``), and its answers (``to_api``, the figures).
``app.routers.precision`` serves them, with the page context, cases and drills, and
``app.routers.precision_lesson`` holds the lesson's states."""

from typing import Literal

from pydantic import Field

from app.charts.precision import bytes_figure, finetune_figure, ledger_figure
from app.charts.precision_keys import (
    OPEN_FT_RECIPE,
    OPEN_MICROBATCHES,
    OPEN_MODULES,
    OPEN_RANK,
    OPEN_SEQ_LEN,
)
from app.charts.precision_time import offload_figure, speed_figure
from app.cluster_controls import Microbatches
from app.model_controls import ModelChoice, ModelGpuControls, model_field
from labs.core.catalogue import RECIPES
from labs.core.limits import (
    GPU_HOST_LINK,
    HOST_LINKS,
    MAX_DEGREE,
    MAX_DP,
    MAX_GPUS_PER_NODE,
    MAX_LORA_RANK,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    RECOMPUTE,
    TRAIN_RECIPES,
)
from labs.hardware.gpus import get_gpu
from labs.precision.inputs import FT_RECIPES, MODULE_SETS, PrecisionInput, PrecisionResult
from labs.precision.lab import compute_precision

DEFAULT_MODEL = "llama-3.1-8b"
MODULE_LABELS = {"qv": "q and v (the LoRA paper)", "attention": "q, k, v, o",
                 "mlp": "gate, up, down", "all": "every linear layer (QLoRA)"}


class PrecisionQuery(ModelGpuControls):
    """The controls of the precision lab: EP01's model, GPU and layout for the FP8 ledger,
    the fine-tune's adapters, and the offload."""

    model: ModelChoice = model_field(DEFAULT_MODEL)
    # The page opens on the FP8 recipe the lesson starts from, against BF16 (BF16 against
    # itself taught nothing); what it answers of steps 1 to 8 is masked until their guesses
    # (templates/partials/_precision.html, tests/browser/test_answers_hidden_browser.py).
    recipe: Literal[TRAIN_RECIPES] = Field(
        "fp8-delayed", description="Training recipe drawn against BF16 mixed precision "
        "(labs.core.catalogue: the FP8 recipes, or a 16-bit one: adam16 is BF16 itself).")
    seq_len: int = Field(OPEN_SEQ_LEN, ge=1, le=MAX_SEQ_LEN, description="Tokens per sequence.")
    micro_batch: int = Field(1, ge=1, le=MAX_MICRO_BATCH, description="Sequences per "
                             "micro-batch.")
    recompute: Literal[RECOMPUTE] = Field(
        "selective", description="Activation recomputation (full = gradient checkpointing).")
    microbatches: Microbatches = OPEN_MICROBATCHES  # step 8's runs (app/charts/precision.py)
    tp: int = Field(1, ge=1, le=MAX_DEGREE, description="Tensor-parallel degree.")
    pp: int = Field(1, ge=1, le=MAX_DEGREE, description="Pipeline-parallel degree (stages).")
    cp: int = Field(1, ge=1, le=MAX_DEGREE, description="Context-parallel degree.")
    dp: int = Field(8, ge=1, le=MAX_DP, description="Data-parallel degree.")
    ep: int = Field(1, ge=1, le=MAX_DEGREE, description="Expert-parallel degree (MoE only).")
    zero: int = Field(3, ge=0, le=3, description="ZeRO stage over the data-parallel group "
                      "(3 = FSDP).")
    rank: int = Field(OPEN_RANK, ge=1, le=MAX_LORA_RANK, description="LoRA rank r.")
    modules: Literal[tuple(MODULE_SETS)] = Field(
        OPEN_MODULES,
        description="Projections LoRA adapts: qv, attention (q, k, v, o), mlp or all.")
    ft_recipe: Literal[FT_RECIPES] = Field(
        OPEN_FT_RECIPE, description="The 16-bit recipe fine-tuning trains in (adapters or, for "
        "full fine-tuning, every weight).")
    paged: bool = Field(False, description="Paged optimizer: optimizer state moves to host "
                        "RAM when the GPU runs out (QLoRA).")
    offload: int = Field(0, ge=0, le=100, description="Percent of the saved activations "
                         "offloaded to host memory.")
    host_link: Literal[(GPU_HOST_LINK, *HOST_LINKS)] = Field(
        GPU_HOST_LINK, description="The GPU's link to host RAM; 'gpu': the GPU preset's own "
        "(PCIe 4.0 on an A100 or RTX 4090, PCIe 5 on the others).")
    gpus_per_node: int = Field(8, ge=1, le=MAX_GPUS_PER_NODE, description="GPUs sharing one "
                               "host's RAM.")


def precision_input(query: PrecisionQuery) -> PrecisionInput:
    return PrecisionInput(
        model=query.model_spec(), gpu=get_gpu(query.gpu), recipe=query.recipe,
        seq_len=query.seq_len, micro_batch=query.micro_batch, recompute=query.recompute,
        microbatches=query.microbatches, tp=query.tp, pp=query.pp, cp=query.cp, dp=query.dp,
        ep=query.ep, zero=query.zero,
        rank=query.rank, modules=query.modules, ft_recipe=query.ft_recipe, paged=query.paged,
        offload=query.offload / 100, host_link=query.host_link,
        gpus_per_node=query.gpus_per_node)


def run(query: PrecisionQuery) -> PrecisionResult:
    return compute_precision(precision_input(query))


def _ledger_api(ledger, gpu_bytes: float) -> dict:
    r = RECIPES[ledger.recipe]
    return {"recipe": ledger.recipe, "label": r.label, "bytes_per_param": r.bytes_per_param,
            "total_bytes": ledger.total_bytes, "fits": ledger.total_bytes <= gpu_bytes,
            "parts": dict(ledger.parts),
            "copies": [{"what": w, "bytes": b} for w, b in ledger.copies]}


def _speed_api(s) -> dict:
    return {"recipe": s.recipe, "timed": s.timed, "fp8_path": s.fp8_path, "reason": s.reason,
            "microbatches": s.microbatches, "global_batch": s.global_batch,
            "linear_share": s.linear_share, "comm_share": s.comm_share,
            "bf16_step_s": s.bf16_step_s, "fp8_step_s": s.fp8_step_s, "speedup": s.speedup,
            "bf16_mfu": s.bf16_mfu, "fp8_mfu": s.fp8_mfu,
            "bf16_tokens_per_gpu_s": s.bf16_tokens_per_gpu_s,
            "fp8_tokens_per_gpu_s": s.fp8_tokens_per_gpu_s, "dp_bytes": list(s.dp_bytes),
            "unchanged": [p.name for p in s.unchanged],
            "parts": [{"name": p.name, "label": p.label, "bf16_s": p.bf16_s, "fp8_s": p.fp8_s,
                       "sped_up": p.sped_up, "why": p.why} for p in s.parts],
            "notes": list(s.notes)}


def to_api(result: PrecisionResult) -> dict:
    inp, o, p = result.input, result.offload, result.paper
    gpu = inp.gpu.memory_bytes
    return {
        "model": inp.model.id,
        "model_name": inp.model.name,
        "gpu": inp.gpu.id,
        "params": inp.model.params,
        "gpu_memory_bytes": gpu,
        "ledger": _ledger_api(result.ledger, gpu),
        "baseline": _ledger_api(result.baseline, gpu),
        "extra_bytes": result.extra_bytes,
        "recipes": [{"id": pp.recipe, "label": RECIPES[pp.recipe].label,
                     "family": RECIPES[pp.recipe].family, "bytes_per_param": pp.total,
                     "parts": [{"what": w, "bytes_per_param": b} for w, b in pp.parts],
                     "saved_input_bytes": RECIPES[pp.recipe].saved_input_bytes,
                     "formats": RECIPES[pp.recipe].formats,
                     "scaling": RECIPES[pp.recipe].scaling,
                     "source": RECIPES[pp.recipe].source}
                    for pp in result.per_param],
        "finetune": [{"method": f.method, "total_bytes": f.total_bytes,
                      "breakdown": dict(f.breakdown), "host_bytes": f.host_bytes,
                      "offloaded_bytes": f.offloaded_bytes,
                      "trainable_params": f.trainable, "fits": f.fits}
                     for f in result.finetunes],
        "rank": inp.rank,
        "modules": list(inp.module_names),
        "lora_paper": {"trainable_params": p.trainable,
                       "params_over_trainable": inp.model.params / p.trainable,
                       "full_bytes": p.full_bytes, "lora_bytes": p.lora_bytes,
                       "reduction": p.reduction, "checkpoint_bytes": p.checkpoint_bytes},
        "offload": {"share": o.share, "link": inp.host_link, "link_bandwidth": o.link_bandwidth,
                    "activation_bytes": o.activation_bytes, "freed_bytes": o.freed_bytes,
                    "host_bytes_per_gpu": o.host_bytes_per_gpu,
                    "host_bytes_per_node": o.host_bytes_per_node, "layer_bytes": o.layer_bytes,
                    "copy_s": o.copy_s, "forward_s": o.forward_s, "backward_s": o.backward_s,
                    "forward_kernels_s": o.forward_kernels_s,
                    "forward_comms_s": o.forward_comms_s,
                    "hidden": o.hidden, "hidden_share": o.hidden_share,
                    "exposed_s": o.exposed_s,
                    "points": [{"share": pt.share, "copy_s": pt.copy_s} for pt in o.points]},
        "speed": _speed_api(result.speed),
        "assumptions": list(result.assumptions),
    }


def figures(result: PrecisionResult) -> dict:
    return {"ledger": ledger_figure(result), "bytes": bytes_figure(result),
            "finetune": finetune_figure(result), "offload": offload_figure(result),
            "speed": speed_figure(result)}
