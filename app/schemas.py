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
    busy: list[float] = Field(description="Busy time per rank.")
    peak_activations: list[int] = Field(description="Peak micro-batch x chunk units per rank.")
    memory: StageMemoryAnswer | None = Field(description="None when the model cannot fill "
                                                         "the stages (see memory_note).")
    memory_note: str
    events: list[Event] | EventColumns | None = Field(
        description="Every action of the schedule: rows, columns or none (?events=).")


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
