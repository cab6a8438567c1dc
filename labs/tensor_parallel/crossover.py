"""EP04's compute-to-communication crossover: the hidden size per GPU, h/t, above which a
layer's compute outlasts the time to move its TP collectives' bytes.

Per layer and per token, one GPU of the group computes 6·k·h·(h/t) FLOPs, where k·h² is the
layer's weights plus its attention scores counted as weights (k = the model's FLOPs per token
per layer over 6·h²: 12 for GPT-3's 12h² layer without the scores; labs.tensor_parallel.lab's
``layer_flops``). It sends β·h bytes, β = 4 collectives x 2(t−1)/t x 2 bytes = 16(t−1)/t for
Megatron's four all-reduces of the s·b·h bf16 activations (Shoeybi et al. 2019 sec 3; with
sequence parallelism, Korthikanti et al. 2022 sec 4.2.2, the lab's own count of the reduce-
scatters and all-gathers). Both grow with the tokens, which cancel; setting the two times equal,

    (h/t)* = β·R ÷ (6·k·busBW)   (= 8/(3k) x (t−1)/t x R/busBW without SP),

R the layer's FLOP/s on one GPU of the group and busBW the bytes each GPU sends over the
collectives' time. The jax-ml Scaling Book ("How to Scale Your Model", Austin et al. 2025,
"How to Think About GPUs", tensor parallelism) derives the same bound as F/Y > C/W for an MLP
alone (its per-GPU MLP width against the GPU's FLOP/s over its NVLink bytes/s); here the whole
layer counts, so the width is h/t and k carries the layer's shape.

R and busBW are the lab's own at the state (the op-level layer time and NCCL's collectives),
as EP02 and EP03 take theirs, and the (t−1)/t is this state's t, as EP02's (N−1)/N is its N:
the communication is drawn flat, the compute line through the state meets it at (h/t)*. The
lab's other degrees (``points``) run their own rates and their own (t−1)/t, so they leave the
drawn lines where narrow matrices slow down or the group leaves a node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.tensor_parallel.inputs import TPResult
from labs.tensor_parallel.lab import layer_flops, layer_weights

SWEEP_STEPS = 48  # points along the compute line (log-spaced)


@dataclass(frozen=True)
class TPCrossover:
    tp: int
    hidden: int
    per_gpu: float  # h/t, this state's
    tokens: int  # s·b, which cancels
    compute_s: float  # the layer's kernels on one GPU of the group, forward + backward
    comm_s: float  # its TP collectives one after another, none hidden (0 at t = 1)
    comm_bytes: float  # bytes each GPU sends per layer
    flops: float  # the layer's model FLOPs on one GPU of the group
    rate: float  # flops / compute_s
    busbw: float  # comm_bytes / comm_s
    k: float  # FLOPs per token per layer on one GPU x t / (6·h²)
    k_scores: float  # of k, the attention scores': every (query, key) pair, as Megatron counts
    beta: float  # bytes sent per token per unit of h
    crossover: float  # (h/t)*, 0 at t = 1
    # (h/t, compute s) at this state's rate (the communication, β·h·s·b ÷ busBW, does not
    # move with h/t at this t), and the lab's own op-level figures at each timed t > 1.
    sweep: tuple[tuple[float, float], ...]
    points: tuple[tuple[int, float, float, float], ...]  # (t, h/t, compute s, comm s)

    @property
    def ratio(self) -> float | None:
        return self.compute_s / self.comm_s if self.comm_s else None


def tp_crossover(result: TPResult) -> TPCrossover:
    inp, cost = result.input, result.cost
    m, t = inp.model, inp.tp
    tokens = inp.seq_len * inp.micro_batch
    flops = layer_flops(m, inp.seq_len, inp.micro_batch, t)
    rate = flops / cost.compute_s
    k = flops * t / (6 * tokens * m.hidden ** 2)
    # The scores' share: layer_flops less its weights' 6 FLOPs a weight a token.
    k_scores = k - 6 * tokens * layer_weights(m, t) * t / (6 * tokens * m.hidden ** 2)
    busbw = cost.comm_bytes / cost.comm_total_s if cost.comm_total_s else 0.0
    beta = cost.comm_bytes / (tokens * m.hidden)
    cross = beta * rate / (6 * k * busbw) if busbw else 0.0
    per_gpu = m.hidden / t
    # The compute line from h/64 to h/2 (t from 64 to 2), widened to show the crossover.
    lo = min(m.hidden / 64, cross / 2) if cross else m.hidden / 64
    hi = max(m.hidden / 2, 2 * cross)
    sweep = tuple((x, cost.compute_s * x / per_gpu) for x in
                  (lo * (hi / lo) ** (i / SWEEP_STEPS) for i in range(SWEEP_STEPS + 1)))
    points = tuple((c.tp, m.hidden / c.tp, c.compute_s, c.comm_total_s)
                   for c in result.sweep if c.tp > 1)
    return TPCrossover(
        tp=t, hidden=m.hidden, per_gpu=per_gpu, tokens=tokens, compute_s=cost.compute_s,
        comm_s=cost.comm_total_s, comm_bytes=cost.comm_bytes, flops=flops, rate=rate,
        busbw=busbw, k=k, k_scores=k_scores, beta=beta, crossover=cross, sweep=sweep,
        points=points)


def crossover_degree(c: TPCrossover) -> float:
    """t* = h ÷ (h/t)*: the degree where this model's compute meets its collectives at this
    state's rate and bus bandwidth (inf at t = 1, where nothing is sent)."""
    return c.hidden / c.crossover if c.crossover else math.inf
