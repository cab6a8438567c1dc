"""EP11's predict and decide drills (``LESSON_DRILLS["failures"]``)."""

from app.charts.units import fmt_duration
from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import pct


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


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "failures-predict-mtbi-32k",
        "Llama 3.1 405B's job grows from 16,384 to 32,768 GPUs, each GPU failing at the "
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
        "Llama 3.1 405B on 8,192 GPUs saves asynchronously every 30 minutes and takes 10 "
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
