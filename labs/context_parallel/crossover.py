"""EP06's compute-to-communication crossover: the tokens per rank L = s/c above which one
layer's attention (forward) outlasts the time to move its keys and values.

At a fixed CP degree c, the busiest rank computes ι·s²/(2c) causal (query, key) cells per head
(ι its imbalance: 1 for zigzag), 2·(d_qk + d_v) FLOPs each: (d_qk + d_v)·a·ι·c·L² FLOPs, which
grow with L². A ring (or Llama 3's all-gather) moves (c − 1) blocks of L tokens' keys and values,
(c − 1)·L·h_kv·(d_qk + d_v)·2 bytes, which grow with L. Setting the two times equal,

    L* = 2 · (h_kv / a) · (c − 1)/c · R ÷ (ι · busBW),

R the attention's FLOP/s and busBW the bytes a rank sends over their time, both the lab's own at
the state (the fused kernel's measured rate at this block size; NCCL's point-to-point sends or
all-gather, their start-up included). d_qk + d_v cancels, and grouped-query attention's
h_kv / a lowers L*: Llama 3.1 70B's 8 KV heads of 64 need an eighth of the tokens a
multi-head model does. Ring Attention (Liu et al. 2023, arXiv:2310.01889, sec 3) derives the
same bound for multi-head attention without the causal mask, a block of c tokens per host
hiding its transfer when c ≥ F/B (the FLOP/s over the bytes/s): with h_kv = a, ι = 1 and
every cell computed, the form above is (c − 1)/c · R/B, twice it under the causal mask, where
a ring step computes half a block's cells on average. DeepSpeed-Ulysses moves head shards by
all-to-all instead; its bytes grow with L too, so its L* is the same line crossing,
(bytes a rank sends per token) x R ÷ (FLOPs per L² x busBW).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from labs.context_parallel.inputs import CPResult, attention_heads
from labs.context_parallel.lab import cp_cost
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

    @property
    def ratio(self) -> float | None:
        return self.attention_s / self.comm_s if self.comm_s else None

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
    # Where the attention line (∝ L²) meets the communication line (∝ L) through the state:
    # for a ring or all-gather, 2·(h_kv/a)·(c−1)/c·R/(ι·busBW) (the module's derivation).
    cross = per_rank * cost.comm_s / cost.attention_s if cost.comm_s else 0.0
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
        sweep=tuple(sweep), points=lab_points(result) if c > 1 else ())


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
