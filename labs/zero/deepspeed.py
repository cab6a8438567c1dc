"""DeepSpeed's own model-state memory estimators, for checking the ZeRO lab against them.

Re-expressed from DeepSpeed's ``estimate_zero2_model_states_mem_needs``
(deepspeed/runtime/zero/stage_1_and_2.py) and ``estimate_zero3_model_states_mem_needs``
(deepspeed/runtime/zero/stage3.py); DeepSpeed docs, "Memory Requirements" (deepspeed.readthedocs.io,
memory.html). With P total parameters, N = nodes x GPUs per node, n GPUs per node, L the
largest single module's parameters and the 1.5 "additional_buffer_factor":

ZeRO-2, per GPU:  offload: 2P (fp16 weights only);  no offload: 2P + int(18P / N), where 18 =
  2 fp16 gradients + 4 fp32 gradients + 4 fp32 master weights + 8 fp32 Adam moments.
ZeRO-2, CPU per node:  offload: P·max(4N, 16)·1.5;  no offload: 4P·n·1.5.
ZeRO-3 (parameters kept on the GPU, optimizer offload or not), per GPU:  4L, a full fp16
  copy of the largest layer's weights and gradients gathered at once, plus int(2P / N) with
  optimizer offload or int(18P / N) without.
ZeRO-3, CPU per node, with ``zero.Init`` (zero_init, how a model too large for one host is
  built):  offload: 16P·1.5 / nodes;  no offload: 4L·n·1.5.
DeepSpeed's printout is in GiB (2^30 bytes); these are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from labs.model.spec import ModelSpec

ADDITIONAL_BUFFER_FACTOR = 1.5  # DeepSpeed's default
ZERO2_GPU_PARTITION_BYTES = 18  # 2 fp16 grads + 4 fp32 grads + 4 fp32 master + 8 moments
ZERO3_OFFLOAD_CPU_BYTES = 16  # the optimizer's 16 B/param moved to host (zero_init)


@dataclass(frozen=True)
class DeepSpeedEstimate:
    stage: int
    gpu_bytes: int  # per GPU
    cpu_bytes_per_node: int
    largest_layer_params: int  # 0 for stage 2, which has no gather buffer
    offload: bool
    num_gpus_per_node: int
    num_nodes: int


def largest_layer_params(model: ModelSpec) -> int:
    """Parameters of the largest single module (DeepSpeed's ``model_to_params`` counts each
    module's own, non-recursive parameters): the token embedding or untied output head
    (vocab x hidden), one MLP matrix (hidden x ffn, or x expert_ffn) or a query projection."""
    h = model.hidden
    candidates = [model.vocab * h, h * model.ffn, h * model.heads * model.head_dim]
    if model.is_moe:
        candidates.append(h * model.expert_ffn)
    return max(candidates)


def zero2_estimate(params: int, num_gpus_per_node: int, num_nodes: int,
                   offload: bool) -> DeepSpeedEstimate:
    gpus = num_gpus_per_node * num_nodes
    if offload:
        gpu = 2 * params
        cpu = params * max(4 * gpus, 16) * ADDITIONAL_BUFFER_FACTOR
    else:
        gpu = 2 * params + int(ZERO2_GPU_PARTITION_BYTES * params / gpus)
        cpu = params * 4 * num_gpus_per_node * ADDITIONAL_BUFFER_FACTOR
    return DeepSpeedEstimate(2, int(gpu), int(cpu), 0, offload, num_gpus_per_node, num_nodes)


def zero3_estimate(params: int, largest_layer: int, num_gpus_per_node: int, num_nodes: int,
                   offload: bool) -> DeepSpeedEstimate:
    """Optimizer offload without parameter offload (the lab's "offload"), zero_init on."""
    gpus = num_gpus_per_node * num_nodes
    gather = 4 * largest_layer
    if offload:
        gpu = gather + int(2 * params / gpus)
        cpu = params * ZERO3_OFFLOAD_CPU_BYTES / num_nodes * ADDITIONAL_BUFFER_FACTOR
    else:
        gpu = gather + int(ZERO2_GPU_PARTITION_BYTES * params / gpus)
        cpu = largest_layer * 4 * num_gpus_per_node * ADDITIONAL_BUFFER_FACTOR
    return DeepSpeedEstimate(3, int(gpu), int(cpu), largest_layer, offload, num_gpus_per_node,
                             num_nodes)
