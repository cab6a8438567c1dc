"""Option lists for the controls that several labs share, built once (presets never change)."""

import re
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

from labs.core.errors import LabInputError
from labs.hardware.gpus import gpus
from labs.hardware.links import links
from labs.model.code import size_label
from labs.model.presets import custom_model, get_model, models

SEQ_LENGTHS = tuple(2**k for k in range(9, 18))  # 512 ... 131,072 tokens


class LabQuery(BaseModel):
    """The base of every lab's controls: keys it does not know are ignored (a shared link may
    carry another lab's), while every key it knows is validated and bounded."""

    model_config = ConfigDict(extra="ignore")


def with_value(options, value: int) -> list[int]:
    """Keep the current value selectable even when a URL sets an unusual one."""
    return sorted(set(options) | {value})


@cache
def gpu_options() -> tuple[tuple[str, str], ...]:
    return tuple((id_, f"{spec.name} ({spec.memory_bytes / 1e9:,.0f} GB)")
                 for id_, spec in gpus().items())


@cache
def model_options(detail: str = "size") -> tuple[tuple[str, str], ...]:
    """Model presets as (id, label); ``detail`` "size" (total/active params), "total" (total
    params only: EP07, whose step 1 asks the active share) or "layers"."""
    def label(spec) -> str:
        if detail == "layers":
            return f"{spec.name} ({spec.layers} layers)"
        if detail == "total":  # a name that gives its size already ("671B MoE") stays as it is
            inner = spec.name[spec.name.rindex("(") + 1:-1] if spec.name.endswith(")") else ""
            if re.search(r"\d+B\b", inner):
                return spec.name
            size = f"{spec.params / 1e9:.1f}B"
            return f"{spec.name[:-1]}, {size})" if inner else f"{spec.name} ({size})"
        # One format with the pages' own (labs.model.code): "671.0B, 37.6B active", where a
        # rounder active count ("38B active") read as another figure beside the prose's 37.6B.
        # A name that ends in its own parentheses takes the size inside them, not a second
        # pair; where they already give the size ("671B MoE"), only the active count is added:
        # "DeepSeek-V3 (671B MoE, 37.6B active)" (round-5 cold reading, EP01 item 4).
        if spec.name.endswith(")"):
            inner = spec.name[spec.name.rindex("(") + 1:-1]
            size = (f"{spec.active_params / 1e9:.1f}B active"
                    if spec.is_moe and re.search(r"\d+B\b", inner) else size_label(spec))
            return f"{spec.name[:-1]}, {size})"
        return f"{spec.name} ({size_label(spec)})"

    return tuple((id_, label(spec)) for id_, spec in models().items())


# Preset ids as query types: an unknown id is refused while the query is validated, before
# any simulation runs (a refused request costs nothing), and OpenAPI lists the ids as an enum.
# Every lab control that takes a preset id uses these.
ModelId = Literal[tuple(models())]
GpuId = Literal[tuple(gpus())]


def is_custom(model: str | None, params: float | None) -> bool:
    """The model and params controls ask for a custom model (params alone implies it)."""
    return model == "custom" or (model is None and params is not None)


def chosen_model(model: str | None, params: float | None, default: str):
    """The ModelSpec the model and params controls name (EP01, EP03 share them)."""
    if is_custom(model, params):
        if params is None:
            raise LabInputError("params", "a custom model needs a parameter count, e.g. 7e9")
        return custom_model(int(params))
    if params is not None:
        raise LabInputError(
            "params", "params sets a custom model's size: choose model=custom or clear it")
    return get_model(model or default)


def link_choices(ids, label=lambda link: link.name) -> tuple[tuple[str, str, str], ...]:
    """Link presets as (id, label, gpus) for a select filtered by the GPU control
    (``filter_by="gpu"`` in templates/partials/_controls.html): a vendor fabric names the GPUs
    it ships with (``labs.hardware.links.Link.gpus``), so choosing a GPU hides the others and
    the link follows it; an open link (PCIe, InfiniBand, Ethernet) names none: any GPU."""
    every = links()
    return tuple((k, label(every[k]), " ".join(every[k].gpus)) for k in ids)
