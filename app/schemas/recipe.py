"""EP08 answers: a whole 3D plan (/api/recipe): its audits, step, causes, traffic, stages and
memory, its replan, and the views of it that recipe_views.py describes."""

from pydantic import BaseModel, Field

from app.schemas.recipe_views import RecipeLayer, RecipeTimeline, RecipeTwoD


class RecipeAudit(BaseModel):
    name: str
    ok: bool
    detail: str = Field(description="The figure the audit is decided on, in words.")


class RecipeCause(BaseModel):
    name: str
    label: str
    exposed_s: float = Field(description="Seconds per step on the critical path.")
    hidden_s: float = Field(description="Seconds per step overlapped behind something else.")


class RecipeTraffic(BaseModel):
    name: str = Field(description="tp, cp, ep or dp.")
    group: int
    nodes: int = Field(description="Most nodes one of its groups spans.")
    link: str = Field(description="The link that bounds it.")
    bytes_per_step: float = Field(description="Bytes one GPU sends per step.")
    seconds: float = Field(description="Per step if nothing overlapped, seconds.")
    hidden_s: float = Field(description="Of which hidden behind compute, seconds.")
    exposed_s: float = Field(description="Of which on the critical path, seconds.")


class RecipeStage(BaseModel):
    rank: int
    layers: int
    in_flight: float = Field(description="Micro-batches of this stage's activations held at "
                                         "its peak (1F1B: p - rank for the first stages).")
    breakdown: dict[str, float] = Field(description="Bytes per GPU: weights, gradients, "
                                        "master_weights, optimizer_moments, activations, "
                                        "embedding_and_logits, kv_cache, workspace.")
    total_bytes: float


class RecipeHsdpGroup(BaseModel):
    size: int
    nodes: int = Field(description="Most nodes one such group spans.")
    link: str = Field(description="The link its rings are bound by.")


class RecipeHsdp(BaseModel):
    dp_shard: int = Field(description="Data-parallel ranks each shard group spans.")
    replicas: int = Field(description="DP / dp_shard: copies of the sharded state.")
    shard_group: RecipeHsdpGroup = Field(description="DP x CP / replicas ranks: each layer's "
                                         "all-gather and reduce-scatter run in it.")
    replica_group: RecipeHsdpGroup = Field(description="One rank of each shard group: the "
                                           "gradient shards are all-reduced across it.")
    layer_all_gather_s: float = Field(description="One layer's weight all-gather, seconds.")
    layer_reduce_scatter_s: float = Field(description="One layer's gradient reduce-scatter, "
                                          "seconds.")
    layer_all_reduce_s: float = Field(description="One layer's gradient-shard all-reduce "
                                      "across the replicas, seconds.")
    all_reduce_per_step_s: float = Field(description="Every layer's all-reduce, once a step "
                                         "(the last micro-batch), seconds.")
    all_reduce_exposed_s: float = Field(description="Of it, what outlasts the last backward.")
    state_bytes: float = Field(description="Weights, gradients and optimizer state per GPU: "
                               "sharded over the shard group, not all of DP.")


class RecipeResultAnswer(BaseModel):
    plan: dict
    hsdp: RecipeHsdp | None = Field(default=None, description="HSDP (dp_shard below DP, "
                                    "ZeRO-3): its groups and collectives; null otherwise.")
    gpus: int
    audits: list[RecipeAudit]
    passes: bool
    memory_per_gpu_bytes: float | None = Field(description="Heaviest pipeline stage, bytes.")
    gpu_memory_bytes: float
    heaviest_stage: int | None
    bubble_fraction: float = Field(description="Measured by the pipeline simulator.")
    efficiency: float = Field(description="The kernels' own time (the slowest stage's, at an "
                                          "even share) / step time: product of parts.")
    matmul_efficiency: float = Field(description="The full-wave GEMM rate the kernels were "
                                                 "timed at: a fraction of the GPU's dense BF16 "
                                                 "peak (measured, or the override).")
    parts: dict[str, float] = Field(description="Efficiency factors stages (uneven stages' "
                                    "wait for the slowest), tp, cp, ep, sends, pp (bubble), dp, "
                                    "optimizer.")
    mfu: float = Field(description="Model FLOPs (6·N·D + attention) / (step x GPUs x peak).")
    hfu: float = Field(description="Hardware FLOPs utilisation: the FLOPs the GPUs run, the "
                                   "recomputed forward included, over the same peak time. "
                                   "Equal to MFU without recomputation; 4/3 of it with full "
                                   "recomputation of the matmuls.")
    step_s: float
    segments_s: dict[str, float] = Field(description="The step bar: compute, uneven stages' "
                                                     "wait, exposed tp/cp/ep, pipeline sends, "
                                                     "bubble, exposed dp, optimizer; seconds.")
    causes: list[RecipeCause] = Field(description="The step on the slowest stage by cause "
                                                  "(GEMMs, attention, memory-bound ops, each "
                                                  "collective exposed and hidden, sends, "
                                                  "bubble, optimizer), seconds per step; "
                                                  "divide by microbatches for one "
                                                  "micro-batch's.")
    tokens_per_s: float
    global_batch: int
    tokens_per_step: int
    traffic: list[RecipeTraffic]
    stages: list[RecipeStage] = Field(
        default=[], description="Each pipeline stage's bill per GPU (EP01's ledger): its "
                                "layers, the micro-batches of activations it holds at its "
                                "peak, and its bytes by part. Empty for a plan that cannot run.")


class RecipeReplanAnswer(BaseModel):
    # Both have the same fields as the answer itself (audits, fits, step_s, ...); typed as
    # objects so the API docs do not expand that schema three times (ReDoc renders slowly).
    before: dict = Field(description="The running plan on the new model or cluster: the "
                                     "answer's own fields.")
    after: dict | None = Field(description="The nearest plan that passes, the same fields.")
    changed: list[str]


class RecipeAnswer(RecipeResultAnswer):
    replan: RecipeReplanAnswer | None
    micro_causes: list[RecipeCause] = Field(
        description="One micro-batch's share of the step on the slowest stage, by cause: "
                    "``causes`` divided by the micro-batches per step (the bubble, DP sync and "
                    "optimizer spread over them); what EP08's \"why MFU falls short of the GEMM "
                    "rate\" chart draws. Empty for a plan that cannot run.")
    micro_step_s: float | None = Field(description="The step divided by its micro-batches.")
    micro_at_peak_s: float | None = Field(
        description="That micro-batch's model FLOPs at the GPUs' dense peak: MFU x "
                    "micro_step_s.")
    timeline: RecipeTimeline | None = Field(
        description="What hides behind what: the step's last micro-batch on the slowest "
                    "stage as a compute and a communication lane (labs.recipe.overlap). "
                    "None for a plan that cannot run.")
    layer: RecipeLayer | None = Field(
        description="One layer op by op: the slowest stage's layer (its first MoE layer in a "
                    "MoE model) as kernels on the compute stream and each kind's collectives "
                    "on its own stream, laid where the step model runs them "
                    "(labs.recipe.layer_view). None for a plan that cannot run.")
    two_d: RecipeTwoD | None = Field(
        description="Two dimensions before three: the best FSDP + TP plan (PP 1, ZeRO-3) "
                    "against the best TP + PP + DP plan (ZeRO 0 or 1) for the same model, "
                    "links, global batch and software as the cluster grows "
                    "(labs.recipe.two_d, the planner held to each family). None for a plan "
                    "that cannot run, and for a mixture-of-experts model (its fourteen "
                    "planner searches take seconds).")
