"""EP01 The memory ledger's lesson: the states its steps link to and quote (``facts``), the
derivations their whys print, the case states and the derive drill (``STATE_DRILL``)."""

from functools import lru_cache

from app.labkit import Drill, Mistake, lesson_state
from app.routers.memory_state import MemoryQuery, run, to_api
from labs.core.catalogue import FORMATS, RECIPES
from labs.hardware.gpus import GIB, H100_DRIVER_MIB, get_gpu
from labs.memory.inputs import PREFILL_CHUNK_TOKENS
from labs.memory.lab import forward_tokens, recompute_peak_bytes, workspace_width
from labs.model.activations import (
    GPT_COEFFICIENT,
    activation_bytes_per_layer,
    embedding_activation_bytes,
    gemm_input_bytes_per_layer,
    out_proj_input_bytes_per_layer,
    output_activation_bytes,
    own_layer_coefficient,
    own_layer_terms,
)
from labs.model.presets import get_model
from labs.model.spec import ModelSpec

# H100_DRIVER_MIB (labs.hardware.gpus): an H100's driver total; others import it from here.


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes.

    One ``params`` dict per state feeds both the step's try link and the numbers quoted next to
    it, run through the same query model, lab and ``to_api`` as GET /api/memory, so the prose
    cannot drift from what the link shows (tests/app/test_prose.py follows every link)."""
    state = lesson_state(MemoryQuery, run, to_api)

    l70, l8 = {"model": "llama-3.1-70b"}, {"model": "llama-3.1-8b"}
    opening, small = state(**l70), state(**l8)
    # Step 4's small server: a named 7B whose shape the page states, so its KV cache can be
    # checked (round-17 cold reading of EP01, finding 4: a custom 7B was drawn as 28 layers x
    # 4,096, no real model's shape).
    small_int8 = state(**_GOOD)  # also the good case (_GOOD)
    l70_serve = state(**l70, mode="infer", recipe="bf16", seq_len=8192, micro_batch=32)
    deepseek_fp8 = state(model="deepseek-v3", recipe="fp8-blockwise")
    l70_zero3_full = state(**l70, dp=32, zero=3, recompute="full")
    return {
        "l70": opening,
        # Step 1 asks for the 8B's bill, which the opening bench (70B) does not print.
        "l8": small,
        # Steps 1 and 2 quote the logits with their formula and vocabulary (round-12 cold
        # reading, finding 10: 2.27 GB had neither on the step).
        "logits": {"l70": logits_terms(opening), "l8": logits_terms(small)},
        "driver": driver_memory(opening),
        "l70_18": state(**l70, recipe="adam18"),
        "b30": state(model="custom", params="30e9"),
        # Step 3: fused attention (what current stacks run) at 4k (the bench's 70B) and, for
        # the predict, the 8B at 16k, which no visible figure scales to (round-12 cold
        # reading: 4 x the bench's 91.3 GB was a read-off); full recomputation and the unfused
        # kernels of 2021-22 ("none": the s x s scores kept) at the same 16k.
        "l70_flash": state(**l70, recompute="flash", seq_len=4096),
        "l8_flash_16k": state(**l8, recompute="flash", seq_len=16384),
        "l8_full_16k": state(**l8, recompute="full", seq_len=16384),
        "l8_none_16k": state(**l8, recompute="none", seq_len=16384),
        # Step 3's count of Llama's own layer against GPT's 34, which EP06 and EP08 reuse.
        "own_layer": own_layer(get_model("llama-3.1-70b")),
        "small_int8": small_int8,
        "l70_serve": l70_serve,
        # Step 4's workspace sum, the terms workspace_bytes multiplies (round-5 cold reading:
        # the formula was hidden, and it ran every cached token through one forward).
        "ws": {"small": workspace_terms(small_int8), "serve": workspace_terms(l70_serve),
               "chunk": PREFILL_CHUNK_TOKENS,
               # Step 6: the FP8 recipe's 15 bytes, as the recipe lists them.
               "fp8_bytes": fp8_bytes(deepseek_fp8)},
        "l405": state(model="llama-3.1-405b"),
        # Step 5 asks the 18-byte recipe: step 2's link already prints the 16-byte count.
        "l405_18": state(model="llama-3.1-405b", recipe="adam18"),
        "l70_zero3": state(**l70, dp=32, zero=3),
        # Step 5's limit: step 3's full recomputation fits the same 70B on the same 32 GPUs
        # (round-17 cold reading of EP01, finding 1: the limit sent the student to EP04-EP06
        # past the fix step 3 had just taught).
        "l70_zero3_full": l70_zero3_full,
        # ... and its peak, while the backward runs a layer again, counted as EP03 step 6
        # counts it (round-21 cold reading P, finding 6).
        "l70_zero3_full_peak": recompute_peak_bytes(l70_zero3_full["result"]),
        "mixtral": state(model="mixtral-8x7b"),
        "deepseek": state(model="deepseek-v3"),
        "deepseek_fp8": deepseek_fp8,
        # Step 6: why the FP8 recipe's activations are 0.8 of step 3's 34 (round-14 cold
        # reading of EP01, finding 8: 48.7 GB against 60.9 GB, the factor unsaid).
        "fp8_acts": fp8_activation_terms(deepseek_fp8),
    }


def own_layer(model: ModelSpec) -> dict:
    """Korthikanti's count redone for ``model``'s own layer (labs.model.activations
    ``own_layer_terms``), beside GPT's 34 that the ledger keeps: EP01 step 3 derives it once,
    EP06 step 1 and EP08 step 4 quote it (round-12 cold reading: two estimates, 33.5 and
    Megatron's 32, were taught for one layer)."""
    terms = own_layer_terms(model)
    coefficient = own_layer_coefficient(model)
    return {"terms": terms, "coefficient": coefficient, "gpt": GPT_COEFFICIENT,
            "high": GPT_COEFFICIENT / coefficient - 1, "ffn": model.ffn,
            "kv_heads": model.kv_heads, "heads": model.heads, "name": model.name}


def logits_terms(fact: dict) -> dict:
    """The terms of a state's embedding-and-logits bill, the engine's two functions split as
    their docstrings count them: the last stage's fp32 logits (4·s·b·v) and final norm's bf16
    input and output (the rest of ``output_activation_bytes``), the first stage's token ids
    (8·s·b) and any embedding dropout mask (the rest of ``embedding_activation_bytes``)."""
    inp = fact["result"].input
    m, tokens = inp.model, inp.seq_len * inp.micro_batch
    shape = (m, inp.seq_len, inp.micro_batch)
    logits = 4 * tokens * m.vocab
    ids = 8 * tokens
    terms = {"logits": logits, "norm": output_activation_bytes(*shape) - logits,
             "ids": ids, "mask": embedding_activation_bytes(*shape) - ids}
    return {"terms": terms, "vocab": m.vocab, "tokens": tokens, "hidden": m.hidden,
            "layers": m.layers, "total": fact["api"]["breakdown"]["embedding_and_logits"]}


def driver_memory(fact: dict) -> dict:
    """The H100's driver-reported memory against the lab's datasheet figure, both ways, and
    the part of it CUDA hands a process (the HBM tip's figure: round-29 reading A, #10)."""
    reported = H100_DRIVER_MIB * 2**20
    lab = fact["api"]["gpu_memory_bytes"]
    return {"mib": H100_DRIVER_MIB, "bytes": reported, "more": reported / lab - 1,
            "less": 1 - lab / reported, "cuda": get_gpu("h100-sxm").cuda_memory_gib * GIB}


def workspace_terms(fact: dict) -> dict:
    """The terms of a serving state's workspace: tokens of one forward, h and the MLP width."""
    inp = fact["result"].input
    tokens = forward_tokens(inp.seq_len, inp.micro_batch, inp.cp)
    width = workspace_width(inp.model, inp.tp)
    return {"tokens": round(tokens), "hidden": inp.model.hidden,
            "ffn": round((width - 4 * inp.model.hidden) / 2)}


def fp8_activation_terms(fact: dict) -> dict:
    """A low-precision state's activations a layer, per token and unit of h, as the engine
    counts them (labs.model.activations): the bf16 count (GPT's 34), the linear layers' saved
    inputs within it, the bytes an element the recipe saves those in, and what that leaves."""
    inp = fact["result"].input
    m = inp.model
    args = (m, inp.seq_len, inp.micro_batch)
    kw = {"recompute": inp.recompute, "activation_model": inp.activation_model}
    unit = inp.seq_len * inp.micro_batch * m.hidden
    saved = RECIPES[inp.recipe].saved_input_bytes
    coefficient = activation_bytes_per_layer(*args, gemm_inputs=saved, **kw) / unit
    # DeepSeek-V3 keeps one of those inputs finer (fix E, finding 2): the output projection's
    # in E5M6, which the lab saves in FP8 with the rest. The note bounds the lab's error by it.
    out_proj, e5m6 = (out_proj_input_bytes_per_layer(*args, **kw) / unit,
                      FORMATS["e5m6-1x128"].bytes_per_element)
    finer = coefficient + out_proj * (e5m6 - saved) / 2
    shape = inp.seq_len * inp.micro_batch * m.hidden * m.layers
    return {"bf16": activation_bytes_per_layer(*args, **kw) / unit,
            "gemm": gemm_input_bytes_per_layer(*args, **kw) / unit, "saved": saved,
            "coefficient": coefficient, "out_proj": out_proj, "e5m6": e5m6,
            "e5m6_element": FORMATS["e5m6-1x128"].bits / 8,
            "finer": finer, "finer_bytes": finer * shape,
            "tokens": inp.seq_len * inp.micro_batch, "hidden": m.hidden, "layers": m.layers}


def fp8_bytes(fact: dict) -> str:
    """A recipe's bytes per parameter, term by term, as its description lists them."""
    return fact["api"]["recipe_description"].split(": ", 1)[1]


# The case buttons' states; their texts quote the lab's answer for them (never typed in).
# The good case is step 4's small server, Llama 2 7B (round-19 cold reading X, finding 5: a
# custom 7B, 28 layers x 4,096, sat a row from step 4's named one).
_GOOD = {"model": "llama-2-7b", "mode": "infer", "recipe": "int8", "gpu": "rtx-4090"}
_BAD = {"model": "llama-3.1-70b", "mode": "train", "recipe": "adam16", "gpu": "h100-sxm"}
DRILL_GPUS = 4


def drill_answer() -> float:
    """GB of training state per GPU for Llama 3.1 8B in the 18-byte recipe, cut perfectly over
    DRILL_GPUS GPUs (step 2's bytes per parameter, step 5's division)."""
    result = run(MemoryQuery(model="llama-3.1-8b", recipe="adam18"))
    return result.state_bytes / DRILL_GPUS / 1e9


STATE_DRILL = Drill(
    id="memory-state-8b",
    question=(
        f"Llama 3.1 8B ({get_model('llama-3.1-8b').params / 1e9:.2f} billion "
        "parameters) is trained in the 18-byte recipe (its gradients kept in fp32), and "
        f"its state is cut perfectly over {DRILL_GPUS} GPUs. How many GB of weights, "
        "gradients, master weights and optimizer moments does each GPU hold?"
    ),
    answer=drill_answer,
    unit="GB",
    hint="Bytes per parameter: 2 + 4 + 4 + 8. Multiply by the parameters, then divide "
         "by the GPUs.",
    explanation=(
        "{answer} GB: 2 + 4 + 4 + 8 = 18 bytes for each of Llama 3.1 8B's parameters, "
        f"divided over {DRILL_GPUS} GPUs."
    ),
    mistakes=(
        Mistake("16-byte", lambda: drill_answer() * 16 / 18,
                "that is the 16-byte recipe. This one keeps its gradients in fp32, "
                "4 bytes a parameter, not bf16's 2."),
        Mistake("no-master", lambda: drill_answer() * 14 / 18,
                "the fp32 master weights (4 B a parameter) are state too, beside the "
                "bf16 weights the step computes with."),
        Mistake("whole", lambda: drill_answer() * DRILL_GPUS,
                f"that is the whole model's state; it is cut over {DRILL_GPUS} GPUs."),
    ),
)
