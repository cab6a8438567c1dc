"""EP11's two derive drills (Young's interval, the goodput of a job that saves, fails and
restarts) and its more-or-faster decide, each answer computed for the state its question
states; ``failures.py`` lists them in its view after the lesson's predict and decide drills
(app/lesson_drills/failures.py)."""

from app.charts.units import fmt_duration
from app.labkit import Drill, Mistake, decide
from app.routers.failures_state import (
    LLAMA3_CHUNKS,
    LLAMA3_LAYOUT,
    LLAMA3_SEQUENCES,
    STEP_S,
    FailuresQuery,
    llama3_timed,
    run,
    scaled_step,
)
from labs.failures.lab import goodput, young


def fmt_bandwidth(value: float) -> str:
    """Bytes per second as GB/s, or TB/s from 1 TB/s: 2e10 -> "20 GB/s", 2e12 -> "2 TB/s"."""
    return f"{value / 1e12:,.3g} TB/s" if value >= 1e12 else f"{value / 1e9:,.3g} GB/s"


# Drills: each answer computed by the engine for the state its question states.
def young_drill_answer() -> float:
    """Young's interval, minutes: a 100 s save every ... on a job that stops every 6 h."""
    return young(100, 6 * 3600) / 60


# The goodput derive's job: a 15-minute sync save every hour, a 10-minute restart, a failure
# every 5 hours. Round-16 cold reading of EP11, finding 5: on the old job (5-minute saves, a
# failure every 10 h) the named mistake, half of the 60 minutes of work lost rather than of
# the 65-minute cycle, gave 86.15% against the first order's 85.77% and the renewal count's
# 86.0%, and no tolerance could tell them apart. Here the cycle is a quarter of M, so the
# right counts (first order, renewal) and the named mistakes (half of τ, the saves' share
# over τ) lie apart.
GOODPUT_DRILL = {"interval": 3600, "block": 900, "restart": 600, "mtbi": 18_000}
GOODPUT_BAND = 0.3  # points either side of the two right counts


def goodput_drill_answer() -> float:
    """Goodput, %, by the first order the step teaches: interval 1 h, 15 min sync save, 10 min
    restart, a failure every 5 h."""
    return goodput_drill_first()


def goodput_drill_first(lost: float = 0.5, block: bool = True, of_work: bool = False) -> float:
    """The first-order goodput, %, each failure losing ``lost`` of a cycle besides the restart;
    without the saves' stop where ``block`` is false, and losing ``lost`` of the interval's
    work rather than of the cycle where ``of_work`` (both only for the wrong derivations the
    drill names)."""
    d = GOODPUT_DRILL
    cycle = d["interval"] + (d["block"] if block else 0)
    lose = (d["interval"] if of_work else cycle) * lost
    return 100 * d["interval"] / cycle * (1 - (d["restart"] + lose) / d["mtbi"])


def goodput_drill_exact() -> float:
    """The same job by the lab's renewal model (labs.failures.lab.goodput), %."""
    d = GOODPUT_DRILL
    return 100 * goodput(d["interval"], d["block"], 0.0, d["restart"], d["mtbi"], 1.0).goodput


def goodput_drill_band() -> tuple[float, float]:
    """The tries that count: the first order and the lab's renewal count, each within
    GOODPUT_BAND points."""
    counts = (goodput_drill_first(), goodput_drill_exact())
    return min(counts) - GOODPUT_BAND, max(counts) + GOODPUT_BAND


def goodput_drill_saves_over_work() -> float:
    """The named mistake of subtracting the shares: 1 − δ/τ − (R + τ/2)/M, %."""
    d = GOODPUT_DRILL
    return 100 * (1 - d["block"] / d["interval"]
                  - (d["restart"] + d["interval"] / 2) / d["mtbi"])


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g}"


def goodput_drill_question() -> str:
    d = GOODPUT_DRILL
    return (f"A job saves every hour, each sync save stops it for {_minutes(d['block'])} "
            f"minutes, a restart takes {_minutes(d['restart'])} minutes, and it fails every "
            f"{d['mtbi'] / 3600:g} hours on average. What share of the wall clock trains "
            "steps that count, in %?")


def goodput_drill_hint() -> str:
    d = GOODPUT_DRILL
    cycle = _minutes(d["interval"] + d["block"])
    return (f"Cycle = {cycle} min. Each failure costs the restart plus half a cycle; of the "
            f"time left, {_minutes(d['interval'])}/{cycle} trains.")


def goodput_drill_worked() -> str:
    """The worked solution, its figures from GOODPUT_DRILL ({answer}: the checker's)."""
    d = GOODPUT_DRILL
    tau, cycle = d["interval"] / 60, (d["interval"] + d["block"]) / 60
    share, kept = tau / cycle, 1 - (d["restart"] / 60 + cycle / 2) / (d["mtbi"] / 60)
    # Round-20 cold reading R, finding 7: it went on "the first order counts a little too
    # much loss", step 6's answer one step early; step 6's why compares the two counts. The
    # round-20 audit (N4): nor the renewal count's figure, whose place above the first
    # order's told step 6 the same.
    return (f"{{answer}}%: ({tau:g} ÷ {cycle:g}) × (1 − ({_minutes(d['restart'])} + "
            f"{cycle / 2:g}) ÷ {d['mtbi'] / 60:g}) = {share:.3f} × {kept:.3f}. A failure "
            "during a save loses that save too, so on average it loses half of the "
            f"{cycle:g}-minute cycle, not of the {tau:g} minutes of work. This is the first "
            "order; the lab's renewal count (step 6: each cycle tried until it runs to its "
            "end, every failure counted) is also right.")


# The more-or-faster decide's job: sync saves to a 10 GB/s file system, a bandwidth no link or
# case draws (round-10 cold reading, EP11 finding 3: at 20 GB/s, step 6's and 7's links drew
# the async and peer days at 16,384 GPUs on the scale chart).
SLOW_SYNC = {"save": "sync", "storage_bw": 10_000_000_000}


def doubled_dp() -> dict:
    """DP 128 (16,384 GPUs) against DP 256 (32,768), the global batch fixed: each pipeline's
    micro-batches halve (16 -> 8) and the interleaved bubble grows, so the step gains less
    than 2x. ``speedup`` is the engine's ratio; the failures lab applies it to STEP_S."""
    doubled = scaled_step(256)
    return {"dp128": llama3_timed(128), "dp256": llama3_timed(256),
            "speedup": doubled["speedup"], "step_s": doubled["lab_step_s"]}


def more_or_faster():
    """Decide: more GPUs or faster checkpoints, for the slow-storage job on 16,384 GPUs, by
    days to finish at each choice's best interval. Twice the GPUs run the step EP08's engine
    times at DP 256 on the same batch (fewer micro-batches, a larger bubble), not half of it."""
    slow = run(FailuresQuery(**SLOW_SYNC))  # what /api/failures answers
    days, write = slow.best.finish_days, fmt_duration(slow.checkpoint.write_s)
    dd = doubled_dp()
    a, b, p = dd["dp128"], dd["dp256"], LLAMA3_LAYOUT["pp"]
    # The lab times 32,768 GPUs' step on EP08's engine itself (failures_state.timed_steps):
    # the state the scale chart draws there (round-10 cold reading, EP11 finding 3).
    doubled = {**SLOW_SYNC, "gpus": 32_768}
    return decide(
        "failures-decide-more-or-faster",
        f"Llama 3 405B on 16,384 GPUs (TP 8 × PP {p} × DP 128, an interleaved 1F1B "
        f"pipeline, {LLAMA3_CHUNKS} model chunks a stage, one layer a chunk as the report "
        f"implies; its batch of "
        f"{LLAMA3_SEQUENCES:,} sequences is {a['m']} micro-batches of one sequence per "
        f"pipeline) saves synchronously to a {fmt_bandwidth(SLOW_SYNC['storage_bw'])} file "
        f"system and, saving at its best "
        f"interval, takes {days:,.3g} days. Which one change finishes it soonest?",
        "failures", "best.finish_days",
        (("gpus", "Twice the GPUs (32,768: DP 256, the same batch), the same saves", doubled,
          f"Each pipeline now gets {b['m']} micro-batches, not {a['m']}: fewer than its {p} "
          f"stages, so the interleaved rounds run half empty and the bubble grows from "
          f"{a['bubble']:.0%} to {b['bubble']:.0%} of the pipeline's time (EP05). EP08's "
          f"engine times the step {dd['speedup']:.2f}× faster, not twice as fast: Llama 3's "
          f"{STEP_S} s step becomes "
          f"{dd['step_s']:.2f} s, while failures come twice as often: {{value}}."),
         ("async", "Asynchronous saves, the same storage", {**SLOW_SYNC, "save": "async"},
          "The stop shrinks to the copy, but the " + write + " write still lands behind each "
          "save, and a failure in it falls back a whole save: {value}."),
         ("peer", "Saves to peer memory (Gemini)", {**SLOW_SYNC, "save": "peer"},
          "The stop is the copy to host memory and the send to a peer takes milliseconds, so "
          "the job can save often: almost nothing is stopped or redone, and only the "
          "restarts stay: {value}."),
         ("storage", f"Ten times faster storage "
          f"({fmt_bandwidth(10 * SLOW_SYNC['storage_bw'])}), still synchronous",
          {**SLOW_SYNC, "storage_bw": 10 * SLOW_SYNC["storage_bw"]},
          "Each save stops training for a tenth as long, but it still stops it, and the "
          "interval it allows still loses work at each failure: {value}.")),
        # peer memory's 70.7 days (it never writes to storage) is the opening bench's too
        best="min", fmt=lambda v: f"{v:,.4g} days",
        solution="{best}. Days to finish: peer memory {peer}, async {async}, faster storage "
                 "{storage}, twice the GPUs {gpus}. On a fixed batch twice the GPUs halve "
                 "each pipeline's micro-batches, so the bubble grows and the step gains "
                 f"{dd['speedup']:.2f}×, not twice; a checkpoint fix that removes nearly all "
                 "the lost time beats it.",
        reveals=("removes nearly all the lost time",))


# The derive drills, before the lesson's predict and decide drills in the view's list.
DERIVES = (
    Drill(
        id="failures-young",
        question=("A save stops training for 100 s, and the job is interrupted every "
                  "6 hours on average. By Young's rule, how many minutes of training "
                  "should pass between saves?"),
        answer=young_drill_answer, unit="min",
        # Not the rule's form: before step 4's guess √(2·δ·M) gave its answer, √4 = 2
        # (round-20 cold reading R, finding 3); the hint says where the rule comes from.
        hint="Young's interval τ is where the saves' share, δ/τ, equals the failures' "
             "loss, τ/(2M), half an interval each: solve for τ with δ and M in seconds, "
             "then divide by 60.",
        explanation="{answer} min: √(2 × 100 s × 21,600 s) = 2,078 s.",
        rel_tol=0.02,  # 34.6, or 35 to the minute; √(δ·M) without the 2, 24.5, is wrong
        mistakes=(
            Mistake("no-two", lambda: young_drill_answer() / 2 ** 0.5,
                    "that is √(δ·M). Young's rule is √(2·δ·M): the 2 comes from losing "
                    "half an interval of work, on average, at each interruption."),
            Mistake("seconds", lambda: young_drill_answer() * 60,
                    "that is seconds; the question asks minutes."),
        ),
    ),
    Drill(
        id="failures-goodput",
        question=goodput_drill_question(),
        answer=goodput_drill_answer, unit="%",
        hint=goodput_drill_hint,
        explanation=goodput_drill_worked,
        rel_tol=0.01, band=goodput_drill_band,
        mistakes=(
            Mistake("no-saves", lambda: goodput_drill_first(block=False),
                    "that leaves out the saves. Each hour of work also waits for its "
                    "save: only the interval's share of each cycle trains."),
            Mistake("restart-only", lambda: goodput_drill_first(lost=0.0),
                    "a failure costs more than the restart: the work since the last save "
                    "is lost too, half a cycle on average."),
            Mistake("whole-cycle", lambda: goodput_drill_first(lost=1.0),
                    "a failure strikes anywhere in the cycle, so on average it loses half "
                    "of it, not all of it."),
            Mistake("half-work", lambda: goodput_drill_first(of_work=True),
                    "that loses half of the hour of work at each failure. A failure during "
                    "a save loses that save too: half of the whole cycle, work and save."),
            Mistake("shares-subtracted", goodput_drill_saves_over_work,
                    "that subtracts the saves' stop over the hour of work, δ/τ. The save "
                    "is part of the cycle: the share that trains is τ/(τ + δ), and the "
                    "failures' loss comes out of that, with half a cycle each."),
        ),
    ),
)
