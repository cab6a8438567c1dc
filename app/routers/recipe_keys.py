"""What of EP08's bench waits for a guess (round-14 cold reading of EP08 and EP10, finding 4:
EP08 masked nothing, so each try link's own URL, loaded with no guess, printed the answer of
the step it belongs to: 42.9%, 496 GB, 85.1 GB, TP8 x PP6, 59.2%, 3.68 ms, 0.52 ms, 16.1 GB).

Each kind of figure is keyed, as an .answer-mask's data-after-guess (static/js/lab.js), to the
steps and drills whose answer it gives at this state, read off the state's properties (the
question's model and plan: ``ASKED``), or wherever the bench prints the answer's own figure,
not off its URL. Only the answering part waits: the rest of each step's diagram moves at its
try links (the memory chart's state bar at steps 4 and 5, the other collectives at 12 and
13)."""

from functools import lru_cache

from app.charts.units import fmt_bytes, fmt_ms, fmt_pct
from app.routers.recipe_lesson import facts
from labs.recipe.audits import MEMORY_AUDIT

# What of a state a question fixes: its model, cluster and plan as the engine reads them.
MODEL = ("model", "gpu", "seq_len")
LAYOUT = (*MODEL, "tp", "pp", "dp", "cp", "ep")
PLAN = (*LAYOUT, "zero", "recompute", "recipe", "micro_batch", "microbatches", "schedule",
        "virtual", "dp_shard")


def shape(r) -> dict:
    """What a question may fix of a state (a RecipeResult), by name: ``ASKED``'s fields."""
    p = r.plan
    return {"model": r.model.id, "gpu": r.cluster.gpu.id, "nodes": r.nodes,
            "matmul": r.matmul_efficiency, **{k: getattr(p, k) for k in PLAN if hasattr(p, k)},
            "seq_len": p.seq_len}


# Each step that asks one figure of a state: the kind of figure, the fact whose state it asks
# about, and what of a state makes it the same question. Step 3 asks any 4 stages of 4
# micro-batches, step 7 any 2 stages of 16 (1F1B, one chunk); step 12 Mixtral's plan at any
# overlap (its DP sync's wait once a step, ``sync``), step 13 the 70B's TP4 x FSDP16 layer
# at any prefetch; step 14 each family's best plan on 64 GPUs.
ASKED = {
    "step-1": ("efficiency", "e60", (*PLAN, "matmul")),
    "step-3": ("bubble", "m4", ("pp", "microbatches", "schedule", "virtual")),
    "step-4": ("memory", "w0", PLAN),
    "step-5": ("memory", "w1", PLAN),
    "step-6": ("activations", "w2", PLAN),
    "step-7": ("bubble", "w3", ("pp", "microbatches", "schedule", "virtual")),
    # Step 10 asks whether the seed plan on H100s is more or less efficient: its efficiency.
    "step-10": ("efficiency", "h100", (*PLAN, "matmul")),
    "step-11": ("mfu", "zb", (*PLAN, "matmul")),
    "step-12": ("sync", "ov", (*LAYOUT, "microbatches")),
    "step-13": ("dp", "lv", (*LAYOUT, "zero", "microbatches")),
    "step-14": ("losses", "td2", (*PLAN, "nodes")),
    "step-15": ("state", "hs", (*LAYOUT, "zero", "dp_shard")),
}
# Step 14 asks of both families' best plans.
ALSO = {"step-14": ("td3",)}
# Step 2 asks which audits its two plans fail (round-22 cold reading Q, finding 5): at their
# layouts every figure that says whether the memory fits waits for it too (the memory chart,
# its hover and caption, the readout and the table), not only the audit rows.
AUDITED = {"step-2": ("dp64", "tp16")}
# A figure of a kind, as the bench prints it (the readout's rounding): a state that prints a
# step's answer as any figure (efficiency, MFU, a re-plan's efficiency; the bubble's share)
# answers the step there too.
PRINTED = {
    "efficiency": lambda r: fmt_pct(r.efficiency),
    "replan_efficiency": lambda r: fmt_pct(r.efficiency),
    "bubble": lambda r: fmt_pct(r.bubble_fraction),
    "memory": lambda r: fmt_bytes(r.memory_per_gpu_bytes),
    "mfu": lambda r: fmt_pct(r.mfu),
}
# The number drills whose answer is a share the bench prints (an efficiency, a bubble): it
# waits wherever a figure prints it.
DRILLS = ("recipe-efficiency", "recipe-predict-bubble-40")
KINDS = ("efficiency", "bubble", "memory", "activations", "mfu", "tp", "dp", "sync", "losses",
         "state", "audits", "replan", "replan_efficiency", "compute", "whole")
# What completes a step's answer in one line of arithmetic with what else its state draws
# (round-16 cold reading of EP07 and EP08, finding 1: a parts table with one "?" and a visible
# total or share is a sum with one unknown). The efficiency and MFU are one figure twice (the
# kernels do not change: MFU = the seed's × the efficiency's ratio), so each waits with the
# other; a step asking the exposed TP (a part) or the MFU waits with the efficiency too,
# which masks every share and the step's ms. ``whole``: one micro-batch's share of the step
# (the causes' sum: with the predict's model FLOPs at the peak, step 11's MFU; less the
# causes drawn, step 12's DP sync; round-28 reading, finding 1: step 13's DP / FSDP part);
# ``compute``: the compute's ms, with the step's a share.
COMPLETES = {"efficiency": ("mfu", "whole", "compute"), "mfu": ("efficiency", "whole"),
             "tp": ("efficiency", "mfu", "whole"), "sync": ("efficiency", "mfu", "whole"),
             "dp": ("whole",)}


@lru_cache(maxsize=1)
def _drills() -> dict[str, str]:
    """Each share drill's answer as the bench prints it (each runs the lab once). The view is
    the registry's (app.routers.recipe registers it): importing that module would close a
    cycle."""
    from app.labkit import VIEWS

    return {f"drill-{d.id}": fmt_pct(d.answer() / 100) for d in VIEWS["recipe"].drills
            if d.id in DRILLS}


@lru_cache(maxsize=1)
def _asked() -> dict[str, list]:
    """Each asked step's states (their RecipeResults), from the lesson's facts."""
    lesson = facts()
    return {step: [lesson[name]["result"].result for name in (fact, *ALSO.get(step, ()))]
            for step, (_, fact, _same) in ASKED.items()}


@lru_cache(maxsize=1)
def _asked_shapes() -> dict[str, list[tuple]]:
    """Each asked step's states as what makes a state the same question (``ASKED``'s
    fields, in order): read once, not at every answer (issue 31)."""
    return {step: [tuple(shape(a)[s] for s in same) for a in _asked()[step]]
            for step, (_, _fact, same) in ASKED.items()}


@lru_cache(maxsize=1)
def _asked_printed() -> dict[str, set[str]]:
    """Each asked step's answers as the bench prints a figure of its kind (``PRINTED``)."""
    return {step: {PRINTED[kind](a) for a in _asked()[step]} if kind in PRINTED else set()
            for step, (kind, _fact, _same) in ASKED.items()}


@lru_cache(maxsize=4)
def _audited_layouts(plans: tuple[str, ...]) -> frozenset[tuple]:
    """The layouts (``LAYOUT``'s fields) of the lesson's facts ``plans``."""
    lesson = facts()
    return frozenset(tuple(shape(lesson[p]["result"].result)[s] for s in LAYOUT)
                     for p in plans)


def bench_keys(state) -> dict[str, tuple[str, ...]]:
    """The steps and drills each kind of figure answers at ``state`` (a RecipeState), kinds
    as ``KINDS``: ``audits`` is step 2's (which audit fails: the memory or the TP-in-a-node
    audit failing, wherever one does), ``replan`` step 9's (the plan a re-plan picks)."""
    r = state.result
    keys: dict[str, list[str]] = {k: [] for k in KINDS}
    if not r.legal:
        return {k: () for k in KINDS}
    after = state.replan.after if state.replan is not None else None
    printed = {kind: show(after if kind.startswith("replan") else r)
               for kind, show in PRINTED.items()
               if after is not None or not kind.startswith("replan")}
    mine = shape(r)
    for step, (kind, _fact, same) in ASKED.items():
        if tuple(mine[s] for s in same) in _asked_shapes()[step]:
            keys[kind].append(step)
        answers = _asked_printed()[step]
        keys.update({k: [*keys[k], step] for k, v in printed.items()
                     if v in answers and step not in keys[k]})
    for drill, answer in _drills().items():  # wherever a figure prints it
        keys.update({k: [*keys[k], drill] for k, v in printed.items() if v == answer})
    asked = {kind: [k for k in keys[kind] if k.startswith("step-")] for kind in COMPLETES}
    for kind, more in COMPLETES.items():
        for other in more:
            keys[other] += [k for k in asked[kind] if k not in keys[other]]
    broken = {a.name for a in r.audits if not a.ok}
    if broken & {MEMORY_AUDIT, "TP inside a node"}:
        keys["audits"].append("step-2")
    for step, plans in AUDITED.items():
        if tuple(mine[s] for s in LAYOUT) in _audited_layouts(plans):
            keys["audits"] += [step] if step not in keys["audits"] else []
            for kind in ("memory", "state"):
                keys[kind] += [step] if step not in keys[kind] else []
    if state.replan is not None and state.replan.after is not None:
        keys["replan"].append("step-9")
    return {k: tuple(v) for k, v in keys.items()}


def waits_for(keys) -> str:
    """What a mask says it waits for: "step 3's guess" or "the drill"."""
    steps = [f"step {k[5:]}'s guess" for k in keys if k.startswith("step-")]
    return " and ".join(steps + (["the drill"] if any(k.startswith("drill-") for k in keys)
                                 else []))


# The kinds of figure each part of a chart or table gives at a state: a step segment's and a
# cause's (by name), a collective's (by kind). Every part but compute also gives the
# efficiency (the compute's share of their sum).
PART_KINDS = {"bubble": ("bubble", "losses", "mfu"), "dp": ("losses", "dp", "sync"),
              "tp": ("tp",)}


def part_keys(keys: dict, name: str, efficiency: bool = False,
              lanes: bool = False) -> tuple[str, ...]:
    """The keys a part named ``name`` (a segment, a cause, a collective's kind) waits for;
    ``lanes``: a part of one micro-batch's or one layer's streams, which says nothing of
    which segment of the step is largest (step 14's)."""
    found = [k for kind in PART_KINDS.get(name, ()) if not (lanes and kind == "losses")
             for k in keys[kind]]
    if efficiency and name != "compute":
        found += keys["efficiency"]
    return tuple(dict.fromkeys(found))


def _owner(keys, **parts) -> list[dict]:
    """One owner group (lab.js layout.meta.owners) for ``keys``, or none while they are
    empty or own nothing."""
    if not keys or not any(parts.values()):
        return []
    return [{"step": " ".join(dict.fromkeys(keys)), **{k: v for k, v in parts.items() if v}}]


def _meta(figure: dict, owners: list[dict], **more) -> dict:
    if owners:
        figure["layout"]["meta"] = {"masked": {}, "partly": True, "owners": owners, **more}
    return figure


def step_owners(figure: dict, r, keys: dict) -> dict:
    """The step bar: each segment's trace owned by the steps it answers (``part_keys``), the
    efficiency's every segment but compute with the summary's figures, a re-plan's plan (its
    annotation and its sentence) by step 9."""
    from app.charts.recipe import SEGMENTS

    names = {label: key for key, (label, _) in SEGMENTS.items()}
    data, summary = figure["data"], figure["summary"]
    owners = []
    if keys["efficiency"] or keys["replan_efficiency"]:
        for t in data:  # the compute bar's share is the efficiency itself
            if names[t["name"]] == "compute":
                t["text"] = ["" for _ in t["text"]]
                t["customdata"] = ["compute" for _ in t["customdata"]]
    if keys["efficiency"]:
        told = summary.index("one step takes") if "one step takes" in summary else 0
        owners += _owner(keys["efficiency"], traces=[i for i, t in enumerate(data)
                                                     if names[t["name"]] != "compute"],
                         annotations=list(range(len(figure["layout"].get("annotations", [])))),
                         summary=[summary[told:summary.rindex("; MFU")],
                                  f"its parts show after {waits_for(keys['efficiency'])}"])
    mfu = f"MFU {fmt_pct(r.mfu)}"
    owners += _owner(keys["mfu"], summary=[mfu, "MFU ?"] if mfu in summary else None)
    for name in PART_KINDS:
        mine = part_keys(keys, name)
        part = {"pp": "pipeline", "dp": "DP"}.get("pp" if name == "bubble" else name)
        pp = r.parts["pp" if name == "bubble" else name] if name in ("bubble", "dp") else None
        owners += _owner(mine, traces=[i for i, t in enumerate(data) if names[t["name"]] == name],
                         summary=[f"{part} {fmt_pct(pp)}", f"{part} ?"] if pp is not None
                         and f"{part} {fmt_pct(pp)}" in summary and not keys["efficiency"]
                         else None)
    replan = (*keys["replan"], *keys["replan_efficiency"])
    axes = {}
    if replan and len(figure["layout"].get("annotations", [])) > 1:
        said = summary.split(". ")
        # The re-plan's bar too, and its name in the data (round-16 cold reading of EP07 and
        # EP08, finding 4: its segments, no DP sync and a bubble left, told "one replica,
        # stages kept or added"): its category reads "re-plan" alone, its note says the plan.
        for t in data:
            t["y"] = [*t["y"][:1], "re-plan"]
        figure["layout"]["annotations"][1]["y"] = "re-plan"
        owners += _owner(replan, annotations=[1],
                         points=[[i, 1] for i in range(len(data))],
                         summary=None if keys["efficiency"] else
                         [said[-1], f"Re-plan: it shows after {waits_for(replan)}"])
    if replan or keys["efficiency"]:
        # The axis reaches what stays drawn, not the step's (or the re-plan's) ms.
        axes = {"xaxis": {**{k: v for k, v in figure["layout"]["xaxis"].items()
                             if k != "range"}, "rangemode": "tozero"}}
    return _meta(figure, owners, **({"axes": axes} if axes else {}))


def causes_owners(figure: dict, micro: dict, r, keys: dict) -> dict:
    """The causes chart: each cause's bars (both traces' point) owned by the steps it answers;
    the MFU and the peak's time in the summary by the MFU's."""
    rows = [c["name"] for c in micro["micro_causes"] if c["exposed_s"] + c["hidden_s"] > 0]
    rows.reverse()  # as causes_figure draws them
    owners = []
    for name in PART_KINDS:
        owners += _owner(part_keys(keys, name),
                         points=[[i, j] for j, n in enumerate(rows) if n == name
                                 for i in (0, 1)])
    peak = f"take {micro['micro_at_peak_s'] * 1e3:,.0f} ms: MFU {fmt_pct(r.mfu)}"
    if peak in figure["summary"]:
        owners += _owner(keys["mfu"], summary=[peak, "take ? ms: MFU ?"])
    summary = figure["summary"]
    whole = summary[summary.index(": ") + 2:summary.index(";")] if ";" in summary else ""
    owners += _owner(keys["whole"], summary=[whole, "? ms on the slowest stage, of which "
                                                    "GEMMs ?"] if whole else None)
    return _meta(figure, owners)


def lanes_owners(figure: dict, items: list[dict], keys: dict, said: dict) -> dict:
    """A timeline (events) or layer (ops) chart: each collective's bars owned by the steps
    its kind answers, as ``_state_bars`` lays them (a trace per cost state, a point per
    item), and the summary's words of it (``said``: kind -> (text, mask) pairs)."""
    from app.charts.recipe_overlap import TIMELINE_STATES

    states = [s for s in TIMELINE_STATES if any(e["state"] == s for e in items)]
    owners = []
    for kind in ("tp", "dp"):
        mine = part_keys(keys, kind, lanes=True)
        points = [[i, j] for i, s in enumerate(states)
                  for j, e in enumerate(e for e in items if e["state"] == s)
                  if e["kind"] == kind]
        for text, mask in said.get(kind, ()):
            if text in figure["summary"]:
                owners += _owner(mine, summary=[text, mask])
        owners += _owner(mine, points=points)
    return _meta(figure, owners)


def memory_owners(figure: dict, r, keys: dict) -> dict:
    """The memory chart: the activations' bars by the steps that ask the total or the
    activations, the state's by step 15's (HSDP's state), the summary by either; the axis
    reaches what stays drawn and the GPU's line."""
    from app.charts.units import gb_axis

    total = list(dict.fromkeys((*keys["memory"], *keys["activations"])))
    state = keys["state"]
    heavy = r.memory.stages[r.memory.heaviest_stage]
    told = f"{fmt_bytes(heavy.total_bytes)} per GPU"
    summary = figure["summary"]
    shown = [figure["data"][i]["y"] for i, own in ((0, state), (1, total)) if not own]
    top = max([r.memory.gpu_memory_bytes / 1e9, *(v for ys in shown for v in ys)])
    either = tuple(dict.fromkeys((*total, *state)))  # the total gives each bar less the other
    owners = (_owner(total, traces=[1]) + _owner(state, traces=[0])
              + _owner(either, summary=[summary[summary.index(told):],
                                        f"? (after {waits_for(either)})"]))
    return _meta(figure, owners, axes={"yaxis": gb_axis(1.12 * top * 1e9)})


def veiled_figures(state, figures: dict) -> dict:
    """``figures`` (recipe_state.drawn_figures) with each chart's answering parts owned by the steps
    and drills they answer at ``state`` (``bench_keys``), for lab.js to veil until the guess."""
    from app.recipe_answer import end_words, layer_api, micro_api, timeline_api
    from labs.recipe.overlap import LABELS

    if not figures:
        return figures
    r, keys = state.result, bench_keys(state)
    line, layer = timeline_api(r), layer_api(r)
    step_owners(figures["step"], r, keys)
    causes_owners(figures["causes"], micro_api(r), r, keys)
    # ZeRO-0/1/2's DP wait is said once a step, after the critical path (step 12 asks it).
    once = line["exposed_s"]["dp"]
    # The micro-batch's end less the backward's drawn end is the DP wait too (ZeRO-0/1/2).
    end = f"slowest stage: {end_words(line['seconds'], line['compute_end_s'])}."
    # With it, each collective's term (a reduce-scatter's tail, an all-gather's wait).
    said = line["summary"]
    dp_said = f"DP {fmt_ms(once)} once a step"
    if dp_said in said and ". SMs lent" in said:
        dp_said = said[said.index(dp_said):said.index(". SMs lent")]
    # Round-28 reading, finding 1: the SMs charged are step 13's answer (ZeRO-3's gathers
    # charged as SMs lent), so they wait with the DP / FSDP bars.
    lent = f"SMs lent to NCCL, charged: {fmt_ms(line['charged_sm_s'])}"
    lanes_owners(figures["timeline"], line["events"], keys, {
        k: [(f"{LABELS[k]} {fmt_ms(v)}", f"{LABELS[k]} ?"),
            *([(dp_said, "DP ? once a step"), (end, "slowest stage: ?."),
               (lent, "SMs lent to NCCL, charged: ?")] if k == "dp" else [])]
        for k, v in line["exposed_s"].items() if k in ("tp", "dp")})
    if figures.get("layer") and layer:
        lanes_owners(figures["layer"], layer["ops"], keys, {
            "tp": [(f"TP {fmt_ms(layer['exposed_s']['tp'])}", "TP ?")],
            "dp": [(f"DP / FSDP {fmt_ms(layer['exposed_s']['dp'])}", "DP / FSDP ?"),
                   (f"forward {fmt_ms(layer['forward_s'])}", "forward ?"),
                   # less the table's kernels and TP, FSDP's part (round-28, finding 1)
                   (f"backward {fmt_ms(layer['backward_s'])}", "backward ?"),
                   (f"once a step: {fmt_ms(layer['step_end_s'])}", "once a step: ?")]})
        # The backward's start is the forward's end: with its kernels' sum (the table's),
        # the forward's wait; so is the DP wait's label at the step's end.
        meta = figures["layer"]["layout"].get("meta")
        notes = figures["layer"]["layout"]["annotations"]
        marks = _owner(part_keys(keys, "dp", lanes=True), shapes=[0], annotations=[
            i for i, a in enumerate(notes) if a["text"] == "backward →"
            or a["text"].startswith("DP wait")])
        if marks and meta:
            meta["owners"] += marks
        elif marks:
            _meta(figures["layer"], marks)
    memory_owners(figures["memory"], r, keys)
    return figures
