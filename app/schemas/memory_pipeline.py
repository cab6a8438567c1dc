"""EP01 and EP05 answers: the memory ledger and the pipeline schedule."""

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
    # Round-14 cold reading of EP01-EP03, finding 10: /api/zero's state_bytes is per GPU, this
    # one the whole model's; each says which, and each has the other under its own name.
    state_bytes: float = Field(
        description="The whole model's training state (weights, gradients and optimizer state; "
                    "in inference the weights), all GPUs together: params x bytes_per_param, "
                    "whatever the parallel degrees. Not per GPU: see state_bytes_per_gpu "
                    "(/api/zero's state_bytes is per GPU).")
    state_bytes_per_gpu: int = Field(
        description="The part of the state one GPU holds (the heaviest pipeline rank's): "
                    "breakdown's weights, gradients, master_weights and optimizer_moments, "
                    "after TP, PP, EP and ZeRO sharding; offloaded optimizer state is in "
                    "host_bytes instead.")
    min_gpus: int = Field(description="Fewest GPUs whose memory could hold the state alone.")
    world_size: int = Field(description="TP x PP x CP x DP.")
    host_bytes: int = Field(description="Host RAM per GPU (optimizer offload).")
    schedule: str = Field(description="Pipeline schedule whose in-flight rule sizes activations.")
    microbatches: int = Field(description="Micro-batches per step (the default fills the "
                                          "pipeline).")
    virtual: int = Field(description="Model chunks per pipeline rank.")
    stage_in_flight: list[float] = Field(
        description="Per pipeline rank: activations held at its peak, in stage-loads (1F1B: "
                    "min(m, PP - rank); interleaved: Megatron's 1 + (p-1)/(p·v) factor).")
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
    idle_over_ideal: float = Field(description="The measured idle time over the ideal (busy) "
                                   "time: the papers' bubble, f/(1-f) of bubble_fraction f.")
    textbook_over_ideal: float = Field(description="(p-1)/(v*m): Narayanan et al. 2021's "
                                       "bubble over the ideal time, for comparison.")
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
