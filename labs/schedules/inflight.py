"""Activations a pipeline rank holds at its peak, in stage-loads, per schedule.

Each schedule's record (``labs.schedules.catalogue``) gives its closed form, with its source;
a schedule without one (interleaved zero bubble, ZB-V) is measured here off its simulated
timeline (``labs.schedules.simulate``).
"""

from __future__ import annotations

from functools import lru_cache

from labs.schedules.catalogue import CATALOGUE
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate


@lru_cache(maxsize=256)
def _measured_peaks(schedule: str, stages: int, microbatches: int, virtual: int) -> tuple:
    """Peak units held per rank, measured off the simulated schedule (labs.schedules.simulate)."""
    return simulate(PipelineInput(schedule=schedule, stages=stages, microbatches=microbatches,
                                  virtual=virtual)).peak_activations


def in_flight(schedule: str, stages: int, microbatches: int, rank: int,
              virtual: int = 1) -> float:
    """Peak activations on ``rank`` in stage-loads: micro-batches x the rank's whole share of
    layers (a chunk of interleaved 1F1B or DualPipeV counts 1/chunks of a stage-load)."""
    record = CATALOGUE[schedule]
    if record.in_flight is not None:
        return record.in_flight(stages, microbatches, rank, virtual)
    return _measured_peaks(schedule, stages, microbatches, virtual)[rank] / record.chunks(virtual)
