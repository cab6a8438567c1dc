"""Serving (rollout) engines for RL: memory per engine GPU (EP09); their generation time is
``labs.rl.serving_time``'s.

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
  its weights are, and a part with whole weights run on the GPU's scattered share of its
  group's tokens (``serving_workspace``), with SGLang's default --chunked-prefill-size of
  8,192 tokens, which DP attention divides among the groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.memory.lab import (
    PREFILL_CHUNK_TOKENS,
    forward_tokens,
    kv_cache_bytes,
)
from labs.model.activations import ACT_BYTES
from labs.model.spec import ModelSpec

WEIGHT_BYTES = 2  # bf16 rollout weights
KV_DTYPE_BYTES = {"bf16": 2, "fp8": 1}  # keys: labs.core.limits.KV_DTYPES
CHUNKED_PREFILL_TOKENS = PREFILL_CHUNK_TOKENS  # SGLang server_args default chunked_prefill_size


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
    finding 1), and the parts SGLang runs on scattered tokens on the GPU's share of them
    (round-26 reading B, finding 1: the old estimate ran every GPU of a group on an 8,192-token
    chunk, dense MLP and shared expert included, 772 MB on R1's engine GPU for SGLang's 30).

    Tokens (SGLang, under the ``ServingLayout``'s flags):
    - a group's chunk: server_args.py divides --chunked-prefill-size by the DP size under DP
      attention, so each of the D attention groups runs CHUNKED_PREFILL_TOKENS // D tokens;
      without a layout, or a dense engine, the engine is one TP group running one chunk;
    - attention: the group's chunk, its Q, K, V and output over the heads the GPU holds: GQA's
      K and V are kv_heads × head_dim wide (replicated when the GPUs outnumber the KV heads);
      MLA's prefill expands its latent into every head's K (qk_nope + qk_rope) and V
      (v_head_dim), as SGLang's deepseek_v2.py forward_normal does;
    - a dense layer's MLP, 2 × ffn a token (the up projection and its activation): with
      --sglang-moe-dense-tp-size 1 (and DP attention) communicator.py's _compute_mlp_mode is
      SCATTERED, the group reduce-scatters and each GPU runs its chunk ÷ group tokens on whole
      weights; else FULL, the engine's gathered tokens (every group's chunk) on weights split
      over its E GPUs;
    - a MoE layer's shared experts, 2 × their width: SCATTERED with DeepEP (an all-to-all
      backend), the chunk ÷ group tokens on whole weights, else FULL as the dense MLP; and the
      routed experts, 2 × expert_ffn a copy, over the copies a GPU receives under uniform
      routing: the engine's chunks × tokens × top-k ÷ GPUs.
    Bytes at ACT_BYTES (bf16). SGLang leaves this outside --mem-fraction-static's share of the
    device (weights and KV cache pool): the rest holds activations and CUDA graphs."""
    e = engine_gpus
    placed = layout is not None and model.is_moe and model.params_override is None
    chunks, group = attention_groups(e, layout) if placed else (1, e)
    t = float(int(forward_tokens(CHUNKED_PREFILL_TOKENS)) // chunks)
    full = chunks * t  # a FULL-mode MLP's tokens: every group's chunk, gathered
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
    mlps = []
    if not model.is_moe or model.dense_layers:
        scattered = placed and layout.dense_whole and chunks > 1
        mlps.append((WorkspacePart("dense MLP", t / group if scattered else full,
                                   (2 * model.ffn,), (1 if scattered else e,)),))
    if model.is_moe:
        moe = []
        if model.shared_experts:
            scattered = placed and layout.deepep
            moe.append(WorkspacePart(
                "shared experts", t / group if scattered else full,
                (2 * model.shared_experts * model.expert_ffn,), (1 if scattered else e,)))
        moe.append(WorkspacePart("routed experts", chunks * t * model.top_k / e,
                                 (2 * model.expert_ffn,), (1,)))
        mlps.append(tuple(moe))
    return Workspace(attention, tuple(mlps), chunks)


def per_engine(samples: int, engines: int) -> int:
    """Requests each engine holds when ``samples`` spread evenly over ``engines``."""
    return math.ceil(samples / engines) if engines else 0
