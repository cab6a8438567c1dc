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
class ZeroStageBar(BaseModel):
    dp: int
    zero: int
    state_bytes: int
    total_bytes: int
    breakdown: dict[str, int]


class ZeroTransfer(BaseModel):
    collective: str
    moves: str
    phase: Literal["forward", "backward"] = Field(description="The pass it hides behind.")
    bytes: int = Field(description="Bytes each GPU sends per step.")
    seconds: float
    algorithm: str


class ZeroTraffic(BaseModel):
    zero: int
    bytes: int = Field(description="Wire bytes per GPU per step.")
    seconds: float = Field(description="Time on the link per step.")
    exposed_seconds: float = Field(description="Part that does not hide behind compute.")
    hidden_seconds: float
    ratio_to_zero0: float | None
    transfers: list[ZeroTransfer]


class ZeroRecompute(BaseModel):
    recompute: str
    activation_bytes: int
    total_bytes: int
    compute_seconds: float
    extra_compute: float = Field(description="Compute over no recomputation, as a fraction.")
    fits: bool


class ZeroOffload(BaseModel):
    gpu_bytes_without: int
    gpu_bytes_with: int
    host_bytes_per_gpu: int
    host_bytes_per_node: int
    pcie_bytes: int = Field(description="Gradients down and weights up, per GPU per step.")
    pcie_seconds: float
    exposed_seconds: float
    download_hidden: bool


class DeepSpeedColumn(BaseModel):
    gpu_bytes: int = Field(description="DeepSpeed's estimate per GPU.")
    cpu_bytes_per_node: int = Field(description="DeepSpeed's estimate of CPU RAM per node.")
    largest_layer_params: int
    num_gpus_per_node: int
    num_nodes: int


class ZeroAnswer(BaseModel):
    model: str
    model_name: str
    gpu: str
    recipe: str
    params: int
    bytes_per_param: float
    dp: int
    zero: int
    offload: bool
    gpus_per_node: int
    nodes: int
    link: str
    cluster: str
    fsdp_name: str = Field(description="PyTorch FSDP's name for this ZeRO stage.")
    breakdown: dict[str, int] = Field(description="Bytes per GPU, by component.")
    total_bytes: int = Field(description="Bytes per GPU, every component.")
    state_bytes: int = Field(description="Weights, gradients and optimizer state per GPU.")
    gpu_memory_bytes: int
    fits: bool
    traffic_bytes: int = Field(description="Wire bytes per GPU per step at this stage.")
    traffic_seconds: float
    exposed_seconds: float
    compute_seconds: float
    step_seconds: float
    mfu: float
    host_bytes_per_node: int = Field(description="Host RAM per node (optimizer offload).")
    stages: list[ZeroStageBar]
    traffic: list[ZeroTraffic]
    recompute: list[ZeroRecompute]
    offload_plan: ZeroOffload
    deepspeed: dict[str, DeepSpeedColumn] = Field(
        description="DeepSpeed's estimators for stages 2 and 3 (keys stage2, stage3).")
