"""Serving (rollout) engines for RL: memory per engine GPU and generation time (EP09).

Memory of one engine GPU = its share of the bf16 weights + KV cache + workspace:
- weights: the engine shards the whole model over its GPUs (TP for dense models; for MoE,
  experts over EP and attention data-parallel, as slime's scripts run SGLang with
  --sglang-enable-dp-attention / EP MoE), so 2 B x params / engine GPUs;
- KV cache: concurrency x context tokens, K and V per KV head (GQA) or one latent of
  kv_lora_rank + qk_rope_head_dim per token (MLA, DeepSeek-V2 arXiv:2405.04434 sec 2.1.2)
  per layer, in the KV dtype; a dense engine splits KV heads over TP (replicating when TP
  exceeds them, as vLLM/SGLang do), a MoE engine with DP attention keeps each request's cache
  on one GPU, whole requests per GPU, so the busiest GPU holds ceil(concurrency / engine GPUs)
  of them (``dp_attention_requests``: 32 requests on 64 GPUs leave half the GPUs one request
  and half none, and the one with a request sets the memory);
- workspace: one chunked-prefill forward's intermediates (``labs.memory.lab.workspace_bytes``)
  with SGLang's default --chunked-prefill-size of 8,192 tokens.

Time (an estimate in the roofline spirit, Williams et al. 2009): prefill is compute-bound,
2·N_active FLOPs per prompt token at PREFILL_MFU of the BF16 peak; each decode step is bound by
max(bytes read / HBM bandwidth, 2·N_active·batch / peak): the weights the batch touches (a MoE
batch of c tokens touches E·(1-(1-k/E)^c) experts per layer under uniform routing) plus the KV
cache read once per step (a MoE engine's busiest GPU reads its own whole requests' cache, and
the engine's step, synchronised by the experts' all-to-all, waits for it). Every response is
assumed to run to the length limit (an upper bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.hardware.gpus import GPUSpec
from labs.memory.lab import PREFILL_CHUNK_TOKENS, kv_cache_bytes, workspace_bytes
from labs.model.flops import matmul_params
from labs.model.spec import ModelSpec

WEIGHT_BYTES = 2  # bf16 rollout weights
KV_DTYPE_BYTES = {"bf16": 2, "fp8": 1}  # keys: labs.core.limits.KV_DTYPES
CHUNKED_PREFILL_TOKENS = PREFILL_CHUNK_TOKENS  # SGLang server_args default chunked_prefill_size
PREFILL_MFU = 0.5  # estimate: large prefill batches run near half the dense BF16 peak
DECODE_MFU = 0.5  # estimate, only binds for very large decode batches
HBM_EFFICIENCY = 0.8  # estimate: share of datasheet HBM bandwidth a decode kernel reaches


@dataclass(frozen=True)
class EngineMemory:
    """Bytes on one GPU of one serving engine."""

    weights: float
    kv_cache: float
    workspace: float
    concurrency: int  # requests the engine holds at once
    context: int  # tokens per request's cache

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache + self.workspace

    def as_dict(self) -> dict[str, float]:
        return {"weights": self.weights, "kv_cache": self.kv_cache,
                "workspace": self.workspace}


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str) -> float:
    """KV cache bytes per token for the whole model (all layers, all KV heads)."""
    return kv_cache_bytes(model, 1) * KV_DTYPE_BYTES[kv_dtype] / 2


def dp_attention_requests(concurrency: int, engine_gpus: int) -> int:
    """Requests on the busiest GPU of an engine with DP attention: whole requests per GPU."""
    return math.ceil(concurrency / engine_gpus) if concurrency > 0 else 0


def engine_memory(model: ModelSpec, engine_gpus: int, concurrency: int, context: int,
                  kv_dtype: str = "bf16") -> EngineMemory:
    """One engine GPU's bill for ``concurrency`` requests of ``context`` tokens each."""
    weights = WEIGHT_BYTES * model.params / engine_gpus
    scale = KV_DTYPE_BYTES[kv_dtype] / 2
    if model.is_moe:
        # DP attention: whole requests per GPU; the busiest GPU's cache sets the memory.
        kv = kv_cache_bytes(model, context, dp_attention_requests(concurrency, engine_gpus)) \
            * scale
    else:
        kv = kv_cache_bytes(model, context, concurrency, tp=engine_gpus) * scale
    work = workspace_bytes(model, CHUNKED_PREFILL_TOKENS, 1, tp=engine_gpus)
    return EngineMemory(weights, kv, work, concurrency, context)


def prefill_seconds(model: ModelSpec, gpu: GPUSpec, tokens: float, gpus: int) -> float:
    """Prompt tokens through ``gpus`` GPUs at PREFILL_MFU: 2·N_active FLOPs per token."""
    return 2 * matmul_params(model) * tokens / (gpus * gpu.bf16_flops * PREFILL_MFU)


def touched_weight_bytes(model: ModelSpec, batch: int) -> float:
    """bf16 weights one decode step reads for ``batch`` tokens: all dense weights, and of the
    routed experts those any token visits (expected count under uniform routing)."""
    if not model.is_moe:
        return WEIGHT_BYTES * model.params
    return WEIGHT_BYTES * (model.dense_params
                           + touched_expert_share(model, batch) * model.expert_params)


def touched_expert_share(model: ModelSpec, batch: int) -> float:
    """The share of a MoE layer's routed experts a decode step of ``batch`` tokens visits,
    1 - (1 - k/E)^batch under uniform routing (1 for a dense model)."""
    if not model.is_moe:
        return 1.0
    return 1 - (1 - model.top_k / model.experts) ** batch


@dataclass(frozen=True)
class DecodeParts:
    """One engine's decode run: ``response_len`` steps, each bound by its HBM reads (the
    weights it touches, then the cache) or by its compute, whichever is longer."""

    weights: float  # seconds over the run reading the weights
    kv_cache: float  # seconds over the run reading the KV cache
    compute: float  # seconds over the run of the GEMMs at DECODE_MFU

    @property
    def seconds(self) -> float:
        return max(self.weights + self.kv_cache, self.compute)


def decode_parts(model: ModelSpec, gpu: GPUSpec, bandwidth: float, engine_gpus: int,
                 batch: int, prompt_len: int, response_len: int, kv_dtype: str) -> DecodeParts:
    """Where one engine's ``response_len`` decode steps for ``batch`` requests spend time."""
    if batch < 1:
        return DecodeParts(0.0, 0.0, 0.0)
    mean_context = prompt_len + response_len / 2  # the cache grows linearly over the run
    rate = engine_gpus * bandwidth * HBM_EFFICIENCY
    weights = touched_weight_bytes(model, batch) / rate
    if model.is_moe:  # DP attention: the busiest GPU reads its own whole requests' cache
        kv = (dp_attention_requests(batch, engine_gpus) * mean_context
              * kv_bytes_per_token(model, kv_dtype) / (bandwidth * HBM_EFFICIENCY))
    else:
        kv = batch * mean_context * kv_bytes_per_token(model, kv_dtype) / rate
    compute_time = 2 * matmul_params(model) * batch / (engine_gpus * gpu.bf16_flops
                                                        * DECODE_MFU)
    return DecodeParts(response_len * weights, response_len * kv, response_len * compute_time)


def decode_seconds(model: ModelSpec, gpu: GPUSpec, bandwidth: float, engine_gpus: int,
                   batch: int, prompt_len: int, response_len: int, kv_dtype: str) -> float:
    """Time for one engine to generate ``response_len`` tokens for ``batch`` requests."""
    return decode_parts(model, gpu, bandwidth, engine_gpus, batch, prompt_len, response_len,
                        kv_dtype).seconds


def per_engine(samples: int, engines: int) -> int:
    """Requests each engine holds when ``samples`` spread evenly over ``engines``."""
    return math.ceil(samples / engines) if engines else 0
