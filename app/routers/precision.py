"""EP10 Low precision and fine-tuning: page, embeds and JSON for the FP8 ledger against BF16,
each recipe's bytes per parameter, full fine-tuning beside LoRA and QLoRA, and activation
offload. Its controls, run and answers are ``precision_state.py``; here the lesson's states
(``facts``), page context, cases, drills and view."""

from dataclasses import replace
from functools import lru_cache

from fastapi import APIRouter

from app.charts.precision import (
    ACTIVATION_KEYS,
    COPY_KEYS,
    FINETUNE,
    LEDGER,
    LORA_DRILL,
    LORA_DRILL_MODEL,
    METHODS,
    OFFLOAD_STEP,
    STATE_KEYS,
    activations_step,
    finetune_step,
    recipe_step,
    short_recipe,
    speed_step,
    tokens_step,
    total_keys,
)
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, lesson_state, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import SEQ_LENGTHS, gpu_options, model_options, with_value
from app.routers.memory import degree_options, driver_memory, unbilled
from app.routers.precision_state import MODULE_LABELS, PrecisionQuery, figures, run, to_api
from app.schemas import PrecisionAnswer
from labs.core.catalogue import RECIPES
from labs.core.limits import GPU_HOST_LINK, HOST_LINKS, TRAIN_RECIPES
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link
from labs.memory.lab import linear_weight_params, state_bytes
from labs.model.activations import own_layer_terms
from labs.model.code import LLAMA_65B
from labs.model.op_checkpoint import kept_tensors
from labs.model.presets import get_model
from labs.precision.finetune import linear_params, trainable_params
from labs.precision.inputs import FT_RECIPES, MODULE_SETS
from labs.precision.reported import REPORTED
from labs.precision.speed import TP8_ZERO1, amdahl_terms
from labs.recipe.lab import evaluate
from labs.recipe.runs import BY_ID, check

router = APIRouter()


# The lesson's states (facts below): torchtitan's Llama 3 8B run, a 70B Megatron-style layout.
TITAN = {"model": "llama-3.1-8b", "dp": 8, "zero": 3, "seq_len": 8192}
MEGATRON_70B = {"model": "llama-3.1-70b", **TP8_ZERO1, "seq_len": 4096}
# torchao's 1.5x on 128 GPUs: one micro-batch per step keeps the global batch at 1M tokens.
FSDP_70B = {"model": "llama-3.1-70b", "dp": 128, "zero": 3, "seq_len": 8192, "microbatches": 1}
QLORA_65B = {"model": LLAMA_65B, "rank": 64, "modules": "all", "seq_len": 512,
             "recompute": "full", "ft_recipe": "adam12", "gpu": "h100-sxm"}
QLORA_LONG = {**QLORA_65B, "seq_len": 4096, "micro_batch": 6}  # over 80 GB, unless paged


@lru_cache(maxsize=1)
def titan_check():
    """torchtitan's Llama 3.1 8B on 8 H100s (torch.compile), checked as /validation does."""
    return check(BY_ID["torchtitan-llama31-8b-h100x8-compile"])


@lru_cache(maxsize=1)
def titan_fp8() -> dict:
    """Step 8: FP8's gain on torchtitan's own 8B layout (local batch 2 in one micro-batch,
    op-level recomputation, compiled kernels), from the computation /validation runs
    (``labs.recipe.runs.check``: the run's plan, model and cluster through EP08's step model),
    once as checked in BF16 and once with the plan's ``fp8`` option (the linear GEMMs in FP8
    and their casts; the gathers stay bf16), against torchtitan's measured Table 1 gain
    (round-17 cold reading of EP10, finding 9: the page set +28% against the model's 1.33x at
    16 micro-batches, a different layout)."""
    run = BY_ID["torchtitan-llama31-8b-h100x8-compile"]
    bf16 = titan_check().result.step_s
    fp8 = evaluate(replace(run.plan, fp8=True), run.model, run.cluster, run.nodes).step_s
    measured = REPORTED["titan_table1_fp8_tps"].value / REPORTED["titan_table1_bf16_tps"].value
    return {"bf16_s": bf16, "fp8_s": fp8, "lab": bf16 / fp8, "measured": measured}


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes, run
    through the same query model, lab and ``to_api`` as GET /api/precision
    (tests/app/test_prose.py follows every link)."""
    state = lesson_state(PrecisionQuery, run, to_api)

    return {
        "titan": state(**TITAN, recipe="fp8-delayed"),
        # Step 1's first link: BF16 alone, its 16 bytes, before the page's FP8 state adds the
        # recipe step 1 asks about (a first link must leave the opening state:
        # tests/app/test_first_links_move.py).
        "titan_adam16": state(**TITAN, recipe="adam16"),
        # Step 7 links the BF16 run (the FP8 state's bench prints step 8's speed-up), with
        # the measured run's own recomputation, torchtitan's selective op policy (round-6
        # reading of EP10: the ledger at Megatron's selective recomputation erred high for a
        # reason that run did not have).
        "titan_bf16": state(**TITAN, recipe="adam16", recompute="op"),
        "te70": state(**MEGATRON_70B, recipe="fp8-delayed"),
        # The same run with no gradient accumulation: a step dominated by exposed traffic.
        "te70_m1": state(**MEGATRON_70B, recipe="fp8-delayed", microbatches=1),
        "params70": state(**MEGATRON_70B, recipe="fp8-params"),
        "titan_params": state(**TITAN, recipe="fp8-params"),
        "titan_32k": state(**{**TITAN, "seq_len": 32768}, recipe="fp8-params"),
        # Step 4's 32k tokens fit no H100 on 8 GPUs in either recipe (the ledger's fits check);
        # split over CP 2 (EP06), FP8's fits where BF16's does not (round-11 cold reading of
        # EP09-EP10, finding 9).
        # Step 4's catch: FlashAttention without recomputation keeps the core's 16-bit output
        # beside its FP8 copy (round-13 cold reading of EP10-EP11, finding 7).
        "titan_32k_flash": state(**{**TITAN, "seq_len": 32768}, recompute="flash",
                                 recipe="fp8-params"),
        "titan_32k_cp2": state(**{**TITAN, "seq_len": 32768}, cp=2, recipe="fp8-params"),
        "deepseek70": state(**MEGATRON_70B, recipe="fp8-blockwise"),
        "mx70": state(**MEGATRON_70B, recipe="mxfp8", gpu="b200"),
        "gpt3_lora": state(model="gpt-3-175b", rank=4, modules="qv", seq_len=2048),
        "qlora65": state(**QLORA_65B),
        # Step 11's 4-bit base: the linear layers at NF4's 4 bits, the rest (embedding, output
        # head, norms) in bf16, as bitsandbytes leaves them (round-17 cold reading of EP10,
        # finding 4: 33.43 GB against 65.3B x 0.5 B, the bf16 part unsaid).
        "qlora65_linear": linear_params(get_model(LLAMA_65B)),
        # Steps 2 and its note: the linear layers' parameters, the only ones an FP8 recipe
        # keeps FP8 copies of (round-17 cold reading of EP10, finding 5).
        "linear": {"l70": linear_weight_params(get_model(MEGATRON_70B["model"])),
                   "l8": linear_weight_params(get_model(TITAN["model"]))},
        # ...and the recipe its full fine-tune is billed in, part by part (finding 10: 784 GB
        # is 12 B a parameter, which 12 unsaid).
        "qlora65_recipe": RECIPES[QLORA_65B["ft_recipe"]].describe,
        "qlora65_long": state(**QLORA_LONG),
        "qlora65_paged": state(**QLORA_LONG, paged=True),
        "offload70": state(**MEGATRON_70B, recipe="adam16", offload=100),
        "offload70_half": state(**MEGATRON_70B, recipe="adam16", offload=40),
        "speed_a100": state(**TITAN, recipe="fp8-delayed", gpu="a100-80gb"),
        "speed_fsdp70": state(**FSDP_70B, recipe="fp8-params"),
    }


@lru_cache(maxsize=1)
def llama8_layer() -> dict:
    """Step 4's limit: Llama 3.1 8B's own layer counted as EP01 step 3 counts the 70B's
    (``own_layer_terms``), and the part of it its linear layers read: the QKV, output
    projection and MLP inputs and the down projection's, SwiGLU's product (2·ffn/h)."""
    model = get_model("llama-3.1-8b")
    terms = own_layer_terms(model)
    linear = (terms["qkv_input"] + terms["proj_input"] + terms["mlp_input"]
              + 2 * model.ffn / model.hidden)
    return {"total": sum(terms.values()), "linear": linear, "ffn": model.ffn / model.hidden,
            "high": 14 / linear - 1}


@lru_cache(maxsize=1)
def titan_kept() -> dict:
    """Step 7's saved activations tensor by tensor: what torchtitan's op policy keeps per
    token in each layer of the measured run (``labs.model.op_checkpoint.kept_tensors``, the
    list whose sum the ledger bills), the bf16 ones in units of h (round-14 cold reading of
    EP08-EP10, finding 3: the 16.7 GB had no derivation)."""
    inp = facts()["titan_bf16"]["result"].input
    m = inp.model
    tensors = kept_tensors(m, inp.tp)
    kept = {k.what: k for k in tensors}
    lse, h = kept.pop("lse"), m.hidden
    return {"input": kept.pop("input").elements / h, "attention": kept.pop("sdpa").elements / h,
            "matmuls": [(what, k.elements / h) for what, k in kept.items()],
            "widths": sum(k.elements for k in tensors if k.nbytes == 2) / h,
            "lse_heads": lse.elements, "lse_bytes": lse.nbytes,
            "per_token": sum(k.bytes_per_token for k in tensors),
            "tokens": inp.seq_len * inp.micro_batch // inp.cp, "layers": m.layers, "hidden": h}


def extra_context(state) -> dict:
    query = state.query
    spec = state.result.input.model
    return {
        "facts": facts(),
        "llama8_layer": llama8_layer(),
        "titan_kept": titan_kept(),
        # Step 5's fit: the lab's 80 GB against what an H100's driver reports (EP01's figure).
        "deepseek_driver": driver_memory(facts()["deepseek70"]),
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
        "total_keys": total_keys,
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
