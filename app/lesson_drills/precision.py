"""EP10's predict and decide drills (``LESSON_DRILLS["precision"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb
from labs.hardware.gpus import get_gpu


def finetune_bytes(method: str):
    return lambda answer: next(f["total_bytes"] for f in answer["finetune"]
                               if f["method"] == method)


SEVENTY = {"model": "llama-3.1-70b"}  # on the lab's default GPU
H100 = get_gpu("h100-sxm")


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
        "v) on 8,192-token sequences, with selective recomputation only: each layer keeps "
        "its activations (the QLoRA paper checkpoints every layer; this run does not yet). "
        f"It does not fit one {H100.name} ({H100.memory_bytes / 1e9:.0f} GB). Which single "
        "change, on the same data, cuts the bytes QLoRA holds on the GPU the most?",
        "precision", finetune_bytes("qlora"),
        (("recompute", "Full recomputation (gradient checkpointing)",
          {**SEVENTY, "recompute": "full"},
          "Each layer keeps only its input and recomputes the rest in the backward: the "
          "activations of 8,192 tokens, most of the bill, shrink: {value}."),
         ("every2", "Full recomputation of every second layer only",
          {**SEVENTY, "recompute": "every-2nd"},
          "Half the layers keep only their input; the other half still keep everything, "
          "so the activations about halve: {value}. Recomputing every layer cuts more, "
          "for one more forward pass of the other half."),
         ("paged", "A paged optimizer", {**SEVENTY, "paged": True},
          "It moves only the adapters' optimizer state to host RAM, a fraction of a GB: "
          "{value}."),
         ("rank", "A smaller LoRA rank: 8", {**SEVENTY, "rank": 8},
          "The adapters shrink, but they were already small beside the base and the "
          "activations: {value}.")),
        best="min", fmt=gb,
        solution="{best}. QLoRA on the GPU: full recomputation {recompute}, every second "
                 "layer {every2}, paged optimizer {paged}, rank 8 {rank}. At 8,192 "
                 "tokens the activations, not the 4-bit base, are most of the bill.",
        reveals=("not the 4-bit base, are most of the bill",)),
)
