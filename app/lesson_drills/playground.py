"""EP12's predict and decide drills (``LESSON_DRILLS["playground"]``)."""

from app.labkit import Decide, Drill, decide, predict
from app.lesson_drills.units import gb

DRILLS: tuple[Drill | Decide, ...] = (
    # A recap's predict combines two episodes (EP12 cold reading, item 10: 1/33 at 32
    # micro-batches was EP05's formula again): EP02's global batch = DP x micro-batches,
    # held while DP doubles, then EP05's bubble at the micro-batches each replica is left.
    predict(
        "playground-predict-bubble",
        "The worked plan trains 32 sequences a step: DP 2 replicas × 16 micro-batches of "
        "one sequence, each replica a TP8 × PP2 pipeline. Double the cluster to 8 nodes "
        "at the same TP8 × PP2, so DP is 4, and keep the 32 sequences a step. Predict the "
        "pipeline's bubble as a share of the step (idle time over the whole step), in %.",
        "playground", {"nodes": 8, "dp": 4, "microbatches": 8},
        "panels.pipeline.answer.bubble_fraction", unit="%", scale=100,
        hint="How many micro-batches does each replica get now? Then EP05's bubble, "
             "a share of the step, (p − 1)/(m + p − 1); not the papers' idle over busy, "
             "(p − 1)/m.",
        explanation="{answer}%: 32 sequences ÷ 4 replicas = 8 micro-batches each, so "
                    "(2 − 1)/(8 + 2 − 1) = 1/9. More replicas at the same global batch "
                    "leave each pipeline fewer micro-batches to fill its bubble (step 3's "
                    "limit).", rel_tol=0.05),
    decide(
        "playground-decide-memory",
        "Start from the worked plan. Which change cuts the 3D recipe's memory on its "
        "heaviest GPU most?",
        "playground", "panels.recipe.answer.memory_per_gpu_bytes",
        (("zero3", "ZeRO-3 instead of ZeRO-1", {"zero": 3},
          "Shards the bf16 weights and gradients as well, over DP = 2 only: {value}."),
         ("tp4pp4", "TP4 × PP4 instead of TP8 × PP2", {"tp": 4, "pp": 4},
          "Each GPU holds as many weights as before (a quarter of each layer, but half "
          "as many layers). Its activations double: TP 4 splits each layer's activations "
          "4 ways, not 8, and the first stage now keeps 4 micro-batches in flight, not 2: "
          "{value}."),
         ("full", "Full activation recomputation", {"recompute": "full"},
          "At 8,192 tokens the saved activations are the largest item: keeping only each "
          "layer's input leaves {value}."),
         ("m32", "32 micro-batches instead of 16", {"microbatches": 32},
          "1F1B keeps at most p micro-batches in flight, however many there are: "
          "{value}.")),
        best="min", fmt=gb,
        hint="Which item of the ledger is largest at 8,192 tokens?",
        solution="{best}. Memory per GPU: full recomputation {full}, ZeRO-3 {zero3}, "
                 "32 micro-batches {m32}, TP4 × PP4 {tp4pp4}.",
        reveals=("the saved activations are the largest item",)),
)
