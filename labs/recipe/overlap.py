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
- communication lane: each collective's hidden seconds, laid from the pass's start, and its
  exposed seconds, beside the compute lane's wait.

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


@dataclass(frozen=True)
class Timeline:
    events: tuple[Event, ...]
    microbatches: int
    zero: int
    exposed: dict[str, float]  # per kind: exposed + SM seconds on this timeline
    sm_share: dict[str, float]  # per kind: the share of SMs its kernels hold
    charged_sm_s: float  # SM seconds the step charges (EP overlap, ZeRO-3)
    uncharged_sm_s: float  # f x hidden where the model charges no SMs (the lab errs fast)

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

    def add(self, *args) -> None:
        event = Event(*args)
        if event.seconds > 0:
            self.events.append(event)

    def pass_(self, phase: str, start: float, kernels: float,
              comms: list[tuple[str, float, float, float]]) -> float:
        """One pass from ``start``: (kind, seconds, exposed, of it SMs) each; its end."""
        self.add("compute", phase, "kernels", "compute", start, kernels)
        t, c = start + kernels, start
        for kind, seconds, exposed, sm in comms:
            hidden = seconds - exposed
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
    if plan.zero < 3:
        # The buckets run beside the last backward (and the stage's idle time after it);
        # what outlasts them waits at the step's end.
        hidden = dp.seconds - dp.exposed
        lanes.add("comm", "backward", "dp", "hidden",
                  max(backward_start, backward_start + u.compute_backward - hidden), hidden)
        lanes.add("compute", "after", "dp", "exposed", end, dp.exposed)
        lanes.add("comm", "after", "dp", "exposed", end, dp.exposed)
        lanes.exposed["dp"] += dp.exposed
        hidden_uncharged += hidden
    kern = result.cluster.gpu.kernels
    ep_share = min(1.0, COMM_SMS / kern.sm_count) if kern else 0.0
    charged = math.fsum(e.seconds for e in lanes.events if e.state == "sm")
    return Timeline(tuple(lanes.events), m, plan.zero, lanes.exposed,
                    {"tp": share, "cp": share, "ep": ep_share if plan.ep_overlap else share,
                     "sends": 0.0, "dp": share}, charged, share * hidden_uncharged)


def check(result: RecipeResult, line: Timeline) -> dict[str, float]:
    """Each kind's charge on the timeline against the step bar's segment, relative
    difference (0: the same computation)."""
    seg = result.segments
    return {k: abs(v - seg[k]) / max(seg[k], 1e-12) for k, v in line.charged().items()}
