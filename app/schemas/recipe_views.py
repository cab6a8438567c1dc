"""EP08 answers: the views /api/recipe attaches to a plan that runs: what hides behind what
(a micro-batch's timeline, one layer op by op) and two dimensions before three."""

from typing import Annotated

from pydantic import BaseModel, Field

# The timeline's and the layer view's share of the SMs (both labs.hardware.nccl.sm_share).
SmShare = Annotated[dict[str, float], Field(description="Share of the GPU's SMs each kind's "
                                                        "kernels hold while they run.")]


class RecipeTimelineEvent(BaseModel):
    lane: str = Field(description="compute (the compute stream), comm (NCCL's stream), or "
                                  "ZeRO-0/1/2's DP sync: dp (the dense layers' data-parallel "
                                  "group) or edp (the experts').")
    phase: str = Field(description="forward, backward, or after (DP's wait at the step's end).")
    kind: str = Field(description="kernels, tp, cp, ep, sends or dp.")
    state: str = Field(description="compute; hidden (behind compute); exposed (the compute "
                                   "stream waits); sm (compute slowed by the SMs NCCL holds); "
                                   "split (TP overlap all: compute slowed by a GEMM cut into "
                                   "chunks).")
    start_s: float = Field(description="Seconds from the micro-batch's start.")
    seconds: float
    label: str
    collective: str | None = Field(None, description="ZeRO-0/1/2's DP sync: reduce_scatter, "
                                                     "all_gather or all_reduce (dp_sync).")
    group: str | None = Field(None, description="Its group (dense, experts, tied); empty on "
                                                "the compute lane, where one wait sums the "
                                                "groups'.")
    hover: str | None = Field(None, description="What the bar says on hover: which "
                                                "collective, how long, how much exposed.")


class RecipeSyncLeg(BaseModel):
    collective: str = Field(description="reduce_scatter or all_reduce (the gradients), "
                                        "all_gather (the updated weights).")
    group: str = Field(description="dense, experts, or tied (the tied embeddings' "
                                   "all-reduce).")
    lane: str
    buckets: int = Field(description="Megatron's gradient buckets it runs in.")
    seconds: float = Field(description="All its buckets, one after another, once a step.")
    hidden_s: float = Field(description="Hidden beside the last backward (a reduction) or the "
                                        "next step's first forward (the all-gather).")
    idle_s: float = Field(description="Hidden in the pipeline's idle time.")
    exposed_s: float = Field(description="What the step waits for it: the step's DP segment "
                                         "is their sum.")


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
    compute_end_s: float = Field(description="Where the compute stream ends; ZeRO-3's "
                                             "hidden collectives may run past it.")
    dp_sync: list[RecipeSyncLeg] = Field(description="ZeRO-0/1/2: the step's DP sync, "
                                                     "collective by collective, as the step "
                                                     "model charges it (labs.recipe.overlap).")
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
