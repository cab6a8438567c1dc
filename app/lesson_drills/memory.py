"""EP01's predict and decide drills (``LESSON_DRILLS["memory"]``)."""

import math

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb
from labs.hardware.gpus import get_gpu
from labs.memory.inputs import STATE_KEYS
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


def _drill_solution() -> str:
    a = _drill_answer()
    fits = "fits" if a["fits"] else "does not fit"
    s = _DRILL_STATE["seq_len"]
    return (f"{{answer}} GB: the state's share, 16 B × {P405 / 1e9:.1f}B ÷ {H200_SHARDS} = "
            f"{_state_405b():.1f} GB; full recomputation's 2·s·h a layer, 2 × {s:,} × "
            f"{L405.hidden:,} × {L405.layers} = {_drill_acts(2):.1f} GB, which ZeRO does not "
            f"shard; and {gb(a['breakdown']['embedding_and_logits'])} of fp32 logits and their "
            f"neighbours (step 2). It {fits} the {H200 / 1e9:.0f} GB. With selective "
            f"recomputation's 34·s·h the layers alone would take {_drill_acts(34):.0f} GB.")


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "memory-predict-405b-h200",
        f"Llama 3.1 405B ({P405 / 1e9:.1f} billion parameters, {L405.layers} layers, "
        f"h = {L405.hidden:,}), 16 bytes of training state per parameter, sharded with "
        f"ZeRO-3 over {H200_SHARDS} H200s ({H200 / 1e9:.0f} GB each), one "
        f"{_DRILL_STATE['seq_len']:,}-token sequence with full recomputation (step 3). "
        "Predict the GB each GPU holds in all.",
        "memory", _DRILL_STATE, lambda answer: answer["total_bytes"], unit="GB", scale=1e-9,
        hint=f"The state's share, 16 B × {P405 / 1e9:.1f} billion ÷ {H200_SHARDS}; ZeRO "
             "does not shard the activations: full recomputation keeps each layer's input, "
             "2·s·h bytes, in every layer; the fp32 logits (step 2) add a little.",
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
