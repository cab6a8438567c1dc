"""Serving (rollout) engines for RL: memory per engine GPU and generation time (EP09).

Memory of one engine GPU = its share of the bf16 weights + KV cache + workspace:
- weights: a dense engine shards the whole model over its GPUs (TP), 2 B x params / engine
  GPUs. A MoE engine places them as SGLang does under the ``ServingLayout`` its recipe's slime
  script passes (``serving_weight_parts``): with --sglang-enable-dp-attention and
  --sglang-dp-size D the engine's E GPUs form D attention groups of E/D (SGLang
  dp_attention.py: attn_tp_size = tp_size // dp_size), and in SGLang's deepseek_v2.py the
  attention's q_b/kv_b/o projections split over those E/D GPUs while the MLA down-projections
  (fused_qkv_a_proj_with_mqa) are ReplicatedLinear; the token embedding is whole on every GPU
  (VocabParallelEmbedding(enable_tp=not enable_dp_attention)); the output head splits over
  the E/D GPUs with --sglang-enable-dp-lm-head (ParallelLMHead(use_attn_tp_group=...)), else
  over E; the dense layers' MLPs are whole on every GPU with --sglang-moe-dense-tp-size 1
  (else split over E); the shared experts are whole with DeepEP (tp_size=1), else split
  over E; the router (MoEGate, a plain parameter) and the norms are whole; the routed
  experts split over all E GPUs (EP = TP = E). Without a layout (the cheat sheet's one-line
  estimate) a MoE engine splits everything evenly, 2 B x params / E;
- KV cache: concurrency x context tokens, K and V per KV head (GQA) or one latent of
  kv_lora_rank + qk_rope_head_dim per token (MLA, DeepSeek-V2 arXiv:2405.04434 sec 2.1.2)
  per layer, in the KV dtype; a dense engine splits KV heads over TP (replicating when TP
  exceeds them, as vLLM/SGLang do). A MoE engine with DP attention keeps each request's cache
  in one attention group, whole requests per group, so the busiest group holds
  ceil(concurrency / D) of them (``dp_attention_requests``), and each of its E/D GPUs keeps
  their KV heads' share (MLA's latent, shared by every head, whole on each); without a layout
  D = E (32 requests on 64 GPUs leave half the GPUs one request and half none);
- workspace: one layer's forward intermediates for the tokens a GPU runs, each part split as
  its weights are (``serving_workspace``), with SGLang's default --chunked-prefill-size of
  8,192 tokens a chunk.

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
from labs.memory.lab import (
    PREFILL_CHUNK_TOKENS,
    forward_tokens,
    kv_cache_bytes,
)
from labs.model.activations import ACT_BYTES
from labs.model.flops import matmul_params
from labs.model.spec import ModelSpec

WEIGHT_BYTES = 2  # bf16 rollout weights
KV_DTYPE_BYTES = {"bf16": 2, "fp8": 1}  # keys: labs.core.limits.KV_DTYPES
CHUNKED_PREFILL_TOKENS = PREFILL_CHUNK_TOKENS  # SGLang server_args default chunked_prefill_size
PREFILL_MFU = 0.5  # estimate: large prefill batches run near half the dense BF16 peak
DECODE_MFU = 0.5  # estimate, only binds for very large decode batches
HBM_EFFICIENCY = 0.8  # estimate: share of datasheet HBM bandwidth a decode kernel reaches
# DeepEP's low-latency kernels (pure RDMA), dispatch and combine in µs by EP size: DeepEP V1's
# table (deepseek-ai/DeepEP docs/legacy.md, "Low-latency kernels with pure RDMA": H800, CX7
# InfiniBand 400 Gb/s, 128 tokens a batch, hidden 7,168, top-8, FP8 dispatch, BF16 combine).
# The lab leaves this time out of a decode step; EP09 step 5 bounds that error with it.
DEEPEP_LOW_LATENCY_US = {8: (77, 114), 16: (118, 195), 32: (155, 273), 64: (173, 314),
                         128: (192, 369), 256: (194, 360)}


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


@dataclass(frozen=True)
class ServingLayout:
    """How an SGLang engine of a MoE model places its weights: the --sglang-* flags a slime
    script passes (``labs/presets/rl_recipes.json`` cites each recipe's)."""

    attn_dp: int = 1  # --sglang-dp-size with --sglang-enable-dp-attention (1: off)
    dense_whole: bool = False  # --sglang-moe-dense-tp-size 1
    dp_lm_head: bool = False  # --sglang-enable-dp-lm-head
    deepep: bool = False  # --sglang-enable-deepep-moe (shared experts at tp_size 1)

    def groups(self, engine_gpus: int) -> tuple[int, int]:
        """(attention groups D, GPUs per group E/D) for an engine of ``engine_gpus``: SGLang
        needs D to divide the engine's TP size, so another engine size keeps the largest D
        that does."""
        d = math.gcd(self.attn_dp, engine_gpus)
        return d, engine_gpus // d


def serving_weight_parts(model: ModelSpec, engine_gpus: int,
                         layout: ServingLayout | None) -> dict[str, float]:
    """Parameters one GPU of an engine holds, by part (the module docstring gives SGLang's
    placement of each). A dense model, a model given by its parameter count alone, or no
    layout: the even split, ``{"all": params / E}``."""
    e = engine_gpus
    if layout is None or not model.is_moe or model.params_override is not None:
        return {"all": model.params / e}
    d, group = layout.groups(e)
    h, dp_on = model.hidden, d > 1
    whole_attn = 0
    if model.uses_mla:  # fused_qkv_a_proj_with_mqa and the two latent norms: ReplicatedLinear
        whole_attn = h * (model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim) \
            + model.q_lora_rank + model.kv_lora_rank
    split_attn = model.attention_params - whole_attn
    norm = model.hidden if model.norm == "rmsnorm" else 2 * model.hidden
    dense_mlp = (model.layers - model.moe_layers) * model.dense_mlp_params
    head = 0 if model.tied_embeddings else model.vocab * h
    return {
        "attention": model.layers * (whole_attn + split_attn / group),
        "dense_mlp": dense_mlp / (1 if layout.dense_whole and dp_on else e),
        "shared_experts": model.moe_layers * model.shared_experts * model.expert_size
        / (1 if layout.deepep else e),
        "router": model.moe_layers * (model.experts * h
                                      + (model.experts if model.router_bias else 0)),
        "routed_experts": model.expert_params / e,
        "embedding": (model.vocab + model.max_positions) * h / (1 if dp_on else e),
        "head": head / (group if layout.dp_lm_head and dp_on else e),
        "norms": (2 * model.layers + 1) * norm,
    }


# DeepSeek-V3/R1's FP8 release (DeepSeek-V3 README_WEIGHTS.md, "FP8 Weight Documentation"):
# e4m3 weights with one fp32 dequantisation scale (weight_scale_inv) per 128 x 128 block.
FP8_BLOCK = 128
FP8_WEIGHT_BYTES = 1 + 4 / FP8_BLOCK ** 2
FP8_PARTS = ("attention", "dense_mlp", "shared_experts", "routed_experts")  # the linear layers


def fp8_serving_weight_bytes(model: ModelSpec, engine_gpus: int,
                             layout: ServingLayout | None) -> float | None:
    """Bytes of weights on one engine GPU loading an FP8 release as slime's R1 script does:
    the linear layers (attention's projections, the dense MLPs, shared and routed experts) at
    FP8_WEIGHT_BYTES a parameter, the embedding, head, routers and norms (MLA's two latent
    norms among them) in bf16. None where the parts are not known (an even split)."""
    parts = serving_weight_parts(model, engine_gpus, layout)
    if "all" in parts:
        return None
    latent_norms = model.layers * (model.q_lora_rank + model.kv_lora_rank) \
        if model.uses_mla else 0
    linear = sum(parts[k] for k in FP8_PARTS) - latent_norms
    return FP8_WEIGHT_BYTES * linear + WEIGHT_BYTES * (sum(parts.values()) - linear)


def serving_weight_bytes(model: ModelSpec, engine_gpus: int,
                         layout: ServingLayout | None) -> float:
    """bf16 bytes of weights on one engine GPU (``serving_weight_parts``)."""
    return WEIGHT_BYTES * sum(serving_weight_parts(model, engine_gpus, layout).values())


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str) -> float:
    """KV cache bytes per token for the whole model (all layers, all KV heads)."""
    return kv_cache_bytes(model, 1) * KV_DTYPE_BYTES[kv_dtype] / 2


def dp_attention_requests(concurrency: int, groups: int) -> int:
    """Requests on the busiest attention group of an engine with DP attention: whole
    requests per group."""
    return math.ceil(concurrency / groups) if concurrency > 0 else 0


def attention_groups(engine_gpus: int, layout: ServingLayout | None) -> tuple[int, int]:
    """(attention groups, GPUs per group) of a MoE engine; no layout: one GPU a group."""
    return (engine_gpus, 1) if layout is None else layout.groups(engine_gpus)


def engine_memory(model: ModelSpec, engine_gpus: int, concurrency: int, context: int,
                  kv_dtype: str = "bf16", layout: ServingLayout | None = None) -> EngineMemory:
    """One engine GPU's bill for ``concurrency`` requests of ``context`` tokens each."""
    weights = serving_weight_bytes(model, engine_gpus, layout)
    scale = KV_DTYPE_BYTES[kv_dtype] / 2
    if model.is_moe:
        # DP attention: whole requests per group; the busiest group's cache sets the memory.
        groups, group = attention_groups(engine_gpus, layout)
        kv = kv_cache_bytes(model, context, dp_attention_requests(concurrency, groups),
                            tp=group) * scale
    else:
        kv = kv_cache_bytes(model, context, concurrency, tp=engine_gpus) * scale
    work = serving_workspace(model, engine_gpus, layout).bytes
    return EngineMemory(weights, kv, work, concurrency, context)


@dataclass(frozen=True)
class WorkspacePart:
    """One part of a layer's forward intermediates on one engine GPU: ``tokens`` (or token
    copies) through ``widths`` values a token, each split over its ``splits`` GPUs as the
    part's weights are (1: whole)."""

    name: str
    tokens: float
    widths: tuple[int, ...]
    splits: tuple[int, ...]

    @property
    def width(self) -> float:
        return sum(w / s for w, s in zip(self.widths, self.splits, strict=True))

    @property
    def bytes(self) -> float:
        return self.tokens * self.width * ACT_BYTES

    def formula(self) -> str:
        """"8,192 × (24,576 + 24,576 + 16,384 + 16,384) ÷ 8", as the page writes it."""
        def split(ws: list[int], s: int) -> str:
            body = " + ".join(f"{w:,}" for w in ws)
            body = f"({body})" if len(ws) > 1 else body
            return body if s == 1 else f"{body} ÷ {s}"
        groups: dict[int, list[int]] = {}
        for w, s in zip(self.widths, self.splits, strict=True):
            groups.setdefault(s, []).append(w)
        inner = " + ".join(split(ws, s) for s, ws in groups.items())
        return f"{self.tokens:,.0f} × {f'({inner})' if len(groups) > 1 else inner}"


@dataclass(frozen=True)
class Workspace:
    """An engine GPU's workspace: one layer's forward intermediates, the attention's beside
    the wider of the two kinds of MLP (``serving_workspace``)."""

    attention: WorkspacePart
    mlps: tuple[tuple[WorkspacePart, ...], ...]  # each kind of layer's MLP parts
    chunks: int  # chunks the engine runs at once (its attention groups')

    @property
    def mlp(self) -> tuple[WorkspacePart, ...]:
        """The MLP parts of the wider kind of layer, which sets the workspace."""
        return max(self.mlps, key=lambda parts: sum(p.bytes for p in parts))

    @property
    def parts(self) -> tuple[WorkspacePart, ...]:
        return (self.attention, *self.mlp)

    @property
    def bytes(self) -> float:
        return sum(p.bytes for p in self.parts)

    def formula(self) -> str:
        """"(T × (q + k + v + o) ÷ g + T × 2·ffn) × 2 B", each part as its weights split."""
        return (f"({' + '.join(p.formula() for p in self.parts)}) × {ACT_BYTES} B")


def serving_workspace(model: ModelSpec, engine_gpus: int,
                      layout: ServingLayout | None = None) -> Workspace:
    """One engine GPU's workspace: one layer's forward intermediates for the tokens that GPU
    runs, each part split as its weights are (``serving_weight_parts``; round-25 reading F,
    finding 1: the old estimate split the whole width over the engine's GPUs, attention's
    and the dense MLP's too, which SGLang keeps whole or splits over a group).

    Tokens: each attention group runs one chunked-prefill chunk (CHUNKED_PREFILL_TOKENS) of
    its own requests, and every GPU of a group runs all of it (an upper bound where SGLang
    scatters a group's tokens over its GPUs for the MLPs). Without a layout, or a dense
    engine, the engine is one TP group of all its GPUs running one chunk.
    - attention: Q, K, V and the attention's output, each token's values over the heads the
      GPU holds: GQA's K and V are kv_heads × head_dim wide (replicated when the GPUs outnumber
      the KV heads); MLA's prefill expands its latent into every head's K (qk_nope + qk_rope)
      and V (v_head_dim), as SGLang's deepseek_v2.py forward_normal does;
    - a dense layer's MLP: 2 × ffn a token (the up projection and its activation), whole on
      each GPU or split as its weights are;
    - a MoE layer's: the shared experts, 2 × their width, whole with DeepEP; and the routed
      experts, 2 × expert_ffn a copy, over the copies a GPU receives under uniform routing:
      the engine's chunks × tokens × top-k ÷ GPUs.
    Bytes at ACT_BYTES (bf16). SGLang leaves this outside --mem-fraction-static's share of the
    device (weights and KV cache pool): the rest holds activations and CUDA graphs."""
    e, t = engine_gpus, forward_tokens(CHUNKED_PREFILL_TOKENS)
    placed = layout is not None and model.is_moe and model.params_override is None
    chunks, group = attention_groups(e, layout) if placed else (1, e)
    if model.uses_mla:
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        v = model.heads * model.v_head_dim
        attention = WorkspacePart("attention", t, (model.heads * qk, model.heads * qk, v, v),
                                  (group,) * 4)
    else:
        q = model.heads * model.head_dim
        if model.kv_heads % group == 0:
            kv, kv_split = model.kv_heads * model.head_dim, group
        else:  # fewer KV heads than GPUs (or not a multiple): each GPU keeps whole heads
            kv, kv_split = math.ceil(model.kv_heads / group) * model.head_dim, 1
        attention = WorkspacePart("attention", t, (q, kv, kv, q),
                                  (group, kv_split, kv_split, group))
    dense_split = 1 if placed and layout.dense_whole and chunks > 1 else e
    mlps = []
    if not model.is_moe or model.dense_layers:
        mlps.append((WorkspacePart("dense MLP", t, (2 * model.ffn,), (dense_split,)),))
    if model.is_moe:
        moe = []
        if model.shared_experts:
            moe.append(WorkspacePart(
                "shared experts", t, (2 * model.shared_experts * model.expert_ffn,),
                (1 if placed and layout.deepep else e,)))
        moe.append(WorkspacePart("routed experts", chunks * t * model.top_k / e,
                                 (2 * model.expert_ffn,), (1,)))
        mlps.append(tuple(moe))
    return Workspace(attention, tuple(mlps), chunks)


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


def per_engine(samples: int, engines: int) -> int:
    """Requests each engine holds when ``samples`` spread evenly over ``engines``."""
    return math.ceil(samples / engines) if engines else 0
