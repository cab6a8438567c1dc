"""EP05's shapes: a pipeline to simulate (``PipelineInput``, every field checked where it is
built, with the rules each schedule sets on its shape) and what the simulation measures
(``PipelineResult``, its ``Event`` per action). ``labs.schedules.simulate`` runs it;
``labs.schedules.timeline`` places its actions in time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from labs.core.errors import LabInputError
from labs.core.limits import MAX_MICROBATCHES, MAX_STAGES, MAX_VIRTUAL
from labs.core.validate import (
    COST_ABOVE_ZERO,
    COST_FROM_ZERO,
    SEND_ABOVE,
    SEND_FROM,
    WHOLE_COUNT,
    number,
    one_of,
    whole,
)
from labs.schedules import wire
from labs.schedules.catalogue import CATALOGUE, SCHEDULES
from labs.schedules.generators import rounds

# Bound on the actions simulated (events drawn): p*m*chunks units of work, each 2 actions
# (F, B) or 3 for split schedules (F, I, W). 65,536 admits p=32, m=256, v=4 interleaved,
# which simulates in under 100 ms here (tests/benchmarks/bench.py).
MAX_EVENTS = 65536

MAX_COST = 1000.0


def _accepted_rounds(p: int, m: int) -> str:
    """The micro-batch counts nearest m that split into whole rounds (for the message)."""
    def splits(n: int) -> bool:
        return 1 <= n <= MAX_MICROBATCHES and n % rounds(p, n)[0] == 0

    below = next((n for n in range(m - 1, 0, -1) if splits(n)), None)
    above = next((n for n in range(m + 1, MAX_MICROBATCHES + 1) if splits(n)), None)
    return " or ".join(str(n) for n in (below, above) if n is not None)


def check_shape(schedule: str, p: int, m: int, v: int) -> None:
    """The rules a schedule sets on stages p, micro-batches m and chunks v (no bound on
    the work to simulate), as the schedule's record in ``labs.schedules.catalogue`` marks
    them: one source for this lab and the memory ledger."""
    record = CATALOGUE[schedule]
    name = record.name
    if record.interleaved and v < 2:
        raise LabInputError(
            "virtual",
            f"{name} needs at least 2 model chunks per stage (virtual 2 to {MAX_VIRTUAL}); "
            f"with 1 chunk it is plain {SCHEDULES[record.plain]}, so pick that schedule instead.",
        )
    if record.rounds and m % rounds(p, m)[0]:
        count = rounds(p, m)[0]
        raise LabInputError(
            "microbatches",
            f"{name} (as PyTorch runs it) sends the micro-batches through the chunks in "
            f"max(1, m // p) = {count} rounds of equal size, so with {p} stages {m} "
            f"micro-batches do not split; {_accepted_rounds(p, m)} would.",
        )
    if record.v_shape and v > 2:
        raise LabInputError(
            "virtual",
            f"{name} always places exactly 2 model chunks on each stage (down the "
            f"pipeline and back up, a V): set virtual to 2 (1 is read as 2); got {v}.",
        )
    if record.fill > 1 and m < record.fill * p:
        raise LabInputError(
            "microbatches",
            f"{name} needs at least {record.fill_reason}: at least {record.fill * p} for {p} "
            f"stages; got {m}.",
        )


@dataclass(frozen=True)
class PipelineInput:
    """One pipeline to simulate; every field is validated on construction.

    ``f``, ``b`` and ``w`` are the times of one micro-batch through a whole stage (all
    its chunks); a chunk costs f/c, b/c, w/c with c chunks per stage, so interleaving
    keeps the total work constant. Schedules that do not split the backward run one
    B of time b + w. ``virtual`` only matters for the interleaved family (interleaved-1f1b,
    looped-bfs, interleaved-zb: 2..8 chunks) and the V shapes (zb-v, dualpipe-v: always 2
    chunks, 1 or 2 accepted); the other schedules use 1 chunk.

    The send between stages: ``p2p``, in the units of f, if given (the manual override);
    otherwise from the link, ``link_latency + boundary_bytes / link_bandwidth`` seconds,
    put in f's units by ``forward_seconds`` (what f stands for, in seconds); with neither,
    sends are free. ``boundary_bytes`` (see ``labs.schedules.wire.boundary_bytes``) also gives
    the bytes on the wire, counted with or without a link.
    """

    schedule: str = "1f1b"
    stages: int = 4
    microbatches: int = 8
    virtual: int = 1
    f: float = 1.0
    b: float = 1.0
    w: float = 1.0
    p2p: float | None = None
    boundary_bytes: float = 0.0
    link_bandwidth: float | None = None
    link_latency: float = 0.0
    forward_seconds: float | None = None

    def __post_init__(self) -> None:
        one_of("schedule", self.schedule, SCHEDULES, "schedule",
               "Unknown schedule {value!r}; choose one of {choices}.")
        whole("stages", self.stages, 1, MAX_STAGES, "pipeline stages", WHOLE_COUNT)
        whole("microbatches", self.microbatches, 1, MAX_MICROBATCHES, "micro-batches",
              WHOLE_COUNT)
        whole("virtual", self.virtual, 1, MAX_VIRTUAL, "model chunks per stage (virtual)",
              WHOLE_COUNT)
        costs = [("f", "forward time", False), ("b", "backward (input-gradient) time", False),
                 ("w", "weight-gradient time", True)]
        if self.p2p is not None:
            costs.append(("p2p", "point-to-point send time", True))
        for name, what, zero_ok in costs:
            cost = number(name, getattr(self, name), 0, MAX_COST, what,
                          COST_FROM_ZERO if zero_ok else COST_ABOVE_ZERO, low_ok=zero_ok)
            object.__setattr__(self, name, cost)
        self._check_wire()
        self._check_shape()
        per_unit = 3 if self.split_backward else 2
        p, m = self.stages, self.microbatches
        events = p * m * self.chunks * per_unit
        if events > MAX_EVENTS:
            raise LabInputError(
                "microbatches",
                f"That is too much work to simulate: stages x micro-batches x chunks per stage "
                f"x {per_unit} actions = {p} x {m} x {self.chunks} x {per_unit} = {events:,}, "
                f"above the limit of {MAX_EVENTS:,}. Use fewer micro-batches, stages or chunks.",
            )

    def _check_wire(self) -> None:
        def put(name: str, low: float, high: float, what: str, low_ok: bool) -> None:
            value = number(name, getattr(self, name), low, high, what,
                           SEND_FROM if low_ok else SEND_ABOVE, low_ok=low_ok)
            object.__setattr__(self, name, value)

        put("boundary_bytes", 0.0, wire.MAX_SEND_BYTES, "bytes sent per boundary", True)
        put("link_latency", 0.0, wire.MAX_LATENCY, "link latency in seconds", True)
        if self.link_bandwidth is not None:
            put("link_bandwidth", wire.MIN_BANDWIDTH, wire.MAX_BANDWIDTH,
                "link bandwidth in bytes/s", True)
        elif self.link_latency:
            raise LabInputError("link_bandwidth", "A link latency was given without the link's "
                                "bandwidth (bytes/s); give both, or neither.")
        if self.forward_seconds is not None:
            put("forward_seconds", 0.0, wire.MAX_FORWARD_SECONDS, "forward time in seconds",
                False)
        if self.p2p is None and self.link_bandwidth is not None:
            if self.forward_seconds is None:
                raise LabInputError(
                    "forward_seconds",
                    "To put the link's send time on the timeline the lab needs what f is in "
                    "seconds (one micro-batch's forward through a stage); or type the send "
                    "time yourself (p2p).",
                )
            if self.send_time > MAX_COST:
                raise LabInputError(
                    "link_bandwidth",
                    f"On this link one send takes {self.send_seconds:.3g} s, "
                    f"{self.send_time:,.0f} times f; the lab draws sends up to {MAX_COST:g} "
                    "times f. Use a faster link or fewer bytes per send.",
                )

    def _check_shape(self) -> None:
        check_shape(self.schedule, self.stages, self.microbatches, self.virtual)

    @property
    def interleaved(self) -> bool:
        """v chunks per rank: the textbook bubble is (p-1)/(v*m+p-1)."""
        return CATALOGUE[self.schedule].interleaved

    @property
    def split_backward(self) -> bool:
        """The backward runs as I (input gradient) and W (weight gradient)."""
        return CATALOGUE[self.schedule].split_backward

    @property
    def chunks(self) -> int:
        """Model chunks per rank the schedule actually uses."""
        return CATALOGUE[self.schedule].chunks(self.virtual)

    @property
    def send_seconds(self) -> float | None:
        """One send on the link (latency + bytes / bandwidth), None without a link."""
        if self.link_bandwidth is None:
            return None
        return wire.send_seconds(self.boundary_bytes, self.link_bandwidth, self.link_latency)

    @property
    def send_time(self) -> float:
        """The send time on the timeline, in f's units: p2p if given, else from the link."""
        if self.p2p is not None:
            return self.p2p
        seconds = self.send_seconds
        if seconds is None or self.forward_seconds is None:
            return 0.0
        return seconds * self.f / self.forward_seconds


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
    textbook_bubble: float  # (p-1)/(v*m+p-1), v = chunks for INTERLEAVED, else 1 (catalogue)
    busy: tuple[float, ...]  # per rank
    peak_activations: tuple[int, ...]  # per rank, in micro-batch-chunk units
    activation_timeline: tuple[tuple[tuple[float, int], ...], ...]  # per rank (time, held)
    send_time: float  # one send between stages on the timeline, in f's units
    send_seconds: float | None  # one send on the link, seconds; None without a link
    sends: tuple[int, ...]  # per rank: activations sent forward + gradients sent back
    wire_bytes: tuple[float, ...]  # per rank: sends x boundary_bytes

    @property
    def idle_over_ideal(self) -> float:
        """The same measured idle time over the ideal time (the busy time), not over the step:
        the papers' form of the bubble, (p-1)/m for 1F1B with equal stages and (p-1)/(v*m)
        interleaved (Narayanan et al. 2021 sec 2.2.1-2.2.2), where ``bubble_fraction`` is
        GPipe's (p-1)/(m+p-1) of the step (Huang et al. 2019 sec 2.3). Each is the other's
        f/(1-f) and f/(1+f)."""
        return self.bubble_fraction / (1.0 - self.bubble_fraction)  # < 1: some rank works

    @property
    def wire_seconds(self) -> tuple[float, ...] | None:
        """Per rank: the link time of all its sends, one after the other; None without link."""
        if self.send_seconds is None:
            return None
        return tuple(n * self.send_seconds for n in self.sends)
