"""EP10 low precision and fine-tuning: the FP8 recipes' ledger against BF16, their bytes per
parameter, full fine-tuning beside LoRA and QLoRA, and activation offload.

- The FP8 ledger is EP01's (``labs.memory.lab.compute_memory``) run in the chosen recipe and
  in BF16 mixed precision (``adam16``) for the same model and layout; this module only
  itemises what it bills: the weights' bill into the 16-bit copy, each low-precision copy
  (of the linear layers' parameters only, ``labs.memory.lab.weight_parts``, sharded as the
  weights are) and TE's amax history
  (``labs.memory.lab.scaling_state_bytes``); the activations into the linear layers' inputs
  saved in FP8 and the rest in 16-bit (the two ledgers differ by exactly the FP8 saving,
  ``labs.model.activations.gemm_input_bytes_per_layer``). The recipes and their sources are
  records of ``labs.core.catalogue`` (``FP8_RECIPES``).
- Fine-tuning: ``labs.precision.finetune``; offload: ``labs.precision.offload``; what FP8
  buys in time: ``labs.precision.speed``.
- MXFP8 is read natively by Blackwell's tensor cores (NVIDIA Blackwell architecture; TE's
  MXFP8BlockScaling needs compute capability 10.0): on another GPU the ledger bills its
  memory and says so.
"""

from __future__ import annotations

from labs.core.catalogue import RECIPES, Recipe
from labs.core.limits import TRAIN_RECIPES
from labs.memory.inputs import MemoryResult, StageBill
from labs.memory.lab import compute_memory, scaling_state_bytes, weight_parts
from labs.model.activations import ACT_BYTES, layers_activation_bytes
from labs.precision.finetune import finetunes, paper_check
from labs.precision.inputs import (
    BASELINE,
    LEDGER_KEYS,
    Ledger,
    PerParam,
    PrecisionInput,
    PrecisionResult,
)
from labs.precision.offload import offload
from labs.precision.speed import MX_GPUS, speed
from labs.schedules.stages import stage_params


def fp8_activation_bytes(memory: MemoryResult, bill: StageBill, g: float) -> float:
    """The bytes of ``bill``'s saved activations kept at ``g`` bytes per element (the linear
    layers' inputs, ``labs.model.activations.gemm_input_bytes_per_layer``): the ledger's
    own count at ``g`` less the same count with those inputs kept in no bytes at all, so any
    16-bit copy kept beside them (FlashAttention's output) stays in the 16-bit row."""
    m = memory.input
    common = (m.model, m.seq_len, m.micro_batch, m.tp, m.cp, m.recompute)
    kw = {"sp": m.sequence_parallel, "activation_model": m.activation_model, "ep": m.ep,
          "etp": m.etp, "dense_layers": bill.layers - bill.moe_layers,
          "moe_layers": bill.moe_layers}
    return bill.in_flight * (layers_activation_bytes(*common, gemm_inputs=g, **kw)
                             - layers_activation_bytes(*common, gemm_inputs=0.0, **kw))


def itemise(inp: PrecisionInput, recipe: str, stage: int | None = None) -> Ledger:
    """The ledger of ``recipe`` for ``inp``'s model and layout, itemised on its heaviest GPU
    (``stage``: the pipeline rank to read instead)."""
    r = RECIPES[recipe]
    memory = compute_memory(inp.ledger_input(recipe))
    bill = memory.stages[memory.heaviest_stage if stage is None else stage]
    b = bill.breakdown
    scaling = scaling_state_bytes(memory.input, bill.layers, bill.moe_layers, r)
    m = memory.input
    sp = stage_params(m.model, m.pp, m.schedule, m.virtual, m.first_stage_layers,
                      m.last_stage_layers)[bill.rank]
    # The 16-bit copy, and the FP8 copies of the linear layers' parameters only.
    _, linear = weight_parts(m, sp, r)
    acts = b["activations"]
    g = r.saved_input_bytes
    fp8_acts = fp8_activation_bytes(memory, bill, g) if g != ACT_BYTES else 0.0
    parts = dict.fromkeys(LEDGER_KEYS, 0.0)
    parts.update(weights=b["weights"] - scaling - r.copy_bytes * linear,
                 fp8_weights=r.copy_bytes * linear,
                 scaling_state=scaling, gradients=b["gradients"],
                 master_weights=b["master_weights"], optimizer_moments=b["optimizer_moments"],
                 activations_fp8=fp8_acts, activations=acts - fp8_acts,
                 embedding_and_logits=b["embedding_and_logits"])
    copies = tuple((c.what, c.bytes_per_param * linear) for c in r.copies)
    return Ledger(recipe, memory, parts, copies)


def per_param(r: Recipe) -> PerParam:
    """Where a recipe's bytes per parameter live, from its record (never typed)."""
    parts = [("16-bit weights", r.weights), *((c.what, c.bytes_per_param) for c in r.copies),
             ("gradients", r.gradients), ("master weights", r.master_weights),
             ("Adam moments", r.optimizer_moments)]
    return PerParam(r.id, tuple((what, b) for what, b in parts if b))


def _assumptions(inp: PrecisionInput, ledger: Ledger) -> tuple[str, ...]:
    r = inp.recipe_record
    notes = []
    if r.family == "fp8":
        # Named without its bytes per parameter: EP10 step 1 asks for them (the bytes chart
        # and its table give them once it is guessed).
        name = r.label.rsplit(", ", 1)[0]
        notes.append(f"{name}: {r.formats}; scales: {r.scaling} ({r.source}).")
        # "FP8 weight copies" here, on screen at EP10's load, said step 1's answer (copies
        # beside the bf16 weights): the ledger's row of that name waits for the guess.
        notes.append("A recipe's FP8 weights shard under ZeRO-3, the lab's choice "
                     "(torchao casts each shard to FP8 just before FSDP2's all-gather and, "
                     "gathering again for the backward, keeps no copy; TransformerEngine casts "
                     "each gathered layer); the linear layers' "
                     "saved inputs are kept in the recipe's format, the attention core's "
                     "tensors, norms' inputs and masks in 16-bit.")
        if r.amax_history:
            notes.append(f"Delayed scaling keeps {r.amax_history:,} FP32 amax entries per FP8 "
                         "tensor (5 tensors per GEMM), billed with the weights.")
        if inp.recipe == "mxfp8" and inp.gpu.id not in MX_GPUS:
            notes.append(f"MXFP8 runs on Blackwell's tensor cores; the {inp.gpu.name} has "
                         "none: this bills its memory only.")
    notes.append("BF16 beside it: mixed-precision Adam (adam16), the same model and layout.")
    notes.append("What FP8 buys in time is EP08's op-level step model run in BF16 and in the "
                 "recipe (labs.precision.speed); the offload's window is its layer's forward "
                 "there (kernels and TP collectives: the copy runs beside both).")
    notes.append("Fine-tuning is billed on one GPU: full fine-tuning as the ledger bills "
                 f"{inp.ft_recipe}, LoRA and QLoRA with frozen bf16 or NF4 weights and "
                 "adapters trained in that recipe.")
    notes += [n for n in ledger.memory.assumptions if n.startswith(("Not counted", "Pipeline"))]
    return tuple(notes)


def compute_precision(inp: PrecisionInput) -> PrecisionResult:
    """Every figure EP10 draws for ``inp``."""
    baseline = itemise(inp, BASELINE)
    chosen = itemise(inp, inp.recipe)
    return PrecisionResult(
        input=inp, baseline=baseline, ledger=chosen,
        per_param=tuple(per_param(RECIPES[k]) for k in TRAIN_RECIPES),
        finetunes=finetunes(inp),
        paper=paper_check(inp.model, inp.rank, inp.module_names),
        offload=offload(inp, chosen.memory),
        assumptions=_assumptions(inp, chosen),
        speed=speed(inp),
    )
