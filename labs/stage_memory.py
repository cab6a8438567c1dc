"""Per-rank memory of a pipeline schedule: the EP01 ledger's state plus *measured* activations.

The pipeline simulator (``labs.pipeline``) measures how many micro-batch-chunk activations
each rank holds at its peak. One such unit is one micro-batch through one model chunk, i.e.
ceil(L / (p·c)) layers, each keeping Korthikanti et al.'s per-layer activations
(``labs.memory.activation_bytes_per_layer``). The rest of a rank's bill (weights, gradients,
master weights, Adam moments) is the memory ledger's for TP = t and PP = p. So the first
stage of 1F1B, holding p units, sets the limit; GPipe, holding all m, overflows first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.errors import LabInputError
from labs.memory import MemoryInput, activation_bytes_per_layer, compute_memory
from labs.pipeline import PipelineResult
from labs.presets import GPUSpec, ModelSpec

STATE_KEYS = ("weights", "gradients", "master_weights", "optimizer_moments")


@dataclass(frozen=True)
class StageMemory:
    state_bytes: float  # per rank: weights + gradients + master weights + moments
    unit_bytes: float  # activations of one micro-batch through one chunk on one rank
    layers_per_chunk: int
    activation_bytes: tuple[float, ...]  # per rank, at its measured peak
    total_bytes: tuple[float, ...]  # per rank
    gpu_memory_bytes: float
    recipe_description: str

    @property
    def fits(self) -> tuple[bool, ...]:
        return tuple(total <= self.gpu_memory_bytes for total in self.total_bytes)

    @property
    def worst_rank(self) -> int:
        return max(range(len(self.total_bytes)), key=self.total_bytes.__getitem__)


def stage_memory(result: PipelineResult, model: ModelSpec, gpu: GPUSpec, *, tp: int = 1,
                 recompute: str = "selective", seq_len: int = 4096, micro_batch: int = 1,
                 recipe: str = "adam16") -> StageMemory:
    """The bill of every pipeline rank for ``result``'s measured activation peaks."""
    p, chunks = result.input.stages, result.input.chunks
    if p * chunks > model.layers:
        raise LabInputError(
            "stages",
            f"{model.name} has {model.layers} layers: it cannot fill {p} stages x {chunks} "
            f"chunk(s) = {p * chunks} model chunks; use fewer stages or chunks.",
        )
    try:
        ledger = compute_memory(MemoryInput(
            model=model, gpu=gpu, recipe=recipe, seq_len=seq_len, micro_batch=micro_batch,
            recompute=recompute, tp=tp, pp=p, uneven_pp=model.layers % p != 0,
        ))
    except LabInputError as exc:
        # The pipeline page calls PP "stages".
        raise LabInputError("stages" if exc.field == "pp" else exc.field, exc.message) from None
    state = sum(ledger.breakdown[k] for k in STATE_KEYS)
    # Uneven splits (Megatron's uneven first/last stage): size the heaviest chunk.
    layers = math.ceil(model.layers / (p * chunks))
    unit = layers * activation_bytes_per_layer(model, seq_len, micro_batch, tp, 1, recompute)
    acts = tuple(peak * unit for peak in result.peak_activations)
    return StageMemory(
        state_bytes=state,
        unit_bytes=unit,
        layers_per_chunk=layers,
        activation_bytes=acts,
        total_bytes=tuple(state + a for a in acts),
        gpu_memory_bytes=gpu.memory_bytes,
        recipe_description=ledger.recipe_description,
    )
