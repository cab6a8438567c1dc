"""The failures lab's shapes: what it is asked (``FailuresInput``, every control checked where
it is built, in page order) and what it answers (``Checkpoint``, ``Goodput``, ``FailuresResult``).
``labs.failures.lab`` computes them."""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.limits import (
    HOST_LINKS,
    MAX_FAIL_BW,
    MAX_FAIL_GPUS,
    MAX_FAIL_INTERVAL,
    MAX_FAIL_MTBI,
    MAX_FAIL_RESTART,
    MAX_FAIL_STEP,
    MAX_FAIL_STEPS,
    MIN_FAIL_BW,
    MIN_FAIL_MTBI,
    MIN_FAIL_STEP,
    SAVE_MODES,
)
from labs.core.validate import number, one_of, whole
from labs.hardware.links import Link
from labs.model.spec import ModelSpec


@dataclass(frozen=True)
class FailuresInput:
    """One training job: its model (the checkpoint's bytes), its GPUs and their interruption
    rate, its step, how it saves and how long a restart takes."""

    model: ModelSpec
    gpus: int
    gpu_mtbi: float  # seconds between interruptions a single GPU's share of the cluster causes
    step_s: float  # one training step on ``step_gpus`` GPUs
    step_gpus: int  # the GPUs ``step_s`` was timed on (the job's size in GPU-seconds a step)
    steps: int  # the job's steps
    save: str  # "sync" | "async" | "peer"
    storage_bw: float  # bytes/s the file system takes, all writers together
    host_link: Link  # the GPU's link to host memory (an async save's copy)
    interval: float  # seconds of training between checkpoints
    restart: float  # seconds from the failure to training again (reschedule, init, load)
    # The step a step model timed for this job at other cluster sizes, the batch fixed:
    # (GPUs, seconds), ``step_gpus`` among them (EP08's engine on Llama 3's layout,
    # app.routers.failures_state.engine_steps); empty: every size scaled ideally.
    timed: tuple[tuple[int, float], ...] = ()

    def step_at(self, gpus: int) -> tuple[float, bool]:
        """The step on ``gpus`` GPUs, and whether it was timed: a timed size's own step;
        elsewhere ideal strong scaling (1/N) from the largest timed size below (or the
        smallest), or from ``step_s`` on ``step_gpus`` when nothing is timed. Ideal errs fast
        past the sizes timed: communication and the pipeline's bubble do not shrink as 1/N."""
        table = dict(self.timed)
        if gpus in table:
            return table[gpus], True
        if not table:
            return self.step_s * self.step_gpus / gpus, False
        base = max((n for n in table if n <= gpus), default=min(table))
        return table[base] * base / gpus, False

    def step_held(self, gpus: int) -> float | None:
        """The step on ``gpus`` GPUs were it no faster than on the size ``step_at`` scales it
        from (the largest timed size below, or ``step_gpus`` when nothing is timed): the
        other edge of an ideal step's range. None where the step is timed, or ideal from a
        larger size (no speed-up to hold back)."""
        table = dict(self.timed)
        if gpus in table:
            return None
        below = [n for n in table if n <= gpus] if table else (
            [self.step_gpus] if self.step_gpus <= gpus else [])
        if not below:
            return None
        base = max(below)
        return table[base] if table else self.step_s

    @property
    def step_here(self) -> float:
        """The step on the job's ``gpus`` GPUs (``step_at``)."""
        return self.step_at(self.gpus)[0]

    def __post_init__(self) -> None:  # page order
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset or a custom parameter count")
        whole("gpus", self.gpus, 1, MAX_FAIL_GPUS, "the GPUs of the job")
        number("gpu_mtbi", self.gpu_mtbi, MIN_FAIL_MTBI, MAX_FAIL_MTBI,
               "a GPU's mean time between interruptions (seconds)")
        number("step_s", self.step_s, MIN_FAIL_STEP, MAX_FAIL_STEP, "the step time (seconds)")
        whole("step_gpus", self.step_gpus, 1, MAX_FAIL_GPUS, "the GPUs the step was timed on")
        whole("steps", self.steps, 1, MAX_FAIL_STEPS, "the job's steps")
        one_of("save", self.save, SAVE_MODES, "the save")
        number("storage_bw", self.storage_bw, MIN_FAIL_BW, MAX_FAIL_BW,
               "the storage bandwidth (bytes/s)")
        if not isinstance(self.host_link, Link) or self.host_link.id not in HOST_LINKS:
            raise LabInputError("host_link",
                                f"the host link must be one of {', '.join(HOST_LINKS)}")
        number("interval", self.interval, 1.0, MAX_FAIL_INTERVAL,
               "the checkpoint interval (seconds)")
        number("restart", self.restart, 0.0, MAX_FAIL_RESTART, "the restart time (seconds)")
        for n, step in self.timed:
            whole("gpus", n, 1, MAX_FAIL_GPUS, "the GPUs of a timed step")
            number("step_s", step, MIN_FAIL_STEP, MAX_FAIL_STEP, "a timed step (seconds)")


@dataclass(frozen=True)
class Checkpoint:
    """What one save costs: its bytes (the ledger's), the write and the blocking."""

    weights_bytes: float
    master_bytes: float
    moments_bytes: float
    total_bytes: float  # the whole job's checkpoint
    bytes_per_gpu: float  # each rank writes its own shard
    write_s: float  # total ÷ storage bandwidth
    copy_s: float  # one GPU's shard ÷ host link bandwidth (async's and peer's blocking)
    send_s: float  # one GPU's shard ÷ its network port (a peer save's background send)
    cost_s: float  # δ of Young and Daly: write_s (sync) or copy_s (async, peer)
    block_s: float  # training stopped per save at the chosen interval
    lag_s: float  # how much older the newest durable checkpoint is than the newest save


@dataclass(frozen=True)
class Goodput:
    """Where wall time goes at one interval: each share of the wall clock, summing to 1."""

    interval: float
    goodput: float  # useful: steps that count
    blocking: float  # training stopped for saves
    rework: float  # steps redone after failures
    restart: float  # restarting after failures
    finish_days: float | None  # the job's wall time; None when no step ever counts


@dataclass(frozen=True)
class ScalePoint:
    gpus: int
    mtbi_s: float
    per_day: float
    step_s: float
    step_timed: bool  # the step timed by a step model (FailuresInput.timed), not ideal
    sync: Goodput  # each at its own best interval (Daly's, floored)
    async_: Goodput
    peer: Goodput
    # Where the step is ideal (not timed), each save again (sync, async, peer) with the step
    # held at the size it is scaled from (FailuresInput.step_held): the days' other edge, no
    # speed-up past the sizes timed (round-14 cold reading of EP11, finding 12d). Else empty.
    held: tuple[Goodput, ...] = ()


@dataclass(frozen=True)
class FailuresResult:
    input: FailuresInput
    mtbi_s: float  # the job's mean time between interruptions
    per_day: float  # interruptions per day
    step_s: float  # the step on the job's GPUs
    checkpoint: Checkpoint
    young_s: float  # sqrt(2 δ M)
    daly_s: float  # Daly 2006's higher-order optimum
    floor_s: float  # the shortest interval the save allows (a step; async: the write too;
    # peer: the send)
    best_s: float  # max(Daly, floor), rounded up to whole steps
    chosen: Goodput
    best: Goodput
    intervals: tuple[Goodput, ...]  # the interval sweep
    scale: tuple[ScalePoint, ...]  # the cluster-size sweep
