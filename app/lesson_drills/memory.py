"""EP01's predict and decide drills (``LESSON_DRILLS["memory"]``)."""

import math

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb
from labs.hardware.gpus import get_gpu
from labs.memory.inputs import STATE_KEYS, MemoryInput
from labs.memory.lab import compute_memory, recompute_peak_bytes
from labs.model.presets import get_model


def _state(answer: dict) -> float:
    """The training state a GPU holds (weights, gradients, master copy, moments)."""
    return sum(answer["breakdown"][k] for k in STATE_KEYS)


def _rest(answer: dict) -> float:
    """Everything else on that GPU: the activations, with the logits and workspace."""
    return answer["total_bytes"] - _state(answer)


def _b(params: float) -> str:
    return f"{params / 1e9:.2f}B"


# EP01's predict drill: 405B's 16-byte state sharded over 64 H200s with full recomputation.
# It asks what a GPU holds in all, which the page prints nowhere: its state share alone was
# step 2's 6.49 TB over 64, a derive labelled predict (round-17 cold reading of EP01,
# finding 6); the activations ZeRO does not shard (step 5) are the part to predict.
L405 = get_model("llama-3.1-405b")
P405, H200 = L405.params, get_gpu("h200").memory_bytes
H200_SHARDS = 64
_DRILL_STATE = {"model": "llama-3.1-405b", "gpu": "h200", "dp": H200_SHARDS, "zero": 3,
                "recompute": "full", "seq_len": 4096}
# EP01's decide drill: the 8B on one H100 in the 18-byte recipe at Llama 3.1's pre-training
# length, selective recomputation; which of four training changes EP01 teaches cuts its bill
# the most (issue 36: the serving option it had before abandoned training, so its right
# answer taught nothing of the ledger). Each saving is one of EP01's formulas: 2 B a
# parameter (step 2), 34·s·h a layer against full recomputation's 2·s·h and fused
# attention's same 34·s·h (step 3), and the tokens. At 4,096 tokens the recipe's 16.1 GB
# and full recomputation's 17.2 GB are 1.1 GB apart; at 8,192 they separate clearly.
P8, H100 = get_model("llama-3.1-8b").params, get_gpu("h100-sxm").memory_bytes
CUT_BASE = {"model": "llama-3.1-8b", "recipe": "adam18", "seq_len": 8192}
CUT_STATES = {"adam16": {**CUT_BASE, "recipe": "adam16"},
              "full": {**CUT_BASE, "recompute": "full"},
              "half": {**CUT_BASE, "seq_len": CUT_BASE["seq_len"] // 2},
              "flash": {**CUT_BASE, "recompute": "flash"}}


def _base() -> dict:
    """The decide's starting state, as GET /api/memory answers it."""
    return lab_value("memory", CUT_BASE, lambda a: a)


def cut(answer: dict) -> float:
    """Bytes a change saves against the decide's starting state."""
    return _base()["total_bytes"] - answer["total_bytes"]


def _layers(key: str = "") -> str:
    """s × h × layers of a state (the starting one by default), as EP01 step 3 multiplies
    them by 34 or 2."""
    m = get_model(CUT_BASE["model"])
    return f"{CUT_STATES.get(key, CUT_BASE)['seq_len']:,} × {m.hidden:,} × {m.layers}"


def _state_405b_whole() -> float:
    """405B's whole training state, GB, as the lab counts it (GET /api/memory)."""
    return lab_value("memory", _DRILL_STATE, "state_bytes") / 1e9


def _state_405b() -> float:
    return _state_405b_whole() / H200_SHARDS


def _drill_acts(per_layer: int) -> float:
    """GB of a 405B GPU's layer activations at the drill's sequence, keeping ``per_layer``·s·h
    bytes a layer (full recomputation's 2, selective's 34: step 3)."""
    return per_layer * _DRILL_STATE["seq_len"] * L405.hidden * L405.layers / 1e9


def _drill_answer() -> dict:
    return lab_value("memory", _DRILL_STATE, lambda a: a)


def _drill_total(per_layer: int) -> float:
    """The drill's total with ``per_layer``·s·h a layer: its state's share, the layers'
    activations and the logits with their neighbours, as the lab bills them."""
    return (_state_405b() + _drill_acts(per_layer)
            + _drill_answer()["breakdown"]["embedding_and_logits"] / 1e9)


def _drill_peak() -> float:
    """The drill's GPU at its peak, bytes: the bill plus the one layer the backward runs
    again (selective's 34·s·h), as EP01 step 5's why counts it (round-31 reading A,
    finding 8: the solution gave the bill alone beside the why's peak)."""
    s = _DRILL_STATE
    return recompute_peak_bytes(compute_memory(MemoryInput(
        model=L405, gpu=get_gpu(s["gpu"]), dp=s["dp"], zero=s["zero"],
        recompute=s["recompute"], seq_len=s["seq_len"])))


def _drill_solution() -> str:
    a = _drill_answer()
    fits = "fits" if a["fits"] else "does not fit"
    s = _DRILL_STATE["seq_len"]
    # Each term to two decimals, so the printed three add to the printed sum and round to the
    # answer (round-21 cold reading P, finding 9: 101.5 + 16.9 + 2.4 read 120.8 beside 120.7).
    terms = (_state_405b(), _drill_acts(2), a["breakdown"]["embedding_and_logits"] / 1e9)
    return (f"{{answer}} GB: the state's share, 16 B × {P405 / 1e9:.2f}B ÷ {H200_SHARDS} = "
            f"{terms[0]:.2f} GB; full recomputation's 2·s·h a layer, 2 × {s:,} × "
            f"{L405.hidden:,} × {L405.layers} = {terms[1]:.2f} GB, which ZeRO does not "
            f"shard; and {terms[2]:.2f} GB of fp32 logits and their neighbours (step 2): "
            f"{' + '.join(f'{t:.2f}' for t in terms)} = {a['total_bytes'] / 1e9:.2f} GB "
            f"({_drill_peak() / 1e9:.1f} GB at the peak, while a layer is recomputed). It "
            f"{fits} the {H200 / 1e9:.0f} GB. With selective recomputation's 34·s·h the "
            f"layers alone would take {_drill_acts(34):.0f} GB.")


# EP01's predict drill: the 8B's bill at eight times step 1's tokens. Nothing on the page
# prints it, and no printed figure gives it by one product: the student has to see that the
# state stays and what grows with the tokens (the layers' 34·s·h and the logits, step 3)
# grows eight-fold (round-19 cold reading X, finding 13: the 405B drill below, worked from
# the inputs its question states, is a derive and is headed so).
LONG_STATE = {"model": "llama-3.1-8b", "seq_len": 32768, "recompute": "flash"}
STEP1_STATE = {"model": "llama-3.1-8b"}
# Its question names step 1's state (whose bill is step 1's answer, so not printed there).
STEP1_BILL = compute_memory(MemoryInput(model=get_model("llama-3.1-8b"), gpu=get_gpu("h100-sxm")))


def _grows(answer: dict) -> float:
    """What grows with the tokens: everything but the state."""
    return answer["total_bytes"] - _state(answer)


def _long_solution() -> str:
    short, long, times = _short(), lab_value("memory", LONG_STATE, lambda a: a), _times()
    return (f"{{answer}} GB: the {gb(_state(short))} of state does not depend on the tokens; "
            f"the {gb(_grows(short))} that grows with them, the layers' 34·s·h and the fp32 "
            f"logits (steps 2 and 3), grows {times}-fold with fused attention: "
            f"{gb(_state(long))} + {times} × {_grows(short) / 1e9:.2f} GB = "
            f"{gb(long['total_bytes'])}.")


def _short() -> dict:
    return lab_value("memory", STEP1_STATE, lambda a: a)


def _times() -> int:
    """How many times step 1's tokens the drill's sequence is."""
    return LONG_STATE["seq_len"] // STEP1_BILL.input.seq_len


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "memory-predict-8b-32k",
        f"Take step 1's bill for Llama 3.1 8B, one {STEP1_BILL.input.seq_len:,}-token "
        "sequence (its why gives it). Predict the GB one GPU holds, in the same recipe, for "
        f"one sequence of {LONG_STATE['seq_len']:,} tokens, with fused attention.",
        "memory", LONG_STATE, "total_bytes", unit="GB", scale=1e-9,
        hint="Which parts of step 1's bill grow with the tokens, and how (step 3)? The "
             "weights, gradients, master copy and moments do not.",
        explanation=_long_solution,
        rel_tol=0.05,
        mistakes=(
            Mistake("all-grows", lambda: _times() * _short()["total_bytes"] / 1e9,
                    "that grows the whole bill with the tokens. The 16 bytes a parameter "
                    "of state do not depend on them (step 2)."),
            Mistake("none-grows", lambda: _short()["total_bytes"] / 1e9,
                    "that is step 1's bill unchanged. The activations and logits grow with "
                    "the tokens (step 3)."),
        )),
    Drill(
        id="memory-predict-405b-h200",
        question=f"Llama 3.1 405B ({P405 / 1e9:.1f} billion parameters, {L405.layers} layers, "
        f"h = {L405.hidden:,}, vocabulary {L405.vocab:,}), 16 bytes of training state per "
        f"parameter, sharded with ZeRO-3 over {H200_SHARDS} H200s ({H200 / 1e9:.0f} GB "
        f"each), one {_DRILL_STATE['seq_len']:,}-token sequence with full recomputation "
        "(step 3). How many GB does each GPU hold in all?",
        answer=lambda: lab_value("memory", _DRILL_STATE, "total_bytes") / 1e9,
        unit="GB", kind="derive", see=dict(_DRILL_STATE),
        hint=f"The state's share, 16 B × {P405 / 1e9:.1f} billion ÷ {H200_SHARDS}; ZeRO "
             "does not shard the activations: full recomputation keeps each layer's input, "
             "2·s·h bytes, in every layer; the fp32 logits, 4 B × the vocabulary a token "
             "(step 2), add a little.",
        explanation=_drill_solution,
        # The logits and their neighbours are 2% of it: state and activations alone count.
        rel_tol=0.03,
        mistakes=(
            Mistake("selective", lambda: _drill_total(34),
                    "that keeps selective recomputation's 34·s·h a layer. Full recomputation "
                    "keeps each layer's input alone, 2·s·h, and runs the rest again in the "
                    "backward."),
            Mistake("state-only", _state_405b,
                    "that is the state's share alone. ZeRO shards the state, not the "
                    "activations: every GPU keeps its own sequence's, 2·s·h a layer."),
            Mistake("unsharded", lambda: _state_405b() * H200_SHARDS,
                    f"that is the whole state; ZeRO-3 gives each of the {H200_SHARDS} GPUs an "
                    "equal share of it."),
            Mistake("gib", lambda: _drill_total(2) * 1e9 / 2 ** 30,
                    "that is GiB (2³⁰ bytes). The lab's GB are 10⁹ bytes, as the H200's 141 "
                    "GB are."),
        )),
    decide(
        "memory-decide-fit",
        f"Llama 3.1 8B ({_b(P8)} parameters) in the 18-byte recipe, one "
        f"{CUT_BASE['seq_len']:,}-token sequence (its pre-training length), selective "
        f"recomputation: its training step does not fit one H100 ({H100 / 1e9:.0f} GB). "
        "Which single change cuts this bill the most?",
        "memory", cut,
        (("adam16", "The 16-byte recipe: bf16 gradients", CUT_STATES["adam16"],
          lambda a: f"Keeping the gradients in bf16 saves 2 of the 18 bytes a parameter (step "
                    f"2): 2 B × "
                    f"{_b(a['params'])} = {{value}} less. The activations do not depend on "
                    "the recipe."),
         ("full", "Full activation recomputation", CUT_STATES["full"],
          lambda a: "Full recomputation keeps only each layer's input, 2·s·h of its 34·s·h "
                    f"(step 3), and saves the other 32: 32 × {_layers('full')} layers = "
                    "{value} less, for about one more forward pass."),
         ("half", f"Sequences of {CUT_STATES['half']['seq_len']:,} tokens, half as long",
          CUT_STATES["half"],
          lambda a: "Half the tokens halve what grows with them: the layers' 34·s·h, to "
                    f"{gb(a['breakdown']['activations'])}, and the fp32 logits with their "
                    "neighbours (step 2), to "
                    f"{gb(a['breakdown']['embedding_and_logits'])}: {{value}} less. The state "
                    "does not depend on the tokens."),
         ("flash", "Fused attention (FlashAttention) instead of selective recomputation",
          CUT_STATES["flash"],
          lambda a: "Fused attention is selective recomputation done inside the kernel (step "
                    f"3): both keep 34·s·h a layer, 34 × {_layers('flash')} layers = "
                    f"{gb(a['breakdown']['activations'])}, so it saves {{value}}.")),
        best="max", fmt=gb,
        solution=lambda found: (
            "{best}. At "
            f"{CUT_BASE['seq_len']:,} tokens the layers' activations, 34 × {_layers()} = "
            f"{gb(_base()['breakdown']['activations'])}, outweigh the 2 B a parameter a "
            "recipe can save, so full recomputation cuts the most: it keeps 2·s·h of the "
            "34 ({full} less); half the tokens halve them and the logits ({half}); the "
            f"16-byte recipe saves 2 B × {_b(P8)} ({{adam16}}); fused attention is what selective "
            "recomputation already keeps ({flash}). None of them makes it fit: the "
            f"{gb(_state(_base()))} of state is over {H100 / 1e9:.0f} GB before a single "
            f"activation, and even the 16-byte recipe needs at least "
            f"{math.ceil(16 * P8 / H100)} GPUs (step 5)."),
        reveals=("full recomputation cuts the most",)),
)
