"""EP11's predict and decide drills (``LESSON_DRILLS["failures"]``)."""

import math

from app.charts.units import fmt_duration
from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.labkit.view import Option
from app.lesson_drills.units import pct
from labs.failures.lab import young


def _mtbi_min(gpus: int) -> float:
    """Minutes between interruptions on ``gpus`` (GET /api/failures)."""
    return lab_value("failures", {"gpus": gpus}, "mtbi_s") / 60


# The goodput decide's job: on 8,192 GPUs, a state no link or case draws (round-10 cold
# reading, EP11 finding 11: at 16,384 GPUs the opening bench's interval chart hovered each
# choice's goodput).
GOODPUT_JOB = {"gpus": 8192, "interval": 1800}


def _storage_why(answer: dict) -> str:
    """Faster storage's reason, from the lab's own model (step 3): the write still runs behind
    training, but a failure before it ends falls back a whole save; twice the bandwidth halves
    that window."""
    before = lab_value("failures", GOODPUT_JOB, "checkpoint.lag_s")
    return (f"The write runs behind training already. Twice the bandwidth halves the window "
            f"in which a failure falls back a whole save ({fmt_duration(before)} → "
            f"{fmt_duration(answer['checkpoint']['lag_s'])}), tiny against 30 minutes of "
            "work: goodput {value}.")


# failures-interval-4x (round-17 cold reading of EP11, finding 19: failures-mtbi was step 1's
# M = M_GPU ÷ N with another N). Four times the GPUs with asynchronous saves: M falls to a
# quarter, and so does δ, the stop for each rank's copy of its shard (step 3), so Young's
# τ = √(2·δ·M) falls to a quarter, not to half as for synchronous saves, whose δ is the whole
# checkpoint's write. Each choice's figure is the τ its reasoning gives, from the engine's δ
# and M at 2,048 and 8,192 GPUs (labs.failures.lab.young); the right one is the engine's own.
# (Not 1,024: its M and copy are steps 1 and 3's answers.) Its question names the rule, not
# its form: beside step 4's "four times the cost, the interval…" √(2·δ·M) gave √4 = 2
# (round-20 cold reading R, finding 3).
INTERVAL_JOB = {"save": "async"}
INTERVAL_GPUS = (2048, 8192)
INTERVAL_FACTORS = {"quarter": 0.25, "half": 0.5, "same": 1.0, "twice": 2.0}


def _interval_job(gpus: int) -> dict:
    a = lab_value("failures", {**INTERVAL_JOB, "gpus": gpus}, lambda answer: answer)
    return {"tau": a["young_s"], "delta": a["checkpoint"]["cost_s"], "m": a["mtbi_s"]}


def _interval_judge() -> tuple[Option, ...]:
    one, four = (_interval_job(g) for g in INTERVAL_GPUS)
    d = fmt_duration
    figures = {"quarter": four["tau"], "half": young(one["delta"], four["m"]),
               "same": one["tau"], "twice": 2 * one["tau"]}
    whys = {
        "quarter": f"M falls to a quarter ({d(one['m'])} → {d(four['m'])}), and so does δ: "
                   "each rank's shard is a quarter as big, and an async save stops only for "
                   f"its copy ({d(one['delta'])} → {d(four['delta'])}). τ falls with both: "
                   f"√(¼ × ¼) = ¼, {d(one['tau'])} → {d(figures['quarter'])}.",
        "half": "That keeps δ, as for synchronous saves, whose write of the whole checkpoint "
                "does not shrink with N. An async save stops for its own shard's copy, "
                f"which does: with δ kept, √(2 × {d(one['delta'])} × {d(four['m'])}) = "
                f"{d(figures['half'])}.",
        "same": "A job of 4 times the GPUs stops 4 times as often (step 1), so M falls, and τ "
                f"= √(2·δ·M) falls with it: it cannot stay {d(figures['same'])}.",
        "twice": "More GPUs stop more often, so saves must come more often, not less: twice "
                 f"the interval, {d(figures['twice'])}, would lose twice the work a failure.",
    }
    ratio = four["tau"] / one["tau"]
    right = min(INTERVAL_FACTORS, key=lambda k: abs(math.log(INTERVAL_FACTORS[k] / ratio)))
    return tuple(Option(key, key == right, whys[key], d(figures[key]))
                 for key in INTERVAL_FACTORS)


INTERVAL_CHOICES = (("quarter", "a quarter as long"), ("half", "half as long"),
                    ("same", "the same"), ("twice", "twice as long"))


def _interval_solution() -> str:
    one, four = (_interval_job(g) for g in INTERVAL_GPUS)
    right = next(o.key for o in _interval_judge() if o.right)
    label = dict(INTERVAL_CHOICES)[right]
    return (f"{label[0].upper()}{label[1:]}: τ = √(2·δ·M) = {fmt_duration(one['tau'])} on "
            f"{INTERVAL_GPUS[0]:,} GPUs, {fmt_duration(four['tau'])} on {INTERVAL_GPUS[1]:,}. "
            "With async saves both δ (a rank's copy) and M (the whole job's stops) scale as "
            "1/N, so τ scales as 1/N; with synchronous saves δ is the whole write and τ "
            "scales as 1/√N.")


DRILLS: tuple[Drill | Decide, ...] = (
    Decide(
        id="failures-interval-4x",
        question="Llama 3 405B saves asynchronously: training stops only while each rank "
                 "copies its shard of the checkpoint to host memory (step 3). The job grows "
                 f"from {INTERVAL_GPUS[0]:,} to {INTERVAL_GPUS[1]:,} GPUs, each GPU failing at "
                 "the same rate, on the same storage and links. Young's interval "
                 "becomes…",
        choices=INTERVAL_CHOICES,
        judge=_interval_judge, solution=_interval_solution,
        reveals=("and so does δ", "τ scales as 1/N"),
        # It predicts what τ becomes; the episode's decision is failures-decide-goodput.
        predicts=True),
    predict(
        "failures-predict-mtbi-32k",
        "Llama 3 405B's job grows from 16,384 to 32,768 GPUs, each GPU failing at the "
        "same rate. Predict the minutes between interruptions.",
        "failures", {"gpus": 32768}, "mtbi_s", unit="minutes", scale=1 / 60,
        hint="Interruptions come from any GPU: twice the GPUs, twice the rate.",
        explanation="{answer} minutes: half the time between interruptions at 16,384 "
                    "GPUs.",
        mistakes=(
            Mistake("unchanged", lambda: _mtbi_min(16384),
                    "that is the time at 16,384 GPUs. Interruptions come from any GPU: "
                    "twice the GPUs, twice as many."),
            Mistake("doubled", lambda: 2 * _mtbi_min(16384),
                    "more GPUs fail more often, not less: twice the GPUs, half the time "
                    "between interruptions."),
        )),
    decide(
        "failures-decide-goodput",
        "Llama 3 405B on 8,192 GPUs saves asynchronously every 30 minutes and takes 10 "
        "minutes to restart. Which change raises the goodput the most?",
        "failures", "chosen.goodput",
        (("often", "Save every 10 minutes instead of 30", {**GOODPUT_JOB, "interval": 600},
          "An asynchronous save barely stops training, and a failure now loses at most "
          "10 minutes of work, not 30: goodput {value}."),
         ("restart", "Restart in 5 minutes instead of 10", {**GOODPUT_JOB, "restart": 300},
          "Each interruption costs 5 minutes less, but the lost work since the last "
          "save is unchanged: goodput {value}."),
         ("storage", "Twice the storage bandwidth", {**GOODPUT_JOB, "storage_bw": 4e12},
          _storage_why)),
        best="max", fmt=pct,
        solution="{best}. Goodput: saving every 10 minutes {often}, restarting in 5 "
                 "{restart}, faster storage {storage}. Re-doing the work since the last "
                 "save costs half an interval per failure on average.",
        reveals=("loses at most 10 minutes of work",)),
)
