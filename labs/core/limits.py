"""One source for every enumeration and bound the labs accept.

The engine validates against these, the web layer's query models take their bounds and
choices from here, and so do the page's sliders: a limit changes in one place. The shared
choices (recomputation modes, precision recipes, activation models) are records in
``labs.core.catalogue``, whose ids are repeated here; the pipeline schedules are a catalogue of
their own (``labs.schedules.catalogue``).
"""

from __future__ import annotations

from labs.core.catalogue import ACTIVATION_MODEL_RECORDS, RECIPES
from labs.core.recomputation import RECOMPUTATION

# Pipeline shapes (labs.schedules): stages p, micro-batches m, model chunks v per rank.
MAX_STAGES = 64
MAX_MICROBATCHES = 1024
MAX_VIRTUAL = 64  # one layer per chunk at PP 2 for models up to 128 layers (NeMo runs VP 20-24)

__all__ = [
    "ACTIVATION_MODELS", "INFER_RECIPES", "MAX_DEGREE", "MAX_DP", "MAX_MICROBATCHES",
    "MAX_MICRO_BATCH", "MAX_SEQ_LEN", "MAX_STAGES", "MAX_VIRTUAL", "MAX_WORLD", "MODES",
    "KORTHIKANTI_RECOMPUTE", "RECIPE_IDS", "RECOMPUTE", "TRAIN_RECIPES", "ZERO_STAGES",
    "EXPORT_FORMATS", "MAX_GPUS_PER_NODE",
]

MODES = ("train", "infer")
RECOMPUTE = tuple(RECOMPUTATION)  # none, flash, selective, full, every-2nd, op
# Korthikanti et al. 2022's three modes, the ones the planner tries (EP03 prices its modes against
# "flash" instead of "none": labs.zero.lab.SHOWN_RECOMPUTE; "flash" keeps what "selective" keeps
# and repeats what "none" repeats).
KORTHIKANTI_RECOMPUTE = ("none", "selective", "full")
# Activation models (labs.model.activations): Korthikanti et al. 2022's 34·s·b·h, or Megatron-LM's
# theoretical-memory formula, which follows the model's FFN width and MoE routing.
ACTIVATION_MODELS = tuple(ACTIVATION_MODEL_RECORDS)  # classic, megatron
TRAIN_RECIPES = tuple(k for k, r in RECIPES.items() if r.mode == "train")  # adam16, ..., mxfp8
INFER_RECIPES = tuple(k for k, r in RECIPES.items() if r.mode == "infer")  # bf16, int8, int4
RECIPE_IDS = TRAIN_RECIPES + INFER_RECIPES
ZERO_STAGES = (0, 1, 2, 3)

MAX_SEQ_LEN = 1_048_576  # 1M tokens: the longest context any preset model is trained for
MAX_MICRO_BATCH = 1024
MAX_DEGREE = 4096  # any one of TP, PP, CP, EP
MAX_DP = 100_000
MAX_WORLD = 1_000_000  # GPUs in one job; bounds every product of degrees

# EP04 tensor parallelism (labs.tensor_parallel.lab): the TP degrees its sweep draws (Megatron
# splits by whole heads, so powers of two that divide the heads), the largest TP asked of it,
# and the MFU the compute model assumes (the shared default of labs.model.flops.training_time).
TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)
MAX_TP = 64
DEFAULT_MFU = 0.4
MIN_MFU, MAX_MFU = 0.05, 1.0
MAX_GPUS_PER_NODE = 72  # the largest NVLink domain among the link presets (NVL72)
# EP08's compute rate (labs.recipe.step_time): the GPUs' kernels run at their measured rates
# (labs.hardware.kernels: each GEMM at its shape's share of the GPU's measured full-wave matmul
# rate). ``matmul_efficiency`` overrides that full-wave rate, as a fraction of the dense peak
# (None: as measured; old links that set it keep working).
DEFAULT_MATMUL_EFFICIENCY = None
MIN_MATMUL_EFFICIENCY, MAX_MATMUL_EFFICIENCY = 0.2, 1.0
__all__ += ["DEFAULT_MATMUL_EFFICIENCY", "MAX_MATMUL_EFFICIENCY", "MIN_MATMUL_EFFICIENCY"]
__all__ += ["DEFAULT_MFU", "MAX_GPUS_PER_NODE", "MAX_MFU", "MAX_TP", "MIN_MFU", "TP_DEGREES"]

# EP02 data parallelism (labs.data_parallel.lab): scaling readings, overlap, and bounds.
__all__ += ["DP_OVERLAPS", "DP_SCALINGS", "MAX_DP_BUCKET_BYTES", "MAX_DP_COMPUTE_S",
            "MAX_DP_GLOBAL_BATCH", "MAX_DP_GPUS", "MAX_DP_GRAD_BYTES", "MAX_NICS_PER_NODE",
            "MIN_DP_BUCKET_BYTES", "MIN_DP_COMPUTE_S", "MIN_DP_GRAD_BYTES"]
DP_SCALINGS = ("weak", "strong")
DP_OVERLAPS = ("none", "bucketed")
MAX_DP_GPUS = 1024  # the scaling chart's log axis runs 1 .. 1,024 GPUs
MIN_DP_GRAD_BYTES, MAX_DP_GRAD_BYTES = 2e9, 2e14  # bf16 gradients of 1B .. 100T parameters
MIN_DP_COMPUTE_S, MAX_DP_COMPUTE_S = 1e-3, 1e4
MIN_DP_BUCKET_BYTES, MAX_DP_BUCKET_BYTES = 1e5, 1e12
MAX_DP_GLOBAL_BATCH = 1 << 20  # sequences per step
MAX_NICS_PER_NODE = 8

# EP07 Experts (labs.experts.lab, labs.parallel.rank_map).
__all__ += ["MAX_CAPACITY_FACTOR", "MAX_MOE_TOKENS", "MAX_NODES", "MAX_RANK_MAP_GPUS",
            "MAX_SKEW", "MOE_GROUP_KINDS"]
MOE_GROUP_KINDS = ("tp", "cp", "dp", "pp", "ep", "edp")  # what the rank map can colour by
MAX_MOE_TOKENS = 131_072  # tokens per GPU entering one MoE layer (a micro-batch's worth)
MAX_CAPACITY_FACTOR = 8.0  # 0 means no capacity limit (dropless, Megatron's default)
MAX_SKEW = 1.0  # 0 = uniform routing, 1 = every token picks the one hot expert
MAX_NODES = 512
# The leaf-to-spine oversubscription a network control takes (labs.hardware.links.Cluster):
# 1 (a full fat tree, DGX SuperPOD) to 8 (past the 1:7 of Llama 3's aggregation tier).
MAX_OVERSUBSCRIPTION = 8.0
__all__ += ["MAX_OVERSUBSCRIPTION"]
MAX_RANK_MAP_GPUS = 4096  # GPUs one rank map draws (DeepSeek-V3's 2,048 fit)
# Context parallelism (labs.context_parallel.lab): the layouts, the tokens the mask picture draws
# (one cell per (query, key) pair stays readable up to 64 x 64) and the CP degree (64 ranks: the
# largest CP groups reported, Llama 3's 16 and 1M-token runs on 32-64 GPUs).
__all__ += ["CP_LAYOUTS", "MAX_CP", "MAX_CP_TOKENS"]
CP_LAYOUTS = ("contiguous", "zigzag", "allgather", "ulysses")
MAX_CP_TOKENS = 64
MAX_CP = 64
# EP03 (ZeRO/FSDP): the host links optimizer offload can cross (labs/presets/links.json), and
# the DP degrees the ZeRO lab always draws beside the chosen one (GPUs per node: above).
HOST_LINKS = ("pcie-4", "pcie-5")
GPU_HOST_LINK = "gpu"  # a host-link control's default: the GPU preset's own (GPUSpec.host_link)
ZERO_DP_SHOWN = (1, 8, 64)

# EP08 (labs.recipe.lab): the cluster a plan runs on. 72 GPUs per node is an NVL72 rack's NVLink
# domain. The recipe and the planner take the same jobs: up to MAX_PLAN_GPUS GPUs, in as many
# nodes (MAX_JOB_NODES) as that makes (rank groups are placed from their pattern,
# labs.recipe.groups.spread, so the walk does not grow with the GPUs).
EXPORT_FORMATS = ("megatron", "deepspeed", "fsdp")
# EP09 RL placement (labs.rl.lab): placements, engine KV dtypes, and the sizes one request
# may ask for (the whole cluster is drawn GPU by GPU, so it is bounded).
__all__ += ["KV_DTYPES", "MAX_ENGINES", "MAX_POOL_GPUS", "MAX_PROMPTS", "MAX_PROMPT_LEN",
            "MAX_RESPONSES", "MAX_RESPONSE_LEN", "MAX_TRAIN_GPUS", "PLACEMENTS"]
PLACEMENTS = ("colocated", "separate", "separate-pd")
KV_DTYPES = ("bf16", "fp8")
MAX_TRAIN_GPUS = 2048
MAX_POOL_GPUS = 4096
MAX_ENGINES = 1024
MAX_RESPONSE_LEN = 131_072
MAX_PROMPT_LEN = 131_072
MAX_PROMPTS = 4096
MAX_RESPONSES = 64

# EP08's auto-planner (labs.recipe.planner, GET /api/plan): a job of up to 65,536 GPUs (Llama 3 405B
# trained on 16,384), and a global batch of up to 65,536 sequences.
MAX_PLAN_GPUS = 65_536
MAX_GLOBAL_BATCH = 65_536
MAX_JOB_NODES = MAX_PLAN_GPUS  # a node of one GPU each, at most; GPUs bound the job
__all__ += ["MAX_GLOBAL_BATCH", "MAX_JOB_NODES", "MAX_PLAN_GPUS"]

# Bring your own model (labs.model.hf_config, labs.model.code): the largest shape a pasted
# config.json or a model code may describe. Above every published model (Llama 3.1 405B: 126
# layers, hidden 16,384; DeepSeek-V3: 256 experts; Gemma 3: 262,144 vocab) with room to spare,
# yet small enough that no lab's per-layer, per-head or per-expert loop grows slow.
__all__ += ["MAX_CONFIG_BYTES", "MAX_MODEL_CODE", "MODEL_BOUNDS"]
MAX_CONFIG_BYTES = 65_536  # a config.json is ~1-3 KB; larger bodies are refused unread
# Bring your own run (labs.runs_log): a pasted training log, read as text only. Megatron's
# arguments block is ~30 KB, an iteration line ~300 bytes; larger bodies are refused unread.
MAX_LOG_BYTES = 65_536
__all__ += ["MAX_LOG_BYTES"]
MAX_MODEL_CODE = 160  # characters of a model code in a URL
MODEL_BOUNDS = {  # ModelSpec field -> (low, high)
    "layers": (1, 512),
    "hidden": (64, 65_536),
    "heads": (1, 1024),
    "kv_heads": (1, 1024),
    "head_dim": (1, 1024),
    "ffn": (1, 524_288),
    "vocab": (1, 1_048_576),
    "experts": (0, 1024),
    "top_k": (0, 1024),
    "shared_experts": (0, 64),
    "expert_ffn": (0, 524_288),
    "dense_layers": (0, 511),
    "q_lora_rank": (0, 65_536),
    "kv_lora_rank": (0, 65_536),
    "qk_nope_head_dim": (0, 1024),
    "qk_rope_head_dim": (0, 1024),
    "v_head_dim": (0, 1024),
    "max_positions": (0, 1_048_576),
    "route_groups": (0, 1024),
    "route_group_limit": (0, 1024),
}
# Layers a pipeline stage may be given (Megatron's --decoder-first/last-pipeline-num-layers);
# the model's own layer count bounds it further (labs.schedules.stages.uneven_problems).
MAX_STAGE_LAYERS = 1024
__all__ += ["MAX_STAGE_LAYERS"]
# EP12 cheat sheet: the worked example's knobs (each line's lab checks its own rules as well).
MAX_CHEAT_DEGREE = 64  # TP, PP and CP of the example
MAX_CHEAT_DP = 4096
MAX_CHEAT_MICRO_BATCH = 64
MAX_CHEAT_MICROBATCHES = 1024
# EP10 low precision and fine-tuning (labs.precision): the LoRA rank (QLoRA used 64; a rank
# past the model's width adapts nothing a full update would not) and the offload's sweep.
MAX_LORA_RANK = 1024
OFFLOAD_SHARES = tuple(i / 20 for i in range(21))  # 0%, 5%, ..., 100% of saved activations
__all__ += ["MAX_LORA_RANK", "OFFLOAD_SHARES"]
# Failures at scale (labs.failures): the job's GPUs, a GPU's mean time between interruptions
# (1 day .. 1,000 years), the step, the job's steps, the checkpoint's storage bandwidth
# (0.1 GB/s .. 100 TB/s, aggregate), the interval between checkpoints (1 s .. 11.6 days) and
# the restart (0 .. 1 day). Sizes and times are bytes and seconds.
__all__ += ["MAX_FAIL_BW", "MAX_FAIL_GPUS", "MAX_FAIL_INTERVAL", "MAX_FAIL_MTBI",
            "MAX_FAIL_RESTART", "MAX_FAIL_STEP", "MAX_FAIL_STEPS", "MIN_FAIL_BW",
            "MIN_FAIL_MTBI", "MIN_FAIL_STEP", "SAVE_MODES"]
SAVE_MODES = ("sync", "async", "peer")
MAX_FAIL_GPUS = MAX_WORLD
MIN_FAIL_MTBI, MAX_FAIL_MTBI = 86_400.0, 1000 * 365 * 86_400.0
MIN_FAIL_STEP, MAX_FAIL_STEP = 0.01, 3600.0
MAX_FAIL_STEPS = 100_000_000
MIN_FAIL_BW, MAX_FAIL_BW = 1e8, 1e14
MAX_FAIL_INTERVAL = 1_000_000.0
MAX_FAIL_RESTART = 86_400.0
