"""EP09's predict and decide drills (``LESSON_DRILLS["placement"]``)."""

from app.charts.rl import DECIDE_GPUS
from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import per_s
from labs.rl.recipes import experiment


def _rollout(responses: int) -> dict:
    """GLM-4-9B's colocated rollout at ``responses`` per prompt (GET /api/placement): its
    seconds and step 5's parts."""
    answer = lab_value("placement", {"preset": "glm-4-9b", "responses_per_prompt": responses},
                       lambda a: a)
    return {"seconds": answer["rollout_seconds"], **answer["rollout_parts"]}


def _unsplit_batch(a: dict) -> str:
    """Where a plan's DP does not divide the step's samples, the sentence that says a real run
    refuses it (round-23 cold reading R, finding 3): slime sets the global batch to the
    rollout's samples and asserts it divides by DP (slime/utils/arguments.py), as Megatron-LM's
    micro-batch calculator does; the lab times the fractional share."""
    if not a["samples"] % a["dp"]:
        return ""
    return (f"DP {a['dp']} does not divide {a['samples']} samples "
            f"({a['samples'] / a['dp']:.2f} a replica): slime refuses such a batch "
            "(slime/utils/arguments.py). The lab times it anyway. ")


# The closing decide's recipe: GLM-4-9B at 24 prompts a step (8 responses each, the
# recipe's), on DECIDE_GPUS (app.charts.rl masks every GLM-4-9B time on that many GPUs until
# the decide is answered).
DECIDE = {"preset": "glm-4-9b", "prompts": 24}


def _samples() -> int:
    """The closing decide's samples a step (the lab's: prompts × responses)."""
    return DECIDE["prompts"] * experiment().responses_per_prompt


def _base() -> int:
    """The recipe's samples a step, step 2's."""
    return experiment().prompts * experiment().responses_per_prompt


def _times() -> str:
    """The decide's samples against the recipe's (step 2's), in words."""
    base = _base()
    return {2: "twice", 3: "three times", 4: "four times"}[_samples() // base] + \
        f" step 2's {base}"


def _step_sum(a: dict, colocated: bool = False) -> str:
    """A plan's step as the sum its feedback prints: rollout + training + sync (colocated,
    the phases take turns) or max(rollout, training) + sync (separate pools at once), at two
    decimals, or three where two would print parts that miss the printed total (round-24:
    max(19.85, 15.65) + 0.39 = 20.25)."""
    parts = (a["rollout_seconds"], a["train_seconds"], a["sync_seconds"])
    for places in (2, 3):
        r, t, y, step = (round(x, places) for x in (*parts, a["step_seconds"]))
        if round((r + t if colocated else max(r, t)) + y, places) == step:
            break
    f = f"{{:.{places}f}}".format
    head = (f"{f(r)} + {f(t)}" if colocated else f"max({f(r)}, {f(t)})")
    return f"{head} + {f(y)} = {f(step)} s"


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "placement-predict-rollout-2x",
        "GLM-4-9B colocated: double the responses per prompt from 8 to 16, so twice the "
        "tokens are generated. Like step 5, the lab prefills each sample's prompt on its "
        "own (no prefix sharing). Predict the rollout phase's seconds.",
        "placement", {"preset": "glm-4-9b", "responses_per_prompt": 16}, "rollout_seconds",
        unit="s",
        hint="The note under this drill splits the rollout into three parts: which grow "
             "with the requests an engine holds, and which is read once for the whole batch?",
        explanation="{answer} s: not twice the time. Take the note's split of the rollout: "
                    "each decode step reads the weights once for the whole batch, so "
                    "their part stays; the prefill and the cache reads double with the "
                    "requests. Weights + 2 × (prefill + cache) = {answer} s.",
        # Within 1% (round-5b cold reading of EP09, item 6): at 10% it took 17.8 s, step 5's
        # split with only the cache doubled (14.4 + 0.29 + 2 × 1.54), and 19.6 s, which no
        # derivation gives; the split as printed, 14.4 + 2 × (0.29 + 1.54) = 18.06 s, is in.
        rel_tol=0.01,
        mistakes=(
            Mistake("double", lambda: 2 * _rollout(8)["seconds"],
                    "not all of the rollout doubles. Each decode step reads the weights once "
                    "for the whole batch, however many requests it holds."),
            Mistake("unchanged", lambda: _rollout(8)["seconds"],
                    "the prefill and the reads of the KV cache grow with the requests: "
                    "twice the responses, twice those parts."),
            Mistake("cache-only", lambda: _rollout(8)["seconds"] + _rollout(8)["decode_kv_s"],
                    "the lab prefills each sample's prompt on its own, so the prefill "
                    "doubles too. An engine that shares a prompt's prefix across its "
                    "responses (SGLang's RadixAttention) would keep it and land near your "
                    "answer: on that the lab errs slow."),
        )),
    # 24 GPUs, a size step 2 did not draw (round-6 cold reading of EP09, item 2: the right
    # plan at 16 GPUs was step 2's own 8 + 8), four plans: each pool's times in its feedback.
    # Round-24 cold reading B, finding 16: at the recipe's 64 samples, all 24 colocated trained
    # on DP 6, a batch slime refuses (64 ÷ 6). At 24 prompts (192 samples) every plan's DP (6,
    # 2, 4, 1) divides the batch, and three times step 2's samples triple the training while
    # the rollout barely grows: the trainer, not the rollout, now wants the GPUs.
    decide(
        "placement-decide-throughput",
        f"You have {DECIDE_GPUS} H100s for GLM-4-9B's RL recipe (TP 2 × CP 2 replicas, "
        f"rollout engines of 2 GPUs), now at {DECIDE['prompts']} prompts × "
        f"{_samples() // DECIDE['prompts']} responses = {_samples()} samples a step, "
        f"{_times()}. Which plan gives the most samples per second?",
        "placement", "samples_per_second",
        (("colocated", f"All {DECIDE_GPUS} colocated: DP 6 and 12 engines, taking turns",
          {**DECIDE, "placement": "colocated", "train_gpus": DECIDE_GPUS, "engines": 12},
          lambda a: _unsplit_batch(a) + "The phases still take turns, so a step is "
          f"rollout + training + sync: {_step_sum(a, colocated=True)} for {a['samples']} "
          "samples. "
          "More engines barely shorten the rollout: decoding "
          "is bound by reading the weights, which each engine does every token whatever its "
          "batch: {value}."),
         ("rollout-heavy", "8 training GPUs and 16 rollout GPUs (8 engines), working at once",
          {**DECIDE, "placement": "separate", "train_gpus": 8, "engines": 8},
          lambda a: _unsplit_batch(a) + "The pools work at once, so a step is max(rollout, "
          f"training) + sync: {_step_sum(a)} for {a['samples']} samples. "
          f"DP {a['dp']} replicas train {a['samples'] // a['dp']} samples each, against "
          f"{_base() // a['dp']} at step 2's {_base()}, and no longer hide behind the "
          "rollout: the training sets the step, and the rollout's extra engines wait for "
          "it: {value}."),
         ("train-heavy", "16 training GPUs and 8 rollout GPUs (4 engines), working at once",
          {**DECIDE, "placement": "separate", "train_gpus": 16, "engines": 4},
          lambda a: _unsplit_batch(a) + f"{_step_sum(a)}: DP {a['dp']} trains "
          f"{a['samples'] // a['dp']} samples a replica, fast enough to "
          "hide behind the rollout, and the rollout on 4 engines grows far less than the "
          "samples: each decode step reads the weights once for the whole batch: {value}."),
         ("trainer-starved", "4 training GPUs and 20 rollout GPUs (10 engines), working "
          "at once", {**DECIDE, "placement": "separate", "train_gpus": 4, "engines": 10},
          lambda a: _unsplit_batch(a) + f"{_step_sum(a)}: one replica trains all "
          f"{a['samples']} samples and takes far longer than the "
          "rollout, so the training sets the step: {value}.")),
        best="max", fmt=per_s,
        solution="{best}. Samples per second: 8 + 16: {rollout-heavy}; 16 + 8: {train-heavy}; "
                 "4 + 20: {trainer-starved}; all 24 colocated: {colocated}. Three times the "
                 "samples triple the training, which DP splits, while the rollout barely "
                 "grows, since each decode step reads the weights once for the whole batch. "
                 "Give the slower pool GPUs while the other still hides behind it.",
        reveals=("while the other still hides behind it", "triple the training")),
)
