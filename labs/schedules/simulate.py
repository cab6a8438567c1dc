"""EP05 pipeline parallelism: schedule generator and discrete-event simulator.

``generate`` orders each rank's work (see ``labs.schedules.generators``); ``simulate`` places every
action at the earliest time its rank is free and its inputs have arrived. The bubble,
the makespan and the activations held are all *measured* off that timeline; the
textbook formula is returned next to them only for comparison.

The schedules are those of PyTorch's ``torch.distributed.pipelining`` (plus ZB-H1), in
the same per-rank order (tests/fixtures/torch_pipeline_orders.json). What the
pipeline puts on the wire, the bytes each rank sends to its neighbours and the send time
on a given link, comes from ``labs.schedules.wire``; the engine that places actions in time
is ``labs.schedules.timeline``; the input and the result are ``labs.schedules.inputs``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from functools import partial
from itertools import repeat

from labs.schedules import generators as schedules
from labs.schedules import wire
from labs.schedules.catalogue import CATALOGUE
from labs.schedules.generators import Action
from labs.schedules.inputs import Event, PipelineInput, PipelineResult
from labs.schedules.timeline import activations, gc_paused, place

__all__ = ["generate", "placed", "simulate"]


def _events(rank: int, *columns: Sequence) -> list[Event]:
    """Events of one rank from columns: kinds, micro-batches, chunks, starts, ends."""
    # tuple.__new__ directly: what Event._make does, without its per-call Python frame.
    return list(map(partial(tuple.__new__, Event), zip(repeat(rank), *columns, strict=False)))


def _plan(inp: PipelineInput) -> schedules.Plan:
    """Per-rank steps as plain tuples (the fast form of ``generate``): the schedule's
    generator, as its record in ``labs.schedules.catalogue`` names it."""
    return CATALOGUE[inp.schedule].generate(inp.stages, inp.microbatches, inp.virtual)


def _owners(inp: PipelineInput) -> list[int]:
    """The rank that holds each model piece."""
    record = CATALOGUE[inp.schedule]
    owner = [0] * (inp.stages * inp.chunks)
    for r in range(inp.stages):
        for j in range(inp.chunks):
            owner[record.piece(inp.stages, r, j)] = r
    return owner


def generate(inp: PipelineInput) -> list[list[Action]]:
    """Per-rank ordered actions for ``inp.schedule`` (see ``labs.schedules.generators``)."""
    return [[Action._make(step) for step in acts] for acts in _plan(inp)]


def placed(inp: PipelineInput) -> tuple[schedules.Plan, list, list]:
    """Each rank's steps (kind, micro-batch, chunk, piece) and their start and end times,
    without the events, activations and sends ``simulate`` also measures (for callers that
    only need the timing, e.g. EP08's planner over many pipelines)."""
    with gc_paused():
        plan = _plan(inp)
        starts, ends = place(inp, plan, _owners(inp))
    return plan, starts, ends


def simulate(inp: PipelineInput) -> PipelineResult:
    """Generate ``inp.schedule`` and place it in time; every figure is measured."""
    p = inp.stages
    with gc_paused():
        plan = _plan(inp)
        owner = _owners(inp)
        starts, ends = place(inp, plan, owner)
        events: list[Event] = []
        timelines, peaks = [], []
        for r, acts in enumerate(plan):
            kinds, mbs, chunks, _pieces = zip(*acts, strict=True)
            events += _events(r, kinds, mbs, chunks, starts[r], ends[r])
            steps, peak = activations(kinds, starts[r], ends[r])
            timelines.append(steps)
            peaks.append(peak)
        busy = tuple(math.fsum(map(operator.sub, ends[r], starts[r])) for r in range(p))
        makespan = max(ends[r][-1] for r in range(p))
        bubble = min(max(1.0 - math.fsum(busy) / (p * makespan), 0.0), 1.0)
        sends = wire.sends_per_rank(plan, owner)
        return PipelineResult(
            input=inp,
            events=tuple(events),
            makespan=makespan,
            bubble_fraction=bubble,
            textbook_bubble=CATALOGUE[inp.schedule].textbook_bubble(p, inp.microbatches,
                                                                    inp.virtual),
            busy=busy,
            peak_activations=tuple(peaks),
            activation_timeline=tuple(timelines),
            send_time=inp.send_time,
            send_seconds=inp.send_seconds,
            sends=sends,
            wire_bytes=tuple(n * inp.boundary_bytes for n in sends),
        )
