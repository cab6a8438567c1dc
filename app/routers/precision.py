"""EP10 Low precision and fine-tuning: page, embeds and JSON for the FP8 ledger against BF16,
each recipe's bytes per parameter, full fine-tuning beside LoRA and QLoRA, and activation
offload. Its controls, run and answers are ``precision_state.py``, the lesson's states
(``facts``) and the derivations their notes print ``precision_lesson.py``; here the page
context, cases, drills and view."""

from fastapi import APIRouter

from app.charts.precision import (
    ACTIVATION_KEYS,
    COPY_KEYS,
    FINETUNE,
    LEDGER,
    METHODS,
    STATE_KEYS,
    short_recipe,
)
from app.charts.precision_keys import (
    LORA_DRILL,
    LORA_DRILL_MODEL,
    OFFLOAD_STEP,
    activations_step,
    bill_step,
    finetune_step,
    recipe_step,
    speed_step,
    tokens_step,
    total_keys,
    unsharded_step,
)
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import SEQ_LENGTHS, gpu_options, model_options, with_value
from app.routers.memory_state import degree_options, unbilled
from app.routers.precision_lesson import (
    QLORA_LONG,
    facts,
    llama8_layer,
    titan_check,
    titan_fp8,
    titan_kept,
)
from app.routers.precision_state import MODULE_LABELS, PrecisionQuery, figures, run, to_api
from app.schemas import PrecisionAnswer
from labs.core.catalogue import RECIPES
from labs.core.limits import GPU_HOST_LINK, HOST_LINKS, TRAIN_RECIPES
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link
from labs.memory.lab import linear_weight_params, state_bytes
from labs.model.presets import get_model
from labs.precision.finetune import trainable_params
from labs.precision.inputs import FT_RECIPES, MODULE_SETS
from labs.precision.reported import REPORTED
from labs.precision.speed import amdahl_terms

router = APIRouter()


def extra_context(state) -> dict:
    query = state.query
    spec = state.result.input.model
    return {
        "facts": facts(),
        "llama8_layer": llama8_layer(),
        "titan_kept": titan_kept(),
        "h100": get_gpu("h100-sxm"),  # the datasheet peaks step 8 quotes
        # torchtitan's 8B run on its own layout, as /validation checks it (step 8).
        "titan_check": titan_check(),
        "titan_fp8": titan_fp8(),
        # Steps 8 and 9 work speed-up = 1 / ((1 − g) + g/r + c + e) from these terms, the
        # function the cheat sheet's FP8 line prints them from (fix E, finding 3).
        "amdahl": lambda fact: amdahl_terms(fact["result"].speed),
        "reported": REPORTED,
        "model_options": model_choices(model_options(), query.model_value),
        "model_value": query.model_value,
        "gpu_options": gpu_options(),
        # Without their bytes per parameter: steps 1, 3, 5 and 6 ask for them.
        "recipe_options": tuple((k, unbilled(RECIPES[k].label)) for k in TRAIN_RECIPES),
        "ft_recipe_options": tuple((k, unbilled(RECIPES[k].label)) for k in FT_RECIPES),
        "module_options": tuple(MODULE_LABELS.items()),
        "host_link_options": ((GPU_HOST_LINK, f"The GPU's own "
                                              f"({get_link(get_gpu(query.gpu).host_link).name})"),
                              *((k, get_link(k).name) for k in HOST_LINKS)),
        "ledger_names": LEDGER, "finetune_names": FINETUNE, "methods": METHODS,
        # Each figure's mask keyed to the step its state answers (a recipe's, a micro-batch
        # count's): templates/partials/_precision.html.
        "copy_keys": COPY_KEYS, "state_keys": STATE_KEYS, "recipe_step": recipe_step,
        "speed_step": speed_step, "activation_keys": ACTIVATION_KEYS, "tokens_step": tokens_step,
        "activations_step": activations_step,
        "total_keys": total_keys, "unsharded_step": unsharded_step,
        "bill_step": bill_step,
        "finetune_step": finetune_step, "offload_step": OFFLOAD_STEP,
        "short_recipe": short_recipe,
        "degree_options": degree_options(spec, query),
        "seq_options": with_value(SEQ_LENGTHS + (262144,), query.seq_len),
    }


# Llama 3.1 70B's parameters (the EP01 ledger's count): the drill states them to the two
# decimals its answer needs (18 B x 70.6B = 1,270.8 GB was printed beside 1,270.0).
P70 = get_model("llama-3.1-70b").params
# ...and those of its linear layers, the only ones the FP8 recipe keeps FP8 copies of (round-17
# cold reading of EP10, finding 5: every parameter was billed the copies).
P70_LINEAR = linear_weight_params(get_model("llama-3.1-70b"))


def bytes_drill() -> float:
    """GB of state Llama 3.1 70B holds unsharded in TransformerEngine's delayed-scaling recipe
    (bf16 weights kept): the EP01 ledger's state, its 16 bytes per parameter and the two FP8
    copies on the linear layers' parameters (``labs.memory.lab.state_bytes``)."""
    return state_bytes(get_model("llama-3.1-70b"), RECIPES["fp8-delayed"]) / 1e9


def _bytes_drill_with(per_param: float, copies: float) -> float:
    """The drill's state with ``per_param`` bytes on every parameter and ``copies`` on the
    linear layers' (a mistake's arithmetic)."""
    return (per_param * P70 + copies * P70_LINEAR) / 1e9


# The speed drill runs step 8's formula backwards: the GEMM gain a wanted speed-up needs.
SPEED_DRILL = {"g": 0.65, "c": 0.04, "target": 1.45}
H100_FP8_GAIN = get_gpu("h100-sxm").kernels.fp8_flops / get_gpu("h100-sxm").bf16_flops


def speed_drill() -> float:
    """The GEMM gain r with 1 / ((1 - g) + g/r + c) = target: r = g / (1/target - (1 - g) - c)
    (Amdahl's law solved for r; step 8's formula with e = 0)."""
    g, c, target = SPEED_DRILL["g"], SPEED_DRILL["c"], SPEED_DRILL["target"]
    r = g / (1 / target - (1 - g) - c)
    return r


def _speed_without_casts() -> float:
    """The speed drill's r with the casts' c left out (a wrong derivation)."""
    g, target = SPEED_DRILL["g"], SPEED_DRILL["target"]
    return g / (1 / target - (1 - g))


LORA_DRILL_RANK = 8  # not the page's default rank (16), whose count the fine-tuning chart shows


_L70 = get_model(LORA_DRILL_MODEL)  # its count on q and v waits for the drill (finetune_step)


def _lora_70b(v_out: int | None) -> float:
    """A wrong count of the LoRA drill, in millions: q's r·(h + h), and v's as if it mapped h
    to ``v_out`` (None: v left out), in each layer."""
    v = 0 if v_out is None else _L70.hidden + v_out
    return LORA_DRILL_RANK * (2 * _L70.hidden + v) * _L70.layers / 1e6


def lora_drill() -> float:
    """LoRA's trainable parameters, in millions: Llama 3.1 70B, r = 8 on q and v (not the 8B
    of the page's chart, whose count scales to any rank's)."""
    return trainable_params(_L70, LORA_DRILL_RANK, MODULE_SETS["qv"]) / 1e6


def _waits(query: dict) -> dict:
    """What a case's headline (its bytes per GPU, ``total_keys`` at its state) and its diagram
    (the fine-tune chart's LoRA and QLoRA bars, ``finetune_step``) wait for on the lesson page
    (round 17, as EP11's cases; round-20 cold reading R, finding 8: the line named step 1
    alone, and after step 1's guess the chart drew only the full fine-tune's bar)."""
    result = run(PrecisionQuery(**query))
    keys = (*total_keys(result), *(finetune_step(result.input) or "").split())
    return {"waiting": "Its bytes per GPU and its fine-tuning bars show",
            "waits_for": tuple(dict.fromkeys(keys))}


VIEW = LabView(
    name="precision",
    episode=BY_SLUG["low-precision"],
    query_model=PrecisionQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=(
        Diagram("ledger", "Memory per GPU: BF16 against the chosen recipe (GB)",
                embed_height=560),
        Diagram("bytes", "Bytes per parameter: BF16 against the chosen recipe",
                embed_height=460),
        Diagram("finetune", "Full fine-tuning, LoRA and QLoRA on one GPU (GB)",
                embed_height=560),
        Diagram("offload", "Activation offload: the copy of one layer against its compute",
                embed_height=480),
        Diagram("speed", "What FP8 buys in time: a step by part, BF16 against the recipe (ms)",
                embed_height=620),
    ),
    labels={
        "model": "Model", "params": "Custom params", "gpu": "GPU", "recipe": "Recipe",
        "seq_len": "Sequence length", "micro_batch": "Micro-batch",
        "microbatches": "Micro-batches per step", "recompute": "Recomputation",
        "tp": "TP (tensor)", "pp": "PP (pipeline)",
        "cp": "CP (context)", "dp": "DP (data)", "ep": "EP (expert)", "zero": "ZeRO stage",
        "rank": "LoRA rank", "modules": "Adapted modules", "ft_recipe": "Fine-tuning recipe",
        "paged": "Paged optimizer", "offload": "Offloaded activations",
        "host_link": "Host link", "gpus_per_node": "GPUs per node",
    },
    response_model=PrecisionAnswer,
    embed_height=2200,
    oob_template="partials/_memory_options_oob.html",  # EP01's degree selects, refreshed
    extra_context=extra_context,
    summary="Where every byte of an FP8 recipe (against BF16), a LoRA or QLoRA fine-tune and "
            "an activation offload lives (bytes, seconds)",
    # The cases are step 11's longer QLoRA run, with and without paging: FP8 cases drew
    # steps 1 and 2's answers (its bytes per parameter, its extra GB) and QLoRA at 512 tokens
    # step 11's, one click before the guess (test_answers_hidden).
    good=Case(
        "Good case: QLoRA on 65B, a paged optimizer",
        {**QLORA_LONG, "paged": True},
        "LLaMA 65B's frozen weights in 4-bit NF4, 6 sequences of 4,096 tokens: what overflows "
        "the GPU is the adapters' optimizer state, paged to host RAM.",
        diagram="precision-finetune",  # the bench scrolls to the chart the case changes
        **_waits({**QLORA_LONG, "paged": True}),
    ),
    bad=Case(
        "Bad case: QLoRA on 65B, long sequences",
        QLORA_LONG,
        "The same fine-tune without paging: 6 sequences of 4,096 tokens on one 80 GB H100.",
        diagram="precision-finetune",
        **_waits(QLORA_LONG),
    ),
    drills=(
        Drill(
            id="precision-bytes-delayed",
            question=(
                "TransformerEngine's FP8 recipe on Hopper keeps the bf16 weights, bf16 "
                "gradients, an fp32 master copy and two fp32 Adam moments, and for the linear "
                "layers' weights an FP8 copy and its FP8 transpose. How many GB of that state "
                f"does Llama 3.1 70B ({P70 / 1e9:.2f}B parameters, {P70_LINEAR / 1e9:.2f}B of "
                "them in linear layers) hold on one replica, unsharded?"
            ),
            answer=bytes_drill,
            unit="GB",
            hint="Mixed precision's 2 + 2 + 4 + 8 bytes on every parameter, then 1 + 1 (the "
                 "two FP8 copies) on the linear layers' parameters alone.",
            explanation="{answer} GB: (2 + 2 + 4 + 8) B × "
                        f"{P70 / 1e9:.2f}B parameters + (1 + 1) B × {P70_LINEAR / 1e9:.2f}B "
                        "linear-layer parameters. The embedding, output head and norms keep no "
                        "FP8 copy: only the linear layers run in FP8.",
            # Tight enough to tell copies on every parameter (18 B x 70.55B, 0.3% more).
            rel_tol=0.001,
            mistakes=(
                Mistake("every-param", lambda: _bytes_drill_with(18, 0),
                        "that bills the FP8 copies on every parameter. Only the linear layers "
                        "run in FP8: the embedding, the output head and the norms keep their "
                        "bf16 weights alone."),
                Mistake("bf16", lambda: _bytes_drill_with(16, 0),
                        "that is BF16's 16 bytes a parameter. The FP8 recipe keeps two FP8 "
                        "copies of the linear layers' weights on top."),
                Mistake("one-copy", lambda: _bytes_drill_with(16, 1),
                        "the FP8 transpose is a second copy, one more byte a linear-layer "
                        "parameter: the backward's GEMMs read the weights transposed."),
                Mistake("no-master", lambda: _bytes_drill_with(12, 2),
                        "the fp32 master copy of the weights (4 B a parameter) is state too: "
                        "Adam updates it, and the bf16 and FP8 copies are cast from it."),
            ),
        ),
        Drill(
            id=LORA_DRILL.removeprefix("drill-"),
            question=(
                "LoRA with rank r = 8 on the q and v projections of Llama 3.1 70B (80 layers, "
                "hidden 8,192; q maps 8,192 to 8,192, v maps 8,192 to 1,024 with its 8 KV "
                "heads). How many million parameters train?"
            ),
            answer=lora_drill,
            unit="M params",
            hint="Each adapted matrix adds r·(d_in + d_out): 8·(8,192 + 8,192) for q, "
                 "8·(8,192 + 1,024) for v, in each of the 80 layers.",
            explanation="{answer} million: 80 × 8 × (16,384 + 9,216), 0.02% of the model.",
            mistakes=(
                Mistake("v-square", lambda: _lora_70b(v_out=_L70.hidden),
                        "v maps 8,192 to 1,024, not to 8,192: Llama 3.1 70B's 8 KV heads "
                        "make k and v eight times narrower than q."),
                Mistake("one-layer", lambda: lora_drill() / _L70.layers,
                        "that is one layer's adapters; each of the 80 layers has its own."),
                Mistake("q-only", lambda: _lora_70b(v_out=None),
                        "that counts q alone; v is adapted too."),
            ),
        ),
        Drill(
            id="precision-fp8-speedup",
            question=(
                f"In a BF16 step, the linear layers' GEMMs take {SPEED_DRILL['g']:.0%} of the "
                f"time (g = {SPEED_DRILL['g']}); FP8's casts and scaling add work worth "
                f"{SPEED_DRILL['c']:.0%} of the BF16 step (c = {SPEED_DRILL['c']}), and no "
                "communication is exposed (e = 0). How many times faster must FP8 run the "
                f"GEMMs (r) for the whole step to be {SPEED_DRILL['target']}× as fast?"
            ),
            answer=speed_drill,
            unit="×",
            hint=f"Solve step 8's formula for r: the new step is 1 / {SPEED_DRILL['target']} "
                 "of the old one, and "
                 "(1 − g) + c of it does not shrink.",
            explanation=(
                f"{{answer}}×: 1 / {SPEED_DRILL['target']} = {1 / SPEED_DRILL['target']:.3f} = "
                f"{1 - SPEED_DRILL['g']:.2f} + {SPEED_DRILL['g']} / r + {SPEED_DRILL['c']}, so "
                f"{SPEED_DRILL['g']} / r = "
                f"{1 / SPEED_DRILL['target'] - (1 - SPEED_DRILL['g']) - SPEED_DRILL['c']:.3f}. "
                f"More than the {H100_FP8_GAIN:.1f}× of the H100's FP8 peak over its BF16 "
                f"peak: no FP8 GEMM gets this step to {SPEED_DRILL['target']}×."),
            rel_tol=0.02,  # 2.17 or 2.2 (1.4% off); leaving out the casts, 1.91, is wrong
            mistakes=(
                Mistake("no-casts", lambda: _speed_without_casts(),
                        "that leaves out the casts: c is work FP8 adds that does not shrink, "
                        "so the GEMMs must gain more to make up for it."),
                Mistake("step-gain", lambda: SPEED_DRILL["target"],
                        "that is the whole step's gain. Only the GEMMs' share g runs faster; "
                        "the rest of the step, and the casts, do not, so the GEMMs must gain "
                        "more than the step."),
            ),
        ),
        *LESSON_DRILLS["precision"],  # predict and decide (app/lesson_drills/precision.py)
    ),
)

register(router, VIEW)
