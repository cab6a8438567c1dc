"""EP10's answer keys: the step whose guess each state's figures answer (a recipe's bytes,
a total per GPU, the activations saved in FP8, the fine-tune's adapters, the offload's copy, an
FP8 step against BF16's), by what the state is, not by its URL. Split from
``app.charts.precision`` (its diagrams), which draws with them."""

from labs.core.catalogue import RECIPES

# The EP10 step whose guess a recipe's figures answer, keyed by the state drawn, not by the
# chart (issue 36, round-9 cold reading, finding 3: step 1's guess lifted the bytes chart, so
# the Recipe menu then drew steps 3, 5 and 6's bytes per parameter before their guesses).
# A recipe's bytes per parameter (the readout, the bytes chart and table), its FP8 copies on
# the ledger and its total are its step's; a 16-bit recipe other than BF16 is step 1's.
RECIPE_STEPS = {"fp8-delayed": "step-1", "fp8-params": "step-3", "fp8-blockwise": "step-5",
                "mxfp8": "step-6"}
# The page's micro-batches per step (step 8's runs): fewer, where the gradient sync is paid
# once a step (ZeRO below 3), answer step 9, which asks what one micro-batch does to FP8's
# gain there (70B on TP 8, ZeRO-1: 1.27x at 16, 1.24x at 8, 1.00x at 1). Under FSDP every
# micro-batch gathers and scatters its own layers, so step 8's torchao run at one
# micro-batch (128 GPUs, a 1M-token batch) is step 8's.
OPEN_MICROBATCHES = 16
# The page's other controls as it opens (app/routers/precision_state.py's defaults): a state
# that moves them is a later step's, and keys what it answers to that step (round-13 cold
# reading of EP10-EP11, findings 1-3), by what the state is, not by its URL.
OPEN_SEQ_LEN, OPEN_RANK, OPEN_MODULES, OPEN_FT_RECIPE = 8192, 16, "qv", "adam16"


def recipe_step(recipe: str) -> str | None:
    """The step whose guess ``recipe``'s bytes answer; None for BF16, the baseline."""
    return None if recipe == "adam16" else RECIPE_STEPS.get(recipe, "step-1")


def total_keys(result) -> tuple[str, ...]:
    """What a state's total per GPU (the headline, the readout, the ledger's total) waits for:
    its recipe's step where it keeps FP8 weights (with their copies), step 2's where they stay
    whole (``unsharded_step``), and step 4's on long sequences (``tokens_step``)."""
    led = result.ledger
    keys = (recipe_step(led.recipe) if led.parts.get("fp8_weights") else None,
            unsharded_step(result.input), tokens_step(result.input), bill_step(result.input))
    return tuple(k for k in keys if k)


def bill_step(inp) -> str | None:
    """Step 7's, at torchtitan's op-level recomputation: BF16's bill there, over the peak
    its predict quotes, is step 7's share (round-31 reading A, finding 3: its own link, and
    the opening with the recompute control moved, printed BF16's 37.1 GB: 37.1 / 51.2 =
    72%). Both columns, their totals and bars, and the headline wait for its guess."""
    return "step-7" if inp.recompute == "op" else None


def unsharded_step(inp) -> str | None:
    """Step 2's, at the delayed-scaling recipe under ZeRO below 3, which leaves the weights
    and their FP8 copies whole: the recipe's bar on the ledger, its column and its total
    against BF16's are what step 2 asks of the 70B on ZeRO-1 (more or less than BF16?).
    Under the opening's ZeRO-3 the copies are sharded, and step 1's why quotes that total.
    Step 1's guess lifted these at step 2's own try link: "75.0 GB per GPU, 14.8 GB more than
    BF16's 60.2 GB" (test_round29_no_steps_own_try_state_prints_its_answer_before_the_guess,
    run over every lesson)."""
    return "step-2" if inp.recipe == "fp8-delayed" and inp.zero < 3 else None


def tokens_step(inp) -> str | None:
    """Step 4's, at an FP8 recipe on sequences longer than the opening's: what the activations
    saved in FP8 take (the ledger's two activation rows, their bars, its total against
    BF16's) is the saving step 4 asks for at 32,768 tokens (the 8,192-token state it scales
    from stays drawn). Shorter sequences are steps 2 and 3's 70B states, whose totals their
    own guesses show."""
    fp8 = RECIPES[inp.recipe].family == "fp8"
    return "step-4" if fp8 and inp.seq_len > OPEN_SEQ_LEN else None


def activations_step(inp) -> str | None:
    """Step 4's, at an FP8 recipe from the opening's sequence length on: the activations it
    saves in FP8 and in 16-bit (the ledger's two rows and their bars). At the opening's 8,192
    tokens they print the saving step 4 asks for at 32,768, a quarter of it (round-17 cold
    reading of EP10, finding 6: "Activations saved in FP8 0 GB | 7.52 GB", x 4). The totals
    there stay drawn: steps 1 to 3 read them."""
    fp8 = RECIPES[inp.recipe].family == "fp8"
    return "step-4" if fp8 and inp.seq_len >= OPEN_SEQ_LEN else None


# Step 10's LoRA drill counts Llama 3.1 70B's adapters on q and v (app/routers/precision.py,
# lora_drill): that model's count at any rank on q and v scales to its answer (r = 16, the
# page's, is twice it), so there the adapters wait for the drill too.
LORA_DRILL_MODEL, LORA_DRILL = "llama-3.1-70b", "drill-precision-lora-params"
FINETUNE_KEY_NAMES = {"step-10": "step 10", "step-11": "step 11", LORA_DRILL: "step 10's drill"}


def finetune_step(inp) -> str | None:
    """The keys the fine-tune's LoRA and QLoRA bills answer: step 11's where the adapters sit
    on every linear layer or the fine-tuning recipe is not the opening's (QLoRA's 65B run),
    step 10's where the rank or the adapted modules move (LoRA's GPT-3 run: its trainable
    parameters), the LoRA drill's on its model's q and v; None at the opening's adapters."""
    keys = []
    if inp.modules == "all" or inp.ft_recipe != OPEN_FT_RECIPE:
        keys.append("step-11")
    elif inp.rank != OPEN_RANK or inp.modules != OPEN_MODULES:
        keys.append("step-10")
    if inp.model.id == LORA_DRILL_MODEL and inp.modules == "qv":
        keys.append(LORA_DRILL)
    return " ".join(keys) or None


# Step 12's key at every state: the copy against the forward (the chart, its summary, the
# table's copy, hidden share and exposed time) says whether the forward hides it. With nothing
# offloaded the chart still draws the copy line by the share offloaded, and the opening 8B's
# break-even (49.6%) answered step 12's 70B "only part of them" at load: both are bytes a
# token against FLOPs a token (round-19 cold reading Z, finding 5).
OFFLOAD_STEP = "step-12"


def speed_step(inp, speed=None) -> str:
    """The step whose guess an FP8 step against BF16's answers: step 9's with fewer
    micro-batches than the page's and a once-a-step gradient sync, or wherever FP8 buys
    nothing (``speed``: 1.00x, step 9's answer; step 11's QLoRA state, 65B on 512-token
    sequences, showed it before step 9's guess), else step 8's."""
    fewer = inp.microbatches < OPEN_MICROBATCHES and inp.zero < 3
    none = speed is not None and speed.timed and not speed.reason and round(speed.speedup, 2) == 1
    return "step-9" if fewer or none else "step-8"
