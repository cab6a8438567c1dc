"""Model presets (``labs/presets/models.json``) by id, model codes, and custom-size models."""

from __future__ import annotations

import math
from dataclasses import fields
from functools import lru_cache

from labs.core.data import Presets, load
from labs.core.errors import LabInputError
from labs.core.validate import UNKNOWN, is_number
from labs.model.code import decode, is_code
from labs.model.spec import ModelSpec

# Custom models: the synthesized shape keeps Llama 3.1's tokenizer (128,256 entries, untied
# output head; Llama 3 report, arXiv:2407.21783) and its aspect ratio, hidden ≈ 128 x layers.
CUSTOM_VOCAB = 128_256
CUSTOM_MIN_PARAMS = 1_000_000_000  # 1B: below this the embedding table dominates
CUSTOM_MAX_PARAMS = 100_000_000_000_000  # 100T


MODELS = Presets(lambda: load("models.json", ModelSpec), "model", "model",
                 UNKNOWN + ", or a model code (Bring your own model)")


def models() -> dict[str, ModelSpec]:
    """All model presets by id, in file order (a fresh dict; the specs are shared and frozen)."""
    return MODELS.all()


def get_model(model_id: str) -> ModelSpec:
    """A preset by id, or the shape a model code describes (bring your own model: a pasted
    config.json travels as a code, ``L80.h8192.a64...``; labs.model.code)."""
    if isinstance(model_id, str) and model_id not in MODELS and is_code(model_id):
        return decode(model_id)
    return MODELS.get(model_id)


def _custom_shape(layers: int, hidden: int) -> ModelSpec:
    # Llama-like: head_dim 128, MHA, SwiGLU with ffn = 8/3 h rounded to 256 (Llama 2/3 papers).
    heads = hidden // 128
    ffn = 256 * max(1, round(8 * hidden / 3 / 256))
    return ModelSpec(
        id="custom", name="custom", layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
        head_dim=128, ffn=ffn, vocab=CUSTOM_VOCAB,
        source="synthesized: Llama-style dense shape (Dubey et al. 2024, arXiv:2407.21783)",
    )


# Bounded: every distinct custom size a class types would otherwise stay in memory for good.
@lru_cache(maxsize=256)
def _custom_model(params: int) -> ModelSpec:
    # Search hidden in steps of 1024 (heads a multiple of 8, so TP = 1, 2, 4, 8 divide them:
    # Megatron needs heads % tp == 0) and layers in steps of 4 (so PP = 2, 4 divide them). For
    # each hidden, take the layer count that best matches the request, and keep the shape whose
    # own count is closest, mildly preferring Llama 3.1's aspect ratio hidden ≈ 128 x layers.
    scored: list[tuple[bool, float, ModelSpec]] = []
    for k in range(1, 160):
        hidden = 1024 * k
        four, eight = _custom_shape(4, hidden).shape_params, _custom_shape(8, hidden).shape_params
        per_layer = (eight - four) / 4
        exact_layers = (params - (four - 4 * per_layer)) / per_layer / 4
        for layers in {4 * max(1, math.floor(exact_layers)), 4 * max(1, math.ceil(exact_layers))}:
            shape = _custom_shape(layers, hidden)
            aspect = hidden / (128 * layers)
            score = abs(math.log(shape.shape_params / params)) + 0.05 * abs(math.log(aspect))
            scored.append((not 0.6 <= aspect <= 1.7, score, shape))
    shape = min(scored, key=lambda item: item[:2])[2]
    label = f"{params / 1e9:.1f}B" if params < 1e12 else f"{params / 1e12:.2f}T"
    name = f"Custom {label} (dense, {shape.layers} layers x {shape.hidden:,} hidden)"
    return ModelSpec(**{**{f.name: getattr(shape, f.name) for f in fields(ModelSpec)},
                        "name": name, "params_override": params})


def custom_model(params: int | float) -> ModelSpec:
    """A dense Llama-like model whose ``params`` is exactly ``params``.

    The layer shapes (used for activations and KV cache) are the nearest Llama-style shape;
    ``shape_params`` tells how far that shape's own count is from the request.
    """
    if not is_number(params):
        raise LabInputError("params", "the custom parameter count must be a number, e.g. 7e9")
    if params != int(params):
        raise LabInputError("params", "the custom parameter count must be a whole number")
    count = int(params)
    if not CUSTOM_MIN_PARAMS <= count <= CUSTOM_MAX_PARAMS:
        raise LabInputError(
            "params",
            f"a custom model must have between {CUSTOM_MIN_PARAMS / 1e9:g}B and "
            f"{CUSTOM_MAX_PARAMS / 1e12:g}T parameters (got {count:,})",
        )
    return _custom_model(count)
