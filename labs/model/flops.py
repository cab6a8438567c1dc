"""Training compute: FLOPs per token and time at a given MFU on a GPU's dense BF16 peak.

- Model FLOPs per token (what MFU counts): 6·N for the matmuls of forward (2·N) and backward
  (4·N) (Kaplan et al. 2020, arXiv:2001.08361 sec 2.1), with N the *active* parameters that
  multiply activations (routed experts a token does not visit do no work; the input
  embedding is a lookup, not a matmul, so it is left out, while the output head counts),
  plus the attention scores and their weighted sum, 6·L·a·s·(d_qk + d_v) = 12·L·a·d·s for
  equal head dims (Chowdhery et al. 2022, "PaLM", arXiv:2204.02311, appendix B, counted over
  the whole sequence, not halved for causality).
- Hardware FLOPs: recomputation repeats forward work. Full recomputation runs the transformer
  layers' forward once more, 8·N_layers + 2·N_head + 16·L·a·d·s (≈ 8·N: +33%, Korthikanti et
  al. 2022 sec 5): Megatron checkpoints the layers only, so the output head's matmul runs its
  forward once, as Narayanan et al. 2021 eq. 3 counts it (its V/(16·l·h) term, 3 passes of
  2·s·h·V, where a layer's h² terms count 4: arXiv:2104.04473 sec 5.1); selective
  recomputation repeats only the attention core's forward, + 2·L·a·s·(d_qk + d_v);
  torchtitan's op-level policy repeats the forward of every 2nd matmul of a layer, + 2·L·P_r
  with P_r those matmuls' weights (``labs.model.op_checkpoint``), the attention core not. A
  layer-granular mode adds each per-layer mode's extra in the share of the layers it covers
  (``Recomputation.groups`` on each pipeline rank): every 2nd layer, about half of full's.
- MFU (model FLOPs utilisation, PaLM appendix B): achieved model FLOPs / peak. The peak is the
  GPU preset's dense BF16 tensor-core figure (``GPUSpec.bf16_flops``, datasheet in its
  ``source``), without 2:4 sparsity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.limits import RECOMPUTE
from labs.core.recomputation import RECOMPUTATION
from labs.core.validate import is_int, one_of
from labs.hardware.gpus import GPUSpec
from labs.model.op_checkpoint import recomputed_params_per_layer
from labs.model.spec import ModelSpec


def matmul_params(model: ModelSpec) -> float:
    """Active parameters that multiply activations (input embedding lookup excluded)."""
    lookup = model.max_positions * model.hidden
    if not model.tied_embeddings:
        lookup += model.vocab * model.hidden  # the separate output head still computes
    return model.active_params - lookup


def head_matmul_params(model: ModelSpec) -> int:
    """The output head's weights (vocab × hidden, tied or not): the matmul outside the
    transformer layers, which no recomputation mode repeats."""
    return model.vocab * model.hidden


def layer_matmul_params(model: ModelSpec) -> float:
    """Active parameters that multiply activations inside the transformer layers (what a
    recomputed forward runs again): ``matmul_params`` less the output head."""
    return matmul_params(model) - head_matmul_params(model)


def attention_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Forward + backward FLOPs of QK^T and AV per token: 6·L·a·s·(d_qk + d_v)."""
    if model.uses_mla:
        d_qk, d_v = model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
    else:
        d_qk = d_v = model.head_dim
    return 6 * model.layers * model.heads * seq_len * (d_qk + d_v)


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Training FLOPs per token that MFU counts: 6·N + attention."""
    return 6 * matmul_params(model) + attention_flops_per_token(model, seq_len)


def forward_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """One forward pass alone, a token: the matmuls' 2·N (Kaplan et al. 2020 sec 2.1) and the
    forward's share of the attention core, a third of ``attention_flops_per_token`` (QK^T and
    AV once, where the backward runs each twice: PaLM appendix B's 6 = 2 + 4). What a forward
    that computes log-probabilities without a backward runs (EP09's RL step)."""
    return 2 * matmul_params(model) + attention_flops_per_token(model, seq_len) / 3


def hardware_flops_per_token(model: ModelSpec, seq_len: int, recompute: str = "selective",
                             stage_layers: tuple[int, ...] = ()) -> float:
    """FLOPs the GPUs actually run per token, recomputation included. ``stage_layers``: the
    layers each pipeline rank holds (empty: the whole model on one), which a layer-granular
    mode counts on each rank; the share of the layers each per-layer mode covers pays its
    extra (all of them, share 1, in the other modes)."""
    one_of("recompute", recompute, RECOMPUTE, "recomputation")
    flops = model_flops_per_token(model, seq_len)
    covered: dict[str, int] = {}
    for layers in stage_layers or (model.layers,):
        for mode, n, _ in RECOMPUTATION[recompute].groups(layers):
            covered[mode] = covered.get(mode, 0) + n
    for mode, n in covered.items():
        share, again = n / model.layers, RECOMPUTATION[mode]
        if again.forward_again:  # one more forward of the layers: their matmuls ...
            flops += share * (2 * layer_matmul_params(model))
        if again.attention_again:  # ... and the attention core's forward again
            flops += share * attention_flops_per_token(model, seq_len) / 3
        if again.policy:  # an op-level policy: the matmuls it drops run their forward again
            flops += share * 2 * model.layers * recomputed_params_per_layer(model)
    return flops


@dataclass(frozen=True)
class ComputeTime:
    tokens: float
    flops: float  # model FLOPs for the tokens
    seconds: float
    mfu: float
    peak_flops: float  # per GPU
    gpus: int
    source: str


def training_time(model: ModelSpec, gpu: GPUSpec, tokens: float, *, seq_len: int = 4096,
                  gpus: int = 1, mfu: float = 0.4) -> ComputeTime:
    """Seconds to train on ``tokens`` tokens with ``gpus`` GPUs at ``mfu`` of the BF16 peak."""
    if not (isinstance(mfu, int | float) and 0 < mfu <= 1):
        raise LabInputError("mfu", "MFU must be a fraction in (0, 1]")
    if not is_int(gpus) or gpus < 1:
        raise LabInputError("gpus", "the number of GPUs must be a whole number >= 1")
    if not (isinstance(tokens, int | float) and math.isfinite(tokens) and tokens > 0):
        raise LabInputError("tokens", "the number of tokens must be a positive number")
    flops = tokens * model_flops_per_token(model, seq_len)
    seconds = flops / (gpus * gpu.bf16_flops * mfu)
    return ComputeTime(tokens, flops, seconds, mfu, gpu.bf16_flops, gpus, gpu.source)


def expert_flops_per_token(model: ModelSpec, *, training: bool = False) -> float:
    """FLOPs one routed expert spends on one token it receives: 2·P_e forward, 6·P_e forward
    and backward, with P_e one expert's weights (the same 2N/6N rule as above, Kaplan et al.
    2020 sec 2.1, applied to one expert's matmuls)."""
    return (6 if training else 2) * model.expert_size
