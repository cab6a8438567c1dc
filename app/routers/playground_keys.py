"""What of EP12's bench waits for which step's guess at a state (``ASKED``, ``waits``), the
panels' key figures (``headlines``) and the labs' own figures drawn together, each part
veiled while a step it answers is unguessed (``figures``)."""

from collections.abc import Callable
from functools import partial
from typing import Any

from app.charts import veiled_after
from app.charts.units import fmt_bytes, fmt_count, fmt_ms, fmt_pct
from app.recipe_answer import result_api
from app.routers.playground_lesson import facts
from app.routers.playground_panels import PANELS, PanelState
from app.routers.playground_state import PlaygroundState, diagram_name, unveiled_figures

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
