"""Serving (rollout) engines for RL: generation time (EP09); the memory an engine GPU holds
is ``labs.rl.serving``'s.

Time (an estimate in the roofline spirit, Williams et al. 2009): prefill is compute-bound,
2·N_active FLOPs per prompt token at PREFILL_MFU of the BF16 peak; each decode step is bound by
max(bytes read / HBM bandwidth, 2·N_active·batch / peak): the weights the batch touches plus the
KV cache read once per step. Each GPU reads its own HBM, and the engine's step, synchronised by
the experts' all-to-all (a dense engine's by TP's all-reduces), waits for the slowest GPU, so a
step takes the busiest GPU's reads at one GPU's bandwidth (DeepSeek-V3 technical report,
arXiv:2412.19437 sec 3.4: expert-parallel serving balances the load across GPUs because the
all-to-all makes every GPU wait for the most loaded one, and decode's small per-expert batches
are bound by memory access, not compute). What a GPU reads: the weights it holds
(``serving_weight_parts``, the memory chart's own per-GPU parts: under DP attention the
attention, dense layers and shared experts each GPU keeps whole or split over its group), but
not the token embedding, of which a lookup gathers only its tokens' rows (under 1 MB a step:
left out), and of its routed experts those its tokens visit. Under uniform, independent routing
(each token picks k of E experts) an expert is visited by a batch of c tokens with probability
q = 1 - (1 - k/E)^c; a GPU holding n experts visits Binomial(n, q) of them in a layer (the
experts treated as independent), and the busiest of the G GPUs holding distinct experts visits
E[max] = sum_{j<n} (1 - F(j)^G) on average, F the binomial CDF (the largest of G independent
draws has CDF F^G; the GPUs are treated as independent too, though one token's k picks are
not: both err slow by a little). Each MoE layer waits for its own busiest GPU, so the step reads
E[max] / n of the routed experts a GPU holds (``busiest_expert_share``). The cache: a MoE
engine's busiest GPU holds its own whole requests'. Every response is assumed to run to the
length limit (an upper bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.hardware.gpus import GPUSpec
from labs.memory.lab import kv_cache_bytes
from labs.model.flops import matmul_params
from labs.model.spec import ModelSpec
from labs.rl.serving import (
    KV_DTYPE_BYTES,
    WEIGHT_BYTES,
    ServingLayout,
    attention_groups,
    dp_attention_requests,
    kv_bytes_per_token,
    serving_weight_parts,
)

PREFILL_MFU = 0.5  # estimate: large prefill batches run near half the dense BF16 peak
DECODE_MFU = 0.5  # estimate, only binds for very large decode batches
HBM_EFFICIENCY = 0.8  # estimate: share of datasheet HBM bandwidth a decode kernel reaches
# DeepEP's low-latency kernels (pure RDMA), dispatch and combine in µs by EP size: DeepEP V1's
# table (deepseek-ai/DeepEP docs/legacy.md, "Low-latency kernels with pure RDMA": H800, CX7
# InfiniBand 400 Gb/s, 128 tokens a batch, hidden 7,168, top-8, FP8 dispatch, BF16 combine).
# The lab leaves this time out of a decode step; EP09 step 5 bounds that error with it.
DEEPEP_LOW_LATENCY_US = {8: (77, 114), 16: (118, 195), 32: (155, 273), 64: (173, 314),
                         128: (192, 369), 256: (194, 360)}


def prefill_seconds(model: ModelSpec, gpu: GPUSpec, tokens: float, gpus: int) -> float:
    """Prompt tokens through ``gpus`` GPUs at PREFILL_MFU: 2·N_active FLOPs per token."""
    return 2 * matmul_params(model) * tokens / (gpus * gpu.bf16_flops * PREFILL_MFU)


def touched_expert_share(model: ModelSpec, batch: int) -> float:
    """The chance q that a decode step of ``batch`` tokens visits a given routed expert,
    1 - (1 - k/E)^batch under uniform routing: the share of a layer's experts the average GPU
    visits (1 for a dense model)."""
    if not model.is_moe:
        return 1.0
    return 1 - (1 - model.top_k / model.experts) ** batch


def experts_per_gpu(model: ModelSpec, engine_gpus: int) -> tuple[int, int]:
    """(n, G): the routed experts of a layer one engine GPU holds (at least a slice of one;
    the most any GPU holds when E does not divide, which the engine-split check flags), and
    the GPUs holding distinct experts (E when the GPUs outnumber the experts, each expert
    split over several)."""
    return max(1, math.ceil(model.experts / engine_gpus)), min(engine_gpus, model.experts)


def busiest_terms(model: ModelSpec, engine_gpus: int, batch: int) -> list[float]:
    """P(the busiest GPU visits more than j of its experts) = 1 - F(j)^G for j = 0 .. n-1,
    with F the CDF of Binomial(n, q), n and G from ``experts_per_gpu`` and q from
    ``touched_expert_share``: their sum is the busiest GPU's expected visits. The binomial's
    terms are taken in logs (n reaches 1,024, where C(n, j) overflows a float)."""
    n, g = experts_per_gpu(model, engine_gpus)
    q = touched_expert_share(model, batch)
    if q <= 0 or q >= 1:
        return [float(q >= 1)] * n
    cdf, terms = 0.0, []
    for j in range(n):
        cdf += math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                        + j * math.log(q) + (n - j) * math.log1p(-q))
        terms.append(1 - min(cdf, 1.0) ** g)
    return terms


def busiest_experts(model: ModelSpec, engine_gpus: int, batch: int) -> float:
    """E[max over G GPUs of Binomial(n, q)] = sum_j P(max > j): the experts of a layer the
    busiest GPU's decode step visits, on average (the module docstring gives the model)."""
    return sum(busiest_terms(model, engine_gpus, batch))


def busiest_expert_share(model: ModelSpec, engine_gpus: int, batch: int) -> float:
    """The share of its routed experts the busiest engine GPU reads in a decode step of
    ``batch`` tokens, E[max] / n (1 for a dense model)."""
    if not model.is_moe:
        return 1.0
    return busiest_experts(model, engine_gpus, batch) / experts_per_gpu(model, engine_gpus)[0]


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


def decode_weight_bytes(model: ModelSpec, engine_gpus: int, batch: int,
                        layout: ServingLayout | None) -> float:
    """bf16 bytes the busiest engine GPU reads from its own weights in a decode step of
    ``batch`` tokens: every part it holds (``serving_weight_parts``, as the memory chart counts
    them) but its routed experts and, under a layout, the token embedding (a step gathers only
    its tokens' rows); and of its routed experts the busiest GPU's share
    (``busiest_expert_share``). An even split (no layout, a dense model) reads its 1/E of the
    model, the routed experts at that share."""
    e = engine_gpus
    parts = serving_weight_parts(model, e, layout)
    share = busiest_expert_share(model, e, batch)
    if "routed_experts" not in parts:
        if not model.is_moe:
            return WEIGHT_BYTES * model.params / e
        return WEIGHT_BYTES * (model.dense_params + share * model.expert_params) / e
    routed = parts["routed_experts"]
    return WEIGHT_BYTES * (sum(parts.values()) - routed - parts["embedding"] + share * routed)


def decode_parts(model: ModelSpec, gpu: GPUSpec, bandwidth: float, engine_gpus: int,
                 batch: int, prompt_len: int, response_len: int, kv_dtype: str,
                 layout: ServingLayout | None = None) -> DecodeParts:
    """Where one engine's ``response_len`` decode steps for ``batch`` requests spend time:
    each step the busiest GPU's weight reads (``decode_weight_bytes``) and cache reads at one
    GPU's achieved bandwidth."""
    if batch < 1:
        return DecodeParts(0.0, 0.0, 0.0)
    mean_context = prompt_len + response_len / 2  # the cache grows linearly over the run
    rate = engine_gpus * bandwidth * HBM_EFFICIENCY
    weights = decode_weight_bytes(model, engine_gpus, batch, layout) / (bandwidth
                                                                        * HBM_EFFICIENCY)
    if model.is_moe:  # DP attention: each GPU of the busiest group reads its requests' cache
        groups, group = attention_groups(engine_gpus, layout)
        kv = (kv_cache_bytes(model, 1, dp_attention_requests(batch, groups), tp=group)
              * KV_DTYPE_BYTES[kv_dtype] / 2 * mean_context / (bandwidth * HBM_EFFICIENCY))
    else:
        kv = batch * mean_context * kv_bytes_per_token(model, kv_dtype) / rate
    compute_time = 2 * matmul_params(model) * batch / (engine_gpus * gpu.bf16_flops
                                                        * DECODE_MFU)
    return DecodeParts(response_len * weights, response_len * kv, response_len * compute_time)


def decode_seconds(model: ModelSpec, gpu: GPUSpec, bandwidth: float, engine_gpus: int,
                   batch: int, prompt_len: int, response_len: int, kv_dtype: str,
                   layout: ServingLayout | None = None) -> float:
    """Time for one engine to generate ``response_len`` tokens for ``batch`` requests."""
    return decode_parts(model, gpu, bandwidth, engine_gpus, batch, prompt_len, response_len,
                        kv_dtype, layout).seconds
