"""ZeRO-3's published fall at a fixed batch, against the lab's compute-to-communication ratio.

Narayanan et al. 2021 (arXiv:2104.04473), Table 2, "ZeRO-3 without model parallelism": GPT-3
175B (174.6B parameters), a global batch of 1,536 sequences of 2,048 tokens, on 384, 768 and
1,536 A100s with micro-batches of 4, 2 and 1 (so one micro-batch a step), reached 144, 88 and
44 TFLOP/s per GPU: throughput per GPU roughly halves with each doubling. Their FLOPs count the
recomputed forward (their eq. 3: 96·B·s·l·h²·(1 + s/6h + V/16lh) a step, activation
recomputation on), so a published step is those FLOPs over the GPUs and their rate.

The ratio (EP03 step 9, ``labs.zero.lab.crossover``): each GPU computes ~6·P·T FLOPs on T
tokens and moves 3 × 2 B × P × (D-1)/D for ZeRO-3 whatever T is; halving T halves the compute
and leaves the bytes. Once the bytes take longer than the compute, the step stops shrinking and
throughput per GPU halves with T: Table 2's 88 -> 44 is exactly that. The published steps at
768 and 1,536 GPUs are the same length (``published_step_s``), the sign of a fixed cost, and
the lab's own bytes over that step give the bandwidth the run's collectives can have reached at
most (``implied_busbw``): far below the lab's NCCL bus bandwidth on the same 8 HDR ports a
node, which keeps T* under a thousand tokens and so shows little of the fall. The 384-GPU
run's step is longer than that fixed cost, so it computed longer than it communicated: at the
runs' own rates T* lay between its 8,192 tokens a GPU and the 768-GPU run's 4,096
(``t_star_between``). What the lab
leaves out is what DeepSpeed's 2021 ZeRO-3 paid beyond NCCL's bus rate: per-parameter gathers
of small partitions, each a latency-bound collective, issued and waited for parameter by
parameter, not bucketed per layer as FSDP2 and Megatron's distributed optimizer do.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from labs.core.data import read
from labs.hardware.gpus import get_gpu
from labs.model.presets import get_model
from labs.zero.inputs import ZeroInput
from labs.zero.lab import crossover, simulate_zero

# (GPUs, micro-batch, TFLOP/s per GPU): Narayanan et al. 2021 Table 2, GPT-3 175B, ZeRO-3
# without model parallelism, global batch 1,536.
TABLE_2 = ((384, 4, 144e12), (768, 2, 88e12), (1536, 1, 44e12))
GLOBAL_BATCH, SEQ_LEN = 1536, 2048
MODEL, GPU, LINK = "gpt-3-175b", "a100-80gb", "ib-hdr"  # Selene: DGX A100, 8 HDR ports a node
VOCAB = 51200  # Narayanan et al. 2021 eq. 3's V for their GPT models
# Llama 3 405B's pre-training MFU on H100s, 38-43% across its three configurations (Dubey et
# al. 2024, arXiv:2407.21783, Table 4): what a tuned 2024 stack reaches, against which the
# lab's ideal MFU (every kernel at its measured rate, nothing between) is set on EP03 step 5.
LLAMA3_MFU = (0.38, 0.43)


@dataclass(frozen=True)
class FallRow:
    gpus: int
    micro_batch: int
    tokens_per_gpu: int
    published_flops: float  # per GPU, as Table 2 counts them
    published_step_s: float  # eq. 3's FLOPs a step / GPUs / the published rate
    lab_compute_s: float  # the zero lab's op-level compute for the same step
    lab_comm_s: float  # ZeRO-3's collectives at the lab's NCCL bus bandwidth
    lab_step_s: float
    lab_flops: float  # eq. 3's FLOPs a step / GPUs / the lab's step
    comm_bytes: float  # what each GPU moves a step
    busbw: float  # the lab's
    crossover_tokens: float  # the lab's T*
    implied_busbw: float  # comm_bytes / published_step_s: the most the run can have reached


def hardware_flops_per_step() -> float:
    """Narayanan et al. 2021 eq. 3 for GPT-3 175B at Table 2's batch (recomputation on)."""
    m = get_model(MODEL)
    b, s, layers, h = GLOBAL_BATCH, SEQ_LEN, m.layers, m.hidden
    return 96 * b * s * layers * h * h * (1 + s / (6 * h) + VOCAB / (16 * layers * h))


def eq3_over_6pt() -> float:
    """Eq. 3's FLOPs a step over 6·P·T (P parameters, T the batch's tokens): what turns the
    lab's 6·P·T rate into Table 2's count, the recomputed forward and attention included."""
    return hardware_flops_per_step() / (6 * get_model(MODEL).params * GLOBAL_BATCH * SEQ_LEN)


@lru_cache(maxsize=1)
def fall() -> tuple[FallRow, ...]:
    """Table 2's three ZeRO-3 runs beside the zero lab's step for each (full recomputation,
    as the runs), and the bandwidth each published step leaves its collectives."""
    flops, rows = hardware_flops_per_step(), []
    for gpus, b, published in TABLE_2:
        result = simulate_zero(ZeroInput(model=get_model(MODEL), gpu=get_gpu(GPU), dp=gpus,
                                         zero=3, link=LINK, seq_len=SEQ_LEN, micro_batch=b,
                                         recompute="full"))
        c = crossover(result)
        step = flops / gpus / published
        implied = c.comm_bytes / step
        rows.append(FallRow(
            gpus=gpus, micro_batch=b, tokens_per_gpu=c.tokens_per_gpu,
            published_flops=published, published_step_s=step, lab_compute_s=c.compute_s,
            lab_comm_s=c.comm_s, lab_step_s=result.step_seconds,
            lab_flops=flops / gpus / result.step_seconds, comm_bytes=c.comm_bytes,
            busbw=c.busbw, crossover_tokens=c.crossover_tokens, implied_busbw=implied))
    return tuple(rows)


def fixed_cost_s(rows: tuple[FallRow, ...]) -> float:
    """The runs' communication a step, at most: the shortest published step, which the 768-
    and 1,536-GPU runs share (to 1%) because below T* the step is ZeRO-3's bytes alone."""
    return min(r.published_step_s for r in rows)


def t_star_between(rows: tuple[FallRow, ...]) -> tuple[int, int]:
    """Tokens a GPU between which T* lay at the runs' own rates: the most any run at the
    fixed cost held (below T*, its step the communication) and the fewest any run whose step
    outlasted it held (above T*, its compute longer than its communication). The lab's compute
    rate does not enter: mixing it with the runs' bandwidth put T* past all three runs."""
    cost = fixed_cost_s(rows)
    below = [r.tokens_per_gpu for r in rows if r.published_step_s <= 1.01 * cost]
    above = [r.tokens_per_gpu for r in rows if r.published_step_s > 1.01 * cost]
    return max(below), min(above)


@lru_cache(maxsize=1)  # a file read and parsed per zero answer was a fifth of its render
def megatron_table_1() -> tuple[float, float]:
    """The lowest and highest TFLOP/s per GPU of Megatron-LM's own runs on the same A100s
    (Narayanan et al. 2021, Table 1: 1.7B to 1T, counted by the same eq. 3, recomputation
    included), read from labs/presets/runs.json: what tuned 2021 software reached with its
    communication largely hidden, against which the lab's ideal compute is measured."""
    rates = [r["published"]["tflops_per_gpu"] * 1e12 for r in read("runs.json")["runs"]
             if r["group"] == "narayanan-2021-table1"]
    return min(rates), max(rates)


def gap_split(rows: tuple[FallRow, ...], best: float) -> tuple[tuple[float, float], ...]:
    """Each run's error (the lab's throughput over the published one) as two factors whose
    product it is: the lab's compute against Megatron-LM's best 2021 compute rate on A100s,
    its collectives and bubble taken out (``best``, FLOP/s: labs.recipe.runs.megatron_compute,
    a floor above this one, gives it; the lab's ZeRO-3 step is its
    compute alone on all three runs: every gather hides), and that rate against the published
    ZeRO-3 run, the most that DeepSpeed's 2021 collectives and engine can have cost it.
    Like with like: two compute rates, then compute against a whole step."""
    return tuple((r.lab_flops / best, best / r.published_flops) for r in rows)


def lab_fall(rows: tuple[FallRow, ...]) -> tuple[int, int, float]:
    """The lab's throughput per GPU at the first and last run as the lesson prints it (whole
    TFLOP/s), and its fall from those printed rates (a fraction): one rounding, so the page's
    arithmetic checks (round-15 cold reading of EP03, finding 4: "248 to 238 TFLOP/s, a 4.3%
    fall" was 4.26% from the unrounded rates, 4.0% from the printed ones)."""
    first, last = round(rows[0].lab_flops / 1e12), round(rows[-1].lab_flops / 1e12)
    return first, last, 1 - last / first


def share_shown(rows: tuple[FallRow, ...]) -> float:
    """How much of the published fall, first run to last, the lab's model shows: its own
    fall in throughput per GPU (from the rates as printed, lab_fall) over the published one
    (0: none, 1: all)."""
    published = 1 - rows[-1].published_flops / rows[0].published_flops
    return lab_fall(rows)[2] / published
