"""EP10 Low precision and fine-tuning's lesson: the states its steps link to and quote
(``facts``, from the runs named ``TITAN``, ``MEGATRON_70B``, ``FSDP_70B`` and ``QLORA_65B``),
torchtitan's measured run as /validation checks it (``titan_check``, ``titan_fp8``) and the
derivations step 4's and step 7's notes print (``llama8_layer``, ``titan_kept``)."""

import math
from dataclasses import replace
from functools import lru_cache

from app.labkit import lesson_state
from app.routers.precision_state import PrecisionQuery, run, to_api
from labs.core.catalogue import RECIPES
from labs.memory.lab import linear_weight_params
from labs.model.activations import own_layer_terms
from labs.model.code import LLAMA_65B
from labs.model.op_checkpoint import kept_tensors
from labs.model.presets import get_model
from labs.precision.finetune import linear_params
from labs.precision.reported import REPORTED
from labs.precision.speed import TP8_ZERO1
from labs.recipe.lab import evaluate
from labs.recipe.runs import BY_ID, check

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
        # Step 12: the H100 layer EP05 steps 4-5 quote (EP08's step model: kernels and TP
        # collectives), whose forward hides its copy at PCIe 5's datasheet rate by 5%, and
        # the predict's B200, whose faster kernels and NVLink leave the same copy over the
        # same PCIe 5 only part of it; then the B200 at the largest tenth that fits (round-29
        # cold reading B, findings 1 and 21: the window was GEMM FLOPs alone, 1.42 ms, and
        # the 40% offload said no why).
        "offload70": state(**MEGATRON_70B, recipe="adam16", offload=100),
        "offload_b200": (b200 := state(**MEGATRON_70B, recipe="adam16", offload=100,
                                       gpu="b200")),
        "offload70_half": state(**MEGATRON_70B, recipe="adam16", gpu="b200",
                                offload=10 * math.floor(10 * b200["result"].offload
                                                        .hidden_share)),
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
