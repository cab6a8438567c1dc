"""The choices several labs share, one record each: recomputation modes, precision recipes and
activation models. Their ids (``labs.core.limits``: RECOMPUTE, TRAIN_RECIPES, INFER_RECIPES,
ACTIVATION_MODELS), the option lists, the descriptions and the rules the engine applies are all
read from here. (The pipeline schedules are a catalogue of their own:
``labs.schedules.catalogue``.)

Sources:
- recomputation: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models" (arXiv:2205.05198): what each mode keeps (Table 2; formulas in
  ``labs.model.activations``) and what it runs again (sec 5; FLOPs in ``labs.model.flops``);
  Megatron-LM's --recompute-granularity / --recompute-method and DeepSpeed's
  activation_checkpoint_interval for the exports (``labs.recipe.export``);
- recipes: Micikevicius et al. 2018, "Mixed Precision Training" (arXiv:1710.03740); ZeRO,
  Rajbhandari et al. 2020 (arXiv:1910.02054) sec 3.1 counts 2 + 2 + 12 = 16 B/param: bf16
  weights and grads, fp32 master copy, fp32 first and second moments (Kingma & Ba 2015);
- activation models: Korthikanti et al. 2022 Table 2 (``classic``) and Megatron-LM's
  theoretical memory estimate (megatron/training/theoretical_memory_usage.py, ``megatron``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Recomputation:
    """One activation-recomputation mode: what it keeps, what it runs again, what it exports."""

    id: str
    phrase: str  # how prose names it
    # What a layer keeps for its backward (labs.model.activations):
    stores_scores: bool  # the attention scores (5·a·s²·b per layer) are kept: no FlashAttention
    input_only: bool  # only the layer's input (2·s·b·h) is kept
    # What the backward runs again (labs.model.flops, the recipe's step time and TP traffic):
    attention_again: bool  # the attention core's forward runs again (+ its FLOPs / 3)
    forward_again: bool  # the whole forward runs again (+ 2·N FLOPs per token, its TP traffic)
    megatron: tuple[tuple[str, object], ...]  # Megatron-LM's arguments for it
    deepspeed_interval: int  # DeepSpeed's pipeline activation_checkpoint_interval
    text: str = ""  # the option list's text, when it is not the id

    @property
    def label(self) -> str:
        """The option list's text."""
        return self.text or self.id


RECOMPUTATION: dict[str, Recomputation] = {r.id: r for r in (
    # Keeps every intermediate, the attention scores included, sbh(34 + 5as/h); repeats nothing.
    Recomputation("none", "no recomputation", stores_scores=True, input_only=False,
                  attention_again=False, forward_again=False, megatron=(),
                  deepspeed_interval=0),
    # FlashAttention with nothing recomputed (Dao et al. 2022, arXiv:2205.14135: the fused
    # kernel never writes the s x s scores and its backward rebuilds them from the softmax
    # statistics, inside the kernel): keeps 34sbh, no score term; repeats nothing outside the
    # kernel. What Llama 3 ran at 8K tokens (Dubey et al. 2024, arXiv:2407.21783, sec 3.3).
    Recomputation("flash", "no recomputation, with FlashAttention", stores_scores=False,
                  input_only=False, attention_again=False, forward_again=False, megatron=(),
                  deepspeed_interval=0, text="none, with FlashAttention"),
    # Keeps all but the attention core's intermediates, 34sbh; repeats the core's forward.
    Recomputation("selective", "selective recomputation", stores_scores=False,
                  input_only=False, attention_again=True, forward_again=False,
                  megatron=(("--recompute-granularity", "selective"),), deepspeed_interval=0),
    # Keeps each layer's input only, 2sbh; repeats one whole forward (attention included).
    Recomputation("full", "full recomputation", stores_scores=False, input_only=True,
                  attention_again=True, forward_again=True,
                  megatron=(("--recompute-granularity", "full"),
                            ("--recompute-method", "uniform"), ("--recompute-num-layers", 1)),
                  deepspeed_interval=1),
)}


@dataclass(frozen=True)
class Recipe:
    """Bytes per parameter for each kind of state a recipe keeps, and how pages name it."""

    id: str
    mode: str
    weights: float
    gradients: float
    master_weights: float
    optimizer_moments: float
    describe: str  # the ledger's full account
    label: str = ""  # the option list's text
    summary: str = ""  # how a chart's summary names it

    @property
    def bytes_per_param(self) -> float:
        return self.weights + self.gradients + self.master_weights + self.optimizer_moments


# Training recipes first, then inference (labs.core.limits.RECIPE_IDS keeps this order).
RECIPES: dict[str, Recipe] = {r.id: r for r in (
    Recipe("adam16", "train", 2, 2, 4, 8,
           "mixed-precision Adam, 16 B/param: 2 B bf16 weights + 2 B bf16 gradients + "
           "4 B fp32 master weights + 8 B fp32 Adam moments",
           "Mixed-precision Adam, 16 B/param (bf16 grads)", "mixed-precision Adam, 16 B/param"),
    Recipe("adam18", "train", 2, 4, 4, 8,
           "mixed-precision Adam with fp32 gradients, 18 B/param: 2 B bf16 weights + "
           "4 B fp32 gradients + 4 B fp32 master weights + 8 B fp32 Adam moments",
           "Mixed-precision Adam, 18 B/param (fp32 grads)", "mixed-precision Adam, 18 B/param"),
    Recipe("bf16", "infer", 2, 0, 0, 0, "bf16 inference, 2 B/param of weights",
           "bf16 weights, 2 B/param", "bf16 weights"),
    Recipe("int8", "infer", 1, 0, 0, 0, "int8 weight-only inference, 1 B/param",
           "int8 weights, 1 B/param", "int8 weights"),
    Recipe("int4", "infer", 0.5, 0, 0, 0, "int4 weight-only inference, 0.5 B/param",
           "int4 weights, 0.5 B/param", "int4 weights"),
)}
# The recipe a mode gets when none is chosen.
DEFAULT_RECIPE = {"train": "adam16", "infer": "bf16"}


@dataclass(frozen=True)
class ActivationModel:
    """One model of the activation bytes a layer keeps (formulas: labs.model.activations)."""

    id: str
    label: str  # the option list's text
    what: str  # what it is, in the API's field description

    @property
    def described(self) -> str:
        return f"{self.id} ({self.what})"


ACTIVATION_MODEL_RECORDS: dict[str, ActivationModel] = {a.id: a for a in (
    ActivationModel("classic", "classic (Korthikanti 34·s·b·h)", "Korthikanti's 34·s·b·h"),
    ActivationModel("megatron", "megatron (Megatron-LM estimate)",
                    "Megatron-LM's estimate, from the model's FFN width"),
)}
ACTIVATION_MODEL_HELP = ("Activations per layer: "
                         + " or ".join(a.described for a in ACTIVATION_MODEL_RECORDS.values())
                         + ".")
