"""EP10's predict and decide drills (``LESSON_DRILLS["precision"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb
from labs.hardware.gpus import get_gpu
from labs.model.presets import get_model


def finetune_bytes(method: str):
    return lambda answer: next(f["total_bytes"] for f in answer["finetune"]
                               if f["method"] == method)


QLORA_SEQ = 8192
SEVENTY = {"model": "llama-3.1-70b", "seq_len": QLORA_SEQ}  # on the lab's default GPU
H100 = get_gpu("h100-sxm")
L70 = get_model("llama-3.1-70b")


def _qlora(answer: dict) -> dict:
    return next(f for f in answer["finetune"] if f["method"] == "qlora")


def _layer_copy(answer: dict) -> tuple[float, float, float]:
    """The offload state's one layer of QLoRA's saved activations, its copy over the host
    link and the layer's forward, in bytes and seconds (step 12's rule: hidden while the
    copy takes no longer than the forward; labs.precision.offload)."""
    o = answer["offload"]
    layer = _qlora(answer)["offloaded_bytes"] / L70.layers
    return layer, layer / o["link_bandwidth"], o["forward_s"]


def _why_full(answer: dict) -> str:
    acts, forward = _qlora(answer)["breakdown"]["activations"], answer["offload"]["forward_s"]
    return (f"Each layer keeps only its input, 2·s·h: {L70.layers} × {QLORA_SEQ:,} × "
            f"{L70.hidden:,} × 2 B = {gb(acts)} of activations still on the GPU, for one more "
            f"forward of every layer ({L70.layers} × {1e3 * forward:.1f} ms = "
            f"{L70.layers * forward:.2f} s a sequence): {{value}}.")


def _why_offload(answer: dict) -> str:
    layer, copy, forward = _layer_copy(answer)
    return (f"Every saved activation, {gb(_qlora(answer)['offloaded_bytes'])}, waits in host "
            f"RAM, so the GPU keeps none of them: {{value}}. The price is PCIe time: a layer's "
            f"{gb(layer)} takes {1e3 * copy:.1f} ms over PCIe 5 against its "
            f"{1e3 * forward:.1f} ms forward, which hides {min(1, forward / copy):.0%} of it.")


def _why_op(answer: dict) -> str:
    acts = _qlora(answer)["breakdown"]["activations"]
    return ("It runs every other matmul again, but each layer still keeps its input and the "
            f"other matmuls' and attention's outputs: {gb(acts)} of activations, {{value}}, "
            f"still over the {H100.memory_bytes / 1e9:.0f} GB.")


def _why_paged(answer: dict) -> str:
    q = _qlora(answer)
    over = q["total_bytes"] - H100.memory_bytes
    return (f"Paging moves only optimizer state to host RAM, the adapters' {gb(q['host_bytes'])}: "
            f"{{value}}. It rescues a step over by less than its optimizer state (step 11), "
            f"not one {gb(over)} over.")


def _qlora_solution(found: dict[str, float]) -> str:
    _, copy, forward = _layer_copy(lab_value("precision", {**SEVENTY, "offload": 100},
                                             lambda answer: answer))
    return ("{best}. QLoRA on the GPU: offload {offload}, full recomputation {recompute}, op "
            "policy {op}, paged optimizer {paged}. Full recomputation still keeps each "
            "layer's input; offload keeps none, and pays in PCIe time where recomputation "
            f"pays in compute: a layer's copy ({1e3 * copy:.1f} ms) outlasts its forward "
            f"({1e3 * forward:.1f} ms), as step 12 warned. Both fit; the op policy and "
            "paging do not.")


def _lora_24(modules: str) -> float:
    """Millions of trainable parameters, rank 24 on Llama 3.1 8B's ``modules``, as the lab
    counts them (GET /api/precision)."""
    return lab_value("precision", {"rank": 24, "modules": modules},
                     lambda a: a["finetune"][1]["trainable_params"]) / 1e6


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "precision-predict-lora-24",
        "LoRA on all seven linear layers of Llama 3.1 8B (32 layers; q and o map 4,096 "
        "to 4,096, k and v 4,096 to 1,024, gate and up 4,096 to 14,336, down 14,336 to "
        "4,096) with rank r = 24. Predict the trainable parameters, in millions.",
        "precision", {"rank": 24, "modules": "all"},
        lambda a: a["finetune"][1]["trainable_params"], unit="M params", scale=1e-6,
        hint="Each adapted matrix adds r·(d_in + d_out); add the seven.",
        explanation="{answer} million: 32 × 24 × (8,192 + 5,120 + 5,120 + 8,192 + 3 × "
                    "18,432). The MLP's three matrices are two thirds of it.",
        rel_tol=0.02,
        mistakes=(
            Mistake("attention-only", lambda: _lora_24("attention"),
                    "that adapts the attention's four matrices only. All seven means the "
                    "MLP's gate, up and down too, two thirds of the count."),
            Mistake("one-layer", lambda: _lora_24("all") / 32,
                    "that is one layer's adapters; each of the 32 layers has its own."),
            Mistake("kv-square", lambda: _lora_24("all") + 2 * 24 * 32 * (4096 - 1024) / 1e6,
                    "k and v map 4,096 to 1,024, not to 4,096: Llama 3.1 8B's 8 KV heads "
                    "make them a quarter of q's width."),
        )),
    decide(
        "precision-decide-qlora-fit",
        "You fine-tune Llama 3.1 70B with QLoRA (a 4-bit base, small adapters on q and "
        f"v) on {QLORA_SEQ:,}-token sequences, with selective recomputation only: each layer "
        "keeps its activations (the QLoRA paper checkpoints every layer; this run does not "
        f"yet). It does not fit one {H100.name} ({H100.memory_bytes / 1e9:.0f} GB). Which "
        "single change, on the same data, leaves the fewest bytes on the GPU?",
        "precision", finetune_bytes("qlora"),
        (("recompute", "Full recomputation (gradient checkpointing)",
          {**SEVENTY, "recompute": "full"}, _why_full),
         ("offload", "Offload every saved activation to host RAM over PCIe 5",
          {**SEVENTY, "offload": 100}, _why_offload),
         ("op", "torchtitan's op policy: run every other matmul again",
          {**SEVENTY, "recompute": "op"}, _why_op),
         ("paged", "A paged optimizer", {**SEVENTY, "paged": True}, _why_paged)),
        best="min", fmt=gb, solution=_qlora_solution,
        reveals=("so the GPU keeps none of them", "offload keeps none")),
)
