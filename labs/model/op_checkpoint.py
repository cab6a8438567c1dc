"""torchtitan's selective op activation checkpointing, op by op: what a layer keeps for its
backward and what the backward runs again.

Source: pytorch/torchtitan, ``torchtitan/models/llama/parallelize_llama.py`` as of the
2024-12 performance runs (torchtitan 9dec370; later moved to
``torchtitan/distributed/activation_checkpoint.py`` with the same rule):
``_apply_ac_to_transformer_block`` with ``mode = "selective"``, ``selective_ac_option =
"op"`` wraps every TransformerBlock in ``ptd_checkpoint_wrapper`` with a
``create_selective_checkpoint_contexts`` policy (PyTorch's selective activation
checkpointing, ``torch.utils.checkpoint``):

- an op's output is saved (MUST_SAVE) when the op is in ``_save_list`` (``aten.mm``, the two
  fused SDPA kernels, ``_c10d_functional.reduce_scatter_tensor``, ``aten.max``), **except
  every second mm** (a per-block counter: ``meta[mm_count] % 2 == 0`` is recomputed);
- every other op is PREFER_RECOMPUTE: in the backward the block's forward is replayed, the
  saved ops' outputs taken from the cache, everything else run again.

torchtitan's Llama block (``torchtitan/models/llama/model.py``) runs its matmuls in this
order: ``wq``, ``wk``, ``wv`` (three separate projections), the attention core (SDPA),
``wo``; then ``w2(silu(w1(x)) * w3(x))``: ``w1``, ``w3``, ``w2``. So the 2nd, 4th and 6th,
``wk``, ``wo`` and ``w3``, run again in the backward, with every elementwise op (the RMSNorms,
rotary embeddings, repeat_kv, SiLU and its product, the residual adds) and, under tensor
parallelism, the sequence-parallel all-gathers (``all_gather_into_tensor`` is not in the
list; the reduce-scatters are). The attention core is kept, not run again.

What a layer keeps, bytes per token on one GPU (bf16 activations, t the TP degree,
sequence parallelism splitting the block's input along the sequence as torchtitan's TP
plan does):
- the block's input (the checkpoint's own input): 2h/t;
- the kept matmuls' outputs, ``wq``, ``wv``, ``w1``, ``w2``: 2·(q + kv + f + h) with q, kv
  and f the query, key/value and MLP widths on this GPU (``w2``'s output is the full-width
  partial sum before its reduce-scatter);
- SDPA's outputs: the attention output (2q) and its fp32 log-sum-exp (4 B per head);
- with t > 1, the two reduce-scatters' outputs (after ``wo`` and ``w2``): 2 · 2h/t.
The backward's replay (what it runs again): the recomputed matmuls' forward GEMMs, every
memory-bound op of the forward (``labs.model.ops``'s count for the software's kernels) and
the forward's TP collectives that are not kept: with sequence parallelism the two
all-gathers (half of the forward's TP traffic), without it the two all-reduces (all of it).
The policy is written for torchtitan's dense Llama block; a MoE layer's grouped expert GEMMs
or MLA's projections follow other rules, so those models are refused with this mode.
"""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.model.ops import key_value_width, query_width
from labs.model.spec import ModelSpec

# bf16 activations, fp32 log-sum-exp (FlashAttention's softmax statistics).
ACT_BYTES, LSE_BYTES = 2, 4


def check_model(model: ModelSpec) -> None:
    """The op policy is torchtitan's dense Llama block's: refuse what it does not describe."""
    if model.is_moe or model.uses_mla:
        raise LabInputError(
            "recompute", f"torchtitan's op-level checkpointing is modelled for dense Llama-style "
                         f"layers; {model.name} has "
                         f"{'expert' if model.is_moe else 'latent-attention'} layers: choose "
                         f"another recomputation")


def block_matmuls(model: ModelSpec, tp: int = 1) -> list[tuple[str, int, int]]:
    """The block's matmuls in the order its forward runs them: (name, output width, input
    width) per token on one GPU."""
    check_model(model)
    h, f = model.hidden, model.ffn // tp
    q, kv = query_width(model, tp), key_value_width(model, tp)  # as the layer's GEMMs
    mms = [("wq", q, h), ("wk", kv, h), ("wv", kv, h), ("wo", h, q), ("w1", f, h)]
    if model.gated_mlp:
        mms.append(("w3", f, h))
    mms.append(("w2", h, f))
    return mms


def recomputed_matmuls(model: ModelSpec, tp: int = 1) -> list[tuple[str, int, int]]:
    """Every second matmul of the block (counted from 1): run again in the backward."""
    return [mm for i, mm in enumerate(block_matmuls(model, tp), start=1) if i % 2 == 0]


def recomputed_params_per_layer(model: ModelSpec) -> int:
    """Weights of the recomputed matmuls in one whole layer (their forward is 2 FLOPs each per
    token)."""
    return sum(n * k for _, n, k in recomputed_matmuls(model))


@dataclass(frozen=True)
class Kept:
    """One tensor a layer keeps for its backward: ``elements`` per token on one GPU, each of
    ``nbytes`` bytes."""

    what: str  # the op whose output it is ("input": the checkpoint's own)
    elements: float
    nbytes: int

    @property
    def bytes_per_token(self) -> float:
        return self.elements * self.nbytes


def kept_tensors(model: ModelSpec, tp: int = 1, sp: bool = True) -> tuple[Kept, ...]:
    """What one layer keeps per token on one GPU for its backward (module docstring), in the
    order the forward makes it. Without sequence parallelism (``sp`` False, t > 1: not
    torchtitan's TP plan, which always splits the sequence) the input stays whole and the
    all-reduces that replace the reduce-scatters are not in ``_save_list``, so nothing of
    theirs is kept."""
    h, q = model.hidden, query_width(model, tp)
    split = tp > 1 and sp
    kept = [Kept("input", h / (tp if split else 1), ACT_BYTES)]  # sequence-split under SP
    kept += [Kept(name, n, ACT_BYTES)  # the kept matmuls' outputs
             for i, (name, n, _) in enumerate(block_matmuls(model, tp), start=1) if i % 2 == 1]
    kept += [Kept("sdpa", q, ACT_BYTES), Kept("lse", model.heads / tp, LSE_BYTES)]
    if split:
        kept += [Kept("reduce-scatter", 2 * h / tp, ACT_BYTES)]  # after wo and after w2
    return tuple(kept)


def kept_bytes_per_token(model: ModelSpec, tp: int = 1, sp: bool = True) -> float:
    """Bytes one layer keeps per token on one GPU for its backward: ``kept_tensors`` summed."""
    return sum(k.bytes_per_token for k in kept_tensors(model, tp, sp))
