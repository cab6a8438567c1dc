"""EP09 answers: an RL job's placement (/api/placement): its pools, checks, timeline and memory."""

from pydantic import BaseModel, Field


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
                                       "on a step's two phase switches over PCIe (0 for "
                                       "separate pools).")
    sync_switch_bytes: list[int] = Field(description="Colocated: the bytes of those switches: "
                                         "the trainer's weights, gradients and any optimizer "
                                         "state on the GPU (none with CPU Adam) offloaded to "
                                         "host memory after training, and brought back before "
                                         "the next (the engine's weights are refilled by the "
                                         "sync, not copied from host; [0, 0] for separate "
                                         "pools).")
    sync_switch_link: str = Field(description="Colocated: the PCIe link that switch crosses "
                                  "(labs/presets/links.json pcie-5; '' for separate pools).")
    sync_switch_rate: float = Field(description="Colocated: bytes/s the switch is timed at, "
                                    "that link's datasheet rate (no NCCL on the host copy; 0 "
                                    "for separate pools).")
    rollout_parts: dict[str, float] = Field(description="The rollout's parts: prefill_s, "
                                            "and the fullest decode engine's "
                                            "decode_weights_s (decode_weight_bytes the busiest "
                                            "GPU reads a step: what it holds of the parts every "
                                            "token passes, and its visited share of its routed "
                                            "experts), decode_kv_s (both HBM reads of one GPU, "
                                            "at the lab's 80% of the datasheet rate) and "
                                            "decode_compute_s (decode takes max(weights + kv, "
                                            "compute)), its decode_requests and "
                                            "experts_touched (the chance a decode step visits "
                                            "a given routed expert, 1 if dense); a MoE engine "
                                            "adds experts_per_gpu (a layer's routed experts one "
                                            "GPU holds), expert_gpus (the GPUs holding distinct "
                                            "experts) and busiest_experts (those the busiest "
                                            "GPU visits a step, on average). "
                                            "A prefill/decode split adds kv_move_s and takes "
                                            "max(prefill, decode) + kv_move.")
    train_parts: dict = Field(description="The training phase's parts: step_s, EP08's step "
                              "for the samples on the training layout (microbatches of one "
                              "seq_len sequence each), and its segments (compute, tp, cp, "
                              "ep, bubble, ...: EP08's step bar, seconds, summing to "
                              "step_s); mfu, the step's model FLOPs over its time and "
                              "the GPUs' peak, compute_hfu, the share of peak its compute "
                              "segment runs at (recomputation counted), and for a MoE model "
                              "expert_tokens (a routed expert's tokens a micro-batch) and "
                              "expert_wgrad_flops (its weight gradient's FLOP/s) beside "
                              "matmul_flops (a full GEMM's); log_prob, the factor the "
                              "log-probability forward "
                              "adds (2 FLOPs a parameter a token over the step's hardware "
                              "FLOPs, flops_per_param a parameter a token); compute_s = step_s x "
                              "log_prob; offload_s, CPU Adam's "
                              "gradients down and weights up over PCIe at offload_rate, "
                              "bytes/s (0 without it); "
                              "seconds = compute_s + offload_s, the training time. A layout "
                              "EP08's recipe refuses is timed at 35% of the peak instead "
                              "(estimated: true, step_s 0, no segments).")
    samples_per_second: float
    serving_weights: dict = Field(description="How one engine GPU's weights come about: "
                                  "attention_groups (SGLang's --sglang-dp-size, 1 for a "
                                  "dense engine), group_gpus (the GPUs each attention group "
                                  "splits its attention over), and params, the parameters the "
                                  "GPU holds by part (attention, dense_mlp, shared_experts, "
                                  "router, routed_experts, embedding, head, norms; 'all' for "
                                  "an even split), in bf16 at 2 bytes each; and fp8_bytes, "
                                  "the bytes the GPU holds loading an FP8 release (the linear "
                                  "layers at 1 byte and a 4-byte scale a 128 x 128 block, the "
                                  "rest bf16; null for an even split).")
    train_stage: dict = Field(description="The heaviest training GPU's pipeline stage: rank, "
                              "layers, moe_layers, first, last; the stage's parameters "
                              "before division (tp_split_params, replicated_params, "
                              "expert_params) and one GPU's (dense_params_per_gpu: over TP, "
                              "the replicated whole; expert_params_per_gpu: over EP x "
                              "expert-TP); dense_shard and expert_shard, the groups the "
                              "distributed optimizer shards their state over; "
                              "host_bytes_per_param, CPU Adam's host RAM a parameter of "
                              "those shards. Empty when "
                              "the layout does not divide.")
    replicas: dict
    notes: list[str]
