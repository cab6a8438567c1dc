"""EP03's answer: ZeRO (optimizer states, gradients and weights sharded over DP)."""

from typing import Literal

from pydantic import BaseModel, Field


class ZeroStageBar(BaseModel):
    dp: int
    zero: int
    state_bytes: int = Field(description="Weights, gradients and optimizer state per GPU at "
                                         "this stage and D.")
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
    extra_compute: float = Field(
        description="Compute over no recomputation with fused attention (flash), a fraction.")
    fits: bool
class ZeroOffload(BaseModel):
    gpu_bytes_without: int
    gpu_bytes_with: int
    host_bytes_per_gpu: int
    host_bytes_per_node: int
    pcie_bytes: int = Field(description="Gradients down and weights up, per GPU per step.")
    pcie_seconds: float
    adam_bytes: int = Field(description="CPU Adam's host-memory traffic per GPU: 28 B per "
                            "parameter of its shard (read fp32 weight, gradient, m, v; write "
                            "weight, m, v).")
    adam_seconds: float = Field(description="CPU Adam: the node's GPUs' adam_bytes over the "
                                "node's host memory bandwidth.")
    host_memory_bandwidth: float = Field(description="A node's host memory bandwidth, bytes/s "
                                         "(DGX H100: 2 x 8 channels of DDR5-4800, two DIMMs "
                                         "a channel, at 4,400 MT/s).")
    exposed_seconds: float = Field(description="Gradients' overrun of backward + CPU Adam + "
                                   "the weights' upload.")
    delayed_exposed_seconds: float = Field(description="The same with ZeRO-Offload's one-step "
                                           "delayed parameter update (CPU Adam and upload "
                                           "beside the next step's compute).")
    download_hidden: bool
class DeepSpeedColumn(BaseModel):
    gpu_bytes: int = Field(description="DeepSpeed's estimate per GPU.")
    cpu_bytes_per_node: int = Field(description="DeepSpeed's estimate of CPU RAM per node.")
    largest_layer_params: int
    num_gpus_per_node: int
    num_nodes: int
class ZeroCrossover(BaseModel):
    """The chosen stage's communication against the step's compute (EP03 step 5)."""

    tokens_per_gpu: int = Field(description="micro_batch x seq_len.")
    compute_s: float = Field(description="The step's compute, op by op, seconds.")
    comm_s: float = Field(description="The stage's collectives in all, seconds.")
    comm_bytes: int = Field(description="Bytes each GPU sends: k(D-1)/D x 2P.")
    busbw: int = Field(description="comm_bytes / comm_s, bytes/s.")
    rate: int = Field(description="6 x params x tokens / compute_s, FLOP/s.")
    factor: float = Field(description="k/3: 2/3 for stages 0-2, 1 for ZeRO-3.")
    crossover_tokens: float = Field(description="factor x (D-1)/D x rate / busbw: tokens per "
                                    "GPU where compute equals the stage's communication.")
    hidden_tokens: float = Field(description="Tokens per GPU from which every pass's "
                                 "collectives fit behind that pass (nothing exposed): 1.5 x "
                                 "crossover_tokens for stages 0-2, about it for ZeRO-3.")
    ratio: float | None = Field(description="compute_s / comm_s (null on one GPU).")
    sweep: list[list[float]] = Field(description="[tokens per GPU, compute seconds] pairs.")


class ZeroAnswer(BaseModel):
    model_name: str
    recipe: str
    params: int
    bytes_per_param: float
    dp: int
    zero: int
    offload: bool
    nodes: int
    cluster: str
    fsdp_name: str = Field(description="PyTorch FSDP's name for this ZeRO stage.")
    breakdown: dict[str, int] = Field(description="Bytes per GPU, by component.")
    total_bytes: int = Field(description="Bytes per GPU, every component.")
    # Round-14 cold reading of EP01-EP03, finding 10: /api/memory's state_bytes is the whole
    # model's, this one per GPU; each says which, and each has the other under its own name.
    state_bytes: int = Field(
        description="Weights, gradients and optimizer state on each GPU at this ZeRO stage "
                    "and D (breakdown's weights, gradients, master_weights and "
                    "optimizer_moments). Per GPU, not the whole model: see "
                    "state_bytes_whole_model (/api/memory's state_bytes is the whole model's). "
                    "Offloaded optimizer state is in host_bytes_per_node instead.")
    state_bytes_whole_model: int = Field(
        description="The whole model's training state, all GPUs (and host RAM) together: "
                    "params x bytes_per_param, the same at every stage and D.")
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
    crossover: ZeroCrossover
    deepspeed: dict[str, DeepSpeedColumn] = Field(
        description="DeepSpeed's estimators for stages 2 and 3 (keys stage2, stage3).")
