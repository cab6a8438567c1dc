"""One source for every enumeration and bound the labs accept.

The engine validates against these, the web layer's query models take their bounds and
choices from here, and so do the page's sliders: a limit changes in one place. Pipeline
schedules and their bounds belong to the pipeline simulator (``labs.pipeline``) and are
re-exported here, not redefined.
"""

from __future__ import annotations

from labs.pipeline import MAX_MICROBATCHES, MAX_STAGES, MAX_VIRTUAL, SCHEDULES

__all__ = [
    "ACTIVATION_MODELS", "INFER_RECIPES", "MAX_DEGREE", "MAX_DP", "MAX_MICROBATCHES",
    "MAX_MICRO_BATCH", "MAX_SEQ_LEN", "MAX_STAGES", "MAX_VIRTUAL", "MAX_WORLD", "MODES",
    "RECIPE_IDS", "RECOMPUTE", "SCHEDULES", "TRAIN_RECIPES", "ZERO_STAGES",
]

MODES = ("train", "infer")
RECOMPUTE = ("none", "selective", "full")
# Activation models (labs.activations): Korthikanti et al. 2022's 34·s·b·h, or Megatron-LM's
# theoretical-memory formula, which follows the model's FFN width and MoE routing.
ACTIVATION_MODELS = ("classic", "megatron")
TRAIN_RECIPES = ("adam16", "adam18")
INFER_RECIPES = ("bf16", "int8", "int4")
RECIPE_IDS = TRAIN_RECIPES + INFER_RECIPES
ZERO_STAGES = (0, 1, 2, 3)

MAX_SEQ_LEN = 1_048_576  # 1M tokens: the longest context any preset model is trained for
MAX_MICRO_BATCH = 1024
MAX_DEGREE = 4096  # any one of TP, PP, CP, EP
MAX_DP = 100_000
MAX_WORLD = 1_000_000  # GPUs in one job; bounds every product of degrees

# EP09 RL placement (labs.placement_rl): placements, engine KV dtypes, and the sizes one request
# may ask for (the whole cluster is drawn GPU by GPU, so it is bounded).
PLACEMENTS = ("colocated", "separate", "separate-pd")
KV_DTYPES = ("bf16", "fp8")
MAX_TRAIN_GPUS = 2048
MAX_POOL_GPUS = 4096
MAX_ENGINES = 1024
MAX_RESPONSE_LEN = 131_072
MAX_PROMPT_LEN = 131_072
MAX_PROMPTS = 4096
MAX_RESPONSES = 64
