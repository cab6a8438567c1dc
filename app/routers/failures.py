"""Failures at scale: how often a job stops, what a checkpoint costs, the best interval and the
goodput, from labs.failures. Its controls, run and answers are ``failures_state.py``, its
derive drills and more-or-faster decide ``failures_drills.py``; here the lesson's states
(``facts``), page context, cases and view."""

from functools import lru_cache

from fastapi import APIRouter

from app.charts.units import fmt_duration
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, LabView, lesson_state, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import model_options
from app.routers.failures_drills import (
    DERIVES,
    GOODPUT_DRILL,
    fmt_bandwidth,
    goodput_drill_exact,
    goodput_drill_first,
    more_or_faster,
)
from app.routers.failures_state import (
    BEST,
    BW_OPTIONS,
    DEFAULT_MODEL,
    GPU_MTBI,
    GPUS_OPTIONS,
    INTERVAL_OPTIONS,
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
        "llama3_layers": get_model(LLAMA3_LAYOUT["model"]).layers,  # step 7's chunk slots
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


def step_state(state, gpus: int, step_s: float, **params) -> dict:
    """A lesson state of ``gpus`` GPUs whose step is ``step_s`` there (its own step: the lab
    scales other sizes ideally from it), at its best interval."""
    step = {"gpus": gpus, "step_s": round(step_s, 3), "step_gpus": gpus, **params}
    return state(**step, interval=BEST)


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
                "real stop longer, and real runs save every tens of minutes (step 4).")
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
        *DERIVES,
        *LESSON_DRILLS["failures"],  # predict and decide (app/lesson_drills/failures.py)
        more_or_faster(),
    ),
)

register(router, VIEW)
