"""RL training recipes (EP09) as data: ``labs/presets/rl_recipes.json``.

One row per model of the curriculum's recipe table: training GPUs, TP/PP/CP/EP, GPUs per
serving (rollout) engine, CPU Adam and recomputation, a MoE engine's SGLang flags
(``sglang``: its ``ServingLayout``), each with its source (a THUDM/slime
launch script where one is published; otherwise the row is the curriculum's and says so).
The file also holds the experiment the recipes assume (response limit, prompts x responses)
and each GPU preset's HBM bandwidth, which decode speed needs and ``gpus.json`` does not carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from labs.core.data import Presets, read
from labs.core.errors import LabInputError
from labs.hardware.gpus import GPUSpec
from labs.model.presets import get_model
from labs.model.spec import ModelSpec
from labs.rl.serving import ServingLayout


@dataclass(frozen=True)
class RLRecipe:
    id: str
    model: str  # model preset id (labs/presets/models.json)
    name: str
    train_gpus: int
    tp: int
    pp: int
    cp: int
    ep: int
    engine_gpus: int  # GPUs per serving engine (slime's --rollout-num-gpus-per-engine)
    cpu_adam: bool  # --optimizer-cpu-offload
    recompute: str
    source: str
    # --use-kl-loss (with --ref-load): a reference model's forward each step (the script's)
    kl_loss: bool = False
    sglang: dict | None = None  # the ServingLayout's fields, from the script's SGLANG_ARGS

    @property
    def spec(self) -> ModelSpec:
        return get_model(self.model)

    @property
    def serving(self) -> ServingLayout | None:
        return ServingLayout(**self.sglang) if self.sglang else None


@dataclass(frozen=True)
class Experiment:
    response_len: int
    prompt_len: int
    prompts: int
    responses_per_prompt: int
    gpus_per_node: int
    source: str


@cache
def _data() -> dict:
    return read("rl_recipes.json")


RECIPES = Presets(lambda: {row["id"]: RLRecipe(**row) for row in _data()["recipes"]},
                  "preset", "recipe")


def recipes() -> dict[str, RLRecipe]:
    """The six recipes by id, in the table's order."""
    return RECIPES.all()


def get_recipe(recipe_id: str) -> RLRecipe:
    return RECIPES.get(recipe_id)


@cache
def experiment() -> Experiment:
    return Experiment(**_data()["experiment"])


def memory_bandwidth(gpu: GPUSpec) -> float:
    """HBM bytes/s of a GPU: its preset's datasheet figure (``labs/presets/gpus.json``, cited
    there), the one the op-level step model times memory-bound kernels at."""
    if gpu.kernels is None:
        raise LabInputError("gpu", f"no memory bandwidth on file for GPU {gpu.name}")
    return gpu.kernels.hbm_bandwidth
