"""The render pool's lanes (app/render_pool.py): where a lab answer waits for a child, and
when it is refused instead.

A miss comes with its expected cost (app/lanes.py) and waits in the light or the heavy lane
(which children draw which lane is the pool's: app/render_pool.py).
Bounded and fair: a client (its address, as uvicorn reports it: behind a proxy, the
forwarded one) may have CLIENT_QUEUE answers queued or drawn per lane, and its k-th waits
behind every other client's first k: each answer takes the client's next round of the
lane, never before the round being drawn (start-time fair queuing, Goyal, Vin & Cheng,
SIGCOMM 1996, with one unit per answer), so a class behind one address (one NAT, the
benchmark's loopback) is served in the order it asked and no answer waits for ever
behind later, cheaper ones (issue 31: counting only what a client held let answers asked
later jump ahead until the 10 s deadline). A lane holds LANE_QUEUE waiting answers per
child that may take them. Past either, :class:`Busy`: a 429 with Retry-After from the
lane's measured render time (a flood gets 429s or its answers, never a hang; 503 is kept
for a render that broke its deadline).
The wait has the render's deadline (RENDER_TIMEOUT) too: past it, a 429 (no request hangs
in a lane).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from dataclasses import dataclass, field

from app.lanes import HEAVY, LIGHT, Cost
from app.settings import SETTINGS

# One client's answers queued or being drawn, per lane: a browser opens 6 connections to a
# site; a page of embeds, or a class behind one address, may ask more at once.
CLIENT_QUEUE = {LIGHT: 32, HEAVY: 2}
# Answers waiting in a lane, per child that takes it. Light answers take 1-25 ms: 128 of them
# are at most a few hundred ms of a child's work, so a class's burst of misses (or a few
# seconds of a CPU taken by something else) is drawn late rather than refused; 32 refused
# answers a class would have had within 0.2-0.6 s (issue 31: 29 429s in 90 s for 1,000
# students on a machine shared with other jobs). The deadline bounds the wait either way.
LANE_QUEUE = {LIGHT: 128, HEAVY: 2}


class Busy(Exception):
    """The pool will not draw this answer now: 429 (the client has enough queued, the lane is
    full, or the answer waited past the deadline to start) or 503 (its render passed the
    deadline, and its child is being replaced). ``retry_after`` in whole seconds."""

    def __init__(self, status: int, retry_after: int, message: str) -> None:
        super().__init__(message)
        self.status, self.retry_after, self.message = status, retry_after, message


@dataclass(eq=False)
class Job:
    scope: dict
    cost: Cost
    client: str | None
    future: asyncio.Future
    round: int = 0  # the client's round of the lane it waits in (FairLanes._enqueue)
    timer: asyncio.TimerHandle | None = None
    started: float | None = None
    gone: bool = False  # its request stopped waiting


@dataclass(eq=False)
class Lane:
    waiting: list = field(default_factory=list)  # heap of (round, ms, order, job)
    seconds: float = 0.0  # measured render time (moving average), for Retry-After
    round: int = 0  # the round of the answer drawn last


class FairLanes:
    """The lanes' waiting answers and each client's share of them, with their bounds and the
    deadline on a wait: what the render pool (a subclass) draws from. Used from the event
    loop thread only."""

    def __init__(self) -> None:
        self.timeout = float(SETTINGS.render_timeout)
        self.refused = {429: 0, 503: 0}
        self.lanes = {LIGHT: Lane(), HEAVY: Lane()}
        self.held: dict[tuple[str | None, str], int] = {}  # answers queued or drawn
        self.rounds: dict[tuple[str | None, str], int] = {}  # the last round each took
        self.order = itertools.count()

    def _enqueue(self, job: Job) -> None:
        """A client's k-th answer waits behind every other client's first k (one client's
        burst cannot push a classmate back): it takes the client's next round, and never one
        before the lane's (so an answer asked later never takes an earlier round). In a
        round, the cheapest first in the light lane (a 5 ms answer does not wait behind a
        40 ms one), then in the order they came."""
        lane = job.cost.lane
        key = (job.client, lane)
        job.round = max(self.rounds.get(key, 0), self.lanes[lane].round) + 1
        self.rounds[key] = job.round
        heapq.heappush(self.lanes[lane].waiting, (
            job.round, job.cost.ms if lane == LIGHT else 0.0, next(self.order), job))
        job.timer = asyncio.get_running_loop().call_later(self.timeout, self._waited_too_long,
                                                          job)
        self.held[key] = self.held.get(key, 0) + 1

    def _admit(self, client: str | None, lane: str, takers: int, cost: Cost) -> None:
        held = self.held.get((client, lane), 0)
        if held >= CLIENT_QUEUE[lane]:
            self.refused[429] += 1
            raise Busy(429, self._retry_after(lane, held, 1),
                       f"You have {held} answers like this one being drawn already (at most "
                       f"{CLIENT_QUEUE[lane]}); wait for them, then ask again.")
        waiting = len(self.lanes[lane].waiting)
        if waiting >= LANE_QUEUE[lane] * takers:
            self.refused[429] += 1
            retry = self._retry_after(lane, waiting + takers, takers)
            raise Busy(429, retry, f"The lab is busy drawing {waiting + takers} large answers "
                                   f"like this one ({cost.what}); try again in {retry} s.")

    def _retry_after(self, lane: str, jobs: int, takers: int) -> int:
        seconds = self.lanes[lane].seconds or (1.0 if lane == HEAVY else 0.05)
        return max(1, min(math.ceil(jobs * seconds / takers), math.ceil(self.timeout)))

    def _release(self, job: Job) -> None:
        """The job's request no longer waits (answered, refused or gone): its client holds one
        fewer in the lane."""
        job.gone = True
        key = (job.client, job.cost.lane)
        self.held[key] -= 1
        if not self.held[key]:  # its rounds are all drawn: bounded by the held
            del self.held[key]
            self.rounds.pop(key, None)

    def _next(self, lane: str) -> Job | None:
        waiting = self.lanes[lane].waiting
        while waiting:
            *_, job = heapq.heappop(waiting)
            if not job.gone and not job.future.done():
                job.timer.cancel()
                self.lanes[lane].round = max(self.lanes[lane].round, job.round)
                return job
        return None

    def _measured(self, lane: str, took: float) -> None:
        """A render of the lane took ``took`` s: its moving average, for Retry-After."""
        measured = self.lanes[lane]
        measured.seconds = took if not measured.seconds else 0.8 * measured.seconds + 0.2 * took

    @staticmethod
    def _settle(job: Job, answer=None, error: BaseException | None = None) -> None:
        if job.timer is not None:
            job.timer.cancel()
        if job.future.done():
            return
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(answer)

    def _waited_too_long(self, job: Job) -> None:
        """A deadline on the wait, too: no request hangs in a queue (its answer would be
        late anyway)."""
        if job.started is None:
            self.refused[429] += 1
            self._settle(job, error=Busy(
                429, self._retry_after(job.cost.lane, 1, 1),
                f"The lab was too busy to start drawing {job.cost.what} within "
                f"{self.timeout:g} s; try again in a moment."))
