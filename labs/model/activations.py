"""Activation memory: bytes per layer, and the embedding and output terms.

Sources:
- ``classic``: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models" (arXiv:2205.05198), Table 2, bf16, per layer per micro-batch:
  no recomputation sbh(34 + 5as/h), selective 34sbh, full 2sbh, all divided by t with
  tensor + sequence parallelism; without sequence parallelism only the terms inside the
  TP-split matmuls divide: sbh(10 + 24/t + 5as/(ht)). "No recomputation" stores the
  attention scores (5as/h term), i.e. assumes no FlashAttention.
- the scores' 5as²b (sec 4.1): the softmax output (2as²b), the attention-dropout mask (as²b)
  and the dropout's output (2as²b), which the attention-over-values matmul saves. A model
  trained without dropout (``ModelSpec.dropout`` False: Llama and the other current presets)
  keeps the softmax output only, which serves both the softmax's backward and the matmul's:
  2as²b (``score_bytes_per_element``). PyTorch's dropout at p = 0 returns its input and keeps
  no mask (aten/src/ATen/native/Dropout.cpp, ``_dropout_impl``). The 34sbh is left as
  Korthikanti's GPT count in both cases (its 2sbh of hidden dropout masks included): EP01
  compares it with the model's own layer (``own_layer_coefficient``).
- ``megatron``: Megatron-LM's theoretical memory estimate
  (megatron/training/theoretical_memory_usage.py, ``compute_activation_memory``): 18sbh for
  attention, norms, residuals and dropout masks plus 4·s·b·ffn for the MLP (the model's own
  FFN width; 34sbh when ffn = 4h); a MoE layer keeps 18sbh + 4·s·b·shared_ffn split by TP,
  plus 4·k·s·b·h dispatched tokens over EP and 4·k·s·b·expert_ffn expert intermediates over
  EP·expert-TP. Like Megatron's, its attention term keeps full-width K and V (it does not
  narrow them for grouped-query attention). Its no-SP split (10 replicated, 8 + 4·ffn/h by
  TP) follows ``compute_activation_memory_without_sp`` (10 + 24/t when ffn = 4h).
- embedding and output: the same Megatron file: 8·s·b bytes of token ids and s·b·h of
  embedding dropout mask per micro-batch on the first stage (the mask only for a model trained
  with dropout, except in the ``megatron`` estimate, whose formula always counts it; the ids
  whole on every TP rank, except in the ``megatron`` estimate: ``embedding_activation_bytes``);
  4·s·b·h·(1 + v/h) for the final norm's bf16 input and output and the fp32 logits on the last
  stage.
- the linear layers' saved inputs (``gemm_input_bytes_per_layer``), the part a low-precision
  recipe saves in FP8 (``gemm_inputs`` of ``activation_bytes_per_layer``): of Korthikanti's
  terms, the QKV projection's input (2sbh, the first norm's output), the output
  projection's (2sbh/t, the attention core's output), the MLP's first input (2sbh) and its
  second (8sbh of GeLU output; Megatron's 2·s·b·ffn): 14sbh of the 34. TransformerEngine's
  Linear saves its FP8 (transposed) input for the weight gradient, the output projection's
  too (module/linear.py: ``saved_inputmat = inputmat``, the FP8 cast; TE issue 1764: "a 50%
  reduction in the activation memory usage"); DeepSeek-V3 caches them in FP8
  ("Low-Precision Activation"; the output projection's in its own E5M6, taken here at the
  recipe's bytes). Where FlashAttention is kept and not recomputed (``flash``), its core
  also saves that same output in 16-bit for its own backward, so the projection's FP8 copy
  comes on top of it (``attention_output_bytes_per_layer``); the unfused core of ``none``
  and a recomputed core (``selective``) hold no such copy. Attention scores, norms' inputs
  and masks are no GEMM inputs.
- a rank's layers (``layers_activation_bytes``): each layer as its per-layer mode keeps; a
  layer-granular mode splits them as torchtitan's counter does (``Recomputation.groups``);
  an op-level policy (torchtitan's selective op AC) keeps what ``labs.model.op_checkpoint``
  counts from its save list, in bf16, whichever activation model is chosen.
"""

from __future__ import annotations

from labs.core.recomputation import RECOMPUTATION, layer_rules
from labs.model.op_checkpoint import check_model, kept_bytes_per_token
from labs.model.spec import ModelSpec

ACT_BYTES = 2  # bf16 activations and KV cache
GPT_COEFFICIENT = 34  # Korthikanti's selective count, bytes per token per unit of h


def activation_bytes_per_layer(model: ModelSpec, seq_len: int, micro_batch: int = 1,
                               tp: int = 1, cp: int = 1, recompute: str = "selective", *,
                               sp: bool | None = None, activation_model: str = "classic",
                               moe_layer: bool = False, ep: int = 1, etp: int = 1,
                               gemm_inputs: float = ACT_BYTES) -> float:
    """Bytes one transformer layer keeps for backward, per micro-batch, on one GPU.

    ``sp`` (sequence parallelism) defaults to on whenever tp > 1. With CP each rank keeps
    s/cp tokens; its attention scores pair those local queries with all s keys: 5a(s/cp)s b.
    ``moe_layer`` only matters to the ``megatron`` model (the classic one knows no experts).
    ``gemm_inputs``: bytes per element the linear layers' inputs are saved in (a recipe's
    ``saved_input_bytes``: 1 in FP8), the rest staying bf16.
    """
    args = (model, seq_len, micro_batch, tp, cp, recompute)
    kw = {"sp": sp, "activation_model": activation_model, "moe_layer": moe_layer, "ep": ep,
          "etp": etp}
    kept = _bf16_bytes_per_layer(*args, **kw)
    if gemm_inputs != ACT_BYTES:  # bf16 recipes return the bf16 count untouched
        kept -= gemm_input_bytes_per_layer(*args, **kw) * (1 - gemm_inputs / ACT_BYTES)
        # FlashAttention's own 16-bit copy of the projection's input stays beside the FP8 one.
        kept += attention_output_bytes_per_layer(*args, **kw)
    return kept


def attention_output_bytes_per_layer(model: ModelSpec, seq_len: int, micro_batch: int = 1,
                                     tp: int = 1, cp: int = 1, recompute: str = "selective",
                                     **_: object) -> float:
    """The bf16 bytes of the attention core's output, 2·s·b·h/t, when the core itself keeps
    them for its backward (``Recomputation.keeps_attention_output``: FlashAttention, not
    recomputed); 0 otherwise. A low-precision recipe keeps them beside its FP8 copy."""
    if not layer_rules(recompute).keeps_attention_output:
        return 0.0
    return 2 * seq_len / cp * micro_batch * model.hidden / tp


def gemm_input_bytes_per_layer(model: ModelSpec, seq_len: int, micro_batch: int = 1,
                               tp: int = 1, cp: int = 1, recompute: str = "selective", *,
                               sp: bool | None = None, activation_model: str = "classic",
                               moe_layer: bool = False, ep: int = 1, etp: int = 1) -> float:
    """The bf16 bytes, within ``activation_bytes_per_layer``'s, of the linear layers' saved
    inputs (module docstring): s·b·h·(4/r + 10/t) in the classic model (QKV and first MLP
    inputs outside the TP split; the output projection's and the second MLP input inside
    it), s·b·(4h/r + 2h/t + 2·ffn/t) in Megatron's, with a MoE layer's experts' inputs over
    EP; none with full recomputation."""
    sp = tp > 1 if sp is None else sp
    rules = layer_rules(recompute)
    if rules.input_only:
        return 0.0
    if rules.policy:  # the op policy keeps matmul and attention outputs, in bf16
        check_model(model)
        return 0.0
    h, b = model.hidden, micro_batch
    s = seq_len / cp
    rest = tp if sp else 1
    if activation_model == "classic":
        return s * b * h * (4 / rest + 10 / tp)
    if moe_layer and model.is_moe:
        mlp = 2 * s * b * model.shared_experts * model.expert_ffn / tp
        routed = (2 * model.top_k * s * b * h / ep
                  + 2 * model.top_k * s * b * model.expert_ffn / (ep * etp))
    else:
        mlp, routed = 2 * s * b * model.ffn / tp, 0.0
    return 4 * s * b * h / rest + 2 * s * b * h / tp + mlp + routed


def out_proj_input_bytes_per_layer(model: ModelSpec, seq_len: int, micro_batch: int = 1,
                                   tp: int = 1, cp: int = 1, recompute: str = "selective",
                                   **kw: object) -> float:
    """The bf16 bytes, within ``gemm_input_bytes_per_layer``'s, of the output projection's
    saved input (the attention's output, h wide, inside the TP split): 2·s·b·h/t in either
    activation model; 0 where no matmul input is saved. DeepSeek-V3 keeps this one input finer
    than FP8 (sec 3.3.3: a custom E5M6), which EP01 step 6's note bounds."""
    if not gemm_input_bytes_per_layer(model, seq_len, micro_batch, tp, cp, recompute, **kw):
        return 0.0
    return 2 * seq_len / cp * micro_batch * model.hidden / tp


def _bf16_bytes_per_layer(model: ModelSpec, seq_len: int, micro_batch: int, tp: int, cp: int,
                          recompute: str, *, sp: bool | None, activation_model: str,
                          moe_layer: bool, ep: int, etp: int) -> float:
    """``activation_bytes_per_layer`` with every tensor in bf16 (the sources' counts)."""
    sp = tp > 1 if sp is None else sp
    h, a, b = model.hidden, model.heads, micro_batch
    s = seq_len / cp
    split = tp  # divisor of the terms inside TP-split matmuls
    rest = tp if sp else 1  # divisor of the others (norms, residuals, dropout masks)
    mode = layer_rules(recompute)  # what it keeps (labs.core.recomputation)
    if mode.input_only:
        return 2 * s * b * h / rest  # only the layer input, split along s by SP
    if mode.policy:  # an op-level policy counts its kept tensors op by op
        return s * b * kept_bytes_per_token(model, tp, sp)
    scores = score_bytes_per_element(model) * a * s * seq_len * b / split \
        if mode.stores_scores else 0.0
    if activation_model == "classic":
        return s * b * h * (10 / rest + 24 / split) + scores
    if moe_layer and model.is_moe:
        mlp = 4 * s * b * model.shared_experts * model.expert_ffn / split
        routed = (4 * model.top_k * s * b * h / ep
                  + 4 * model.top_k * s * b * model.expert_ffn / (ep * etp))
    else:
        mlp, routed = 4 * s * b * model.ffn / split, 0.0
    return s * b * h * (10 / rest + 8 / split) + mlp + routed + scores


def score_bytes_per_element(model: ModelSpec) -> int:
    """Bytes the unfused attention core keeps per element of its a·s×s scores (module
    docstring): 5 with attention dropout (softmax output 2, mask 1, dropout output 2), 2
    without (the softmax output alone)."""
    return 5 if model.dropout else 2


def own_layer_terms(model: ModelSpec) -> dict[str, float]:
    """Korthikanti et al.'s sec 4.1 count redone for the model's own dense layer: bytes per
    token per unit of hidden size that one layer keeps with fused attention (or selective
    recomputation), no TP. Their GPT layer gives 34: the two norms' inputs (4), the QKV
    input (2), Q and K for the scores (4) and V (2), the output projection's input (2), the
    MLP's input (2), GeLU's input and output (2 × 2·4h/h = 16) and two 1-byte dropout masks.
    Here K and V take the KV heads' width (grouped-query attention), a gated MLP keeps its
    three ffn-wide tensors (SwiGLU's gate and up outputs, the product the down projection
    reads: 3 × 2·ffn/h; GeLU's two: 2 × 2·ffn/h) and a model without dropout keeps no masks.
    Llama 3.1 70B: 4 + 2 + 2 + 0.25 + 0.25 + 2 + 2 + 21 = 33.5. Dense, non-MLA layers only."""
    if model.is_moe or model.uses_mla:
        raise ValueError(f"{model.name}: the own-layer count is for dense, non-MLA layers")
    h = model.hidden
    q, kv = model.heads * model.head_dim / h, model.kv_heads * model.head_dim / h
    mask = 1 if model.dropout else 0
    return {"norms": 4, "qkv_input": 2, "q": 2 * q, "k": 2 * kv, "v": 2 * kv,
            "proj_input": 2 * q, "attention_mask": mask, "mlp_input": 2,
            "mlp": (3 if model.gated_mlp else 2) * 2 * model.ffn / h, "mlp_mask": mask}


def own_layer_coefficient(model: ModelSpec) -> float:
    """The sum of ``own_layer_terms``: 34 for a GPT layer, 33.5 for Llama 3.1 70B's."""
    return sum(own_layer_terms(model).values())


def layers_activation_bytes(model: ModelSpec, seq_len: int, micro_batch: int = 1,
                            tp: int = 1, cp: int = 1, recompute: str = "selective", *,
                            dense_layers: int, moe_layers: int = 0, **kw) -> float:
    """Bytes one micro-batch leaves on one GPU over a pipeline rank's ``dense_layers`` and
    ``moe_layers`` (in model order), each counted by ``activation_bytes_per_layer`` (``kw``: its
    keywords) in the mode its place gives it (``Recomputation.groups``: every layer in one
    mode, or a layer-granular mode's two)."""
    total = 0.0
    for mode, dense, moe in RECOMPUTATION[recompute].groups(dense_layers, moe_layers):
        common = (model, seq_len, micro_batch, tp, cp, mode)
        if dense:
            total += dense * activation_bytes_per_layer(*common, **kw)
        if moe:
            total += moe * activation_bytes_per_layer(*common, moe_layer=True, **kw)
    return total


def embedding_activation_bytes(model: ModelSpec, seq_len: int, micro_batch: int = 1,
                               tp: int = 1, cp: int = 1, sp: bool | None = None, *,
                               activation_model: str = "classic") -> float:
    """First stage, per micro-batch: token ids (8·s·b) and the embedding dropout mask (s·b·h),
    which a model trained without dropout does not keep (``ModelSpec.dropout``; Megatron-LM's
    embedding dropout is its --hidden-dropout). Megatron-LM's estimate (``megatron``) counts the
    mask whatever the dropout, as its formula does.

    Sequence parallelism splits the mask, not the ids: Megatron-LM hands every TP rank the
    micro-batch's whole ``tokens`` (megatron/training/utils.py ``get_batch_on_this_tp_rank``
    broadcasts them over the TP group), ``VocabParallelEmbedding`` looks all of them up and
    keeps its masked copy of them for the backward, and ``LanguageModelEmbedding.forward``
    scatters only the embedding's output (``scatter_to_sequence_parallel_region``) before its
    dropout. Context parallelism does split them (``get_batch_on_this_cp_rank``). The
    ``megatron`` estimate divides the ids by t all the same, as ``compute_activation_memory``
    divides its whole sum by the TP size (round-22 cold reading Q, finding 2)."""
    sp = tp > 1 if sp is None else sp
    s = seq_len / cp
    split = tp if sp else 1
    mask = model.hidden if model.dropout or activation_model == "megatron" else 0
    ids = 8 * s * micro_batch / (split if activation_model == "megatron" else 1)
    return ids + s * micro_batch * mask / split


def output_activation_bytes(model: ModelSpec, seq_len: int, micro_batch: int = 1,
                            tp: int = 1, cp: int = 1, sp: bool | None = None) -> float:
    """Last stage, per micro-batch: the final norm's bf16 input and output, 2 × 2·s·b·h (the
    norm saves its input, the output layer its; Megatron-LM's "output layer (layer norm) +
    output layer (linear)"), and fp32 logits (4·s·b·v,
    split over TP by the vocab-parallel output layer)."""
    sp = tp > 1 if sp is None else sp
    s, b = seq_len / cp, micro_batch
    return 4 * s * b * model.hidden / (tp if sp else 1) + 4 * s * b * model.vocab / tp
