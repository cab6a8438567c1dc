"""What a step runs outside its layers, kernel by kernel: the first stage's embedding, the last
stage's final norm, output layer and loss, the optimizer step and the gradient accumulation
(the layers themselves: ``labs.model.ops``).

Head: the embedding lookup (read and write 2h), the learned position add (6h) and its
dropout (5h), backward the embedding gradient's accumulation (6h) and the dropout's (5h);
the final norm, the logits GEMM (T, V/t, h) and Megatron's vocab-parallel cross-entropy on
fp32 logits (``megatron/mpu/cross_entropy.py``: cast 2+4, max 4, subtract 4+4, exp 4+4, sum
4, divide 4+4 = 38 B per logit forward; the gradient 4+4 and its cast back 4+2 = 14).
Optimizer: Megatron's mixed-precision Adam touches 52 B per local parameter (model grad to
fp32 main grad 2+4, unscale and inf check 4+4, grad norm 4, apex FusedAdam read g, p, m, v
and write p, m, v 16+12, master to model copy 4+2). Gradient accumulation, when not fused
into the weight-gradient GEMM (Megatron's --gradient-accumulation-fusion), adds each
micro-batch's 16-bit gradient into fp32 main_grad: 6 B per local parameter per micro-batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from labs.hardware.gpus import GPUSpec
from labs.hardware.kernels import mem_time
from labs.model.ops import DEFAULT_OPTIONS, ComputeOptions
from labs.model.passes import Pass, PassBuilder
from labs.model.spec import ModelSpec

OPTIMIZER_BYTES = 52  # per local parameter, Megatron mixed-precision Adam (docstring)
ACCUMULATE_BYTES = 6  # per local parameter per micro-batch, unfused main_grad add


@dataclass(frozen=True)
class HeadOps:
    """The first stage's embedding and the last stage's output layer and loss."""

    embedding_forward: Pass
    embedding_backward: Pass
    output_forward: Pass
    output_backward: Pass


@lru_cache(maxsize=4096)
def head_ops(model: ModelSpec, gpu: GPUSpec, *, tp: int, cp: int, micro_batch: int,
             seq_len: int, sp: bool, options: ComputeOptions = DEFAULT_OPTIONS) -> HeadOps:
    """Embedding (first stage) and final norm, logits and cross-entropy (last stage)."""
    t, h = tp, model.hidden
    tokens = seq_len * micro_batch // cp
    fsp = 1 / t if sp else 1.0
    drop = options.dropout
    vocab = math.ceil(model.vocab / t)
    ef, eb = PassBuilder(gpu, False), PassBuilder(gpu, False)
    positions = 6 * h if model.max_positions else 0
    ef.mem("embedding", tokens * fsp * (4 * h + positions + (5 * h if drop else 0)))
    eb.mem("embedding", tokens * fsp * (6 * h + (5 * h if drop else 0)))
    of, ob = PassBuilder(gpu, options.fp8), PassBuilder(gpu, options.fp8)
    of.mem("final-norm", tokens * 4 * h * fsp)
    ob.mem("final-norm", tokens * 6 * h * fsp)
    of.gemm("logits", tokens, vocab, h, fp8=False)
    ob.gemm("logits.dgrad", tokens, h, vocab, fp8=False)
    ob.gemm("logits.wgrad", h, vocab, tokens, fp8=False)
    of.mem("cross-entropy", tokens * vocab * 38)
    ob.mem("cross-entropy", tokens * vocab * 14)
    return HeadOps(ef.done(), eb.done(), of.done(), ob.done())


def optimizer_time(gpu: GPUSpec, params: float) -> float:
    """Seconds of the optimizer step over ``params`` local parameters (HBM-bound)."""
    return mem_time(gpu, params * OPTIMIZER_BYTES)


def accumulate_time(gpu: GPUSpec, params: float) -> float:
    """Seconds one micro-batch's unfused gradient accumulation takes."""
    return mem_time(gpu, params * ACCUMULATE_BYTES)
