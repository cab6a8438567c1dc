"""What hides behind what: one micro-batch on the slowest stage as two lanes, the compute stream
and the communication stream, read off the step model's own answer (``labs.recipe.lab.evaluate``:
``Timing.micro.comms`` and the DP part), never timed again.

The micro-batch drawn is the step's last, whose backward the gradient buckets run beside
(ZeRO-0/1/2: once a step; ZeRO-3 gathers and reduce-scatters every micro-batch). Each pass lays
out the same way:

- compute lane: the pass's kernels, then, kind by kind, what its collectives add to the critical
  path: the SMs lent (the compute beside an overlapped collective runs slower because NCCL's
  kernels hold SMs, ``state="sm"``) and the wait for what outlasts the compute
  (``state="exposed"``);
- communication lane: each collective's hidden seconds (its own seconds less the wait; the SMs
  it lends are the compute lane's), laid from the pass's start, and its exposed seconds, beside
  the compute lane's wait.

ZeRO-0/1/2's sync, once a step, is drawn collective by collective (``Leg``, read off the step
model's ``Part.buckets``): each group's gradient reduction (all-reduce, or reduce-scatter) on its
own lane ("dp": the dense layers' data-parallel group, "edp": the experts'), its buckets where the
step model runs them beside the last backward (``Buckets.runs``) and what they leave after it;
then the updated weights' all-gathers, which run beside the next step's first forward, off this
timeline: only the wait they leave that forward is drawn, after the reductions', where the step
bar charges it. The compute lane waits for each kind in turn: the reductions' tails, the
all-gathers' waits, the tied embeddings' all-reduce, as the step model adds them
(``labs.recipe.dp_time``: each less the pipeline's idle time that hides its part). With DP
overlap the two groups' legs of a collective run at once, each on its lane from the same
start, and the compute lane waits for the later (``labs.recipe.timing.group_wait``); without
it they run one after another and it waits for their sum.

The step bar charges exactly these exposed and SM seconds (``check``): per micro-batch for TP,
CP, EP, the pipeline sends and ZeRO-3; once a step for ZeRO-0/1/2's buckets. The bubble, uneven
stages and the optimizer step are not on this timeline.

SMs. The model charges the SMs an overlapped collective takes where it times them: EP overlap
at DeepSeek-V3's 20 SMs (arXiv:2412.19437 sec 3.2.2, ``labs.parallel.layer_time.COMM_SMS``),
ZeRO-3's gathers and reduce-scatters at NCCL's 16 ring CTAs, one SM each
(``labs.hardware.nccl_constants.RING_CTAS``, NVIDIA/nccl#1453). It leaves uncharged the same
16 SMs under TP's and CP's hidden collectives and ZeRO-0/1/2's hidden buckets, so there the lab
errs fast:
``uncharged_sm_s`` is f × hidden, f = 16 / SMs, the most those SMs could add.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.hardware.nccl import sm_share
from labs.parallel.layer_time import COMM_SMS
from labs.recipe.inputs import RecipeResult
from labs.recipe.timing import Part, concurrent, group_wait

KINDS = ("tp", "cp", "ep", "sends", "dp")
LABELS = {"tp": "TP collectives", "cp": "CP ring", "ep": "EP all-to-all",
          "sends": "Pipeline sends", "dp": "DP / ZeRO sync"}


@dataclass(frozen=True)
class Event:
    lane: str  # "compute" or "comm"
    phase: str  # "forward", "backward" or "after" (the step's DP wait)
    kind: str  # "kernels" or one of KINDS
    state: str  # "compute", "hidden", "exposed", "sm"
    start: float  # seconds from the micro-batch's start
    seconds: float
    # ZeRO-0/1/2's sync (Timeline.sync): the collective ("reduce_scatter", ...) and its group
    # (Leg.group; "" on the compute lane, where one wait sums the groups' of a collective)
    collective: str = ""
    group: str = ""


@dataclass(frozen=True)
class Leg:
    """One collective of ZeRO-0/1/2's sync on one group, once a step, as the step model charges
    it (``Part.buckets``; the tied embeddings' all-reduce, ``Part.tie``)."""

    kind: str  # "all_reduce", "reduce_scatter" (the gradients) or "all_gather" (the weights)
    group: str  # "dense", "experts" or "tied" (the tied embeddings' all-reduce)
    buckets: int
    seconds: float  # all its buckets, one after another
    hidden: float  # beside the last backward (a reduction) or the next forward (a gather)
    idle: float  # hidden in the pipeline's idle time (after the last backward, or before the
    # first forward), not drawn
    exposed: float  # what the step waits for it
    # beside the other group's leg of its collective (DP overlap: each group on its own
    # communicator, ``labs.recipe.timing.group_wait``), or after it (without overlap)
    concurrent: bool = False

    @property
    def lane(self) -> str:
        return "edp" if self.group == "experts" else "dp"


@dataclass(frozen=True)
class Timeline:
    events: tuple[Event, ...]
    microbatches: int
    zero: int
    exposed: dict[str, float]  # per kind: exposed + SM seconds on this timeline
    sm_share: dict[str, float]  # per kind: the share of SMs its kernels hold
    charged_sm_s: float  # SM seconds the step charges (EP overlap, ZeRO-3)
    uncharged_sm_s: float  # f x hidden where the model charges no SMs (the lab errs fast)
    sync: tuple[Leg, ...] = ()  # ZeRO-0/1/2: the step's DP sync, collective by collective

    @property
    def seconds(self) -> float:
        return max((e.start + e.seconds for e in self.events), default=0.0)

    @property
    def compute_end(self) -> float:
        """Where the compute stream ends (its last kernel or wait): with DP overlap on, the
        hidden buckets can run on past it on the communication stream (``seconds``)."""
        return max((e.start + e.seconds for e in self.events if e.lane == "compute"),
                   default=0.0)

    def charged(self) -> dict[str, float]:
        """What the step bar charges for each kind, read back from this timeline: m x the
        micro-batch's, ZeRO-0/1/2's DP once."""
        m = self.microbatches
        return {k: v * (1 if k == "dp" and self.zero < 3 else m)
                for k, v in self.exposed.items()}


class _Lanes:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.exposed = dict.fromkeys(KINDS, 0.0)

    def add(self, *args, **kw) -> None:
        event = Event(*args, **kw)
        if event.seconds > 0:
            self.events.append(event)

    def pass_(self, phase: str, start: float, kernels: float,
              comms: list[tuple[str, float, float, float]]) -> float:
        """One pass from ``start``: (kind, seconds, exposed, of it SMs) each; its end."""
        self.add("compute", phase, "kernels", "compute", start, kernels)
        t, c = start + kernels, start
        for kind, seconds, exposed, sm in comms:
            # The collective runs its whole seconds: what the compute stream does not wait
            # for is hidden, and the SMs it holds slow the compute lane, not the collective
            # (round-27 reading A, finding 2: EP overlap's bar was drawn 20/132 short).
            hidden = seconds - (exposed - sm)
            self.add("comm", phase, kind, "hidden", c, hidden)
            c += hidden
            self.add("compute", phase, kind, "sm", t, sm)
            t += sm
            self.add("compute", phase, kind, "exposed", t, exposed - sm)
            self.add("comm", phase, kind, "exposed", t, exposed - sm)
            t += exposed - sm
            self.exposed[kind] += exposed
        return t


def timeline(result: RecipeResult) -> Timeline | None:
    """The step's last micro-batch on the slowest stage (module docstring); None for a plan
    that cannot run."""
    if not result.legal or result.timing is None:
        return None
    timing, plan = result.timing, result.plan
    u, m = timing.micro, plan.microbatches
    dp = next(p for p in timing.parts if p.name == "dp")
    comms = {(p, k): (s, e, sm) for p, k, s, e, sm in u.comms}
    lanes = _Lanes()
    per_pass = []
    for phase in ("forward", "backward"):
        rows = [(k, *comms[phase, k]) for k in ("tp", "cp", "ep") if (phase, k) in comms]
        rows.append(("sends", u.sends / 2, u.sends / 2, 0.0))  # one hop chain each way
        if plan.zero == 3:
            f_total, f_exposed, f_sm = dp.forward
            total, exposed, sm = (f_total, f_exposed, f_sm) if phase == "forward" \
                else (dp.seconds - f_total, dp.exposed - f_exposed, dp.sm - f_sm)
            rows.append(("dp", total / m, exposed / m, sm / m))
        per_pass.append(rows)
    forward = u.compute_forward
    end = lanes.pass_("forward", 0.0, forward, per_pass[0])
    backward_start = end
    end = lanes.pass_("backward", backward_start, u.compute_backward, per_pass[1])
    share = sm_share(result.cluster)
    hidden_uncharged = math.fsum(s - e for p, k, s, e, _ in u.comms if k in ("tp", "cp"))
    sync: tuple[Leg, ...] = ()
    if plan.zero < 3:
        sync = legs(dp)
        _draw_sync(lanes, dp, sync, end)
        hidden_uncharged += dp.seconds - dp.exposed
    kern = result.cluster.gpu.kernels
    ep_share = min(1.0, COMM_SMS / kern.sm_count) if kern else 0.0
    charged = math.fsum(e.seconds for e in lanes.events if e.state == "sm")
    return Timeline(tuple(lanes.events), m, plan.zero, lanes.exposed,
                    {"tp": share, "cp": share, "ep": ep_share if plan.ep_overlap else share,
                     "sends": 0.0, "dp": share}, charged, share * hidden_uncharged, sync)


def _share(amount: float, parts: list[float]) -> list[float]:
    """``amount`` laid over ``parts`` in order, each taking what it can: the step waits for
    the first ``amount`` seconds of what is left, and the pipeline's idle time hides the rest
    (``labs.recipe.layer_view``'s order)."""
    out, before = [], 0.0
    for x in parts:
        out.append(min(x, max(0.0, amount - before)))
        before += x
    return out


def legs(dp: Part) -> tuple[Leg, ...]:
    """ZeRO-0/1/2's sync on the slowest stage, collective by collective, as the step model
    charges it (``labs.recipe.dp_time._stage_dp``): the reductions leave what runs past the
    last backward, of which the pipeline's idle time after it hides up to ``dp.idle[1]``;
    the gathers leave the next forward's wait, of which the idle time before the stage's
    first forward hides up to ``dp.idle[0]``; the tied embeddings' all-reduce waits whole.
    With DP overlap the groups run at once (``labs.recipe.timing.group_wait``): each group's
    leg waits its own tail, less the idle time, and the step waits for the later; without it
    they run one after another and the step waits for their sum. The step's DP segment is,
    each way, the later (or the sum) of the legs' exposed seconds (``wait_of``), then the tied
    embeddings'."""
    reductions = [b for b in dp.buckets if b.kind != "all_gather"]
    gathers = [b for b in dp.buckets if b.kind == "all_gather"]
    out = []
    for rows, idle in ((reductions, dp.idle[1]), (gathers, dp.idle[0])):
        left = [b.exposed for b in rows]
        step = max(0.0, group_wait(rows) - idle)
        waited = ([min(x, step) for x in left] if concurrent(rows) else _share(step, left))
        out += [Leg(b.kind, b.group, b.count, b.seconds, b.seconds - x, x - w, w,
                    concurrent(rows)) for b, x, w in zip(rows, left, waited, strict=True)]
    if dp.tie > 0:
        out.append(Leg("all_reduce", "tied", 1, dp.tie, 0.0, 0.0, dp.tie))
    return tuple(out)


def wait_of(legs_: list[Leg]) -> float:
    """What the compute stream waits for one collective's legs: the later of them where
    they run at once (DP overlap), else their sum; the step model's own rule
    (``labs.recipe.timing.group_wait``), read off the legs."""
    exposed = [leg.exposed for leg in legs_]
    if legs_ and all(leg.concurrent for leg in legs_):
        return max(exposed)
    return math.fsum(exposed)


def _draw_sync(lanes: _Lanes, dp: Part, sync: tuple[Leg, ...], end: float) -> None:
    """The sync's legs (``legs``) on their lanes. Beside the backward (which ends at ``end``,
    its last ``window_s`` the window the buckets run in), each reduction's buckets, runs of
    them back to back as one bar; after it, the compute stream waits for the reductions'
    tails, then for the gathers' waits, then the tied embeddings', each group's part on its
    lane beside it."""
    reductions = [b for b in dp.buckets if b.kind != "all_gather"]
    for leg, b in zip(sync, reductions, strict=False):
        runs: list[list[float]] = []
        for _, s0, s1 in b.runs():
            s1 = min(s1, b.window_s)
            if s1 <= s0:
                continue
            if runs and s0 <= runs[-1][1] + 1e-12 * b.window_s:
                runs[-1][1] = s1
            else:
                runs.append([s0, s1])
        for s0, s1 in runs:
            lanes.add(leg.lane, "backward", "dp", "hidden", end - b.window_s + s0, s1 - s0,
                      collective=leg.kind, group=leg.group)
    t = end
    for step in ("reduce", "gather", "tied"):
        mine = [leg for leg in sync if leg.exposed > 0 and step == (
            "gather" if leg.kind == "all_gather" else "tied" if leg.group == "tied"
            else "reduce")]
        if not mine:
            continue
        wait = wait_of(mine)
        lanes.add("compute", "after", "dp", "exposed", t, wait, collective=mine[0].kind,
                  group="tied" if step == "tied" else "")
        at = t
        for leg in mine:  # each group's wait on its lane: at once, or one after another
            lanes.add(leg.lane, "after", "dp", "exposed", t if leg.concurrent else at,
                      leg.exposed, collective=leg.kind, group=leg.group)
            at += leg.exposed
        t += wait
        lanes.exposed["dp"] += wait


def check(result: RecipeResult, line: Timeline) -> dict[str, float]:
    """Each kind's charge on the timeline against the step bar's segment, relative
    difference (0: the same computation)."""
    seg = result.segments
    return {k: abs(v - seg[k]) / max(seg[k], 1e-12) for k, v in line.charged().items()}
