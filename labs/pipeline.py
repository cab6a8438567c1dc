"""EP05 pipeline parallelism: schedule generator and discrete-event simulator.

``generate`` orders each rank's work (see ``labs.schedules``); ``simulate`` places every
action at the earliest time its rank is free and its inputs have arrived. The bubble,
the makespan and the activations held are all *measured* off that timeline; the
textbook formula is returned next to them only for comparison.
"""

from __future__ import annotations

import gc
import math
import operator
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from typing import NamedTuple

from labs import schedules
from labs.errors import LabInputError
from labs.schedules import Action

__all__ = [
    "SCHEDULES",
    "Action",
    "Event",
    "PipelineInput",
    "PipelineResult",
    "ScheduleDeadlock",
    "generate",
    "simulate",
]

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "dualpipe-v")

MAX_STAGES = 64
MAX_MICROBATCHES = 1024
MAX_VIRTUAL = 8
# Bound on the actions simulated (events drawn): p*m*chunks units of work, each 2 actions
# (F, B) or 3 for split schedules (F, I, W). 65,536 admits p=32, m=256, v=4 interleaved,
# which simulates in under 100 ms here (tests/benchmarks/bench.py).
MAX_EVENTS = 65536

# Schedules that split the backward into I (input gradient) and W (weight gradient).
SPLIT_BACKWARD = ("zb-h1", "dualpipe-v")
MAX_COST = 1000.0


def _whole(field: str, value: object, low: int, high: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise LabInputError(
            field,
            f"The number of {what} must be a whole number from {low} to {high}; got {value!r}.",
        )


def _cost(field: str, value: object, what: str, *, zero_ok: bool) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value > MAX_COST or value < 0 or (value == 0 and not zero_ok):
        low = "0 (inclusive)" if zero_ok else "0 (exclusive)"
        raise LabInputError(
            field, f"The {what} must be a number between {low} and {MAX_COST:g}; got {value!r}."
        )
    return float(value)


@dataclass(frozen=True)
class PipelineInput:
    """One pipeline to simulate; every field is validated on construction.

    ``f``, ``b`` and ``w`` are the times of one micro-batch through a whole stage (all
    its chunks); a chunk costs f/c, b/c, w/c with c chunks per stage, so interleaving
    keeps the total work constant. Schedules that do not split the backward run one
    B of time b + w. ``virtual`` only matters for interleaved-1f1b (2..8 chunks) and
    dualpipe-v (always 2 chunks: 1 or 2 accepted); the other schedules use 1 chunk.
    """

    schedule: str = "1f1b"
    stages: int = 4
    microbatches: int = 8
    virtual: int = 1
    f: float = 1.0
    b: float = 1.0
    w: float = 1.0
    p2p: float = 0.0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise LabInputError(
                "schedule",
                f"Unknown schedule {self.schedule!r}; choose one of {', '.join(SCHEDULES)}.",
            )
        _whole("stages", self.stages, 1, MAX_STAGES, "pipeline stages")
        _whole("microbatches", self.microbatches, 1, MAX_MICROBATCHES, "micro-batches")
        _whole("virtual", self.virtual, 1, MAX_VIRTUAL, "model chunks per stage (virtual)")
        for name, what, zero_ok in (
            ("f", "forward time", False),
            ("b", "backward (input-gradient) time", False),
            ("w", "weight-gradient time", True),
            ("p2p", "point-to-point send latency", True),
        ):
            object.__setattr__(self, name, _cost(name, getattr(self, name), what, zero_ok=zero_ok))
        p, m, v = self.stages, self.microbatches, self.virtual
        if self.schedule == "interleaved-1f1b":
            if v < 2:
                raise LabInputError(
                    "virtual",
                    "Interleaved 1F1B needs at least 2 model chunks per stage (virtual 2 to 8); "
                    "with 1 chunk it is plain 1F1B, so pick that schedule instead.",
                )
            if m % p:
                raise LabInputError(
                    "microbatches",
                    f"Interleaved 1F1B (as in Megatron-LM) sends micro-batches through each "
                    f"chunk in groups of one per stage, so the number of micro-batches must be "
                    f"a multiple of the {p} stages ({p}, {2 * p}, {3 * p}, ...); got {m}.",
                )
        if self.schedule == "dualpipe-v":
            if v > 2:
                raise LabInputError(
                    "virtual",
                    "DualPipeV always places exactly 2 model chunks on each stage (down the "
                    f"pipeline and back up, a V): set virtual to 2 (1 is read as 2); got {v}.",
                )
            if m < 2 * p:
                raise LabInputError(
                    "microbatches",
                    f"DualPipeV needs at least twice as many micro-batches as stages to fill "
                    f"both arms of the V: at least {2 * p} for {p} stages; got {m}.",
                )
        per_unit = 3 if self.schedule in SPLIT_BACKWARD else 2
        events = p * m * self.chunks * per_unit
        if events > MAX_EVENTS:
            raise LabInputError(
                "microbatches",
                f"That is too much work to simulate: stages x micro-batches x chunks per stage "
                f"x {per_unit} actions = {p} x {m} x {self.chunks} x {per_unit} = {events:,}, "
                f"above the limit of {MAX_EVENTS:,}. Use fewer micro-batches, stages or chunks.",
            )

    @property
    def chunks(self) -> int:
        """Model chunks per rank the schedule actually uses."""
        if self.schedule == "interleaved-1f1b":
            return self.virtual
        return 2 if self.schedule == "dualpipe-v" else 1


class Event(NamedTuple):
    """One action placed on the timeline of one rank (times in the units of f, b, w).

    A NamedTuple, not a frozen dataclass: just as immutable, and about five times cheaper
    to build, which matters with 65,536 of them per request.
    """

    rank: int
    kind: str  # "F", "B" (full backward), "I" (input gradient), "W" (weight gradient)
    microbatch: int
    chunk: int
    start: float
    end: float


@dataclass(frozen=True)
class PipelineResult:
    """A simulated schedule; every figure but ``textbook_bubble`` is measured off ``events``."""

    input: PipelineInput
    events: tuple[Event, ...]  # sorted by (rank, start)
    makespan: float  # last end; the run starts at 0
    bubble_fraction: float  # idle / (ranks * makespan), measured
    textbook_bubble: float  # (p-1)/(v*m+p-1), v = chunks for interleaved, else 1
    busy: tuple[float, ...]  # per rank
    peak_activations: tuple[int, ...]  # per rank, in micro-batch-chunk units
    activation_timeline: tuple[tuple[tuple[float, int], ...], ...]  # per rank (time, held)


def _events(rank: int, *columns: Sequence) -> list[Event]:
    """Events of one rank from columns: kinds, micro-batches, chunks, starts, ends."""
    # tuple.__new__ directly: what Event._make does, without its per-call Python frame.
    return list(map(partial(tuple.__new__, Event), zip(repeat(rank), *columns, strict=False)))


class ScheduleDeadlock(RuntimeError):
    """Internal: an action order that can never make progress (a generator bug)."""


def _plan(inp: PipelineInput) -> schedules.Plan:
    """Per-rank steps as plain tuples (the fast form of ``generate``)."""
    p, m = inp.stages, inp.microbatches
    if inp.schedule == "gpipe":
        return schedules.gpipe(p, m)
    if inp.schedule == "1f1b":
        return schedules.one_f_one_b(p, m)
    if inp.schedule == "interleaved-1f1b":
        return schedules.interleaved(p, m, inp.virtual)
    if inp.schedule == "zb-h1":
        return schedules.zb_h1(p, m)
    return schedules.dualpipe_v(p, m)


def generate(inp: PipelineInput) -> list[list[Action]]:
    """Per-rank ordered actions for ``inp.schedule`` (see ``labs.schedules``)."""
    return [[Action._make(step) for step in acts] for acts in _plan(inp)]


def _place(inp: PipelineInput, plan: schedules.Plan) -> tuple[list[list[float]], list[list[float]]]:
    """Earliest-start placement: per rank, the start and the end time of each action.

    A rank runs its actions one at a time in list order. F of piece k waits for F of
    piece k-1; B or I of piece k waits for the backward of piece k+1 (the last piece
    waits for its own F); W waits for the I of the same piece, on the same rank. A
    result made on another rank arrives p2p later. Each rank runs as far as it can; a
    blocked rank is parked on the one result it waits for and resumed when that result
    exists, so the work is linear in the number of actions.
    """
    p, m, c = inp.stages, inp.microbatches, inp.chunks
    npieces = p * c
    n = m * npieces
    owner = [0] * npieces
    for r in range(p):
        for j in range(c):
            owner[schedules.piece(inp.schedule, p, r, j)] = r

    def hop(k: int, dep: int) -> float:
        return inp.p2p if owner[k] != owner[dep] else 0.0

    # Results live in ``done`` at mb * npieces + k: forward ends in [0, n), backward (B
    # or I) ends in [n, 2n); -1 while not yet made. Per kind and piece: (offset of the
    # result the action makes, offset of the result it waits for, that result's
    # latency, duration); None when there is nothing to make or to wait for.
    tf, ti, tb, tw = inp.f / c, inp.b / c, (inp.b + inp.w) / c, inp.w / c
    fwd = [(0, None, 0.0, tf)] + [(0, -1, hop(k, k - 1), tf) for k in range(1, npieces)]
    back = [(n, n + 1, hop(k, k + 1)) for k in range(npieces - 1)] + [(n, 0, 0.0)]
    spec = {
        "F": fwd,
        "B": [s + (tb,) for s in back],
        "I": [s + (ti,) for s in back],
        "W": [(None, n, 0.0, tw)] * npieces,
    }
    done = [-1.0] * (2 * n)
    waiting: list[list[int] | None] = [None] * (2 * n)  # ranks parked on each result
    starts: list[list[float]] = [[] for _ in range(p)]
    ends: list[list[float]] = [[] for _ in range(p)]
    pos = [0] * p
    clock = [0.0] * p
    ready = list(range(p))
    while ready:
        r = ready.pop()
        acts, i, t = plan[r], pos[r], clock[r]
        begin, finish, count = starts[r].append, ends[r].append, len(acts)
        while i < count:
            kind, mb, _ch, k = acts[i]
            made, needs, delay, dur = spec[kind][k]
            idx = mb * npieces + k
            if needs is not None:
                got = done[idx + needs]
                if got < 0:
                    parked = waiting[idx + needs]
                    if parked is None:
                        waiting[idx + needs] = [r]
                    else:
                        parked.append(r)
                    break
                got += delay
                if got > t:
                    t = got
            begin(t)
            t += dur
            finish(t)
            if made is not None:
                done[idx + made] = t
                woken = waiting[idx + made]
                if woken is not None:
                    ready += woken
            i += 1
        pos[r], clock[r] = i, t
    stuck = [r for r in range(p) if pos[r] < len(plan[r])]
    if stuck:
        r = stuck[0]
        raise ScheduleDeadlock(
            f"{inp.schedule}: ranks {stuck} can never progress; rank {r} is stuck at "
            f"{plan[r][pos[r]]} (action {pos[r]} of {len(plan[r])})."
        )
    return starts, ends


def _activations(
    kinds: tuple[str, ...], starts: list[float], ends: list[float]
) -> tuple[tuple[tuple[float, int], ...], int]:
    """Step points (time, held after that time) for one rank, and the peak.

    A rank holds one unit from the start of F of (micro-batch, chunk) until the
    backward that consumes it has finished: the end of B or, for split schedules, the
    end of W, because the weight gradient needs the stored layer inputs (the
    zero-bubble paper also keeps them until W). Changes at the same instant are
    netted, so a release and a new forward at time t do not count twice. A rank's
    actions do not overlap, so these instants already come in time order.
    """
    steps = [(0.0, 0)]
    held = peak = 0
    last = 0.0
    for kind, start, end in zip(kinds, starts, ends, strict=True):
        if kind == "F":
            held += 1
            at = start
        elif kind == "I":
            continue
        else:
            held -= 1
            at = end
        if at == last:
            steps[-1] = (at, held)
        else:
            steps.append((at, held))
            last = at
        if held > peak:
            peak = held
    return tuple(steps), peak


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while tens of thousands of events are made.

    The events hold no reference cycles; without this, repeated collections of the
    growing young generation cost about a quarter of a large simulation's time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def simulate(inp: PipelineInput) -> PipelineResult:
    """Generate ``inp.schedule`` and place it in time; every figure is measured."""
    p = inp.stages
    with _gc_paused():
        plan = _plan(inp)
        starts, ends = _place(inp, plan)
        events: list[Event] = []
        timelines, peaks = [], []
        for r, acts in enumerate(plan):
            kinds, mbs, chunks, _pieces = zip(*acts, strict=True)
            events += _events(r, kinds, mbs, chunks, starts[r], ends[r])
            steps, peak = _activations(kinds, starts[r], ends[r])
            timelines.append(steps)
            peaks.append(peak)
        busy = tuple(math.fsum(map(operator.sub, ends[r], starts[r])) for r in range(p))
        makespan = max(ends[r][-1] for r in range(p))
        bubble = min(max(1.0 - math.fsum(busy) / (p * makespan), 0.0), 1.0)
        v = inp.chunks if inp.schedule == "interleaved-1f1b" else 1
        return PipelineResult(
            input=inp,
            events=tuple(events),
            makespan=makespan,
            bubble_fraction=bubble,
            textbook_bubble=(p - 1) / (v * inp.microbatches + p - 1),
            busy=busy,
            peak_activations=tuple(peaks),
            activation_timeline=tuple(timelines),
        )
