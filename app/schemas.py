"""The JSON answers of the lab APIs, as pydantic models: /docs documents them, and the route
tests validate every answer against them. The answers themselves are built by each router's
``to_api`` (plain dicts); these models describe, they are not on the hot path."""

from typing import Literal

from pydantic import BaseModel, Field


class MemoryAnswer(BaseModel):
    model: str = Field(description="Model preset id, or 'custom'.")
    model_name: str
    gpu: str
    mode: Literal["train", "infer"]
    recipe: str
    recipe_description: str
    params: int = Field(description="Total parameters.")
    active_params: int = Field(description="Parameters used per token (MoE: routed top-k).")
    bytes_per_param: float
    breakdown: dict[str, int] = Field(description="Bytes per GPU, by component.")
    total_bytes: int = Field(description="Bytes per GPU, every component.")
    gpu_memory_bytes: int
    headroom_bytes: int = Field(description="GPU memory minus total (negative: over).")
    fits: bool
    state_bytes: float = Field(description="Training state (or weights) of the whole model.")
    min_gpus: int = Field(description="Fewest GPUs whose memory could hold the state alone.")
    world_size: int = Field(description="TP x PP x CP x DP.")
    host_bytes: int = Field(description="Host RAM per GPU (optimizer offload).")
    assumptions: list[str]


class StageMemoryAnswer(BaseModel):
    state_bytes: int = Field(description="Weights, gradients and optimizer state per rank.")
    activation_unit_bytes: int = Field(description="One micro-batch through one chunk.")
    layers_per_chunk: int
    per_rank_bytes: list[int] = Field(description="Peak bytes per rank.")
    gpu_memory_bytes: int
    fits: list[bool]


class EventColumns(BaseModel):
    rank: list[int]
    kind: list[str]
    microbatch: list[int]
    chunk: list[int]
    start: list[float]
    end: list[float]


class Event(BaseModel):
    rank: int
    kind: str = Field(description="F forward, B backward, I input gradient, W weight gradient.")
    microbatch: int
    chunk: int
    start: float
    end: float


class PipelineAnswer(BaseModel):
    schedule: str
    stages: int
    microbatches: int
    virtual: int = Field(description="Model chunks per rank actually used.")
    makespan: float = Field(description="Time of the whole step, in the unit of f, b, w.")
    bubble_fraction: float = Field(description="Idle share of the ranks' time, measured.")
    textbook_bubble: float = Field(description="(p-1)/(v*m+p-1), for comparison.")
    send_time: float = Field(description="One send between neighbouring stages, in f's units "
                                         "(0: sends are free).")
    send_seconds: float | None = Field(description="One send on the chosen link, seconds "
                                                   "(None without a link).")
    wire_bytes: list[int] = Field(description="Bytes each rank sends per step (forward "
                                              "activations and backward gradients).")
    busy: list[float] = Field(description="Busy time per rank.")
    peak_activations: list[int] = Field(description="Peak micro-batch x chunk units per rank.")
    memory: StageMemoryAnswer | None = Field(description="None when the model cannot fill "
                                                         "the stages (see memory_note).")
    memory_note: str
    events: list[Event] | EventColumns | None = Field(
        description="Every action of the schedule: rows, columns or none (?events=).")


class DataParallelPoint(BaseModel):
    link: str = Field(description="Link preset id.")
    kind: str = Field(description="nvlink, infiniband, ethernet, pcie (or infinity-fabric).")
    gpus: int
    speedup: float = Field(description="Against one GPU (2 decimals).")
    efficiency: float = Field(description="speedup / N.")
    compute_s: float = Field(description="Compute seconds per GPU per step.")
    comm_s: float = Field(description="Every all-reduce of the step, hidden or not, seconds.")
    exposed_comm_s: float = Field(description="All-reduce the step waits for, seconds.")
    overlapped_comm_s: float = Field(description="All-reduce hidden behind backward, seconds.")
    step_s: float = Field(description="compute_s + exposed_comm_s.")
    allreduce_bytes_per_gpu: int = Field(description="2(N-1)/N x gradient bytes.")
    buckets: int
    algorithm: str = Field(description="ring or hierarchical (NCCL).")
    bottleneck: str = Field(description="The link that bounds the all-reduce.")


class DataParallelReplica(BaseModel):
    gpu: str
    total_bytes: int = Field(description="EP01 ledger of one replica, bytes per GPU.")
    state_bytes: int
    breakdown: dict[str, int]
    gpu_memory_bytes: int
    fits: bool


class DataParallelAnswer(DataParallelPoint):
    model: str
    model_name: str
    grad_bytes: float
    scaling: str
    overlap: str
    bucket_bytes: float
    nics_per_node: int
    global_batch: int
    max_gpus: int = Field(description="Largest N on the curve (strong: the global batch).")
    curve_links: list[str]
    curve: list[DataParallelPoint] = Field(description="One entry per GPU count per link.")
    flat_ring: DataParallelPoint | None = Field(
        description="Scale-out links: a port per GPU and one flat ring (the textbook reading).")
    replica: DataParallelReplica
    assumptions: list[str]
class MoEGroupAnswer(BaseModel):
    kind: str = Field(description="tp, cp, dp, pp, ep or edp (expert data parallel).")
    size: int = Field(description="GPUs per group.")
    count: int = Field(description="Groups of this kind.")
    nodes_spanned: int = Field(description="Most nodes one group covers.")
    inside_node: bool = Field(description="Every group of this kind sits inside one node.")


class MoERankMapAnswer(BaseModel):
    group: str = Field(description="The kind of group coloured.")
    gpus_per_node: int
    group_of_rank: list[int] = Field(description="Group index of each global rank (rank r on "
                                                 "node r // gpus_per_node).")


class MoEAnswer(BaseModel):
    model: str
    link: str = Field(description="Cluster preset id.")
    world_size: int
    tp: int
    pp: int
    cp: int
    dp: int = Field(description="world / (TP x PP x CP).")
    ep: int
    etp: int
    expert_dp: int = Field(description="TP x CP x DP / (EP x expert-TP).")
    params: int = Field(description="Total parameters: what memory holds.")
    active_params: int = Field(description="Parameters one token computes with.")
    params_per_gpu: int = Field(description="Parameters one GPU of the heaviest stage holds.")
    experts_per_gpu: int
    ep_group: list[int] = Field(description="Global ranks of the first EP group.")
    ep_per_node: int = Field(description="EP group members sharing one node.")
    tokens_per_expert: list[int] = Field(description="Token copies routed to each expert over "
                                                     "one EP group, one MoE layer.")
    dropped_per_expert: list[int] = Field(description="Of those, dropped over capacity.")
    capacity: int | None = Field(description="Tokens per expert over the EP group (None: no "
                                             "limit).")
    dropped_fraction: float
    max_over_mean: float = Field(description="Busiest expert's tokens / the mean.")
    tokens_per_gpu: list[int] = Field(description="Token copies each EP rank computes.")
    gpu_max_over_mean: float
    dispatch_bytes_per_gpu: list[int] = Field(description="Bytes each EP rank receives in the "
                                                          "dispatch all-to-all (and sends back "
                                                          "in the combine).")
    dispatch_sent_bytes_per_gpu: list[int] = Field(description="Bytes each EP rank sends in "
                                                               "the dispatch.")
    dispatch_s_per_gpu: list[float]
    compute_s_per_gpu: list[float]
    dispatch_s: float = Field(description="The dispatch all-to-all: its slowest member.")
    combine_s: float = Field(description="The combine all-to-all (same bytes, reversed).")
    compute_s: float = Field(description="The slowest GPU's expert compute.")
    layer_s: float = Field(description="One MoE layer's forward: dispatch + compute + combine, "
                                       "each phase ending with its slowest GPU.")
    balanced_layer_s: float = Field(description="The same with uniform routing.")
    slowest_gpu: int
    groups: list[MoEGroupAnswer]
    rank_map: MoERankMapAnswer | None = Field(description="None above 4,096 GPUs.")


class RecipeAudit(BaseModel):
    name: str
    ok: bool
    detail: str = Field(description="The figure the audit is decided on, in words.")


class RecipeTraffic(BaseModel):
    name: str = Field(description="tp, cp, ep or dp.")
    collective: str
    group: int
    nodes: int = Field(description="Most nodes one of its groups spans.")
    link: str = Field(description="The link that bounds it.")
    bytes_per_step: float = Field(description="Bytes one GPU sends per step.")
    seconds: float = Field(description="Per step if nothing overlapped, seconds.")
    hidden_s: float = Field(description="Of which hidden behind compute, seconds.")
    exposed_s: float = Field(description="Of which on the critical path, seconds.")


class RecipeResultAnswer(BaseModel):
    plan: dict
    gpus: int
    audits: list[RecipeAudit]
    passes: bool
    fits: bool
    memory_per_gpu_bytes: float | None = Field(description="Heaviest pipeline stage, bytes.")
    gpu_memory_bytes: float
    heaviest_stage: int | None
    bubble_fraction: float = Field(description="Measured by the pipeline simulator.")
    efficiency: float = Field(description="Ideal compute time / step time: product of parts.")
    parts: dict[str, float] = Field(description="Efficiency factors tp, cp, ep, pp, dp.")
    mfu: float = Field(description="Model FLOPs (6·N·D + attention) / (step x GPUs x peak).")
    step_s: float
    segments_s: dict[str, float] = Field(description="The step bar: compute, exposed "
                                                     "tp/cp/ep, bubble, exposed dp; seconds.")
    tokens_per_s: float
    global_batch: int
    tokens_per_step: int
    traffic: list[RecipeTraffic]


class RecipeReplanAnswer(BaseModel):
    # Both have the same fields as the answer itself (audits, fits, step_s, ...); typed as
    # objects so the API docs do not expand that schema three times (ReDoc renders slowly).
    before: dict = Field(description="The running plan on the new model or cluster: the "
                                     "answer's own fields.")
    after: dict | None = Field(description="The nearest plan that passes, the same fields.")
    changed: list[str]


class RecipeAnswer(RecipeResultAnswer):
    replan: RecipeReplanAnswer | None
