"""Activations a pipeline rank holds at its peak, in stage-loads, per schedule.

Sources:
- in-flight micro-batches per rank: Narayanan et al. 2021 (arXiv:2104.04473) sec 2.2 (1F1B
  holds min(m, p − r) on rank r; GPipe all m); the interleaved schedule's warm-up of
  2(p − r − 1) + (v − 1)p chunks (Megatron's ``get_forward_backward_func``), which on rank 0 is
  the factor 1 + (p − 1)/(p·v) of Megatron's estimate; ZB-H1 (Qi et al. 2023,
  arXiv:2401.10241) and DualPipeV (DeepSeek-V3 sec 3.2.1) as the pipeline lab measures them.
"""

from __future__ import annotations

from functools import lru_cache

from labs.schedules.catalogue import INTERLEAVED
from labs.schedules.generators import V_SHAPE
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate


def chunks_per_rank(schedule: str, virtual: int = 1) -> int:
    """Model chunks each rank holds: v for the interleaved schedules, 2 for the V-shaped
    ones (ZB-V, DualPipeV), else 1 (INTERLEAVED and V_SHAPE
    in labs.schedules)."""
    if schedule in INTERLEAVED:
        return virtual
    return 2 if schedule in V_SHAPE else 1


@lru_cache(maxsize=256)
def _measured_peaks(schedule: str, stages: int, microbatches: int, virtual: int) -> tuple:
    """Peak units held per rank, measured off the simulated schedule (labs.schedules.simulate)."""
    return simulate(PipelineInput(schedule=schedule, stages=stages, microbatches=microbatches,
                                  virtual=virtual)).peak_activations


def in_flight(schedule: str, stages: int, microbatches: int, rank: int,
              virtual: int = 1) -> float:
    """Peak activations on ``rank`` in stage-loads: micro-batches x the rank's whole share of
    layers (a chunk of interleaved 1F1B or DualPipeV counts 1/chunks of a stage-load)."""
    p, m, r = stages, microbatches, rank
    if schedule == "gpipe":
        return float(m)
    if schedule == "1f1b":
        return float(min(m, p - r))
    if schedule == "zb-h1":
        # Every rank keeps min(m, p) layer inputs until their weight-gradient (W) pass.
        return float(min(m, p))
    if schedule == "interleaved-1f1b":
        v = virtual
        return min(m * v, 2 * (p - r - 1) + (v - 1) * p + 1) / v
    if schedule == "dualpipe-v":
        # Both arms of the V are full at the peak: 2p + 1 half-stage chunks on every rank.
        return min(2 * m, 2 * p + 1) / 2
    if schedule == "looped-bfs":
        # Every micro-batch passes chunk 0 before any backward: all m stage-loads, as GPipe.
        return float(m)
    # Interleaved zero bubble and ZB-V: no closed form here; measure the simulated peak.
    return _measured_peaks(schedule, p, m, virtual)[r] / chunks_per_rank(schedule, virtual)
