"""EP09's predict and decide drills (``LESSON_DRILLS["placement"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import per_s


def _rollout(responses: int) -> dict:
    """GLM-4-9B's colocated rollout at ``responses`` per prompt (GET /api/placement): its
    seconds and step 6's parts."""
    answer = lab_value("placement", {"preset": "glm-4-9b", "responses_per_prompt": responses},
                       lambda a: a)
    return {"seconds": answer["rollout_seconds"], **answer["rollout_parts"]}


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "placement-predict-rollout-2x",
        "GLM-4-9B colocated: double the responses per prompt from 8 to 16, so twice the "
        "tokens are generated. Predict the rollout phase's seconds.",
        "placement", {"preset": "glm-4-9b", "responses_per_prompt": 16}, "rollout_seconds",
        unit="s",
        hint="Step 6's why splits the rollout into three parts: which grow with the "
             "requests an engine holds, and which is read once for the whole batch?",
        explanation="{answer} s: not twice the time. Take step 6's split of the rollout: "
                    "each decode step reads the weights once for the whole batch, so "
                    "their part stays; the prefill and the cache reads double with the "
                    "requests. Weights + 2 × (prefill + cache) = {answer} s.",
        # Within 1% (round-5b cold reading of EP09, item 6): at 10% it took 17.8 s, step 6's
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
                    "the prefill doubles too: twice the requests, twice the prompts to "
                    "read in."),
        )),
    decide(
        "placement-decide-throughput",
        "You have 16 H100s for GLM-4-9B's RL recipe (64 samples a step: TP 2 × CP 2 "
        "replicas, rollout engines of 2 GPUs). Which plan gives the most samples per "
        "second?",
        "placement", "samples_per_second",
        (("colocated", "All 16 colocated: DP 4 and 8 engines, taking turns",
          {"placement": "colocated", "train_gpus": 16, "engines": 8},
          "The phases still take turns, so a step is rollout + training + sync. Twice the "
          "replicas halve the training, but twice the engines barely shorten the rollout: "
          "decoding is bound by reading the weights, which each engine does every token "
          "whatever its batch, so half the requests per engine take nearly as long: "
          "{value}."),
         ("separate", "8 training GPUs and 8 rollout GPUs (4 engines), working at once",
          {"placement": "separate", "train_gpus": 8, "engines": 4},
          "The pools work at the same time, so a step is max(rollout, training) + sync: "
          "training on 8 GPUs takes about half the rollout's time and hides behind it. "
          "The price: samples come from weights one step old: {value}."),
         ("more-training", "12 training GPUs and 4 rollout GPUs (2 engines), working "
          "at once", {"placement": "separate", "train_gpus": 12, "engines": 2},
          "The pools still overlap, but the step waits for the slower one, and that was "
          "already the rollout. Half the engines now hold twice the requests each: every "
          "decode step reads twice the KV cache, so the rollout grows, while the faster "
          "training only waits longer for it: {value}.")),
        best="max", fmt=per_s,
        hint="A step of separate pools takes as long as its slower pool, plus the sync. "
             "Which pool is the slower one for this recipe, and which plan starves it?",
        solution="{best}. Samples per second: 8 + 8 {separate}, 12 + 4 {more-training}, "
                 "all 16 colocated {colocated}. "
                 "Overlap wins when neither pool waits long for the other.",
        reveals=("overlap wins when neither pool waits long",)),
)
