"""EP08 and EP09 answers: whole plans (3D recipe, RL placement)."""

from typing import Annotated

from pydantic import BaseModel, Field

# The timeline's and the layer view's share of the SMs (both labs.hardware.nccl.sm_share).
SmShare = Annotated[dict[str, float], Field(description="Share of the GPU's SMs each kind's "
                                                        "kernels hold while they run.")]


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


class RecipeTimelineEvent(BaseModel):
    lane: str = Field(description="compute (the compute stream) or comm (NCCL's stream).")
    phase: str = Field(description="forward, backward, or after (DP's wait at the step's end).")
    kind: str = Field(description="kernels, tp, cp, ep, sends or dp.")
    state: str = Field(description="compute; hidden (behind compute); exposed (the compute "
                                   "stream waits); sm (compute slowed by the SMs NCCL holds); "
                                   "split (TP overlap all: compute slowed by a GEMM cut into "
                                   "chunks).")
    start_s: float = Field(description="Seconds from the micro-batch's start.")
    seconds: float
    label: str


class RecipeTimelineKind(BaseModel):
    kind: str
    label: str
    hidden_s: float = Field(description="Seconds hidden behind compute on this micro-batch.")
    sm_s: float = Field(description="Seconds the compute beside it lost to NCCL's SMs.")
    exposed_s: float = Field(description="Seconds the compute stream waits for it.")


class RecipeTimeline(BaseModel):
    events: list[RecipeTimelineEvent]
    by_kind: list[RecipeTimelineKind] = Field(description="The events summed by kind.")
    seconds: float = Field(description="The timeline's end (ZeRO-0/1/2: with DP's wait).")
    backward_start_s: float
    exposed_s: dict[str, float] = Field(description="Per kind, exposed + SM seconds on this "
                                                    "micro-batch (dp: once a step, ZeRO-3: "
                                                    "per micro-batch).")
    charged_s: dict[str, float] = Field(description="The same, per step: equal to the step "
                                                    "bar's segments_s (tests/labs).")
    sm_share: SmShare
    charged_sm_s: float = Field(description="SM seconds the step charges on this "
                                            "micro-batch (EP overlap, ZeRO-3).")
    uncharged_sm_s: float = Field(description="share x hidden seconds where the model "
                                              "charges no SMs (TP, CP, DP buckets): the most "
                                              "the lab errs fast by.")
    summary: str


class RecipeLayerOp(BaseModel):
    lane: str = Field(description="compute (the compute stream), or the stream of tp, cp, ep "
                                  "or dp (DP buckets or FSDP's gathers and reduce-scatters).")
    phase: str = Field(description="forward or backward.")
    kind: str = Field(description="gemm, attention, memory, recompute, or tp, cp, ep, dp.")
    name: str = Field(description="The kernel (qkv, proj.dgrad, ...) or the collective.")
    state: str = Field(description="compute; hidden (behind compute); exposed (the compute "
                                   "stream waits); sm (compute slowed by the SMs NCCL holds).")
    start_s: float = Field(description="Seconds from the layer's forward.")
    seconds: float


class RecipeLayerCollective(BaseModel):
    phase: str = Field(description="forward, or backward (recomputation's again included).")
    kind: str = Field(description="tp, cp or ep.")
    collective: str = Field(description="all_gather, reduce_scatter, all_reduce, ring "
                                        "send/recv, or the all-to-all's dispatch or combine.")
    anchor: str = Field(description="The kernel it runs beside, feeds or follows (recompute: "
                                    "the forward run again).")
    where: str = Field(description="before (it feeds the kernel), after (it follows it), or "
                                   "pass (beside the whole pass: EP overlap).")
    seconds: float = Field(description="The collective, if nothing overlapped.")
    exposed_s: float = Field(description="What it adds to the compute stream: waits, SMs lent "
                                         "and a chunked GEMM's lost rate.")
    sm_s: float = Field(description="Of exposed_s, compute slowed by the SMs NCCL holds.")
    split_s: float = Field(description="Of exposed_s, TP overlap all: the GEMM cut into "
                                       "chunks runs longer than whole.")
    sent_bytes: float = Field(description="Bytes one GPU sends for it.")
    gemm_s: float = Field(description="The anchor kernel's seconds (0: none in its pass).")
    chunked_s: float = Field(description="TP overlap all: the anchor GEMM's seconds cut into "
                                         "TP-degree chunks, each at its own shape's rate (0: "
                                         "not cut).")


class RecipeLayerBuckets(BaseModel):
    kind: str = Field(description="all_reduce or reduce_scatter (the gradients, beside the "
                                  "last backward), all_gather (the updated weights, beside "
                                  "the next step's first forward).")
    group: str = Field(description="dense or experts.")
    params: float = Field(description="The group's parameters on one GPU.")
    count: int = Field(description="Megatron's buckets: max(40M, 1M x DP) parameters each.")
    bucket_s: float = Field(description="One full bucket's collective.")
    last_s: float = Field(description="The last bucket's.")
    window_s: float = Field(description="The pass it runs beside (0: DP overlap off).")
    exposed_s: float = Field(description="Left after the window (gradients) or waited in it "
                                         "(weights), before the pipeline's idle time.")


class RecipeLayerLane(BaseModel):
    id: str
    label: str


class RecipeLayerPass(BaseModel):
    compute_s: float = Field(description="The pass's kernels (recomputation and FSDP2's "
                                         "copy-out included).")
    exposed_s: dict[str, float] = Field(description="Per kind: seconds the compute stream "
                                                    "waits or is slowed in this pass.")
    hidden_s: dict[str, float] = Field(description="Per kind: seconds hidden in this pass.")


class RecipeLayer(BaseModel):
    ops: list[RecipeLayerOp]
    by_pass: dict[str, RecipeLayerPass] = Field(description="forward and backward.")
    lanes: list[RecipeLayerLane] = Field(description="The streams drawn, top to bottom.")
    moe: bool = Field(description="The layer drawn is a MoE layer (the slowest stage's first).")
    count: int = Field(description="Layers like it on the slowest stage.")
    layers: int = Field(description="Layers on the slowest stage.")
    zero: int
    forward_s: float = Field(description="The layer's forward on the critical path (kernels, "
                                         "waits and SMs lent; ZeRO-3: the next layer's "
                                         "gather's and FSDP2's copy-out).")
    backward_s: float = Field(description="Its backward, recomputation included.")
    seconds: float
    backward_start_s: float
    exposed_s: dict[str, float] = Field(description="Per kind (tp, cp, ep, dp), both passes: "
                                                    "seconds the compute stream waits or is "
                                                    "slowed.")
    hidden_s: dict[str, float] = Field(description="Per kind, both passes: seconds hidden "
                                                   "behind compute (dp with ZeRO-0/1/2: the "
                                                   "buckets that run beside the last "
                                                   "micro-batch's backward of this layer, and "
                                                   "what the pipeline's idle time hides).")
    sm_share: SmShare
    bucket_wait_s: float = Field(description="ZeRO-0/1/2: the step's DP segment, waited once "
                                             "after the last backward.")
    step_end_s: float = Field(description="ZeRO-0/1/2, the layer drawn the stage's last to run "
                                          "backward: the step's DP waits drawn after its "
                                          "backward (the last micro-batch's), once a step "
                                          "(= bucket_wait_s); else 0.")
    buckets: list[RecipeLayerBuckets] = Field(
        description="ZeRO-0/1/2: the step model's bucketed gradient sync (and ZeRO-1/2's "
                    "weights' all-gather), each group's, on the stage it times.")
    first_gather_s: float = Field(description="ZeRO-3: one layer's gather, which each pass "
                                              "waits for once (its first layer's).")
    params: float = Field(description="The layer's parameters on one GPU (after TP and EP).")
    summary: str
    collectives: list[RecipeLayerCollective] = Field(
        description="Each TP, CP and EP collective of the layer as the step model times it "
                    "(labs.parallel.layer_time.Piece).")


class TwoDBest(BaseModel):
    label: str = Field(description="The plan's layout and ZeRO stage, e.g. TP4 x DP16, ZeRO-3.")
    plan: dict = Field(description="The plan's controls, as /api/recipe's plan.")
    step_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    memory_per_gpu_bytes: float | None
    mfu: float
    bubble_fraction: float
    bubble_s: float = Field(description="The step's bubble segment (3-D).")
    stages_s: float = Field(description="The end stages' extra work (embedding, loss).")
    dp_exposed_s: float = Field(description="The step's DP segment: FSDP's per-layer "
                                            "gathers and reduce-scatters left exposed (2-D), "
                                            "or the once-a-step gradient sync's (3-D).")
    dp_bytes_per_step: float = Field(description="Bytes each GPU moves for DP/ZeRO a step.")
    dp_seconds: float = Field(description="Those bytes' time, hidden and exposed.")
    dp_group: int = Field(description="GPUs in a data-parallel group.")


class TwoDPoint(BaseModel):
    nodes: int
    gpus: int
    winner: str | None = Field(description="2d or 3d: the faster family's key (None: neither "
                                           "has a plan that passes).")
    best: dict[str, TwoDBest | None] = Field(description="Each family's fastest plan that "
                                                         "passes every audit (the planner's).")
    failed: dict[str, str] = Field(description="Why a family has none ('' where it has one).")


class RecipeTwoD(BaseModel):
    global_batch: int = Field(description="Sequences a step, the page's: every plan keeps it.")
    seq_len: int
    gpus: int
    nodes: int
    family: str | None = Field(description="The page's plan's family: 2d (PP 1, ZeRO-3), 3d "
                                           "(PP > 1, ZeRO 0 or 1), or None.")
    label: str
    passes: bool
    tokens_per_s_per_gpu: float
    points: list[TwoDPoint] = Field(description="Powers of two of nodes up to 128, and the "
                                                "page's own.")
    summary: str


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

class PlacementPool(BaseModel):
    role: str = Field(description="training, rollout, prefill, decode or colocated.")
    engines: int
    memory_per_gpu_bytes: int | None = Field(description="None when the layout is broken.")
    host_bytes_per_gpu: int = Field(description="Host RAM per GPU (CPU Adam).")
    detail: str
class PlacementCheck(BaseModel):
    detail: str
class PlacementPhase(BaseModel):
    lane: str
    phase: str = Field(description="rollout, train or weight_sync.")
    step: int
    start: float = Field(description="Seconds.")
    end: float = Field(description="Seconds.")
class PlacementAnswer(BaseModel):
    preset: str
    model: str
    stand_in: bool = Field(description="The model's config is not published: a stand-in shape.")
    placement: str
    train_gpus: int
    tp: int
    pp: int
    cp: int
    ep: int
    engine_gpus: int
    engines: int
    prefill_engines: int
    samples: int
    stage_layers: list[int]
    pools: list[PlacementPool]
    train_memory_bytes: int | None
    rollout_memory_bytes: int
    colocated_bytes: int | None
    transition_overhead_bytes: int
    checks: list[PlacementCheck]
    all_ok: bool
    gpus: list[dict] = Field(description="One entry per cluster GPU: role, node, coordinates.")
    timeline: list[PlacementPhase]
    rollout_seconds: float
    train_seconds: float
    sync_seconds: float
    sync_bytes_per_gpu: int
    sync_link: str
    sync_rate: float = Field(description="Bytes/s the sync's bytes move at: NCCL's bus "
                             "bandwidth of its link (EP02), never the datasheet's.")
    sync_switch_seconds: float = Field(description="Colocated: the seconds of the sync spent "
                                       "offloading the trainer and reloading the engine over "
                                       "PCIe (0 for separate pools).")
    rollout_parts: dict[str, float] = Field(description="The rollout's parts: prefill_s, "
                                            "and the fullest decode engine's "
                                            "decode_weights_s, decode_kv_s (HBM reads at the "
                                            "lab's 80% of the datasheet rate) and "
                                            "decode_compute_s (decode takes max(weights + kv, "
                                            "compute)), its decode_requests and "
                                            "experts_touched (the share of a MoE layer's "
                                            "routed experts a decode step visits, 1 if dense). "
                                            "A prefill/decode split adds kv_move_s and takes "
                                            "max(prefill, decode) + kv_move.")
    samples_per_second: float
    serving_weights: dict = Field(description="How one engine GPU's weights come about: "
                                  "attention_groups (SGLang's --sglang-dp-size, 1 for a "
                                  "dense engine), group_gpus (the GPUs each attention group "
                                  "splits its attention over), and params, the parameters the "
                                  "GPU holds by part (attention, dense_mlp, shared_experts, "
                                  "router, routed_experts, embedding, head, norms; 'all' for "
                                  "an even split), in bf16 at 2 bytes each.")
    replicas: dict
    notes: list[str]
