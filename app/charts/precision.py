"""EP10's memory diagrams: the FP8 ledger against BF16, each recipe's bytes per parameter and
the fine-tuning bills; and the step each state's figures answer. Its diagrams in time (the
activation offload's copy, the step against BF16's) are ``app.charts.precision_time``.

Every bar is read off ``labs.precision.lab``; EP01's colours for what EP01 bills too.
"""

from app.charts import (
    bar_key,
    base_layout,
    gpu_memory_line,
    short_gpu_name,
)
from app.charts.memory import COMPONENTS as LEDGER_COLOURS
from app.charts.precision_keys import (
    FINETUNE_KEY_NAMES,
    activations_step,
    bill_step,
    finetune_step,
    recipe_step,
    tokens_step,
    unsharded_step,
)
from app.charts.units import fmt_bytes, gb_axis
from labs.core.catalogue import RECIPES
from labs.model.code import LLAMA_65B
from labs.precision.reported import REPORTED

QLORA_GPU = REPORTED["qlora_gpu_bytes"].value  # QLoRA's "single 48GB GPU"

# Component key -> (label, colour), bottom first: the FP8 ledger and the fine-tuning bills.
LEDGER = {
    "weights": ("16-bit weights", LEDGER_COLOURS["weights"][1]),
    "fp8_weights": ("FP8 weight copies", "#9ecae9"),
    "scaling_state": ("Scales and amax history", "#72b7b2"),
    "gradients": ("Gradients", LEDGER_COLOURS["gradients"][1]),
    "master_weights": ("FP32 master weights", LEDGER_COLOURS["master_weights"][1]),
    "optimizer_moments": ("Adam moments", LEDGER_COLOURS["optimizer_moments"][1]),
    "activations_fp8": ("Activations saved in FP8", "#f4a582"),
    "activations": ("Activations, 16-bit", LEDGER_COLOURS["activations"][1]),
    "embedding_and_logits": LEDGER_COLOURS["embedding_and_logits"],
}
FINETUNE = {
    "weights": ("Base weights", LEDGER_COLOURS["weights"][1]),
    "quant_constants": ("NF4 quantization constants", "#9ecae9"),
    "dequant_workspace": ("Dequantized matrix (bf16)", "#bab0ac"),
    "adapter_weights": ("Adapter weights", "#eeca3b"),
    "gradients": ("Gradients", LEDGER_COLOURS["gradients"][1]),
    "master_weights": ("FP32 master weights", LEDGER_COLOURS["master_weights"][1]),
    "optimizer_moments": ("Adam moments", LEDGER_COLOURS["optimizer_moments"][1]),
    "activations": ("Activations", LEDGER_COLOURS["activations"][1]),
    "embedding_and_logits": LEDGER_COLOURS["embedding_and_logits"],
}
METHODS = {"full": "Full fine-tuning", "lora": "LoRA", "qlora": "QLoRA"}
PER_PARAM = {  # what holds a recipe's bytes per parameter -> (label, colour)
    "16-bit weights": ("16-bit weights", LEDGER["weights"][1]),
    "copies": ("Low-precision copies", LEDGER["fp8_weights"][1]),
    "gradients": ("Gradients", LEDGER["gradients"][1]),
    "master weights": ("FP32 master weights", LEDGER["master_weights"][1]),
    "Adam moments": ("Adam moments", LEDGER["optimizer_moments"][1]),
}
# What only an FP8 recipe keeps on the ledger (templates/partials/_precision.html masks
# their table cells as ledger_figure masks their bars).
COPY_KEYS = ("fp8_weights", "scaling_state")
# A recipe's state on the ledger (every copy of the weights, gradients, master and moments):
# its bytes per parameter times the parameters a GPU holds, masked with its step's answer.
STATE_KEYS = ("weights", *COPY_KEYS, "gradients", "master_weights", "optimizer_moments")
COPY_NAMES = {LEDGER[k][0] for k in COPY_KEYS}
STATE_NAMES = {LEDGER[k][0] for k in STATE_KEYS}
# The activations a recipe saves (16-bit and FP8): on long sequences, step 4's saving.
ACTIVATION_KEYS = ("activations_fp8", "activations")
ACTIVATION_NAMES = {LEDGER[k][0] for k in ACTIVATION_KEYS}
def short_recipe(recipe: str) -> str:
    """A bar's or row's name, never the record's id: BF16 for the baseline, mixed precision
    with fp32 gradients named as such (its summary reads as the baseline's), the record's
    short name otherwise."""
    if recipe == "adam16":
        return "BF16"
    if recipe == "adam18":
        return "BF16, fp32 gradients"
    return RECIPES[recipe].summary.split(",")[0]


def legend_below() -> dict:
    return {"orientation": "h", "y": -0.12, "x": 0, "yanchor": "top", "traceorder": "normal"}


def _stacked(bars: list[tuple[str, dict[str, float]]], components: dict, gpu_bytes: float,
             gpu_name: str, top: float | None = None) -> tuple[list[dict], dict]:
    """Stacked bars by component against the GPU's line, no legend (the table under the
    chart names each colour; segments tall enough carry their name). ``top``: the axis's
    height, a bar above it running off the top."""
    totals = [sum(b.values()) for _, b in bars]
    top = top or max(max(totals), gpu_bytes) * 1.12
    names = [name for name, _ in bars]
    data = []
    below = [0.0] * len(bars)  # each bar's height under the segment being drawn

    def named(v: float, under: float) -> bool:
        # A segment tall enough for its name, wholly under the axis's top and clear of the
        # GPU line's label (about 2% under the line to 9% over it, of the axis's height).
        mid = under + v / 2
        return (v >= 0.1 * top and under + v <= top
                and not gpu_bytes - 0.02 * top < mid < gpu_bytes + 0.09 * top)

    for key, (label, colour) in components.items():
        values = [b.get(key, 0.0) for _, b in bars]
        if not any(values):
            continue
        text = [label if named(v, u) else "" for v, u in zip(values, below, strict=True)]
        below = [u + v for u, v in zip(below, values, strict=True)]
        data.append({
            "type": "bar", "name": label, "x": names, "y": [round(v / 1e9, 4) for v in values],
            "marker": {"color": colour}, "customdata": [fmt_bytes(v) for v in values],
            "text": text,
            "textposition": "inside", "insidetextanchor": "middle", "textangle": 0,
            "textfont": {"color": "#ffffff"},
            "hovertemplate": f"{label}: %{{customdata}}<extra>%{{x}}</extra>",
        })
    over = [{"x": name, "y": top / 1e9, "yanchor": "bottom", "showarrow": False,
             "text": f"{fmt_bytes(total)} ↑", "font": {"size": 11}}
            for name, total in zip(names, totals, strict=True) if total > top]
    line = gpu_memory_line(gpu_bytes / 1e9, f"{gpu_name}: {fmt_bytes(gpu_bytes)}")
    layout = base_layout(
        barmode="stack", bargap=0.4, showlegend=False,
        uniformtext={"minsize": 9, "mode": "hide"},
        margin={"l": 52, "r": 8, "t": 22 if over else 8, "b": 28}, yaxis=gb_axis(top),
        xaxis={"fixedrange": True}, shapes=line["shapes"],
        annotations=line["annotations"] + over,
    )
    return data, layout


def ledger_figure(result) -> dict:
    """BF16 and the chosen recipe, stacked by what holds each byte on the heaviest GPU."""
    inp, base, led = result.input, result.baseline, result.ledger
    gpu = inp.gpu.memory_bytes
    gpu_name = short_gpu_name(inp.gpu.name)
    bars = [(short_recipe(base.recipe), base.parts)]
    if led.recipe != base.recipe:  # BF16 against itself is one bar (the page opens there)
        bars.append((short_recipe(led.recipe), led.parts))
    data, layout = _stacked(bars, LEDGER, gpu, gpu_name)
    # The FP8-only state answers the recipe's step (step 1's delayed scaling: a copy as large
    # as the 16-bit weights, 16 + 2 = 18 bytes a parameter; step 3's FP8 parameters: copies
    # as large as the bf16 copy they replace): on the lesson its traces wait for that step's
    # guess, the rest of the ledger drawn (lab.js, layout.meta.owners, "partly": never
    # veiled whole; issue 36).
    diff = result.extra_bytes
    # The chosen recipe by its name, not its bytes per parameter (EP10 step 1 asks for them).
    against = "" if led.recipe == base.recipe else (
        f", {short_recipe(led.recipe)} {fmt_bytes(led.total_bytes)}, "
        + (f"{fmt_bytes(diff)} more" if diff > 0 else f"{fmt_bytes(-diff)} less"))
    copies = [i for i, t in enumerate(data) if t["name"] in COPY_NAMES]
    # The recipe's other state on its bar (16-bit weights, gradients, master, moments) waits
    # too, as the table masks it (issue 36, EP10): at step 5's state its fp32 gradients and
    # bf16 moments beside BF16's drew what step 5 asks; at step 1's, hovered, they read as
    # BF16's, "the same". BF16's bar, the question's 16 bytes, stays drawn.
    state = [[i, len(bars) - 1] for i, t in enumerate(data)
             if t["name"] in STATE_NAMES and i not in copies]
    step = recipe_step(led.recipe) if len(bars) > 1 else None
    held = [against, f", {short_recipe(led.recipe)} ? per GPU"]
    owners = []
    if step and (copies or state):
        # Its total waits with the copies: less the parts drawn, it is the copies' bytes
        # (round-9 cold reading, finding 9: 51.4 GB, 5.51 GB less than BF16's 56.9 GB, beside
        # 7.52 GB of activations saved in FP8, gave step 1's 2.01 GB).
        # Their legend names wait too ("FP8 weight copies": what the state keeps besides
        # BF16's; round-11 cold reading of EP09-EP10, finding 3).
        owners.append({"step": step, "traces": copies, "points": state,
                       **({"summary": held} if copies else {})})
    long = tokens_step(inp) if len(bars) > 1 else None
    acts = activations_step(inp) if len(bars) > 1 else None
    whole = unsharded_step(inp) if len(bars) > 1 else None
    if acts and not long:
        owners.append({"step": acts, "points": [
            [i, len(bars) - 1] for i, t in enumerate(data) if t["name"] in ACTIVATION_NAMES]})
    if long or whole:
        # On a long sequence the recipe's activations and its total against BF16's are step
        # 4's saving (round-13 cold reading of EP10-EP11, finding 3: at 32,768 tokens the
        # FP8 bar's 30.1 GB of FP8 activations, and 146 - 85.9 GB of 16-bit ones); with the
        # FP8 copies whole, the recipe's whole bar against BF16's is step 2's answer
        # (unsharded_step). The total waits for each step it answers: one owner of the
        # summary, every key (one mask).
        for owner in owners:
            owner.pop("summary", None)
        names = ACTIVATION_NAMES if not whole else {t["name"] for t in data}
        owners.append({"step": " ".join(k for k in (step if copies else None, whole, long)
                                        if k),
                       "summary": held, "points": [
            [i, len(bars) - 1] for i, t in enumerate(data) if t["name"] in names]})
    bill = bill_step(inp)
    if bill:
        # At step 7's recomputation BF16's bill is its answer, one division away, and the
        # other bar is BF16's less or plus what the caption says: every bar and the whole
        # caption wait (one owner of the summary, every key).
        for owner in owners:
            owner.pop("summary", None)
        said = (f"BF16 holds {fmt_bytes(base.total_bytes)} per GPU{against}",
                "BF16 holds ? per GPU" + (f", {short_recipe(led.recipe)} ? per GPU"
                                          if len(bars) > 1 else ""))
        owners.append({"step": " ".join(k for k in (step if copies else None, whole, long, bill)
                                        if k),
                       "summary": list(said), "points": [
            [i, j] for i in range(len(data)) for j in range(len(bars))]})
    if owners:
        layout["meta"] = {"masked": {}, "partly": True, "owners": owners,
                          "names": {str(i): f"? ({step.replace('-', ' ')})" for i in copies}}
    return {
        "data": data, "layout": layout, "key": bar_key(data),
        "summary": (
            f"{inp.model.name} on {inp.tp * inp.pp * inp.cp * inp.dp:,} GPUs: BF16 holds "
            f"{fmt_bytes(base.total_bytes)} per GPU{against} against the {gpu_name}'s "
            f"{fmt_bytes(gpu)}"
        ),
    }


def bytes_rows(result) -> list:
    """The recipes the bytes chart and table draw: BF16 mixed precision and the chosen one.
    Not every recipe: EP10's steps ask for each FP8 recipe's bytes per parameter before their
    links choose it (issue 36: no answer on the bench before the guess)."""
    return [r for r in result.per_param if r.recipe in ("adam16", result.input.recipe)]


def bytes_figure(result) -> dict:
    """BF16's and the chosen recipe's bytes per parameter, stacked by what holds them; the
    chosen recipe's name in bold."""
    rows = list(reversed(bytes_rows(result)))  # BF16 on top
    names = [(f"<b>{short_recipe(r.recipe)}</b>" if r.recipe == result.input.recipe
              else short_recipe(r.recipe)) for r in rows]
    data = []
    for key, (label, colour) in PER_PARAM.items():
        values = [sum(b for what, b in r.parts if (what == key) or (
            key == "copies" and what not in PER_PARAM)) for r in rows]
        if not any(values):
            continue
        data.append({
            "type": "bar", "orientation": "h", "name": label, "y": names, "x": values,
            "marker": {"color": colour},
            "hovertemplate": f"{label}: %{{x:.3g}} B/param<extra>%{{y}}</extra>",
        })
    notes = [{"x": r.total, "y": name, "xanchor": "left", "showarrow": False,
              "text": f" {r.total:.3g}", "font": {"size": 11}}
             for r, name in zip(rows, names, strict=True)]
    chosen = next(r for r in result.per_param if r.recipe == result.input.recipe)
    base = next(r for r in result.per_param if r.recipe == "adam16")
    # Another recipe's bytes answer its EP10 step (1, 3, 5 or 6: recipe_step): on the lesson,
    # until that step's guess, the chart is drawn veiled (static/js/lab.js), its total a "?"
    # and no legend (a "Low-precision copies" entry would say which way it goes); BF16's 16
    # the question gives.
    step = recipe_step(chosen.recipe)
    veil = {} if step is None else {"meta": {
        "masked": {"0": " ?", "1": notes[1]["text"]}, "owners": [{"step": step}],
        "names": {str(i): None for i in range(len(data))}}}
    return {
        "data": data,
        "layout": base_layout(barmode="stack", bargap=0.3, legend=legend_below(),
                              annotations=notes, margin={"l": 96, "r": 24, "t": 8, "b": 24},
                              xaxis={"ticksuffix": " B", "range": [0, 21], "fixedrange": True},
                              yaxis={"fixedrange": True, "automargin": True}, **veil),
        "summary": (
            f"Bytes per parameter by recipe: {RECIPES[chosen.recipe].summary.split(',')[0]} "
            f"keeps {chosen.total:.3g} ({', '.join(f'{b:.3g} {w}' for w, b in chosen.parts)}), "
            f"BF16 mixed precision {base.total:.3g}"
        ),
    }


def finetune_figure(result) -> dict:
    """Full fine-tuning, LoRA and QLoRA of one model on one GPU."""
    inp = result.input
    gpu = inp.gpu.memory_bytes
    gpu_name = short_gpu_name(inp.gpu.name)
    bars = [(METHODS[f.method], f.breakdown) for f in result.finetunes]
    # Full fine-tuning can be 50 times LoRA's bill: the axis stops at 1.5 x the larger of
    # LoRA's bar and the GPU, and a taller bar runs off the top with its total written there.
    top = 1.5 * max(result.finetune("lora").total_bytes, gpu)
    tallest = max(f.total_bytes for f in result.finetunes)
    data, layout = _stacked(bars, FINETUNE, gpu, gpu_name,
                            top if tallest > top else None)
    if inp.model.id == LLAMA_65B and gpu > QLORA_GPU:
        # The QLoRA paper's 65B run fit one 48 GB GPU: EP10 step 11 asks the bill against it,
        # so the chart draws that line too (round-17 cold reading of EP10, finding 2).
        paper = gpu_memory_line(QLORA_GPU / 1e9, f"QLoRA paper's GPU: {fmt_bytes(QLORA_GPU)}")
        layout["shapes"] = layout["shapes"] + paper["shapes"]
        layout["annotations"] = layout["annotations"] + paper["annotations"]
    full, lora, qlora = (result.finetune(k) for k in ("full", "lora", "qlora"))
    adapted = (f", LoRA (rank {inp.rank}, {lora.trainable:,} trainable parameters) "
               f"{fmt_bytes(lora.total_bytes)}, QLoRA {fmt_bytes(qlora.total_bytes)}")
    step = finetune_step(inp)
    if step:
        # At a state step 10 or 11 asks about, the LoRA and QLoRA bars (their adapters give
        # the trainable parameters, their totals the fit) wait for its guess; full
        # fine-tuning's stays drawn (round-13 cold reading of EP10-EP11, findings 1 and 2).
        layout["meta"] = {"masked": {}, "partly": True, "owners": [{
            "step": step,
            "summary": [adapted, ", LoRA and QLoRA ? (after "
                        + " and ".join(FINETUNE_KEY_NAMES[k] for k in step.split()) + ")"],
            "points": [[i, k] for i in range(len(data)) for k, f in
                       enumerate(result.finetunes) if f.method != "full"]}]}
    return {
        "data": data, "layout": layout, "key": bar_key(data),
        "summary": (
            f"{inp.model.name} on one {gpu_name}: full fine-tuning {fmt_bytes(full.total_bytes)}"
            f"{adapted}, against {fmt_bytes(gpu)}"
        ),
    }
