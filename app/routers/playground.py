"""EP12 Recap and playground: every control of every episode on one page, the diagrams side by
side, one state in the URL. Each lab is run through its own view (app/routers/playground_panels
translates the shared state into its query; app/routers/playground_state runs them and strips
their lessons' veils); this module draws them together, with what waits for its steps."""

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from fastapi import APIRouter

from app.charts import veiled_after
from app.charts.units import fmt_bytes, fmt_count, fmt_ms, fmt_pct
from app.cluster_controls import INTER, INTRA
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, LabView, register
from app.labkit.render import with_query
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import gpu_options, model_options
from app.recipe_answer import result_api
from app.routers.pipeline import SCHEDULE_LABELS
from app.routers.playground_panels import (
    PANELS,
    SHARED_LABELS,
    PanelState,
    PlaygroundQuery,
    control_choices,
    labels,
)
from app.routers.playground_state import (
    PlaygroundState,
    api_errors,
    diagram_name,
    lab_query,
    run,
    to_api,
    unveiled,  # noqa: F401  (imported from here too)
    unveiled_figures,
)
from app.schemas import PlaygroundAnswer
from labs.hardware.links import links
from labs.hardware.nccl import current_nccl, nccl_time
from labs.model.presets import get_model

router = APIRouter()


def figures(state: PlaygroundState) -> dict[str, dict]:
    """The shown diagrams of every lab that could draw this state, from the lab's own figures
    function (no figure is re-made here), each veiled while a step it answers is unguessed
    (``waits``)."""
    drawn: dict[str, dict] = {}
    held = waits(state)
    for p in state.panels:
        if p.result is None:
            continue
        own = p.made("figures", partial(unveiled_figures, p.view, p.result))
        for name in p.diagrams:
            if name in own:
                keys = tuple(held.get((p.lab, name), "").split())
                drawn[diagram_name(p.lab, name)] = veiled_after(own[name], keys, copy=True)
    return drawn


PLAYGROUND_DIAGRAMS = tuple(
    Diagram(diagram_name(p.lab, d.name), f"{p.view.episode.code} · {d.title}",
            element_id=p.view.element_id(d), embed_height=d.embed_height)
    for p in PANELS for d in p.view.diagrams if not d.template
)


# ---- Controls: every field of the query, grouped, rendered by its type ----

@dataclass(frozen=True)
class Control:
    name: str
    label: str
    kind: str  # select | number | slider
    value: Any
    options: tuple[tuple[str, str], ...] = ()
    low: float | None = None
    high: float | None = None
    unit: str = ""


SLIDERS = {"nodes": (1, 64, "nodes"), "pp": (1, 32, "stages"),
           "microbatches": (1, 128, "micro-batches"), "micro_batch": (1, 16, "sequences"),
           "virtual": (1, 8, "chunks per rank")}
SHARED_GROUPS = (
    ("Model and cluster", ("model", "gpu", "nodes", "gpus_per_node", "intra_link", "inter_link")),
    ("The plan: TP × PP × CP × DP = GPUs (DP follows the nodes and the degrees)",
     ("tp", "pp", "dp", "cp", "ep", "zero", "recompute", "schedule", "virtual", "micro_batch",
      "microbatches", "seq_len")),
)


@lru_cache(maxsize=1)
def _named_options() -> dict[str, tuple[tuple[str, str], ...]]:
    names = {k: v.name for k, v in links().items()}
    return {
        "model": model_options(), "gpu": gpu_options(),
        "intra_link": tuple((k, names[k]) for k in INTRA),
        "inter_link": tuple((k, names[k]) for k in INTER),
        "schedule": tuple(SCHEDULE_LABELS.items()),
    }


@lru_cache(maxsize=1)
def _choice_labels() -> dict[str, dict[str, str]]:
    """The words the episodes' own controls show for a choice, by the field's unprefixed name
    (round-18 cold reading B, finding 18: EP12's "more controls" showed raw ids, "adam16",
    "separate-pd", "every-2nd"), from the same records those episodes read."""
    from app.routers.rl import PLACEMENT_LABELS, recipes, stand_in_label
    from labs.core.catalogue import RECIPES
    from labs.core.recomputation import RECOMPUTATION
    from labs.parallel.rank_map import GROUP_SHORT, GROUP_TITLES

    return {
        "recipe": {k: r.label for k, r in RECIPES.items()},
        "recompute": {k: r.label for k, r in RECOMPUTATION.items()},
        "ep_dispatch": {"alltoall": "NCCL all-to-all", "deepep": "DeepEP"},
        "placement": dict(PLACEMENT_LABELS),
        "preset": {k: stand_in_label(r) for k, r in recipes().items()},
        "group": {k: f"{GROUP_SHORT[k]} ({GROUP_TITLES[k]})" for k in GROUP_SHORT},
        "kv_dtype": {"bf16": "BF16", "fp8": "FP8"},
        "pipeline_link": {"none": "none", **{k: v.name for k, v in links().items()}},
    }


def _choice_words(name: str, choice: str) -> str:
    """A choice's words for the control ``name`` (prefixed or not), or the choice itself."""
    for field, words in _choice_labels().items():
        if name == field or name.endswith("_" + field):
            return words.get(choice, choice)
    return choice


def _bounds(info) -> tuple[float | None, float | None]:
    low = high = None
    for meta in info.metadata:
        low = getattr(meta, "ge", getattr(meta, "gt", low))
        high = getattr(meta, "le", getattr(meta, "lt", high))
    return low, high


def control(name: str, label: str, value) -> Control:
    info = PlaygroundQuery.model_fields[name]
    choices, optional = control_choices(info)
    if name == "model":  # presets and, when the state uses one, the pasted model's code
        return Control(name, label, "select", value,
                       tuple(model_choices(_named_options()["model"], value, custom=False)))
    if name in _named_options():
        return Control(name, label, "select", value, _named_options()[name])
    if choices:
        opts = tuple((c, _choice_words(name, c)) for c in choices)
        return Control(name, label, "select", "" if value is None else value,
                       ((("", "lab default"),) if optional else ()) + opts)
    if bool in (info.annotation, *getattr(info.annotation, "__args__", ())):
        opts = (("true", "on"), ("false", "off"))
        shown = "" if value is None else ("true" if value else "false")
        return Control(name, label, "select", shown,
                       ((("", "lab default"),) if optional else ()) + opts)
    if name in SLIDERS:
        low, high, unit = SLIDERS[name]
        return Control(name, label, "slider", value, low=low, high=high, unit=unit)
    low, high = _bounds(info)
    return Control(name, label, "number", "" if value is None else value, low=low, high=high)


def control_groups(query) -> list[tuple[str, list[Control]]]:
    values = query.model_dump()
    groups = [(title, [control(n, SHARED_LABELS[n], values[n]) for n in names])
              for title, names in SHARED_GROUPS]
    names = labels()
    for panel in PANELS:
        own = [panel.show_field, *(panel.prefixed(f) for f in panel.own_fields())]
        groups.append((f"{panel.view.episode.code} · {panel.view.episode.topic}",
                       [control(n, names[n], values[n]) for n in own]))
    return groups


# ---- The lesson's states ----

SEED: dict = {}  # the defaults: Llama 3.1 70B on 32 H100s as TP8 x PP2 x DP2
ALL = {"show_memory": "ledger", "show_pipeline": "gantt", "show_recipe": "all"}


def step_state(**params) -> dict:
    ran = run(PlaygroundQuery(**params))
    return {"params": params, "result": ran, "api": to_api(ran)}


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson links to, with the JSON its prose quotes (tests/app/test_prose)."""
    return {
        "seed": step_state(show_memory="ledger"),
        # Step 1's move: the worked plan at twice the tokens, EP01's ledger and EP08's audit
        # moving together past the H100's 80 GB (round-15 cold reading of EP12, finding 2's
        # link: it set the opening state, so nothing moved).
        "long": step_state(seq_len=16384),
        "dp32": step_state(tp=1, pp=1, dp=32, microbatches=1),
        "m2": step_state(microbatches=2),
        "zero1_dp32": step_state(tp=1, pp=1, dp=32, microbatches=1),
        "zero3_dp32": step_state(tp=1, pp=1, dp=32, microbatches=1, zero=3),
        # Step 5 asks a wait: its links show EP04's time per layer, compute and the exposed
        # collectives, where the panel's default is its efficiency (round-16 cold reading of
        # EP12, finding 4: the move showed only efficiencies).
        "tp_eth": step_state(gpus_per_node=4, nodes=8, inter_link="eth-100g", show_tp="cost"),
        "tp_node": step_state(show_tp="cost"),
        # Step 6: a case EP06 does not draw (its step 2 is CP 8 on 64 tokens), so the recap
        # asks for a count the student derives (round-6 cold reading of EP12, item 4), on
        # contiguous slices: zigzag's every rank was the panel's total pairs ÷ 4, both on
        # screen (round-15 cold reading, finding 7).
        "cp4": step_state(cp=4, pp=1, dp=1, cp_layout="contiguous", cp_tokens=16),
        # Step 8: steps 2 and 4 combined with EP01's full recomputation, a state no earlier
        # step shows (round-6 cold reading of EP12, item 3: DP32 alone was step 2's answer).
        "fsdp": step_state(tp=1, pp=1, dp=32, microbatches=1, zero=3, recompute="full"),
        # Step 7 asks what one GPU holds (round-6 cold reading of EP12, item 2: the share a
        # token runs was one division of the model list's "46.7B, 12.9B active"): the
        # experts panel shows its parameters chart.
        "mixtral": step_state(model="mixtral-8x7b", tp=2, pp=1, dp=8, ep=8, nodes=2,
                              show_tp="off", show_moe="params"),
    }


# ---- What of the bench waits for a guess (round-15 cold reading of EP12, findings 2, 5 and
# 6: the playground stripped its labs' lesson masks and had none of its own, so the opening
# state printed step 1's two equal figures and each try link's URL, opened in a new tab,
# printed its step's answer). Each step names the state it asks about (a fact), and for each
# lab the controls that make a state that question (none: every state) and the panel's parts
# that answer it (its headline fields and diagrams; None: the whole panel). At such a state
# those parts wait for the step's guess, keyed by its prediction's beat id. ----
MEMORY_SAME = ("model", "tp", "pp", "dp", "cp", "zero", "recompute", "seq_len", "micro_batch")
ASKED: dict[str, tuple[str, dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]]]] = {
    # Step 1 asks the bytes on the heaviest GPU at twice the tokens (round-16 cold reading of
    # EP12, finding 1: it asked whether EP01's ledger agreed with EP08's, a question its own
    # wording, "one state, every lab", answered): at that state EP01's ledger, EP08's audit
    # and EP04's ledger against t wait; the worked plan's totals, which the question quotes,
    # are drawn.
    "predict-playground-1": ("long", {
        "memory": (MEMORY_SAME, None),
        "recipe": (MEMORY_SAME, ("memory_per_gpu_bytes", "memory")),
        "tp": (tuple(n for n in MEMORY_SAME if n != "tp"), ("memory",))}),
    "predict-playground-2": ("dp32", {"memory": (MEMORY_SAME, None),
                                      "zero": (MEMORY_SAME, ("total_bytes", "memory")),
                                      "recipe": (MEMORY_SAME, ("memory_per_gpu_bytes",
                                                               "memory"))}),
    "predict-playground-3": ("m2", {
        "pipeline": (("pp", "microbatches", "schedule", "virtual"), None),
        "recipe": (("pp", "microbatches", "schedule", "virtual"),
                   ("bubble_fraction", "step", "timeline"))}),
    # EP03's memory chart sweeps every stage and DP degree of its model: any 70B state draws
    # ZeRO-3 at D = 32 (finding 5: step 2's link drew step 4's 35.3 GB in its hover).
    "predict-playground-4": ("zero3_dp32", {"zero": (("model",), None),
                                            "memory": (MEMORY_SAME, None)}),
    "predict-playground-5": ("tp_eth", {"tp": (("model", "tp", "gpus_per_node", "inter_link"),
                                               None)}),
    # Step 6 counts the pairs on the mask's 16 tokens: the mask, the pair counts and their
    # chart answer it; EP06's cost and crossover charts, timed on the sequence's 8,192
    # tokens, ask EP06's own steps 6 to 8, none of the playground's, and are drawn (round-15
    # cold reading, finding 12: the crossover waited whole at this state).
    "predict-playground-6": ("cp4", {"cp": (("cp", "cp_layout", "cp_tokens"),
                                            ("busiest_pairs", "total_pairs", "mask", "pairs"))}),
    "predict-playground-7": ("mixtral", {"moe": (("model", "ep", "tp"), None)}),
    "predict-playground-8": ("fsdp", {"memory": (MEMORY_SAME, None),
                                      "zero": (MEMORY_SAME, ("total_bytes", "memory")),
                                      "recipe": (MEMORY_SAME, ("memory_per_gpu_bytes",
                                                               "memory"))}),
}


def _parts(lab: str) -> tuple[str, ...]:
    """A panel's parts: its headline fields and its diagrams."""
    view = next(p.view for p in PANELS if p.lab == lab)
    return (*(key for _, key, _ in HEADLINES.get(lab, ())),
            *(d.name for d in view.diagrams if not d.template))


def waits(state: PlaygroundState) -> dict[tuple[str, str], str]:
    """(lab, headline field or diagram) -> the guesses it waits for at this state."""
    q, lesson = state.query, facts()
    found: dict[tuple[str, str], list[str]] = {}
    for key, (fact, labs) in ASKED.items():
        asked = lesson[fact]["result"].query
        for lab, (same, parts) in labs.items():
            if all(getattr(q, name) == getattr(asked, name) for name in same):
                for part in parts or _parts(lab):
                    found.setdefault((lab, part), []).append(key)
    return {where: " ".join(keys) for where, keys in found.items()}


def waits_text(keys: str) -> str:
    """What a masked panel part says: "Shows once step 2 is guessed"."""
    steps = [k.rsplit("-", 1)[1] for k in keys.split()]
    return f"Shows once step{'s' if len(steps) > 1 else ''} {' and '.join(steps)} " \
           f"{'are' if len(steps) > 1 else 'is'} guessed."


# Each lab's key figures, read off its own JSON answer (the fields the prose quotes).
HEADLINES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "memory": (("Per GPU", "total_bytes", "bytes"), ("Fewest GPUs for the state", "min_gpus", "")),
    "dp": (("Speedup", "speedup", ""), ("Efficiency", "efficiency", "pct")),
    "zero": (("State per GPU", "state_bytes", "bytes"), ("Per GPU, all", "total_bytes", "bytes")),
    # The forward's wait, what step 5 asks, so its move changes the figure it asks about; the
    # panel's one efficiency is its chart's, the whole step's (round-16 cold reading of EP12,
    # findings 3 and 4: a layer's efficiency here beside the chart's step's, 32.6% by 32.8%,
    # and a move that showed efficiencies for a question about a wait).
    "tp": (("Forward's wait per layer", "forward_comm_s", "ms"),
           ("Sent per layer", "comm_bytes", "bytes")),
    "pipeline": (("Bubble, measured", "bubble_fraction", "pct"),),
    "cp": (("Busiest rank's pairs", "busiest_pairs", ""), ("Of all pairs", "total_pairs", "")),
    "moe": (("Total params", "params", "count"), ("Active params", "active_params", "count")),
    "recipe": (("Memory per GPU", "memory_per_gpu_bytes", "bytes"),
               ("Efficiency", "efficiency", "pct"), ("MFU", "mfu", "pct"),
               ("Bubble", "bubble_fraction", "pct"), ("Step", "step_s", "ms")),
}
FORMAT = {"bytes": fmt_bytes, "pct": fmt_pct, "count": fmt_count, "ms": fmt_ms, "": str}
# What a lab's headlines are read off: its JSON answer (``view.to_api``), but where that whole
# answer costs far more than the fields read here (issue 31), the part that holds them: EP05's
# answer lists every event, so its one headline is read off the result; EP08's headlines are
# its result's fields, without the timeline, the layer and step 14's sweep of planner searches
# its whole answer adds (tests/app/test_playground_routes.py checks each against the JSON).
HEADLINE_ANSWERS: dict[str, Callable[[Any], dict]] = {
    "pipeline": lambda result: {"bubble_fraction": result.result.bubble_fraction},
    "recipe": lambda result: result_api(result.result),
}


def _headlines(p: PanelState) -> list[tuple[str, str, str]]:
    answer = HEADLINE_ANSWERS.get(p.lab, p.view.to_api)(p.result)
    return [(label, FORMAT[unit](answer[key]), key) for label, key, unit in HEADLINES[p.lab]
            if answer.get(key) is not None]


def headlines(state: PlaygroundState) -> dict[str, list[tuple[str, str, str]]]:
    found = {}
    for p in state.panels:
        if p.result is None or p.lab not in HEADLINES:
            continue
        found[p.lab] = p.made("headlines", partial(_headlines, p))
    return found


def tp_ring(fact: str):
    """NCCL's time for one of the TP group's all-reduces at a lesson state, term by term
    (labs.hardware.nccl.nccl_time, the call EP04's lab times them by: its ``collective_s``):
    step 5 derives its 5.02 ms from the busBW and the latency's terms (round-15 cold reading of
    EP12, finding 10: it quoted 47 GB/s, the bytes over the whole time, as a rate)."""
    r = facts()[fact]["result"].panel("tp").result
    tp, cluster = r.input.tp, r.input.topology.cluster_for(r.input.gpu, r.input.tp)
    return nccl_time("all_reduce", r.collective_bytes, tp, cluster,
                     min(tp, cluster.gpus_per_node))


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
        "nccl_now": current_nccl(),
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
