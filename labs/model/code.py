"""A model's shape as a short, URL-safe, readable code: ``L80.h8192.a64.k8.f28672.v128256``.

Bring-your-own-model state lives in the URL (reload it, share it), so a pasted config.json
becomes this code and every lab decodes it back to the same :class:`ModelSpec`. Tokens are
joined by ``.``; a token is a key and a whole number (``L80``) or a flag alone (``tie``). Only
fields that differ from their default are written, the defaults being Hugging Face
Transformers' own (``num_key_value_heads`` = heads, ``head_dim`` = hidden // heads; for MLA
the value head width, as the DeepSeek presets count it). Decoding validates exactly what the
config parser validates (labs.core.limits.MODEL_BOUNDS and ModelSpec's own rules) and names the
query field ``model`` in every error.
"""

from __future__ import annotations

import re
from dataclasses import fields, replace
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.core.limits import MAX_MODEL_CODE, MODEL_BOUNDS
from labs.model.spec import ModelSpec

FIELD = "model"  # the query field a code travels in

# Key -> ModelSpec field, in the order a code is written (the shape first, then MoE, MLA).
NUMBERS = {
    "L": "layers", "h": "hidden", "a": "heads", "k": "kv_heads", "d": "head_dim", "f": "ffn",
    "v": "vocab", "E": "experts", "K": "top_k", "S": "shared_experts", "F": "expert_ffn",
    "D": "dense_layers", "q": "q_lora_rank", "c": "kv_lora_rank", "n": "qk_nope_head_dim",
    "r": "qk_rope_head_dim", "V": "v_head_dim", "p": "max_positions", "G": "route_groups",
    "M": "route_group_limit",
}
FLAGS = {  # flag -> (ModelSpec field, value the flag sets; the default is the other one)
    "tie": ("tied_embeddings", True), "qb": ("qkv_bias", True), "lb": ("linear_bias", True),
    "qn": ("qk_norm", True), "rb": ("router_bias", True), "ln": ("norm", "layernorm"),
    "nogate": ("gated_mlp", False), "drop": ("dropout", True),
}
REQUIRED = ("L", "h", "a", "f", "v")
# Published shapes a lesson links to by code (no preset of their own): the code names the
# model, not "Your model". LLaMA 65B: Touvron et al. 2023, arXiv:2302.13971, Table 2 (QLoRA's
# model, Dettmers et al. 2023, EP10 step 11).
LLAMA_65B = "L80.h8192.a64.f22016.v32000"
PUBLISHED = {LLAMA_65B: ("LLaMA 65B", "Touvron et al. 2023, arXiv:2302.13971, Table 2")}
_TOKEN = re.compile(r"([A-Za-z]+)(0|[1-9][0-9]{0,7})?")
_NAME_OF = {name: key for key, name in NUMBERS.items()}


def is_code(value: str) -> bool:
    """A model code starts with its layer count (preset ids are lower-case words)."""
    return bool(re.match(r"L[0-9]", value))


def _default_head_dim(values: dict[str, int]) -> int:
    if values.get("kv_lora_rank"):
        return values.get("v_head_dim", 0)
    return values["hidden"] // values["heads"]


def encode(spec: ModelSpec) -> str:
    """The shortest code of a shape: required fields, then those off their default."""
    values = {name: getattr(spec, name) for name in NUMBERS.values()}
    defaults = {"kv_heads": spec.heads, "head_dim": _default_head_dim(values)}
    parts = []
    for key, name in NUMBERS.items():
        value = values[name]
        if key in REQUIRED or value != defaults.get(name, 0):
            parts.append(f"{key}{value}")
    for flag, (name, value) in FLAGS.items():
        if getattr(spec, name) == value:
            parts.append(flag)
    return ".".join(parts)


def count_label(n: int) -> str:
    """A parameter count as the model menus and custom-size models are labelled
    (labs.model.presets): M below 10^9, T from 10^12. EP01's ledger prints it too, so its
    "405.9B" is the menu's (round-21 cold reading P, finding 13: it printed 406B)."""
    if n < 1e9:
        return f"{n / 1e6:.1f}M"
    return f"{n / 1e9:.1f}B" if n < 1e12 else f"{n / 1e12:.2f}T"


def size_label(spec: ModelSpec) -> str:
    """``70.6B`` or ``671.0B, 37.6B active``, as the pages show it."""
    label = count_label(spec.params)
    if spec.is_moe:
        label += f", {count_label(spec.active_params)} active"
    return label


def _bad(code: str, message: str) -> LabInputError:
    return LabInputError(FIELD, f"model code {code[:40]!r}: {message}")


@lru_cache(maxsize=256)  # bounded: every distinct code a class pastes would otherwise stay
def decode(code: str) -> ModelSpec:
    """The ModelSpec a code describes, named "Your model (size)" (a ``PUBLISHED`` shape by
    its name); LabInputError on ``model``."""
    if not isinstance(code, str) or not code:
        raise LabInputError(FIELD, "a model code must be a non-empty string")
    if len(code) > MAX_MODEL_CODE:
        raise _bad(code, f"longer than {MAX_MODEL_CODE} characters")
    numbers: dict[str, int] = {}
    flags: dict[str, object] = {}
    for token in code.split("."):
        match = _TOKEN.fullmatch(token)
        if not match:
            raise _bad(code, f"{token!r} is not a key and a whole number (like L80)")
        key, digits = match.groups()
        if key in NUMBERS and digits is not None:
            name = NUMBERS[key]
            if name in numbers:
                raise _bad(code, f"{key} is given twice")
            numbers[name] = int(digits)
        elif key in FLAGS and digits is None:
            name, value = FLAGS[key]
            if name in flags:
                raise _bad(code, f"{key} is given twice")
            flags[name] = value
        else:
            known = ", ".join([*NUMBERS, *FLAGS])
            raise _bad(code, f"unknown token {token!r}; keys: {known}")
    missing = [key for key in REQUIRED if NUMBERS[key] not in numbers]
    if missing:
        raise _bad(code, f"missing {', '.join(missing)} (layers L, hidden h, heads a, "
                         "FFN width f and vocabulary v are required)")
    for name, value in numbers.items():
        low, high = MODEL_BOUNDS[name]
        if not low <= value <= high:
            raise _bad(code, f"{_NAME_OF[name]}{value}: {name} must be from {low:,} to "
                             f"{high:,}")
    numbers.setdefault("kv_heads", numbers["heads"])
    numbers.setdefault("head_dim", _default_head_dim(numbers))
    if numbers["head_dim"] < 1:
        raise _bad(code, "head_dim must be at least 1 (give d, or V for an MLA model)")
    shape = ModelSpec(id=code, name="Your model", source="model code", **numbers, **flags)
    if code in PUBLISHED:
        name, source = PUBLISHED[code]
        return replace(shape, name=f"{name} ({size_label(shape)})",
                       source=f"{source}, as model code {code}")
    return replace(shape, name=f"Your model ({size_label(shape)})",
                   source=f"your config.json, as model code {code}")


def canonical(spec: ModelSpec) -> ModelSpec:
    """A shape (from a parsed config, say) as the spec its code decodes to."""
    return decode(encode(spec))


SHAPE_FIELDS = tuple(f.name for f in fields(ModelSpec)
                     if f.name in NUMBERS.values() or f.name in {n for n, _ in FLAGS.values()})
