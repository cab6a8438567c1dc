"""EP12's predict and decide drills (``LESSON_DRILLS["playground"]``)."""

from collections.abc import Callable

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb

# The worked plan's ledger on its heaviest GPU, grouped as EP08 step 6 sums it (the
# engine's breakdown of /api/playground's recipe panel): item -> the breakdown's fields.
LEDGER = (("weights and gradients", ("weights", "gradients")),
          ("optimizer state", ("master_weights", "optimizer_moments")),
          ("saved activations", ("activations",)))


# The same ledger part by part, as EP01's panel lists it (its "largest part").
PARTS = (("weights", "bf16 weights"), ("gradients", "bf16 gradients"),
         ("master_weights", "FP32 master weights"), ("optimizer_moments", "Adam moments"),
         ("activations", "saved activations"))


def heaviest(answer: dict) -> dict[str, float]:
    """The heaviest GPU's breakdown, from one playground answer (its recipe panel)."""
    stages = answer["panels"]["recipe"]["answer"]["stages"]
    return max(stages, key=lambda stage: stage["total_bytes"])["breakdown"]


def ledger(answer: dict) -> dict[str, float]:
    """The heaviest GPU's ledger, by item, from one playground answer (its recipe panel)."""
    breakdown = heaviest(answer)
    return {item: sum(breakdown[f] for f in fields) for item, fields in LEDGER}


def _worked_answer() -> dict:
    return lab_value("playground", {}, lambda answer: answer)


def _worked() -> dict[str, float]:
    return ledger(_worked_answer())


def _zero3_why(answer: dict) -> str:
    """EP12 round-5b cold reading, item 1: the shared hint named the activations as the
    largest item where the worked plan's optimizer state is larger. ZeRO-3's own feedback now
    quotes the worked plan's ledger as the engine has it and what ZeRO-3 does to each item."""
    worked, zero3, parts = _worked(), ledger(answer), heaviest(_worked_answer())
    items = ", ".join(f"{item} {gb(value)}" for item, value in worked.items())
    wg = LEDGER[0][0]
    # Round 6, item 8: the optimizer state named as EP01's panel lists it, two parts.
    return (f"The worked plan's heaviest GPU holds {items} (the optimizer state is two "
            f"parts: FP32 master weights {gb(parts['master_weights'])} and Adam moments "
            f"{gb(parts['optimizer_moments'])}). ZeRO-3 over DP = 2 shards only the {wg} "
            f"further, {gb(worked[wg])} → {gb(zero3[wg])}: {{value}}.")


def _activations_why(text: str) -> Callable[[dict], str]:
    """A choice that moves the saved activations: ``text`` with the worked plan's and the
    choice's activations ({before}, {after}) from the engine's ledger."""
    act = LEDGER[2][0]

    def why(answer: dict) -> str:
        return text.replace("{before}", gb(_worked()[act])).replace(
            "{after}", gb(ledger(answer)[act]))
    return why


def _full_why(answer: dict) -> str:
    """Round-6 cold reading of EP12, item 8: the feedback said the optimizer state (26.5 GB,
    master weights and moments together) was the largest item, where EP01's panel on the same
    state names the activations its largest part (it lists master weights and moments apart).
    One grouping now: the ledger's parts as the panel lists them."""
    worked, full = _worked(), ledger(answer)
    parts = heaviest(_worked_answer())
    act = LEDGER[2][0]
    names = dict(PARTS)
    largest = max(names, key=parts.__getitem__)
    rank = ("the ledger's largest single part, as EP01's panel says (the optimizer state, "
            f"{gb(worked[LEDGER[1][0]])}, is two parts: FP32 master weights "
            f"{gb(parts['master_weights'])} and Adam moments "
            f"{gb(parts['optimizer_moments'])}), and"
            if largest == "activations" else
            f"not the ledger's largest part (the {names[largest]}, {gb(parts[largest])}, "
            "are), but")
    return (f"The {act}, {gb(worked[act])} of the worked plan's ledger, are {rank} "
            f"the item one change removes almost whole: keeping only each layer's input "
            f"leaves {gb(full[act])} of them, {{value}} in all.")


def _tp4pp4_why(answer: dict) -> str:
    """Round-24 cold reading B, finding 14: the feedback gave two doublings (TP 4, 4
    micro-batches in flight) for a ×2, leaving out the half as many layers, and its parts
    (the worked plan's state with the new activations) summed to 1.3 GB under the total it
    printed. Each factor and each item of the heaviest stage now comes from the engine."""
    def first(a: dict) -> dict:
        stages = a["panels"]["recipe"]["answer"]["stages"]
        return max(stages, key=lambda stage: stage["total_bytes"])

    worked, new = _worked_answer(), answer
    w_plan, n_plan = (a["panels"]["recipe"]["answer"]["plan"] for a in (worked, new))
    w_stage, n_stage = first(worked), first(new)
    before, after = ledger(worked), ledger(new)
    wg, opt, act = (item for item, _ in LEDGER)
    state = (before[wg] + before[opt], after[wg] + after[opt])
    tp = f"×{w_plan['tp']}/{n_plan['tp']}"
    layers = f"×{n_stage['layers']}/{w_stage['layers']}"
    flight = f"×{n_stage['in_flight']:g}/{w_stage['in_flight']:g}"
    # The new state's own total (45.4 GB) is the right option's figure: a wrong try is told
    # only its own (test_decide_feedback), so the state's growth is printed instead.
    return (f"Each layer's activations split {n_plan['tp']} ways, not {w_plan['tp']} "
            f"({tp}), on {n_stage['layers']} layers, not {w_stage['layers']} ({layers}), "
            f"and the first stage keeps {n_stage['in_flight']:g} micro-batches in flight, "
            f"not {w_stage['in_flight']:g} ({flight}): its {act} grow {gb(before[act])} → "
            f"{gb(after[act])}. Its weights, gradients and optimizer state barely move, "
            f"{gb(state[0])} and {gb(state[1] - state[0])} more: a quarter of each layer on "
            "half as many layers is as many, and the embedding the first stage holds is split "
            f"{n_plan['tp']} ways, not {w_plan['tp']}. {gb(state[0])} + "
            f"{gb(state[1] - state[0])} + {gb(after[act])} = {{value}}.")


def _bubble(microbatches: int) -> float:
    """The worked plan's bubble doubled to 8 nodes (DP 4) at ``microbatches`` a replica, as
    the playground gives it (the predict drill's wrong answers at 16 and 32)."""
    return lab_value("playground", {"nodes": 8, "dp": 4, "microbatches": microbatches},
                     "panels.pipeline.answer.bubble_fraction")


DRILLS: tuple[Drill | Decide, ...] = (
    # A recap's predict combines two episodes (EP12 cold reading, item 10: 1/33 at 32
    # micro-batches was EP05's formula again): EP02's global batch = DP x micro-batches,
    # held while DP doubles, then EP05's bubble at the micro-batches each replica is left.
    predict(
        "playground-predict-bubble",
        "The worked plan trains 32 sequences a step: DP 2 replicas × 16 micro-batches of "
        "one sequence, each replica a TP8 × PP2 pipeline. Double the cluster to 8 nodes "
        "at the same TP8 × PP2, so DP is 4, and keep the 32 sequences a step. Predict the "
        "pipeline's bubble as a share of the pipeline's time (its 1F1B schedule's idle time "
        "over the schedule's), in %.",
        "playground", {"nodes": 8, "dp": 4, "microbatches": 8},
        "panels.pipeline.answer.bubble_fraction", unit="%", scale=100,
        hint="How many micro-batches does each replica get now? Then EP05's bubble, "
             "a share of the schedule, (p − 1)/(m + p − 1); not the papers' idle over busy, "
             "(p − 1)/m.",
        explanation="{answer}%: 32 sequences ÷ 4 replicas = 8 micro-batches each, so "
                    "(2 − 1)/(8 + 2 − 1) = 1/9. More replicas at the same global batch "
                    "leave each pipeline fewer micro-batches to fill its bubble (step 3's "
                    "limit).", rel_tol=0.05,
        mistakes=(
            Mistake("papers", lambda: 100 * _bubble(8) * 9 / 8,
                    "that is (p − 1)/m, the papers' idle over busy time. As a share of the "
                    "schedule the idle p − 1 stage-steps divide by all m + p − 1."),
            Mistake("sixteen", lambda: 100 * _bubble(16),
                    "that keeps 16 micro-batches a replica. The 32 sequences a step are now "
                    "shared by 4 replicas."),
            Mistake("thirty-two", lambda: 100 * _bubble(32),
                    "each replica gets only its share of the 32 sequences a step: 32 over "
                    "the 4 replicas."),
        )),
    decide(
        "playground-decide-memory",
        "Start from the worked plan. Which change cuts the 3D recipe's memory on its "
        "heaviest GPU most?",
        "playground", "panels.recipe.answer.memory_per_gpu_bytes",
        (("zero3", "ZeRO-3 instead of ZeRO-1", {"zero": 3},
          _zero3_why),
         ("tp4pp4", "TP4 × PP4 instead of TP8 × PP2", {"tp": 4, "pp": 4}, _tp4pp4_why),
         ("full", "Full activation recomputation", {"recompute": "full"}, _full_why),
         ("m32", "32 micro-batches instead of 16", {"microbatches": 32},
          _activations_why(
              "1F1B keeps at most p micro-batches in flight, however many there are: the "
              "activations stay at {after}, {value} in all."))),
        best="min", fmt=gb,
        solution="{best}. Memory per GPU: full recomputation {full}, ZeRO-3 {zero3}, "
                 "32 micro-batches {m32}, TP4 × PP4 {tp4pp4}.",
        reveals=("the item one change removes almost whole",)),
)
