"""EP05's timeline engine: places each rank's ordered actions in time, reads activations off.

``place`` starts every action at the earliest time its rank is free and its inputs have
arrived; ``activations`` counts what a rank holds from those times. ``labs.schedules.simulate``
builds the result (``labs.schedules.inputs``) around them.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from labs.schedules.generators import Plan
from labs.schedules.inputs import PipelineInput


class ScheduleDeadlock(RuntimeError):
    """Internal: an action order that can never make progress (a generator bug)."""


def place(
    inp: PipelineInput, plan: Plan, owner: list[int]
) -> tuple[list[list[float]], list[list[float]]]:
    """Earliest-start placement: per rank, the start and the end time of each action.

    ``owner[k]`` is the rank that holds model piece k. A rank runs its actions one at a
    time in list order. F of piece k waits for F of piece k-1; B or I of piece k waits for
    the backward of piece k+1 (the last piece waits for its own F); W waits for the I of
    the same piece, on the same rank. A result made on another rank arrives
    ``inp.send_time`` later (a neighbour's send). Each rank runs as far as it can; a
    blocked rank is parked on the one result it waits for and resumed when that result
    exists, so the work is linear in the number of actions.
    """
    p, m, c = inp.stages, inp.microbatches, inp.chunks
    npieces = p * c
    n = m * npieces
    send = inp.send_time

    def hop(k: int, dep: int) -> float:
        return send if owner[k] != owner[dep] else 0.0

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


def activations(
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


_gc_lock = threading.Lock()
_gc_pausers = 0  # simulations in flight that asked for the collector to pause
_gc_was_enabled = True


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while tens of thousands of events are made.

    The events hold no reference cycles; without this, repeated collections of the
    growing young generation cost about a quarter of a large simulation's time. The web
    app runs simulations in several threads at once and the switch is process-wide, so the
    pauses are counted: the first one in turns the collector off, the last one out restores
    what was there before.
    """
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()
