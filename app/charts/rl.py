"""EP09's diagrams: the cluster coloured by role, memory per pool, and a step's timeline."""

from app.charts import base_layout, gpu_memory_line, short_gpu_name
from app.charts.units import fmt_bytes, gb_axis
from labs.rl.recipes import get_recipe

# Role -> (label, colours): training and colocated ranks take one shade per data-parallel
# replica (one model-parallel group, TP x PP x CP GPUs), so replicas read apart.
ROLES = {
    "training": ("Training rank", ("#2f5f93", "#4c78a8", "#6f95c2", "#9ab5d8")),
    "colocated": ("Training + rollout (colocated)", ("#5b3f8c", "#7b5ea8", "#9d84c2",
                                                       "#bfaedb")),
    "rollout": ("Rollout engine", ("#3f8a3a",)),
    "prefill": ("Prefill engine", ("#d9730d",)),
    "decode": ("Decode engine", ("#2a9d8f",)),
    "unplaced": ("No whole replica: the recipe fails here", ("#d62728",)),
    "idle": ("Idle (rest of the node)", ("#d9dde5",)),
}
PALETTE = [(role, i, colour) for role, (_, colours) in ROLES.items()
           for i, colour in enumerate(colours)]
CODE = {(role, i): n for n, (role, i, _) in enumerate(PALETTE)}
PHASES = {"rollout": ("Rollout", "#54a24b"), "train": ("Train", "#4c78a8"),
          "weight_sync": ("Weight sync", "#e45756")}
PARTS = {  # memory component -> (label, colour), stacking order
    "weights": ("Weights", "#4c78a8"), "gradients": ("Gradients", "#f58518"),
    "master_weights": ("FP32 master weights", "#54a24b"),
    "optimizer_moments": ("Adam moments", "#b279a2"), "activations": ("Activations", "#e45756"),
    "embedding_and_logits": ("Embedding and logits", "#ff9da6"),
    "kv_cache": ("KV cache", "#72b7b2"), "workspace": ("Workspace", "#9d755d"),
    "transition": ("Transition overhead", "#1d2330"),
}


def _cell(g: dict, replicas: bool = True) -> tuple[int, str, str]:
    """A GPU's colour code, label and hover; without ``replicas``, its role alone: one shade
    a role, no stage or replica (what step 1's state draws before its guess)."""
    role = g["role"]
    shades = len(ROLES[role][1])
    shade = g.get("dp", 0) % shades if role in ("training", "colocated") and replicas else 0
    label, hover = "", ROLES[role][0]
    if "pp" in g and replicas:
        label = f"P{g['pp']}"
        hover += (f"<br>replica {g['dp']}, stage {g['pp']}, TP rank {g['tp']}, "
                  f"CP rank {g['cp']}")
    if "engine" in g:
        label = f"{label}·E{g['engine']}" if label else f"E{g['engine']}"
        hover += f"<br>engine {g['engine']}"
    if not g.get("divides", True):  # no memory bill to fit: the layout does not divide
        label += "÷"
        hover += "<br>the layout does not divide (the checks): no memory bill"
    elif not g["fits"]:
        label += "✗"
        hover += "<br>does not fit in memory"
    return CODE[(role, shade)], label, hover


def replica_keys(result) -> tuple[str, ...]:
    """The steps the state's replica count (DP) answers: step 1's at the GPUs and degrees its
    question states (DeepSeek-R1's recipe: how many replicas do 128 GPUs at TP 8, PP 4, CP 4
    hold?), which the R1 preset sets from the Recipe menu and step 6's links (round-14 cold
    reading of EP09, finding 10: the readout and the world-size check printed "DP 1")."""
    inp, r1 = result.input, get_recipe("deepseek-r1")
    asked = (r1.train_gpus, r1.tp, r1.pp, r1.cp)
    return ("step-1",) if (inp.train_gpus, inp.tp, inp.pp, inp.cp) == asked else ()


# The cells' labels ("P0·E0÷": stage, engine, a mark), and on a phone (static/js/lab.js,
# layout.meta.phoneText) a size that fits a cell of its map, 8 GPUs across about 300 px
# (round-19 cold reading Z, finding 14: at 10 px they ran into each other at 390 px).
TEXT_SIZE, PHONE_TEXT_SIZE = 10, 8


def cluster_figure(result) -> dict:
    """Nodes as rows, their 8 GPUs as columns, each cell coloured by role."""
    per_node = 8
    nodes = len(result.gpus) // per_node

    def grid(replicas: bool) -> tuple[list, list, list]:
        z, text, hover = [], [], []
        for n in range(nodes):
            row = [_cell(g, replicas) for g in result.gpus[n * per_node:(n + 1) * per_node]]
            z.append([c[0] for c in row])
            text.append([c[1] for c in row])
            hover.append([c[2] for c in row])
        return z, text, hover

    top = len(PALETTE) - 1
    scale = []
    for n, (_, _, colour) in enumerate(PALETTE):
        scale += [[n / (top + 1), colour], [(n + 1) / (top + 1), colour]]
    small = nodes <= 16
    counts = {}
    for g in result.gpus:
        counts[g["role"]] = counts.get(g["role"], 0) + 1
    parts = ", ".join(f"{c} {ROLES[r][0].lower()}" for r, c in counts.items())
    divides = all(g.get("divides", True) for g in result.gpus)
    # Its replicas (the shades, each GPU's stage and replica) answer step 1 at step 1's state:
    # there the roles are drawn alone beneath, and the replicas over them wait for its guess
    # (round-16 cold reading of EP09, finding 9: the whole map was one grey block on a phone).
    keys = replica_keys(result)

    def heatmap(replicas: bool) -> dict:
        z, text, hover = grid(replicas)
        return {
            "type": "heatmap", "z": z, "text": text, "customdata": hover,
            "texttemplate": "%{text}" if small else "", "textfont": {"size": TEXT_SIZE},
            "hovertemplate": "node %{y}, GPU %{x}<br>%{customdata}<extra></extra>",
            "colorscale": scale, "zmin": -0.5, "zmax": top + 0.5, "showscale": False,
            "xgap": 2, "ygap": 2, "name": "replicas" if replicas else "roles",
        }

    return {
        "data": [heatmap(False), heatmap(True)] if keys else [heatmap(True)],
        "layout": base_layout(
            # One row per node: a one-node job should not stretch into tall bars.
            height=max(170, min(520, 80 + 34 * nodes)),
            margin={"l": 56, "r": 8, "t": 8, "b": 44},  # room for the title under the ticks
            xaxis={"title": {"text": "GPU in node", "standoff": 8}, "tickmode": "array",
                   "tickvals": list(range(per_node)), "fixedrange": True, "side": "bottom"},
            yaxis={"title": {"text": "node"}, "autorange": "reversed", "fixedrange": True,
                   "tickmode": "auto", "nticks": min(nodes, 16)},
            meta={"phoneText": PHONE_TEXT_SIZE,
                  **({"masked": {}, "partly": True,
                      "owners": [{"step": " ".join(keys), "traces": [1]}]} if keys else {})},
        ),
        "key": [[ROLES[r][0], ROLES[r][1][0]] for r in counts],  # the roles present
        "summary": (f"{len(result.gpus)} GPUs on {nodes} node{'s' if nodes > 1 else ''} of 8: "
                    f"{parts}; "
                    + ("the layout does not divide" if not divides
                       else "every pool fits" if all(p.fits for p in result.pools)
                       else "a pool does not fit")),
    }


def _stack(name: str, parts: dict[str, float]) -> list[dict]:
    out = []
    for key, (label, colour) in PARTS.items():
        value = parts.get(key, 0)
        if value > 0:
            out.append({"type": "bar", "name": label, "x": [name], "y": [round(value / 1e9, 3)],
                        "marker": {"color": colour}, "legendgroup": key,
                        "hovertemplate": f"{name}, {label}: {fmt_bytes(value)}<extra></extra>"})
    return out


# The step of EP09 whose prediction a pool's memory answers: the rollout pool's holds the KV
# cache step 3 asks for, the colocated need is step 4's answer, the training pool's gives what
# step 8 asks comes free (templates/partials/_rl.html masks the tables' figures the same way).
MEMORY_STEPS = {"rollout": "step-3", "colocated": "step-4", "training": "step-8"}
# The model whose serving GPU step 3 asks about (its KV cache beside its weights).
CACHE_MODEL = "deepseek-r1"


def cache_keys(result) -> tuple[str, ...]:
    """What a colocated state's rollout phase answers besides (round-16 cold reading of EP09,
    finding 3): at DeepSeek-R1's states its KV cache, and the phase's total less the weights
    and workspace step 3 states, give step 3's share, so they wait for step 3's guess (the
    need, max(phases) + transition, for step 4's and step 3's)."""
    return ("step-3",) if result.input.model.id == CACHE_MODEL else ()


def memory_figure(result) -> dict:
    """Per-GPU bill of every pool against the GPU's memory; colocated shows both phases and
    the need, max(training, rollout) + transition."""
    inp = result.input
    bars: list[dict] = []
    pool = result.pools[0]
    tops = [p.memory_per_gpu_bytes for p in result.pools if p.memory_per_gpu_bytes < 1e30]
    # The bars each predicting step asks about, masked on the lesson until its guess (lab.js,
    # layout.meta.owners; issue 36: the colocated need's bars added up to step 4's answer, the
    # training pool's bar gave step 8's, the rollout pool's the KV cache step 3 asks for).
    owned: dict[str, list[int]] = {}

    def add(step: str | None, stack: list[dict]) -> None:
        if step:
            owned.setdefault(step, []).extend(range(len(bars), len(bars) + len(stack)))
        bars.extend(stack)

    if pool.role == "colocated":
        train, roll = pool.breakdown["training"], pool.breakdown["rollout"]
        cache = cache_keys(result)
        add(None, _stack("training phase", result.train_breakdown))  # step 4 states both
        phase = _stack("rollout phase", result.rollout_breakdown)
        for step in cache:  # the phase's KV cache, step 3's numerator, at its states
            owned.setdefault(step, []).extend(len(bars) + i for i, b in enumerate(phase)
                                              if b["legendgroup"] == "kv_cache")
        add(None, phase)
        if result.colocated_bytes is not None:
            larger = (result.train_breakdown if train >= roll else result.rollout_breakdown)
            add(" ".join((MEMORY_STEPS["colocated"], *cache)), _stack(
                "colocated need", {**larger, "transition": result.transition_overhead_bytes}))
        tops += [train, roll]
    else:
        for p in result.pools:
            add(MEMORY_STEPS.get(p.role), _stack(f"{p.role} ({p.gpus} GPUs)", p.breakdown))
    seen = set()
    for b in bars:
        b["showlegend"] = b["legendgroup"] not in seen
        seen.add(b["legendgroup"])
    gpu = inp.gpu.memory_bytes
    name = short_gpu_name(inp.gpu.name)
    top = max([gpu, *tops]) * 1.15
    fits = all(p.fits for p in result.pools)
    parts = {p.role: f"{p.role}: {fmt_bytes(p.memory_per_gpu_bytes)} per GPU"
             if p.memory_per_gpu_bytes < 1e30 else f"{p.role}: the layout does not divide"
             for p in result.pools}
    owners = [{"step": step, "traces": traces} for step, traces in owned.items()]
    # Only the answering bars wait (round-14 cold reading of EP09, finding 7: colocated, the
    # whole chart was grey through steps 1-3 while only the need is step 4's answer, and the
    # table under it printed the rollout phase): the phases step 4 states are drawn. While the
    # need waits, the GB axis reaches only the phases' bars.
    meta = {"masked": {}, "owners": owners, "partly": True}
    if pool.role == "colocated":
        drawn = max(gpu, pool.breakdown["training"], pool.breakdown["rollout"])
        meta["axes"] = {"yaxis": gb_axis(drawn * 1.15)}
        # The switch's legend entry, the need's alone, is dropped while the need waits: the
        # phases' eight entries fill a phone's legend already.
        meta["names"] = {str(i): None for i, b in enumerate(bars)
                         if b["legendgroup"] == "transition"}
    for owner in owners:
        role = next((r for r, s in MEMORY_STEPS.items()
                     if s == owner["step"].split()[0] and r in parts), None)
        if role and parts[role].endswith(" per GPU"):
            owner["summary"] = [parts[role], f"{role}: ? per GPU"]
    return {
        "data": bars,
        "layout": base_layout(
            barmode="stack", bargap=0.35, margin={"l": 52, "r": 8, "t": 8, "b": 40},
            meta=meta,
            yaxis=gb_axis(top), xaxis={"fixedrange": True},
            **gpu_memory_line(gpu / 1e9, f"{name}: {fmt_bytes(gpu)}"),
        ),
        "summary": f"{'; '.join(parts.values())} against the {name}'s {fmt_bytes(gpu)}: "
                   + ("every pool fits" if fits else "does not fit"),
    }


# The model ids of EP09's steps whose answers a step's times give (timeline_keys).
R1, GLM9 = "deepseek-r1", "glm-4-9b"
# Its drills' states, keyed by the drill's form (lab.js masks a figure keyed "drill-<id>" until
# that drill is answered): GLM-4-9B's rollout at 16 responses a prompt (step 5's predict
# drill), and its plans on 24 GPUs (the closing decide).
ROLLOUT_DRILL, DECIDE_DRILL = ("drill-placement-predict-rollout-2x",
                               "drill-placement-decide-throughput")
DECIDE_GPUS = 24


def timeline_keys(result) -> dict[str, tuple[str, ...]]:
    """What masks each of a step's times on the lesson (round-11 cold reading of EP09,
    finding 1: the timeline and the Step cell were never masked): the rollout waits for step
    5's guess, the training and the sync for step 6's (step 6's diagram), the step and the
    samples a second for step 2's; and each, for the state that answers a step or a drill,
    for that one too: DeepSeek-R1's step time steps 5 and 6 (at step 6's own states, R1 with
    its default engines, every time is step 6's alone), GLM-4-9B's times step 2 (step 2's
    alone: its guess draws them), its 16 responses a prompt step 5's predict drill, its 24
    GPUs the closing decide."""
    inp = result.input
    state: tuple[str, ...] = ()  # what the state's every time answers
    step: tuple[str, ...] = ()  # what its step time answers besides
    rollout, base = ("step-5",), ("step-2",)
    if inp.model.id == R1 and (inp.engines or inp.placement == "separate-pd"):
        # Step 5's states (4 engines, whole or split): the rollout is step 5's (its why quotes
        # it); the step, with the rollout, gives the sync, which step 6 asks about.
        step = ("step-5", "step-6")
    elif inp.model.id == R1:
        # Step 6's states (its links, R1 colocated and separate, whose rollouts are one): the
        # rollout is step 6's answer, "the longest part", so its guess draws it (round-14
        # cold reading of EP09, finding 1: the reveal said "Right" with every bar but the
        # rollout); the step is max(rollout, training) + sync, all of them step 6's.
        rollout, base = ("step-6",), ()
        step = ("step-6",)
    elif inp.model.id == GLM9 and inp.responses_per_prompt == 8 \
            and len(result.gpus) != DECIDE_GPUS:
        # Step 2's states (its links, GLM-4-9B colocated and separate): every time is step
        # 2's alone, so its guess draws the overlap it teaches and the times its why adds up
        # (round-16 cold reading of EP09, finding 1: each bar waited for step 5's or 6's
        # guess as well, so step 2's reveal drew nothing on the timeline).
        rollout, base = ("step-2",), ()
        state = ("step-2",)
    elif inp.model.id == GLM9:
        state = (ROLLOUT_DRILL,) if inp.responses_per_prompt != 8 else (DECIDE_DRILL,)

    def keys(*own: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(own + state))

    later = () if state == ("step-2",) else ("step-6",)
    return {"rollout": keys(*rollout), "train": keys(*later), "weight_sync": keys(*later),
            "step": keys(*base, *step)}


TIMELINE_MASK = "The phases' times show once their steps are guessed."


def timeline_figure(result) -> dict:
    """Lanes of one, two or three steps: rollout, training, weight sync, in seconds."""
    data, seen = [], set()
    lanes = []
    for ph in result.timeline:
        if ph.lane not in lanes:
            lanes.append(ph.lane)
    for ph in result.timeline:
        label, colour = PHASES[ph.phase]
        data.append({
            "type": "bar", "orientation": "h", "y": [ph.lane], "x": [round(ph.end - ph.start, 4)],
            "base": [round(ph.start, 4)], "name": label, "legendgroup": ph.phase,
            "showlegend": ph.phase not in seen,
            # A white edge parts back-to-back phases; the label names phase and step.
            "marker": {"color": colour, "line": {"color": "#ffffff", "width": 1.5}},
            "text": [f"{label[0]}{ph.step + 1}"], "textposition": "inside",
            "insidetextanchor": "middle", "textfont": {"color": "#ffffff"},
            "hovertemplate": (f"{label}, step {ph.step + 1}: {ph.start:,.1f} s to {ph.end:,.1f} s"
                              "<extra></extra>"),
        })
        seen.add(ph.phase)
    times = (f"a step takes {result.step_seconds:.1f} s "
             f"(rollout {result.rollout_seconds:.1f} s, training "
             f"{result.train_seconds:.1f} s, weight sync {result.sync_seconds:.1f} s): "
             f"{result.samples_per_second:.2f} samples per second")
    # Each phase's bars wait on the lesson for the steps its time answers (timeline_keys;
    # lab.js, layout.meta.owners): the chart is veiled whole until the first of them is
    # guessed, then a phase's bars until all of its own are. The summary says none of its
    # times while any owner waits.
    keys = timeline_keys(result)
    owned: dict[str, list[int]] = {}
    for i, ph in enumerate(result.timeline):
        for key in keys[ph.phase]:
            owned.setdefault(key, []).append(i)
    owners = [{"step": key, "traces": owned.get(key, []),
               "summary": [times, "its times show once their steps are guessed"]}
              for key in dict.fromkeys(k for ks in keys.values() for k in ks)]
    return {
        "data": data,
        "layout": base_layout(
            barmode="overlay", uniformtext={"minsize": 9, "mode": "hide"},
            margin={"l": 72, "r": 8, "t": 8, "b": 40},
            legend={"orientation": "h", "y": -0.3, "x": 0, "yanchor": "top"},
            xaxis={"title": {"text": "seconds"}, "fixedrange": True, "rangemode": "tozero"},
            yaxis={"categoryorder": "array", "categoryarray": lanes[::-1], "fixedrange": True},
            meta={"masked": {}, "owners": owners},
        ),
        "summary": f"{result.input.placement}: {times}",
    }
