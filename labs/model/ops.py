"""One layer's compute on one GPU, kernel by kernel: every GEMM with its (m, n, k), the attention
core, every memory-bound op with its bytes.

The shapes are the layer's after the split (Megatron-LM, Shoeybi et al. 2019 sec 3): tensor
parallelism t divides the attention heads and the MLP width (GQA's KV heads are replicated
below t = kv_heads), context parallelism c the tokens, T = s·b/c rows; expert parallelism e
gives each GPU E/e of the routed experts, each of which sees T/t·k·e/E tokens when routing is
balanced (Megatron Core MoE: each TP rank routes its sequence-parallel share). Each kernel is
timed by ``labs.hardware.kernels`` (GEMM roofline with wave quantisation, memory-bound ops at
achieved HBM bandwidth, the fused attention kernel at its published rate). Backward runs, per
GEMM, the input gradient dX (m, k, n) and the weight gradient dW (k, n, m).

Memory-bound bytes per token, counted from the kernels Megatron runs (16-bit activations,
1-byte dropout masks), per layer; h the hidden size, f the MLP width on this GPU:
- each of the two norms: read x, write y (4h) forward; read x, dy, write dx (6h) backward;
- bias + dropout + residual add (Megatron's fused JIT kernel): read x and the residual,
  write the sum and the mask (7h; 6h without dropout); backward the dropout's 5h and the
  residual gradient's add, 6h;
- the activation: bias + GeLU reads 2f and writes 2f (4f), backward 6f; SwiGLU reads two
  halves (6f), backward 10f;
- Megatron's unfused attention: the [b·a, s, d] → [s, b, a·d] context copy (4 B per element
  each way), the fused scale-mask-softmax on the s² scores (read 2, write 2; backward read
  the probabilities and their gradient, write one: 6) and the score dropout (5 and 5);
- context parallelism's ring: merging each step's partial attention output (6 B per element
  per step) and, in backward, accumulating each step's K and V gradients (10 B);
- rotary embeddings on the queries and keys (read 2, write 2), bias gradients (a reduction
  reading dY: 2 B per output width), FP8 casts of each GEMM input and output gradient (the
  recipe's ``cast_bytes``: Transformer Engine's cast-transpose reads 2 and writes the FP8 copy
  and its transpose, 4);
- with sequence parallelism (Korthikanti et al. 2022 sec 4.2.2) the norms and dropouts run
  on s/t of the tokens.
The head, loss, optimizer step and gradient accumulation are ``labs.model.head``'s.

``kernels`` (the software's kernels; ``ComputeOptions.kernels``): "fused" is the above
(Megatron Core / Transformer Engine's fused norm, activation, rotary and bias-dropout-add
kernels: each reads its inputs and writes its output once). "eager" is PyTorch eager as
torchtitan's Llama runs it (torchtitan models/norms.py RMSNorm, models/llama/model.py
apply_rotary_emb, repeat_kv, FeedForward): every elementwise op a kernel of its own, each
reading and writing its tensors at HBM speed, and autograd's backward op by op; bytes per
element (16-bit activations, fp32 where the code casts), ``EAGER_BYTES``:
- RMSNorm forward: x.float() (read 2, write 4), pow(2) (4+4), mean (4), x·rsqrt (4+4),
  type_as (4+2), ·weight (2+2) = 36; backward: ·weight's dx and dweight (2+2, 2+2+2+2),
  type_as (2+4), x·rsqrt's dx and its row sum (4+4, 4+4+4+4), mean (4), pow's 2·x·dy
  (4+4, 4+4+4), the two dx summed (4+4+4) and .float()'s cast back (4+2) = 84;
- rotary on the queries and keys: .float() (2+4), the complex multiply (4+4), type_as (4+2)
  = 20, and 20 again in backward;
- SwiGLU: silu (2+2) and the product (2+2+2) = 10 per element of f, backward the product's
  two gradients (6+6) and silu's (2+2+2) = 18;
- repeat_kv (GQA): expand + reshape copies K and V to every query head (read the KV width,
  write the query width, 2 B each), backward sums them back;
- the residual adds (6 B per element each way) and the attention core as fused; SDPA's
  output transpose is a view of FlashAttention's [b, s, h, d] output, no copy.
"compiled" is torch.compile (Inductor): each chain of elementwise ops between two extern
kernels (GEMMs, SDPA) becomes one generated kernel, so the norms, rotary and SwiGLU move
what the fused ones do, but SDPA's inputs are materialised, so repeat_kv still copies K and
V to the query width. The head (embedding, loss) is counted alike for all three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from labs.core.catalogue import TE_CAST_BYTES
from labs.core.errors import LabInputError
from labs.hardware.gpus import GPUSpec
from labs.hardware.kernels import ATTENTION_IMPLS, best_attention, flash_time
from labs.model.passes import Kernel, Pass, PassBuilder
from labs.model.spec import ModelSpec

DROPOUT_MASK = 1  # bytes per element of a dropout mask
# A dense layer's kernels sequence parallelism runs on s/t of the tokens (``fsp`` below;
# Korthikanti et al. 2022 sec 4.2.2): EP04 step 5 times what SP saves from them.
SEQUENCE_SPLIT = ("norms", "bias-dropout-add")
# The software's kernels (module docstring): Megatron / Transformer Engine's fused ones,
# torch.compile'd PyTorch, PyTorch eager.
KERNELS = ("fused", "compiled", "eager")
# PyTorch eager's bytes per element, (forward, backward), op by op (module docstring).
EAGER_BYTES = {"norm": (36, 84), "rotary": (20, 20), "swiglu": (10, 18)}


@dataclass(frozen=True)
class ComputeOptions:
    """How the kernels run: properties of the software a run used, not tuned knobs.

    ``attention``: "auto" (the fastest fused kernel the GPU has), "unfused" (Megatron
    2021-22: batched GEMMs, fused softmax), "flash2" or "flash3"; ``dropout``: GPT-3-style
    hidden and attention dropout (Megatron's default 0.1; modern runs set 0); ``fp8``: the
    linear layers' GEMMs in FP8 (Transformer Engine), attention in 16-bit; ``kernels``: the
    memory-bound ops' kernels, "fused" (Megatron / TE), "compiled" (torch.compile) or
    "eager" (PyTorch eager, as torchtitan runs it): the module docstring counts each;
    ``fp32_wgrad``: the weight-gradient GEMMs accumulate into fp32 themselves (Megatron's
    gradient accumulation fusion), reading and writing their fp32 output."""

    attention: str = "auto"
    dropout: bool = False
    fp8: bool = False
    causal: bool = True
    kernels: str = "fused"
    fp32_wgrad: bool = False  # weight gradients accumulated into fp32 in the GEMM (main_grad)
    # HBM bytes per element of each FP8 cast (the recipe's ``cast_bytes``; Transformer
    # Engine's cast-transpose by default: read 2, write the copy and its transpose).
    fp8_cast_bytes: float = TE_CAST_BYTES

    def __post_init__(self) -> None:
        if self.attention not in ("auto",) + ATTENTION_IMPLS:
            raise LabInputError("attention", f"attention must be one of auto, "
                                             f"{', '.join(ATTENTION_IMPLS)}")
        if self.kernels not in KERNELS:
            raise LabInputError("kernels", f"kernels must be one of {', '.join(KERNELS)}")
        for name in ("dropout", "fp8", "causal", "fp32_wgrad"):
            if not isinstance(getattr(self, name), bool):
                raise LabInputError(name, f"{name} is true or false")
        cast = self.fp8_cast_bytes
        if isinstance(cast, bool) or not isinstance(cast, int | float) or not 3 <= cast <= 16:
            raise LabInputError("recipe", "an FP8 cast moves 3 to 16 bytes per element")


DEFAULT_OPTIONS = ComputeOptions()


@dataclass(frozen=True)
class LayerOps:
    """One layer, one micro-batch, one GPU: forward, backward (no recomputation) and the
    attention core's forward (what selective recomputation runs again)."""

    forward: Pass
    backward: Pass
    attention_core: Pass
    attention: str  # the implementation timed
    tokens: int  # rows of the layer's GEMMs (s·b/c)


def attention_impl(gpu: GPUSpec, options: ComputeOptions) -> str:
    return best_attention(gpu) if options.attention == "auto" else options.attention


@lru_cache(maxsize=8192)
def layer_ops(model: ModelSpec, gpu: GPUSpec, *, tp: int, cp: int, micro_batch: int,
              seq_len: int, sp: bool, options: ComputeOptions = DEFAULT_OPTIONS,
              moe: bool = False, ep: int = 1, etp: int = 1) -> LayerOps:
    """The kernels of one layer (a MoE layer when ``moe``) on one GPU, one micro-batch."""
    t, h = tp, model.hidden
    tokens = seq_len * micro_batch // cp
    fsp = 1 / t if sp else 1.0  # sequence parallelism splits the norms and dropouts
    fp8 = options.fp8
    impl = attention_impl(gpu, options)
    fwd, bwd, core = PassBuilder(gpu, fp8), PassBuilder(gpu, fp8), PassBuilder(gpu, fp8)
    drop = options.dropout
    gemms = _attention_gemms(model, tokens, t) + _mlp_gemms(model, tokens, t, moe, ep, etp)
    for name, m, n, k, batch in gemms:
        fwd.gemm(name, m, n, k, batch)
        bwd.gemm(name + ".dgrad", m, k, n, batch)
        bwd.gemm(name + ".wgrad", k, n, m, batch, accumulate=options.fp32_wgrad)
    _attention_core(model, gpu, impl, tokens // micro_batch, seq_len, cp, micro_batch, t,
                    drop, options.causal, fwd, bwd, core)
    # Memory-bound ops, bytes per token (see the module docstring).
    q_width, kv_width = query_width(model, t), key_value_width(model, t)
    eager = options.kernels == "eager"
    norm = EAGER_BYTES["norm"] if eager else (4, 6)
    norm_f, norm_b = 2 * norm[0] * h * fsp, 2 * norm[1] * h * fsp
    add_f = 2 * (7 if drop else 6) * h * fsp
    add_b = 2 * ((5 if drop else 0) + 6) * h * fsp
    norms, adds = SEQUENCE_SPLIT
    fwd.mem(norms, tokens * norm_f)
    bwd.mem(norms, tokens * norm_b)
    fwd.mem(adds, tokens * add_f)
    bwd.mem(adds, tokens * add_b)
    act_rows, act_width = _activation(model, tokens, t, moe, ep, etp)
    gated = model.gated_mlp
    act = (EAGER_BYTES["swiglu"] if eager and gated else (6, 10) if gated else (4, 6))
    fwd.mem("activation", act_rows * act_width * act[0])
    bwd.mem("activation", act_rows * act_width * act[1])
    if impl == "unfused":  # [b·a, s, d] -> [s, b, a·d] context copy, each way
        fwd.mem("context-copy", tokens * 4 * q_width)
        bwd.mem("context-copy", tokens * 4 * q_width)
    if model.max_positions == 0:  # rotary embeddings on queries and keys
        rope = EAGER_BYTES["rotary"] if eager else (4, 4)
        fwd.mem("rotary", tokens * rope[0] * (q_width + kv_width))
        bwd.mem("rotary", tokens * rope[1] * (q_width + kv_width))
    if options.kernels != "fused" and kv_width < q_width and not model.uses_mla:
        # repeat_kv: K and V copied to every query head (2 B read per KV element, 2 B
        # written per query-width element), summed back in backward.
        fwd.mem("repeat-kv", tokens * 2 * 2 * (kv_width + q_width))
        bwd.mem("repeat-kv", tokens * 2 * 2 * (kv_width + q_width))
    if cp > 1:
        # Ring attention merges each step's partial output into the running one by its
        # log-sum-exp (Liu et al. 2023, arXiv:2310.01889; Transformer Engine's
        # AttnFuncWithCPAndKVP2P): read the output and the partial, write the output (2+2+2
        # B per element) at each of the c−1 later steps; backward sums each step's K and V
        # gradients into fp32 accumulators (read 4, add 2, write 4).
        fwd.mem("cp-merge", (cp - 1) * tokens * 6 * q_width)
        bwd.mem("cp-merge", (cp - 1) * tokens * 10 * 2 * kv_width)
    if model.uses_mla:  # the latent norms of the query and KV compressions
        ranks = model.q_lora_rank + model.kv_lora_rank
        fwd.mem("latent-norms", tokens * 4 * ranks)
        bwd.mem("latent-norms", tokens * 6 * ranks)
    if moe:  # route (scores, top-k) and permute the tokens to their experts and back
        routed = tokens * fsp * model.top_k
        fwd.mem("router", tokens * fsp * model.experts * 4 * 2)
        bwd.mem("router", tokens * fsp * model.experts * 4 * 3)
        fwd.mem("permute", 2 * routed * 4 * h)
        bwd.mem("permute", 2 * routed * 4 * h)
    if model.linear_bias or model.qkv_bias:
        widths = sum(n for name, _, n, _, _ in gemms if name in ("qkv", "fc1"))
        bwd.mem("bias-grads", tokens * 2 * widths + (
            tokens * 2 * 2 * h * fsp if model.linear_bias else 0))
    if fp8:  # casts to FP8 (the recipe's bytes): each GEMM's input, and in backward its dY
        cast = options.fp8_cast_bytes
        fwd.mem("fp8-casts", cast * sum(m * k * batch for _, m, _, k, batch in gemms))
        bwd.mem("fp8-casts", cast * sum(m * n * batch for _, m, n, _, batch in gemms))
    return LayerOps(fwd.done(), bwd.done(), core.done(), impl, tokens)


def query_width(model: ModelSpec, t: int) -> int:
    """The query projection's width on one GPU of t (heads split by TP)."""
    if model.uses_mla:
        return model.heads * (model.qk_nope_head_dim + model.qk_rope_head_dim) // t
    return model.heads * model.head_dim // t


def key_value_width(model: ModelSpec, t: int) -> int:
    """The key/value width on one GPU of t as the layer's GEMMs use it: K's (or V's) for
    MHA/GQA, the KV heads replicated below t = kv_heads; for MLA, each head's up-projected
    K (its no-RoPE part) and V together."""
    if model.uses_mla:
        return model.heads * (model.qk_nope_head_dim + model.v_head_dim) // t
    return max(1, model.kv_heads // t) * model.head_dim  # replicated below t = kv_heads


def _attention_gemms(model: ModelSpec, tokens: int, t: int) -> list[tuple]:
    h = model.hidden
    if model.uses_mla:
        # DeepSeek-V2 sec 2.1.2 (Megatron Core MLA): the down projections are replicated
        # across TP, the up projections and the output split by heads.
        heads = model.heads // t
        out = []
        if model.q_lora_rank:
            out.append(("q-down", tokens, model.q_lora_rank, h, 1))
            out.append(("q-up", tokens, heads * (model.qk_nope_head_dim
                                                 + model.qk_rope_head_dim),
                        model.q_lora_rank, 1))
        else:
            out.append(("q", tokens, heads * (model.qk_nope_head_dim
                                              + model.qk_rope_head_dim), h, 1))
        out.append(("kv-down", tokens, model.kv_lora_rank + model.qk_rope_head_dim, h, 1))
        out.append(("kv-up", tokens, heads * (model.qk_nope_head_dim + model.v_head_dim),
                    model.kv_lora_rank, 1))
        out.append(("proj", tokens, h, heads * model.v_head_dim, 1))
        return out
    q, kv = query_width(model, t), key_value_width(model, t)
    return [("qkv", tokens, q + 2 * kv, h, 1), ("proj", tokens, h, q, 1)]


def _mlp_gemms(model: ModelSpec, tokens: int, t: int, moe: bool, ep: int,
               etp: int) -> list[tuple]:
    h, up = model.hidden, 2 if model.gated_mlp else 1
    if not moe:
        f = model.ffn // t
        return [("fc1", tokens, up * f, h, 1), ("fc2", tokens, h, f, 1)]
    out = [("router", tokens // t, model.experts, h, 1)]
    rows, local = _expert_rows(model, tokens, t, ep)
    f = model.expert_ffn // etp
    out += [("experts.fc1", rows, up * f, h, local), ("experts.fc2", rows, h, f, local)]
    if model.shared_experts:
        fs = model.shared_experts * model.expert_ffn // t
        out += [("shared.fc1", tokens, up * fs, h, 1), ("shared.fc2", tokens, h, fs, 1)]
    return out


def _expert_rows(model: ModelSpec, tokens: int, t: int, ep: int) -> tuple[int, int]:
    """(tokens per local expert, local experts): balanced routing of each TP rank's
    tokens, top-k each, over the EP group's experts."""
    local = max(1, model.experts // ep)
    rows = max(1, math.ceil(tokens / t * model.top_k * ep / model.experts))
    return rows, local


def _activation(model: ModelSpec, tokens: int, t: int, moe: bool, ep: int,
                etp: int) -> tuple[int, int]:
    """(rows, width) the MLP activation runs on (routed and shared experts together)."""
    if not moe:
        return tokens, model.ffn // t
    rows, local = _expert_rows(model, tokens, t, ep)
    routed = rows * local * model.expert_ffn // etp
    shared = tokens * model.shared_experts * model.expert_ffn // t
    return 1, routed + shared


def _attention_core(model: ModelSpec, gpu: GPUSpec, impl: str, s_local: int, seq_len: int,
                    cp: int, b: int, t: int, drop: bool, causal: bool, fwd: PassBuilder,
                    bwd: PassBuilder, core: PassBuilder) -> None:
    if model.uses_mla:
        d_qk, d_v = model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
    else:
        d_qk = d_v = model.head_dim
    heads = b * model.heads // t
    if impl == "unfused":
        # Megatron 2021-22 CoreAttention: baddbmm QK^T, fused scale-mask-softmax, dropout,
        # bmm with V, over the b·a/t heads; backward dP, dV, dQ, dK and the two elementwise
        # backwards (module docstring). With CP the queries are s/c against all s keys.
        s_q, s_k = s_local, seq_len
        scores = heads * s_q * s_k
        for builder in (fwd, core):
            builder.gemm("attention.qk", s_q, s_k, d_qk, heads, fp8=False)
            builder.mem("attention.softmax", scores * 4)
            if drop:
                builder.mem("attention.dropout", scores * (4 + DROPOUT_MASK))
            builder.gemm("attention.av", s_q, d_v, s_k, heads, fp8=False)
        bwd.gemm("attention.dp", s_q, s_k, d_v, heads, fp8=False)
        bwd.gemm("attention.dv", s_k, d_v, s_q, heads, fp8=False)
        if drop:
            bwd.mem("attention.dropout", scores * (4 + DROPOUT_MASK))
        bwd.mem("attention.softmax", scores * 6)
        bwd.gemm("attention.dq", s_q, d_qk, s_k, heads, fp8=False)
        bwd.gemm("attention.dk", s_k, d_qk, s_q, heads, fp8=False)
        for builder in (fwd, bwd, core):  # re-label the batched GEMMs as attention
            builder.kernels = [Kernel(k.name, "attention", k.seconds, k.flops, k.nbytes,
                                      k.shape) if k.name.startswith("attention.") else k
                               for k in builder.kernels]
        return
    d = (d_qk + d_v) / 2
    if cp == 1:
        calls = [(seq_len, seq_len, causal, 1)]
    else:
        # Ring attention with the zigzag split (Megatron's context parallelism): per rank,
        # one causal block of its s/c queries against their own keys, and c−1 blocks of
        # which half the pairs are computed, each a call at a length of s/c.
        s = s_local
        calls = [(s, s, causal, 1), (s // 2, s, False, cp - 1)] if causal \
            else [(s, s, False, cp)]
    for s_q, s_k, masked, count in calls:
        f, b_ = flash_time(gpu, impl, s_q, s_k, d, heads, masked)
        flops = 4.0 * s_q * s_k * d * heads * (0.5 if masked else 1.0) * count
        for builder in (fwd, core):
            builder.attn("attention", f * count, flops)
        bwd.attn("attention", b_ * count, 2.5 * flops)
