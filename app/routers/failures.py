"""Failures at scale: how often a job stops, what a checkpoint costs, the best interval and the
goodput, from labs.failures. Its controls, run and answers are ``failures_state.py``; here the
lesson's states (``facts``), page context, cases, drills and view."""

from functools import lru_cache

from fastapi import APIRouter

from app.charts.units import fmt_duration
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, decide, lesson_state, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import model_options
from app.routers.failures_state import (
    BEST,
    BW_OPTIONS,
    DEFAULT_MODEL,
    GPU_MTBI,
    GPUS_OPTIONS,
    INTERVAL_OPTIONS,
    LLAMA3_CHUNKS,
    LLAMA3_LAYOUT,
    LLAMA3_REPLICA,
    LLAMA3_SEQUENCES,
    MTBI_OPTIONS,
    RESTART_OPTIONS,
    SAVE_NAMES,
    SLOW_STORAGE_BW,
    STEP_S,
    FailuresQuery,
    answer_keys,
    figures,
    llama3_timed,
    replanned_step,
    run,
    scaled_step,
    to_api,
)
from app.schemas import FailuresAnswer
from labs.core.limits import HOST_LINKS
from labs.failures.lab import (
    LLAMA3,
    LLAMA3_STORAGE_BW,
    goodput,
    llama3_ramp_steps,
    llama3_steps,
    young,
)
from labs.hardware.links import get_link
from labs.model.flops import attention_flops_per_token
from labs.model.presets import get_model

router = APIRouter()


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes, run
    through the same query model, engine and ``to_api`` as GET /api/failures
    (tests/app/test_prose.py follows every link)."""
    state = lesson_state(FailuresQuery, run, to_api)
    slow = {"save": "sync", "storage_bw": SLOW_STORAGE_BW}
    out = {
        "llama": state(gpus=LLAMA3["gpus"]),
        "small": state(gpus=1024),
        "sync": state(save="sync"),
        "sync_best": state(save="sync", interval=BEST),
        # Step 4: a save four times as long (a quarter of the bandwidth), at its best interval.
        "sync_4x": state(save="sync", storage_bw=int(LLAMA3_STORAGE_BW) // 4, interval=BEST),
        "async_best": state(interval=BEST),
        "slow_naive": state(**slow, interval=10_800),
        "slow_best": state(**slow, interval=BEST),
        # Step 7: the job on 32,768 and 65,536 GPUs, each step EP08's engine's (the lab takes
        # it wherever the engine can time Llama 3's layout: failures_state.timed_steps).
        "slow_32k": state(**slow, gpus=32_768, interval=BEST),
        "slow_64k": state(**slow, gpus=65_536, interval=BEST),
        "no_restart": state(restart=0, interval=BEST),
        "restart_5": state(restart=300, interval=BEST),
        "restart_30": state(restart=1800, interval=BEST),
        "more": state(**CASES["more"][1]),
        "engine_64k": scaled_step(65_536 // LLAMA3_REPLICA),
        "engine_32k": scaled_step(32_768 // LLAMA3_REPLICA),
        "engine_16k": scaled_step(LLAMA3["gpus"] // LLAMA3_REPLICA),
        # ... and with the batch grown 4 times with the cluster: 16 micro-batches a pipeline,
        # a quarter of the steps (its own step, so the chart scales other sizes ideally).
        "engine_64k_batch": (grown := scaled_step(65_536 // LLAMA3_REPLICA,
                                                  4 * LLAMA3_SEQUENCES)),
        "slow_64k_batch": step_state(state, 65_536, grown["lab_step_s"],
                                     steps=llama3_steps() // 4, **slow),
        # The ideal step on 65,536 GPUs (1/N from 16,384), which step 7 says how far it errs:
        # quoted, never linked (its chart would scale every other size ideally from it).
        "slow_64k_ideal": step_state(state, 65_536, STEP_S * LLAMA3["gpus"] / 65_536, **slow),
        "peer_128k": state(save="peer", storage_bw=20_000_000_000, gpus=131_072, interval=BEST),
    }
    # Step 8's job at Llama 3's batch: 131,072 GPUs leave each pipeline 2 micro-batches for 16
    # stages, a layout EP08's engine cannot time (8,192 nodes at most), so the chart takes the
    # step ideally from the engine's at 65,536 (peer_128k); the bound takes it no faster than
    # that (round-10 cold reading, EP11 finding 2: the ideal 0.779 s step gave 12 days).
    # Quoted, never linked: the chart would scale every other size ideally from it.
    # Step 7's re-planned layout on 65,536 GPUs, CP 4 × DP 128: Llama 3's micro-batches a
    # pipeline again. Quoted, never linked (its chart would scale every other size from it).
    out["engine_64k_cp"] = (cp := replanned_step(65_536, 4))
    out["slow_64k_cp"] = step_state(state, 65_536, cp["lab_step_s"], **slow)
    # Step 5: Young's interval for the same M with the frameworks' staging in the stop
    # (round-14 cold reading of EP11, finding 6: 100 ms and 500 ms, step 3's limit's range).
    out["staged"] = [(d, young(d, out["async_best"]["api"]["mtbi_s"])) for d in (0.1, 0.5)]
    # Step 5's step counts 6 FLOPs a parameter a token (llama3_step_s), leaving out the
    # attention scores, 12·L·a·d·s a token at Llama 3's 8,192 tokens (labs.model.flops;
    # half that for a causal mask): round-16 cold reading of EP11, finding 8.
    model = get_model(DEFAULT_MODEL)
    seq = LLAMA3_LAYOUT["seq_len"]
    attn = attention_flops_per_token(model, seq)
    out["attention"] = {"layers": model.layers, "width": model.heads * model.head_dim,
                        "seq_len": seq, "per_token": attn, "six_n": 6 * model.params,
                        "causal": attn / 2 / (6 * model.params),
                        "full": attn / (6 * model.params)}
    # Step 5's count leaves out Llama 3's batch ramp: round-17 cold reading, finding 17.
    out["ramp_steps"] = llama3_ramp_steps()
    out["peer_128k_bound"] = step_state(state, 131_072, out["slow_64k"]["api"]["step_here_s"],
                                        save="peer", storage_bw=20_000_000_000)
    return out


def extra_context(state) -> dict:
    q = state.query
    return {
        "facts": facts(),
        "llama3_layout": LLAMA3_LAYOUT,
        "save_names": SAVE_NAMES,
        "model_options": model_choices(model_options(), q.model_value),
        "model_value": q.model_value,
        "gpus_options": [(n, f"{n:,}") for n in sorted(set(GPUS_OPTIONS) | {q.gpus})],
        # Llama 3's per GPU by its count, not in years: ÷ 1,024 GPUs those give step 1's
        # answer before its guess (round-16 cold reading of EP11, finding 4).
        "mtbi_options": [(v, LLAMA3_MTBI_LABEL if v == GPU_MTBI else fmt_duration(v))
                         for v in sorted(set(MTBI_OPTIONS) | {q.gpu_mtbi})],
        "bw_options": [(v, fmt_bandwidth(v) + (" (Llama 3)"
                                                        if v == LLAMA3_STORAGE_BW else ""))
                       for v in sorted(set(BW_OPTIONS) | {q.storage_bw})],
        # "best" names the policy, not its length (round-20 cold reading R, finding 4)
        "interval_options": [(BEST, "best (Daly's)")]
        + [(v, fmt_duration(v))
           for v in sorted(set(INTERVAL_OPTIONS) | ({q.interval} - {BEST}))],
        "restart_options": [(v, fmt_duration(v) if v else "none")
                            for v in sorted(set(RESTART_OPTIONS) | {q.restart})],
        "host_link_options": tuple((k, get_link(k).name) for k in HOST_LINKS),
        # What each of the bench's figures waits for (the steps whose answers it gives).
        "answer_keys": answer_keys,
        # Step 5's derive by both counts, which step 6's why compares (round-20 cold
        # reading R, finding 7: the drill's own feedback said it, step 6's answer).
        "goodput_drill": {"first": goodput_drill_first(), "exact": goodput_drill_exact(),
                          "cycle_min": (GOODPUT_DRILL["interval"] + GOODPUT_DRILL["block"]) / 60,
                          "mtbi_h": GOODPUT_DRILL["mtbi"] / 3600},
    }


LLAMA3_MTBI_LABEL = (f"Llama 3's: {LLAMA3['days']} days × {LLAMA3['gpus']:,} GPUs ÷ "
                     f"{LLAMA3['interruptions']}")


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


def step_state(state, gpus: int, step_s: float, **params) -> dict:
    """A lesson state of ``gpus`` GPUs whose step is ``step_s`` there (its own step: the lab
    scales other sizes ideally from it), at its best interval."""
    step = {"gpus": gpus, "step_s": round(step_s, 3), "step_gpus": gpus, **params}
    return state(**step, interval=BEST)


def _more_or_faster():
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
        f"pipeline, {LLAMA3_CHUNKS} model chunks a stage; its batch of "
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


def _case_why(name: str) -> str:
    r = run(FailuresQuery(**CASES[name][1]))
    if name == "good":  # the setup only: steps 3 and 5 ask for the stop and the loss
        # Not the interval's length either: with M, Young's rule gives back the copy, step 3's
        # answer (round-14 cold reading of EP11, finding 11). And what that interval is, and
        # is not (finding 6: the card taught saving every 11 s as the plan).
        return (f"A failure every {fmt_duration(r.mtbi_s)}. Each async save copies the shard "
                "to host memory, and the write to storage runs behind training. It saves at "
                "the best interval, Young and Daly's optimum for that M and a stop that is "
                "the copy alone (step 4): the lab's optimum, not a practice. Staging makes a "
                "real stop longer, and real runs save every tens of minutes (step 5).")
    if name == "bad":  # the setup only: step 6 asks for the goodput
        # Nor the checkpoint's size: over the model's parameters it answers step 2.
        return ("Each sync save writes the whole checkpoint to a 20 GB/s file system while "
                "training waits, once every 3 h, on twice the good case's GPUs.")
    raise ValueError(name)


def _case(name: str) -> Case:
    """A case button, with what its headline waits for at its state (``answer_keys``): the
    good case's goodput gives step 5's answer, the bad case's days step 7's; its line says so
    while they wait (round 17: the good case drew "Goodput ?" and a grey chart until step 5,
    unexplained, and read as a button held until then)."""
    label, query = CASES[name]
    keys = answer_keys(run(FailuresQuery(**query)))
    parts = [part for part in ("goodput", "days") if keys[part]]
    waits = tuple(dict.fromkeys((*keys["goodput"], *keys["days"])))
    verb = "shows" if parts == ["goodput"] else "show"
    waiting = f"Its {' and '.join(parts)} {verb}" if parts else ""
    return Case(label, query, _case_why(name), waiting=waiting, waits_for=waits)


CASES = {
    "good": ("Good case: Llama 3 405B on 16,384 H100s, async saves",
             {"save": "async", "interval": BEST}),
    # On 32,768 GPUs: on step 6's 16,384 the bad case drew that step's goodput one click
    # before its guess (test_answers_hidden).
    "bad": ("Bad case: 32,768 GPUs, sync saves to a 20 GB/s file system every 3 hours",
            {"save": "sync", "storage_bw": 20_000_000_000, "interval": 10_800, "gpus": 32_768}),
    "more": ("More GPUs: 131,072 GPUs, sync saves at 20 GB/s",
             {"save": "sync", "storage_bw": 20_000_000_000, "gpus": 131_072,
              "interval": BEST}),
}

VIEW = LabView(
    name="failures",
    episode=BY_SLUG["failures"],
    query_model=FailuresQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=(
        Diagram("rate", "Interruptions per day against the GPUs in the job", embed_height=420),
        Diagram("time", "Where the wall clock goes: training, saving, redoing, restarting",
                embed_height=300),
        Diagram("interval", "Goodput against the checkpoint interval, the optimum marked",
                embed_height=440),
        Diagram("scale", "Goodput and days to finish against the GPUs in the job, each save",
                embed_height=560),
    ),
    labels={
        "model": "Model", "params": "Custom params", "gpus": "GPUs",
        "gpu_mtbi": "Mean time between interruptions, per GPU", "save": "Save",
        "storage_bw": "Storage bandwidth (all ranks)", "interval": "Checkpoint interval",
        "restart": "Restart time", "host_link": "Host link (async copy)",
        "step_s": "Step time (s)",
        "step_gpus": "Step timed on (GPUs)", "steps": "Steps of the job",
    },
    response_model=FailuresAnswer,
    embed_height=1700,
    extra_context=extra_context,
    summary="A training job's interruptions, checkpoint cost (bytes, seconds), Young's and "
            "Daly's best interval and the goodput (share of wall time on steps that count), "
            "against the interval and the cluster size",
    good=_case("good"),
    bad=_case("bad"),
    drills=(
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
        *LESSON_DRILLS["failures"],  # predict and decide (app/lesson_drills/failures.py)
        _more_or_faster(),
    ),
)

register(router, VIEW)
