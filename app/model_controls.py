"""The model controls every lab with a model shares: one field set, one resolver, one option list.

``model`` is a preset id, ``custom`` (a dense model of ``params`` parameters) or a model code
(bring your own model: a pasted config.json, ``L80.h8192.a64.k8.f28672.v128256``;
labs.model.code). ``params`` alone implies ``custom``. A lab subclasses :class:`ModelControls`
and restates only its default model with :func:`model_field`.
"""

from typing import Annotated, get_args

from pydantic import Field, StringConstraints, WithJsonSchema

from app.options import GpuId, LabQuery, ModelId, chosen_model, is_custom
from labs.core.limits import MAX_MODEL_CODE
from labs.model.code import decode, encode, is_code
from labs.model.presets import get_model
from labs.model.spec import ModelSpec

# A preset id, "custom" or a model code, bounded in length. Which one, and whether it is
# valid, is settled by labs.model.presets.get_model / labs.model.code.decode when the lab runs: a
# dictionary lookup or a cached decode, before any simulation, with a message naming the
# control ("unknown model 'x'; choose one of: ..., or a model code"). OpenAPI's examples are
# each lab's own (model_field): a preset another lab draws may break this lab's rules at its
# defaults (a dense model in EP07, 28 heads at TP 8), and "custom" needs params.
ModelChoice = Annotated[str, StringConstraints(max_length=MAX_MODEL_CODE),
                        WithJsonSchema({"type": "string", "maxLength": MAX_MODEL_CODE,
                                        "examples": [*get_args(ModelId),
                                                     "L80.h8192.a64.k8.f28672.v128256"]})]

CUSTOM_PARAMS_LABEL = "Custom parameter count…"


# GPU presets as a query type: an unknown id is refused while the query is validated, and
# OpenAPI lists the ids. Every lab with a GPU control declares it with gpu_field.
GpuChoice = GpuId


def gpu_field(default: str, what: str = "GPU preset"):
    """The ``gpu`` field of a lab whose default GPU is ``default``."""
    return Field(default, description=f"{what} id (GET /api/gpus). Default {default}.")


def model_field(default: str, what: str = "Model"):
    """The ``model`` field of a lab whose default model is ``default``; its OpenAPI examples
    are the default preset and that preset's model code, which draw the lab at its defaults
    (tests/app/test_schema.py asks each)."""
    return Field(default, examples=[default, encode(get_model(default))], description=(
        f"{what}: a preset id (GET /api/models), 'custom' with params, or a model code from "
        f"POST /api/models/parse (bring your own model). Default {default}; params alone "
        "implies custom."))


class ModelControls(LabQuery):
    """model + params. Subclasses restate ``model = model_field(<their default>)``."""

    model: ModelChoice = model_field("llama-3.1-70b")
    params: float | None = Field(
        None, ge=1e6, le=1e14,
        description="Parameter count of a custom dense model (e.g. 7e9); implies model=custom.")

    @property
    def default_model(self) -> str:
        return type(self).model_fields["model"].default

    @property
    def model_given(self) -> str | None:
        return self.model if "model" in self.model_fields_set else None

    @property
    def model_value(self) -> str:
        """What the model select shows: 'custom', a preset id or a code."""
        return "custom" if is_custom(self.model_given, self.params) else self.model

    def model_spec(self) -> ModelSpec:
        return chosen_model(self.model_given, self.params, self.default_model)

    def model_controls(self) -> dict:
        """The model controls as a link spells them: {"model": ...} and, for a custom size,
        "params" (a preset's default id is written out, so the link stands alone)."""
        if self.model_value == "custom":
            return {"model": "custom", "params": self.params}
        return {"model": self.model}


class ModelGpuControls(ModelControls):
    """model + params + gpu, H100 SXM by default (a lab restates ``gpu`` with
    :func:`gpu_field` for another default; the field keeps its place after ``params``)."""

    gpu: GpuChoice = gpu_field("h100-sxm")


def model_choices(options, value: str, *, custom: bool = True) -> list[tuple[str, str]]:
    """A lab's preset options, then 'custom' (when the lab offers a size, or the state is
    one) and the pasted model, "Your model (70.6B)", when the state uses a code (so the
    select shows what is drawn)."""
    out = list(options)
    if custom or value == "custom":
        out.append(("custom", CUSTOM_PARAMS_LABEL))
    if is_code(value):
        try:
            out.append((value, decode(value).name))
        except ValueError:  # a bad code: its message is by the control; keep it selectable
            out.append((value, "Your model (invalid code)"))
    return out
