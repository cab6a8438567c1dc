"""EP06's compute-to-communication crossover: the tokens per rank L = s/c above which the
attention that covers a transfer outlasts it.

At a fixed CP degree c, the busiest rank computes ι·s²/(2c) causal (query, key) cells per head
(ι its imbalance: 1 for zigzag), 2·(d_qk + d_v) FLOPs each: (d_qk + d_v)·a·ι·c·L² FLOPs a
layer, which grow with L². A ring runs them in c rounds of one K/V block each, and sends c − 1
blocks of L tokens' keys and values, L·h_kv·(d_qk + d_v)·2 bytes each, which grow with L. Each
send overlaps one round's attention, and the next round needs the block it delivers, so the
sends hide only while one send takes no longer than one round (Liu et al. 2023, Ring
Attention, arXiv:2310.01889, sec 3: a block hides its transfer when its compute outlasts it;
labs.context_parallel.lab's exposure, (c − 1)·max(0, t_send − t_block)). A round is the
busiest rank's attention ÷ c, (d_qk + d_v)·a·ι·L² FLOPs, so setting one round equal to one
send,

    L* = 2 · (h_kv / a) · R ÷ (ι · B),

R the attention's FLOP/s and B the bytes a rank sends over their time, both the lab's own at
the state (the fused kernel's measured rate at this block size; NCCL's point-to-point sends,
their start-up included). d_qk + d_v cancels, and grouped-query attention's h_kv / a lowers
L*: Llama 3.1 70B's 8 KV heads of 64 need an eighth of the tokens a multi-head model does.
With h_kv = a, ι = 1 and every cell computed this is Ring Attention's c ≥ F/B (a block of c
tokens, the FLOP/s over the bytes/s); under the causal mask it is twice that, a round
computing half a block's cells on average. Comparing the layer's totals instead, c rounds
against c − 1 sends, gives (c − 1)/c of this L*: optimistic, since the last round's attention
comes after every send and covers none.

An all-gather (Llama 3) and DeepSpeed-Ulysses' all-to-alls are waited for whole, not per round:
their L* is where the layer's attention equals the collective, the same line crossing at the
layer's totals, 2·(h_kv/a)·(c − 1)/c·R ÷ (ι·busBW) for the all-gather, and (bytes a rank
sends per token) x R ÷ (FLOPs per L² x busBW) for Ulysses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from labs.context_parallel.inputs import CPResult, attention_heads
from labs.context_parallel.lab import RING_LAYOUTS, cp_cost
from labs.core.errors import LabInputError
from labs.core.limits import MAX_SEQ_LEN
from labs.hardware.gpus import GPUSpec
from labs.hardware.links import Link
from labs.model.spec import ModelSpec

SWEEP_STEPS = 48  # points along the lines (log-spaced)
POINT_TOKENS = tuple(2 ** e for e in range(7, 18))  # the lab's own runs: 128 ... 131,072 a rank


@dataclass(frozen=True)
class CPCrossover:
    cp: int
    layout: str
    per_rank: float  # L = s / c
    attention_s: float  # the busiest rank's attention, one layer forward
    comm_s: float  # its K/V (or shards') transfers, none hidden
    comm_bytes: float
    flops: float
    rate: float  # flops / attention_s
    busbw: float  # comm_bytes / comm_s
    kv_share: float  # h_kv / a
    imbalance: float
    crossover: float  # L*, 0 on one rank
    sweep: tuple[tuple[float, float, float], ...]  # (L, attention s, comm s) at R and busBW
    points: tuple[tuple[int, float, float], ...]  # the lab at L = POINT_TOKENS: (L, att, comm)
    # What one transfer is set against: a ring's round (its attention ÷ c rounds, its sends
    # ÷ c − 1), or the whole layer (1 and 1) for a collective attention waits for.
    rounds: int = 1
    sends: int = 1

    @property
    def per_round(self) -> bool:
        return self.rounds > 1

    @property
    def round_attention_s(self) -> float:
        """A ring's round of attention, t_block (the layer's, for a collective)."""
        return self.attention_s / self.rounds

    @property
    def send_s(self) -> float:
        """A ring's one send, t_send (the layer's collective, otherwise)."""
        return self.comm_s / self.sends

    @property
    def lab_crossover(self) -> float | None:
        """Where the lab's own marks cross, each run at its own block's kernel rate and send
        start-up (the lines take this state's): attention against transfers as the lines set
        them (a ring's round and send), log-log between the two runs that bracket the first
        crossing; None where no two do."""
        pts = [(x, a / self.rounds, m / self.sends) for x, a, m in self.points]
        for (x0, a0, m0), (x1, a1, m1) in zip(pts, pts[1:], strict=False):
            if a0 < m0 and a1 >= m1:
                r0, r1 = math.log(a0 / m0), math.log(a1 / m1)
                return math.exp(math.log(x0) + math.log(x1 / x0) * -r0 / (r1 - r0))
        return None

    @property
    def ratio(self) -> float | None:
        """t_block ÷ t_send for a ring (1 at L*), attention ÷ the collective otherwise."""
        return self.round_attention_s / self.send_s if self.comm_s else None

    @property
    def collective_name(self) -> str:
        return {"allgather": "K/V all-gather", "ulysses": "Ulysses' all-to-alls"}.get(
            self.layout, "Ring's K/V sends")


def cp_crossover(result: CPResult) -> CPCrossover:
    inp, cost = result.input, result.cost
    c, per_rank = inp.cp, inp.seq_len / inp.cp
    heads, kv = attention_heads(inp.model)
    rate = cost.attention_flops / cost.attention_s
    busbw = cost.comm_bytes_per_gpu / cost.comm_s if cost.comm_s else 0.0
    # Where the attention line (∝ L²) meets the communication line (∝ L) through the state,
    # a ring's per round (one round's attention, one send): 2·(h_kv/a)·R/(ι·B); a
    # collective's per layer: for the all-gather 2·(h_kv/a)·(c−1)/c·R/(ι·busBW) (the
    # module's derivation).
    rounds, sends = (c, c - 1) if inp.layout in RING_LAYOUTS and c > 1 else (1, 1)
    cross = (per_rank * (cost.comm_s / sends) / (cost.attention_s / rounds)
             if cost.comm_s else 0.0)
    lo = min(POINT_TOKENS[0], cross / 4) if cross else POINT_TOKENS[0]
    hi = max(POINT_TOKENS[-1], per_rank * 2)
    sweep = []
    for i in range(SWEEP_STEPS + 1):
        x = lo * (hi / lo) ** (i / SWEEP_STEPS)
        sweep.append((x, cost.attention_s * (x / per_rank) ** 2, cost.comm_s * x / per_rank))
    return CPCrossover(
        cp=c, layout=inp.layout, per_rank=per_rank, attention_s=cost.attention_s,
        comm_s=cost.comm_s, comm_bytes=cost.comm_bytes_per_gpu, flops=cost.attention_flops,
        rate=rate, busbw=busbw, kv_share=kv / heads, imbalance=cost.imbalance, crossover=cross,
        sweep=tuple(sweep), points=lab_points(result) if c > 1 else (), rounds=rounds,
        sends=sends)


def lab_points(result: CPResult) -> tuple[tuple[int, float, float], ...]:
    """The lab's own layer at each of POINT_TOKENS tokens a rank (those the layout can split
    and the lab allows), at the state's model, c, layout, link and GPU: not its sequence
    length, so a student moving that slider reuses them (a bounded cache), and the page's
    several asks of one state share them."""
    inp = result.input
    return _points(inp.model, inp.cp, inp.layout, inp.link, inp.gpu)


@lru_cache(maxsize=512)
def _points(model: ModelSpec, cp: int, layout: str, link: Link,
            gpu: GPUSpec) -> tuple[tuple[int, float, float], ...]:
    out = []
    for per in POINT_TOKENS:
        if per * cp > MAX_SEQ_LEN:
            break
        try:
            c = cp_cost(model, per * cp, cp, layout, link, gpu)
        except LabInputError:
            continue
        out.append((per, c.attention_s, c.comm_s))
    return tuple(out)
