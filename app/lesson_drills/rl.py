"""EP09's predict and decide drills (``LESSON_DRILLS["placement"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import per_s


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
    decide(
        "placement-decide-throughput",
        "You have 24 H100s for GLM-4-9B's RL recipe (64 samples a step: TP 2 × CP 2 "
        "replicas, rollout engines of 2 GPUs). Which plan gives the most samples per "
        "second?",
        "placement", "samples_per_second",
        (("colocated", "All 24 colocated: DP 6 and 12 engines, taking turns",
          {"placement": "colocated", "train_gpus": 24, "engines": 12},
          lambda a: _unsplit_batch(a) + "The phases still take turns, so a step is "
          "rollout + training + sync: "
          f"{a['rollout_seconds']:.2f} + {a['train_seconds']:.2f} + "
          f"{a['sync_seconds']:.2f} = {a['step_seconds']:.2f} s for 64 samples. "
          "More engines barely shorten the rollout: decoding "
          "is bound by reading the weights, which each engine does every token whatever its "
          "batch: {value}."),
         ("rollout-heavy", "8 training GPUs and 16 rollout GPUs (8 engines), working at once",
          {"placement": "separate", "train_gpus": 8, "engines": 8},
          lambda a: "The pools work at once, so a step is max(rollout, training) + sync: "
          f"max({a['rollout_seconds']:.2f}, {a['train_seconds']:.2f}) + "
          f"{a['sync_seconds']:.2f} = {a['step_seconds']:.2f} s for 64 samples. "
          "The rollout, the slower pool, has the most engines "
          "while the training still hides behind it: {value}."),
         ("even-split", "16 training GPUs and 8 rollout GPUs (4 engines), working at once",
          {"placement": "separate", "train_gpus": 16, "engines": 4},
          lambda a: f"max({a['rollout_seconds']:.2f}, {a['train_seconds']:.2f}) + "
          f"{a['sync_seconds']:.2f} = {a['step_seconds']:.2f} s: "
          "the training was already hidden, so halving it buys "
          "nothing, and the rollout, which sets the step, has half the engines: {value}."),
         ("trainer-starved", "4 training GPUs and 20 rollout GPUs (10 engines), working "
          "at once", {"placement": "separate", "train_gpus": 4, "engines": 10},
          lambda a: f"max({a['rollout_seconds']:.2f}, {a['train_seconds']:.2f}) + "
          f"{a['sync_seconds']:.2f} = {a['step_seconds']:.2f} s: "
          "one replica trains all 64 samples and now takes longer "
          "than the rollout, so the training sets the step: {value}.")),
        best="max", fmt=per_s,
        solution="{best}. Samples per second: 8 + 16: {rollout-heavy}; 16 + 8: {even-split}; "
                 "4 + 20: {trainer-starved}; all 24 colocated: {colocated}. Give the slower pool "
                 "GPUs while the other still hides behind it.",
        reveals=("while the other still hides behind it",)),
)
