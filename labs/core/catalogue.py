"""The choices several labs share, one record each: precision recipes (with the storage formats
they are summed from) and activation models. Their ids (``labs.core.limits``: TRAIN_RECIPES,
INFER_RECIPES, ACTIVATION_MODELS), the option lists, the descriptions and the rules the engine
applies are all read from here. (The recomputation modes are ``labs.core.recomputation``'s,
the pipeline schedules ``labs.schedules.catalogue``'s.)

Sources:
- recipes: Micikevicius et al. 2018, "Mixed Precision Training" (arXiv:1710.03740); ZeRO,
  Rajbhandari et al. 2020 (arXiv:1910.02054) sec 3.1 counts 2 + 2 + 12 = 16 B/param: bf16
  weights and grads, fp32 master copy, fp32 first and second moments (Kingma & Ba 2015);
- activation models: Korthikanti et al. 2022 Table 2 (``classic``) and Megatron-LM's
  theoretical memory estimate (megatron/training/theoretical_memory_usage.py, ``megatron``);
- storage formats and the low-precision recipes (EP10, ``labs.precision``): each recipe's bytes
  per parameter are summed from the formats of what it keeps (``Stored``), never typed; the
  sources are cited at each format and recipe below.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Stored:
    """How a tensor is stored: its element's bits plus its scales' share of each element.

    ``block`` elements share one scale of ``scale_bits`` (0: one scale for the whole tensor,
    which costs nothing per element; delayed scaling's history is counted per tensor, by the
    ledger); double quantization (QLoRA) quantizes those scales in turn, ``block2`` of them
    sharing one ``scale2_bits`` constant."""

    name: str
    bits: int
    block: int = 0
    scale_bits: int = 0
    block2: int = 0
    scale2_bits: int = 0
    source: str = ""

    @property
    def scale_bits_per_element(self) -> float:
        extra = self.scale_bits / self.block if self.block else 0.0
        if self.block2:
            extra += self.scale2_bits / (self.block * self.block2)
        return extra

    @property
    def bits_per_element(self) -> float:
        return self.bits + self.scale_bits_per_element

    @property
    def bytes_per_element(self) -> float:
        return self.bits_per_element / 8


FORMATS: dict[str, Stored] = {f.name: f for f in (
    Stored("fp32", 32, source="IEEE 754 single precision"),
    Stored("bf16", 16, source="bfloat16 (Kalamkar et al. 2019, arXiv:1905.12322)"),
    # Per-tensor scaling: one FP32 scale (and its inverse) per tensor. TransformerEngine's
    # DelayedScaling takes it from an amax history (default amax_history_len=1024, the
    # HYBRID format: E4M3 forward, E5M2 backward; TE docs, common.recipe.DelayedScaling).
    Stored("fp8", 8, source="FP8 E4M3/E5M2 (Micikevicius et al. 2022, arXiv:2209.05433); "
                            "one scale per tensor"),
    # DeepSeek-V3 (arXiv:2412.19437) sec 3.3.2: activations scaled per 1x128 tile (one token,
    # 128 channels), weights per 128x128 block, online (the tile's own amax); the released
    # weights carry one float32 weight_scale_inv per 128x128 block (README_WEIGHTS.md).
    Stored("fp8-1x128", 8, block=128, scale_bits=32,
           source="DeepSeek-V3 sec 3.3.2: E4M3, one FP32 scale per 1x128 activation tile"),
    # DeepSeek-V3 sec 3.3.3 ("Low-Precision Activation"): the inputs of the Linear after the
    # attention operator are cached in "a customized E5M6 data format", scaled per 1x128 tile
    # like the other activations. No recipe saves every input in it: EP01 step 6's note bounds
    # the one input it keeps (labs.model.activations.out_proj_input_bytes_per_layer).
    Stored("e5m6-1x128", 12, block=128, scale_bits=32,
           source="DeepSeek-V3 sec 3.3.3: E5M6 for the output projection's input, 1x128 tiles"),
    Stored("fp8-128x128", 8, block=128 * 128, scale_bits=32,
           source="DeepSeek-V3 sec 3.3.2: E4M3, one FP32 scale per 128x128 weight block"),
    # OCP Microscaling Formats (MX) v1.0 sec 5: a block of k = 32 elements shares one 8-bit
    # E8M0 scale (a power of two); MXFP8 elements are E4M3 or E5M2. Blackwell's tensor cores
    # read them natively (TE MXFP8BlockScaling: 1x32 blocks rowwise, 32x1 columnwise).
    Stored("mxfp8", 8, block=32, scale_bits=8,
           source="OCP Microscaling Formats (MX) v1.0 sec 5: 32 elements share one E8M0 scale"),
    # QLoRA (Dettmers et al. 2023, arXiv:2305.14314) sec 3: 4-bit NormalFloat in blocks of 64
    # with an FP32 absmax each, 32/64 = 0.5 bits per parameter; double quantization stores
    # those constants as FP8 in blocks of 256 with one FP32 constant each:
    # 8/64 + 32/(64*256) = 0.127 bits per parameter.
    Stored("nf4", 4, block=64, scale_bits=32,
           source="QLoRA sec 3: NF4, blocks of 64, FP32 absmax (0.5 bits/param)"),
    Stored("nf4-dq", 4, block=64, scale_bits=8, block2=256, scale2_bits=32,
           source="QLoRA sec 3: NF4 with double quantization (0.127 bits/param)"),
)}


@dataclass(frozen=True)
class Copy:
    """One copy of the weights a low-precision recipe keeps beside (or instead of) the 16-bit
    ones, in the format ``stored`` (a key of ``FORMATS``)."""

    what: str
    stored: str

    @property
    def bytes_per_param(self) -> float:
        return FORMATS[self.stored].bytes_per_element


@dataclass(frozen=True)
class Recipe:
    """Bytes per parameter for each kind of state a recipe keeps, and how pages name it.

    ``weights`` is the 16-bit working copy (0 when a recipe keeps its parameters in FP8 only);
    ``copies`` the low-precision copies the GEMMs read; ``saved_inputs`` the format the linear
    layers' inputs are saved in for the backward (labs.model.activations), ``amax_history``
    the FP32 entries per FP8 tensor of per-tensor delayed scaling (0: none kept)."""

    id: str
    mode: str
    weights: float
    gradients: float
    master_weights: float
    optimizer_moments: float
    describe: str  # the ledger's full account
    label: str = ""  # the option list's text
    summary: str = ""  # how a chart's summary names it
    copies: tuple[Copy, ...] = ()
    saved_inputs: str = "bf16"
    amax_history: int = 0
    family: str = "bf16"  # "bf16" (16-bit GEMMs) or "fp8"
    # HBM bytes one element of a GEMM input (or output gradient) moves when cast to FP8,
    # read and written, scales included (labs.model.ops times the casts with it): 0 in a
    # 16-bit recipe.
    cast_bytes: float = 0.0
    scaling: str = ""  # how an FP8 recipe finds its scales, in words
    formats: str = ""  # the FP8 element formats, forward / backward
    source: str = ""

    @property
    def copy_bytes(self) -> float:
        """Bytes per parameter of the low-precision weight copies."""
        return sum(c.bytes_per_param for c in self.copies)

    @property
    def weight_bytes(self) -> float:
        """Every copy of the weights: the 16-bit one and the low-precision ones."""
        return self.weights + self.copy_bytes

    @property
    def other_weights(self) -> float:
        """Bytes per parameter of a weight in no linear layer (the embedding, the output head,
        norms, routers): its 16-bit copy only. An FP8 recipe casts only the linear layers:
        fp8_autocast runs TransformerEngine's own modules in FP8 (te.Linear, LayerNormLinear,
        LayerNormMLP, GroupedLinear; TE docs, "Using FP8 with Transformer Engine"), while
        Megatron-LM's embedding (VocabParallelEmbedding), output layer (a plain
        tensor_parallel.ColumnParallelLinear in megatron/core/models/gpt/gpt_model.py) and the
        final norm are no TE linears and stay bf16, with fp8_model_init (``fp8-params``) too."""
        return self.weights or FORMATS["bf16"].bytes_per_element

    @property
    def gathered_bytes(self) -> float:
        """Bytes per parameter a ZeRO-3/FSDP all-gather moves (and CPU Adam sends back): the
        16-bit weights, or the FP8 copy when the parameters are FP8 only (Megatron-LM's
        --fp8-param-gather; torchao's enable_fsdp_float8_all_gather)."""
        return self.weights or (self.copies[0].bytes_per_param if self.copies else 0.0)

    @property
    def saved_input_bytes(self) -> float:
        """Bytes per element of a saved linear-layer input (2 in bf16)."""
        return FORMATS[self.saved_inputs].bytes_per_element

    @property
    def bytes_per_param(self) -> float:
        return self.weight_bytes + self.gradients + self.master_weights + self.optimizer_moments


def _b(value: float) -> str:
    """A byte count as the recipes' accounts write it: 2, 1.03, 0.516."""
    return f"{value:.3g}"


# A 16-bit GEMM input cast to FP8 on Hopper: Transformer Engine's fused cast-transpose reads
# it once (2 B) and writes the FP8 copy and its transpose (1 + 1 B), since Hopper's FP8 tensor
# cores take only TN GEMMs and the weight gradient reads the transpose (TE issue 1261;
# transformer_engine fp8_cast_transpose_fused); the amax is found inside the same kernel.
TE_CAST_BYTES = 4.0


def _low_precision(id: str, name: str, short: str, *, weights: str | None, copies: tuple,
                   gradients: str, master: str, moments: str, saved_inputs: str,
                   amax_history: int = 0, scaling: str, formats: str, source: str,
                   cast_bytes: float = 0.0) -> Recipe:
    """A low-precision training recipe whose bytes per parameter are the sums of its formats'
    (``FORMATS``): computed here, never typed; its account and option text say the sums."""
    f = {k: FORMATS[v].bytes_per_element if v else 0.0 for k, v in (
        ("weights", weights), ("gradients", gradients), ("master", master))}
    moments_bytes = 2 * FORMATS[moments].bytes_per_element
    record = Recipe(id, "train", f["weights"], f["gradients"], f["master"], moments_bytes,
                    describe="", copies=copies, saved_inputs=saved_inputs,
                    amax_history=amax_history, family="fp8", scaling=scaling, formats=formats,
                    source=source, cast_bytes=cast_bytes)
    parts = ([f"{_b(f['weights'])} B {weights} weights"] if weights else []) + [
        f"{_b(c.bytes_per_param)} B {c.what}" for c in copies] + [
        f"{_b(f['gradients'])} B {gradients} gradients", f"{_b(f['master'])} B {master} master "
        f"weights", f"{_b(moments_bytes)} B {moments} Adam moments"]
    total = _b(record.bytes_per_param)
    return replace(record, describe=f"{name}, {total} B/param: " + " + ".join(parts),
                   label=f"{name}, {total} B/param", summary=f"{short}, {total} B/param")


# TransformerEngine's per-tensor delayed scaling on Hopper (both TE recipes below): an FP8 copy
# and its FP8 transpose, bf16 gradients, fp32 master and moments, inputs saved in FP8.
TE_DELAYED = {
    "copies": (Copy("FP8 weights", "fp8"), Copy("FP8 transposes", "fp8")),
    "gradients": "bf16", "master": "fp32", "moments": "fp32", "saved_inputs": "fp8",
    "amax_history": 1024,
    "scaling": "one scale per tensor from the largest |x| of the last 1,024 steps",
    "formats": "E4M3 forward, E5M2 gradients (HYBRID)",
}

FP8_RECIPES = (
    # TransformerEngine's default FP8 recipe on Hopper: the model keeps its bf16 weights (the
    # optimizer's working copy) and each layer casts them to FP8 with a fused cast-transpose,
    # keeping both as workspaces: Hopper's FP8 tensor cores take only TN GEMMs, so the
    # backward needs the transposed copy (TE issue 1261; PR 647 names the FP8 and FP8
    # transpose weight workspaces). Hence FP8 holding more than bf16 (TE issue 1429: "it
    # consumes more memory ... expected behavior"). Saved inputs: the FP8 transpose only
    # ("the FP8 transpose data (on Hopper)", TE issue 1764), half of bf16's.
    _low_precision(
        "fp8-delayed", "FP8, per-tensor delayed scaling (TE)", "FP8 delayed scaling",
        weights="bf16", **TE_DELAYED, cast_bytes=TE_CAST_BYTES,
        source="TransformerEngine DelayedScaling (HYBRID, amax_history_len=1024); TE issues "
               "1261, 1429, 1764; PR 647"),
    # The same with the parameters created in FP8 (TE fp8_model_init; Megatron-LM
    # --fp8-param-gather casts the fp32 master in the distributed optimizer straight to FP8,
    # TE issue 1764): no bf16 copy, and ZeRO-3/FSDP gathers FP8.
    _low_precision(
        "fp8-params", "FP8 parameters (TE fp8_model_init)", "FP8 parameters",
        weights=None, **TE_DELAYED, cast_bytes=TE_CAST_BYTES,
        source="TransformerEngine fp8_model_init; Megatron-LM --fp8-param-gather (TE issue "
               "1764)"),
    # DeepSeek-V3 sec 3.3: E4M3 on every tensor, fine-grained online scales (1x128 tiles of
    # activations, 128x128 blocks of weights: the same blocks serve W and its transpose, so
    # one FP8 copy with its block scales feeds both passes); bf16 weights cast from the fp32
    # master (Fig. 6); "the master weights ... and gradients ... are still retained in FP32"
    # and AdamW's moments in BF16 (sec 3.3.3, "Low-Precision Optimizer States"); activations
    # cached in FP8 for the linear layers' backward ("Low-Precision Activation").
    _low_precision(
        "fp8-blockwise", "FP8, fine-grained blocks (DeepSeek-V3)", "FP8 fine-grained",
        weights="bf16", copies=(Copy("FP8 weights, 128×128 blocks", "fp8-128x128"),),
        gradients="fp32", master="fp32", moments="bf16", saved_inputs="fp8-1x128",
        scaling="online: each 1x128 activation tile and 128x128 weight block its own scale",
        formats="E4M3 on every tensor",
        # The cast-transpose's 4 B, plus an FP32 scale per 1x128 tile in each of the two
        # quantisations (sec 3.3.3: the backward reads the activations "transposed ... 1x128
        # to 128x1", a second quantisation with its own scales).
        cast_bytes=TE_CAST_BYTES + 2 * 4 / 128,
        source="DeepSeek-V3 technical report (arXiv:2412.19437) sec 3.3, Fig. 6"),
    # MXFP8 on Blackwell (TE MXFP8BlockScaling, E4M3): scales along the reduction dimension,
    # so the forward's 1x32 blocks and the backward's 32x1 blocks are different quantizations:
    # two MXFP8 copies ("MXFP8 requires 2 bytes/param because the forward and backward pass
    # require different scaling formats", TE issue 1880), each with its E8M0 scales.
    _low_precision(
        "mxfp8", "MXFP8, 32-element blocks (Blackwell)", "MXFP8",
        weights="bf16", copies=(Copy("MXFP8 weights, 1×32 blocks", "mxfp8"),
                                Copy("MXFP8 weights, 32×1 blocks", "mxfp8")),
        gradients="bf16", master="fp32", moments="fp32", saved_inputs="mxfp8",
        scaling="one E8M0 power-of-two scale per 32 elements, found by the hardware's cast",
        formats="E4M3 (MXFP8)",
        # Two quantisations (rowwise and columnwise: TE issue 1880), each writing 1 B and an
        # E8M0 scale per 32 elements (OCP MX v1.0 sec 5).
        cast_bytes=TE_CAST_BYTES + 2 / 32,
        source="OCP Microscaling Formats (MX) v1.0; TransformerEngine MXFP8BlockScaling; "
               "TE issue 1880"),
)

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
    # "Regular 16-bit finetuning" as QLoRA counts it (abstract: a 65B model needs ">780GB"):
    # bf16 weights and gradients, fp32 Adam moments and no fp32 master copy (paged_adamw_32bit
    # on bf16 parameters, as the QLoRA scripts train the adapters).
    Recipe("adam12", "train", 2, 2, 0, 8,
           "16-bit Adam without a master copy, 12 B/param: 2 B bf16 weights + 2 B bf16 "
           "gradients + 8 B fp32 Adam moments",
           "16-bit Adam, no master copy, 12 B/param", "16-bit Adam, 12 B/param"),
    *FP8_RECIPES,
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
