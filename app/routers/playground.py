"""EP12 Recap and playground: every control of every episode on one page, the diagrams side by
side, one state in the URL. Each lab is run through its own view (app/routers/playground_panels
translates the shared state into its query; app/routers/playground_state runs them and strips
their lessons' veils). Its controls are ``playground_controls.py``, its lesson's states
``playground_lesson.py``, what of the bench waits for which step's guess, the headlines and
the figures drawn together ``playground_keys.py``; here the page context, cases and view."""

from functools import partial

from fastapi import APIRouter

from app.charts.units import fmt_bytes, fmt_count
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, LabView, register
from app.labkit.render import with_query
from app.lesson_drills import LESSON_DRILLS
from app.routers.playground_controls import control_groups
from app.routers.playground_keys import figures, headlines, waits, waits_text
from app.routers.playground_lesson import facts, step_state, tp_ring
from app.routers.playground_panels import PANELS, PlaygroundQuery, labels
from app.routers.playground_state import (
    api_errors,
    diagram_name,
    lab_query,
    run,
    to_api,
    unveiled,  # noqa: F401  (imported from here too)
)
from app.schemas import PlaygroundAnswer
from labs.hardware.links import links
from labs.hardware.nccl import current_nccl, current_ring_latency
from labs.model.presets import get_model

router = APIRouter()


PLAYGROUND_DIAGRAMS = tuple(
    Diagram(diagram_name(p.lab, d.name), f"{p.view.episode.code} · {d.title}",
            element_id=p.view.element_id(d), embed_height=d.embed_height)
    for p in PANELS for d in p.view.diagrams if not d.template
)


def extra_context(state) -> dict:
    result = state.result
    q = state.query
    return {
        "headlines": headlines(result),
        # What of each panel waits for a step's guess at this state, and what its mask says.
        "waits": waits(result), "waits_text": waits_text,
        "defaults": PlaygroundQuery(),  # the worked plan step 1 names, as the controls default
        # Its model's shape: step 8 derives full recomputation's activations from it.
        "worked_model": get_model(PlaygroundQuery().model),
        # How many episodes' labs the playground runs (the lede counts them, never a word).
        "panel_episodes": len({p.view.episode for p in PANELS}),
        "cheat_query": {"model": q.model, "gpu": q.gpu, "seq_len": q.seq_len, "tp": q.tp,
                        "pp": q.pp, "dp": q.dp, "microbatches": q.microbatches},
        "facts": facts(),
        # Step 5 derives the Ethernet ring's busBW from one port's (labs.hardware.links).
        "link_presets": links(),
        "tp_eth_ring": tp_ring("tp_eth"),
        # Current NCCL's ring plateau on H100 (x1.4, not 2.8's x1.9): step 5 says which way
        # the lab's latency errs (round-19 cold reading Z, finding 11).
        "nccl_now": current_nccl(), "nccl_now_ring": current_ring_latency,
        # Called by the controls template only (the page and the bench): a control change's
        # answer (#playground-panels) never draws them, and building them cost 0.6 ms of its
        # 7 ms (issue 31).
        "control_groups": partial(control_groups, state.query),
        "panel_queries": {p.lab: p.made("query", partial(lab_query, p)) for p in result.panels},
        "panel_errors": result.errors,
        # Beside the controls too: a DP error beside Nodes as well, since DP follows the nodes
        # (EP12 cold reading, item 2: the Nodes slider made a plan EP08 refuses, out of view).
        "control_errors": {**result.errors, **({"nodes": result.errors["dp"]}
                                               if "dp" in result.errors else {})},
    }


GOOD = {"show_pipeline": "gantt"}  # the worked plan, its Gantt chart shown


def _verdict(m: dict) -> str:
    """EP01's panel's fit verdict: "fits the H100's 80.0 GB with 4.02 GB to spare" or "over
    the H100's 80.0 GB by 89.3 GB"."""
    headroom, gpu = fmt_bytes(abs(m["headroom_bytes"])), fmt_bytes(m["gpu_memory_bytes"])
    return (f"fits the H100's {gpu} with {headroom} to spare" if m["fits"]
            else f"over the H100's {gpu} by {headroom}")


def good_case_text() -> str:
    m = step_state(**GOOD)["api"]["panels"]["memory"]["answer"]
    fits = "it fits" if m["fits"] else "it does not fit"
    return (f"{m['model_name']} on 32 H100s as TP8 × PP2 × DP2 with 16 micro-batches: {fits}, "
            "TP stays on NVLink, the bubble is small.")


# The bad case's state: plain DP, no ZeRO, so every GPU holds the whole training state.
BAD = {"model": "llama-3.1-8b", "tp": 1, "pp": 1, "dp": 32, "microbatches": 1, "zero": 0}


def bad_case_text() -> str:
    """The line under the bad case, its verdict first (a narrow caption is cut at two lines)
    and EP01's panel's own (``fits``)."""
    m = step_state(**BAD)["api"]["panels"]["memory"]["answer"]
    verdict = _verdict(m)
    return (f"{verdict[0].upper()}{verdict[1:]}: with no ZeRO every GPU holds all of "
            f"{m['model_name']}'s state, 16 B × {fmt_count(m['params'])} = "
            f"{fmt_bytes(m['state_bytes'])}, {fmt_bytes(m['total_bytes'])} in all.")


VIEW = LabView(
    name="playground",
    episode=BY_SLUG["playground"],
    query_model=PlaygroundQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=PLAYGROUND_DIAGRAMS,
    labels=labels(),
    response_model=PlaygroundAnswer,
    embed_height=2000,
    extra_context=extra_context,
    api_errors=api_errors,
    drills=LESSON_DRILLS["playground"],
    summary="Every lab at once from one state: the shared plan (model, GPU, cluster, degrees, "
            "batch) and each lab's own controls; each shown lab's own JSON answer",
    good=Case("Good case: the worked plan", GOOD, good_case_text),
    # Llama 3.1 8B: with 70B the bench printed steps 2 and 4's answers (its DP32 bills, and
    # 0.5 B × P, ZeRO-3's state over 32, in the EP03 panel's bars) one click before the
    # guess (test_answers_hidden). Without ZeRO (round-15 cold reading, finding 1: at the
    # default ZeRO-1 the state fits, 76.0 GB), its verdict read off EP01's panel.
    bad=Case("Bad case: 8B as plain DP on 32 GPUs", BAD, bad_case_text),
)


def page_url(query: str) -> str:
    return with_query(VIEW.episode.url, query)


register(router, VIEW)
