"""The pipeline schedules: one record per schedule, read by every lab, chart and export.

A schedule is its ``Schedule`` record here and its generator in ``labs.schedules.generators``;
everything else reads the record: the simulator (``labs.schedules.simulate``: the generator,
the rules on p, m and v, the chunks, the textbook bubble), the activations in flight
(``labs.schedules.inflight``), the weights per rank (``labs.schedules.stages``: the chunks and
where each model piece lives), the memory ledger (``labs.memory``), the recipe and its planner,
bounds and exports (``labs.recipe``), the pipeline page's option list and the charts (``app``).
Adding a schedule: its generator, its record in ``CATALOGUE``, its tests.

Sources of the closed forms (each record cites its own where it has one):
- in-flight micro-batches per rank: Narayanan et al. 2021 (arXiv:2104.04473) sec 2.2 (1F1B
  holds min(m, p − r) on rank r; GPipe all m); the interleaved schedule's warm-up of
  2(p − r − 1) + (v − 1)p chunks (Megatron's ``get_forward_backward_func``), which on rank 0 is
  the factor 1 + (p − 1)/(p·v) of Megatron's estimate; ZB-H1 (Qi et al. 2023,
  arXiv:2401.10241) and DualPipeV (DeepSeek-V3 sec 3.2.1) as the pipeline lab measures them.
  A schedule without one (``in_flight=None``) is measured off its simulated timeline.
- textbook bubble: (p − 1)/(v·m + p − 1), Narayanan et al. 2021 sec 2.2 (v = 1 but for the
  interleaved family, which runs v chunks per rank).
- exports: Megatron-LM's ``--num-layers-per-virtual-pipeline-stage`` (interleaved 1F1B, its
  only other schedule); the ``torch.distributed.pipelining.schedules`` class of each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from labs.schedules import generators as gen
from labs.schedules.generators import Plan

# (bubble, per-rank (idle before the first forward, idle after the last backward) as fractions
# of the makespan) of the recipe's costs: f = 1, b = w = 1 (backward twice forward), free sends.
Flush = tuple[float, tuple[tuple[float, float], ...]]


@dataclass(frozen=True)
class Schedule:
    """One pipeline schedule: what each lab, chart and export reads of it."""

    id: str  # stable, used in the API
    name: str  # the name the field and PyTorch give it
    hint: str  # what the page's option list says after the name
    generate: Callable[[int, int, int], Plan]  # (p, m, v) -> each rank's steps
    # Family: v chunks per rank, piece k on rank k % p; their textbook bubble is
    # (p-1)/(v*m+p-1). ``plain``: the schedule it is with one chunk (the message says so).
    interleaved: bool = False
    plain: str = ""
    v_shape: bool = False  # two chunks per rank, placed as a V (down the ranks and back up)
    rounds: bool = False  # m in rounds of micro-batches (generators.rounds): must split whole
    split_backward: bool = False  # the backward runs as I (input gradient) and W (weight)
    # Micro-batches per stage the schedule needs (``fill``), and why, in the message's words.
    fill: int = 1
    fill_reason: str = ""
    # Peak activations on rank r in stage-loads, (p, m, r, v) -> float; None: measured off
    # the simulated schedule (labs.schedules.inflight).
    in_flight: Callable[[int, int, int, int], float] | None = None
    # Every micro-batch's logits wait for the backward (all forwards first): the ledger holds
    # m of them on the last stage, else 1.
    holds_all_logits: bool = False
    # The memory ledger's note names it so ("{virtual}" for the chunks); "" reads ``name``.
    ledger_name: str = ""
    # The recipe's timeline in closed form, (p, m, v) -> Flush, None where it has none for
    # that shape; the recipe simulates the rest (labs.recipe.lab).
    flush: Callable[[int, int, int], Flush | None] | None = None
    # Exports (labs.recipe.export): how Megatron-LM runs it ("plain", "interleaved", or ""
    # when it does not, and falls back to 1F1B); PyTorch's class, and what the FSDP export
    # notes when that class is only the nearest.
    megatron: str = ""
    torch_class: str = ""
    torch_note: str = ""

    @property
    def label(self) -> str:
        """The option list's text: the name, then what it does."""
        return f"{self.name} ({self.hint})"

    def chunks(self, virtual: int = 1) -> int:
        """Model chunks each rank holds: v for the interleaved family, 2 for the V shapes,
        else 1."""
        if self.interleaved:
            return virtual
        return 2 if self.v_shape else 1

    def piece(self, stages: int, rank: int, chunk: int) -> int:
        """The model piece that ``chunk`` of ``rank`` holds.

        Interleaved: piece k lives on rank k % p (chunk j of rank r is piece j*p + r).
        V shape (ZB-V, DualPipeV): chunk 0 runs down ranks 0..p-1, chunk 1 comes back up
        p-1..0, so rank r holds pieces r and 2p-1-r and the loss is on rank 0.
        """
        if self.v_shape:
            return rank if chunk == 0 else 2 * stages - 1 - rank
        return chunk * stages + rank

    def textbook_bubble(self, p: int, m: int, virtual: int = 1) -> float:
        """(p-1)/(v*m+p-1), v = the chunks for the interleaved family, else 1."""
        v = virtual if self.interleaved else 1
        return (p - 1) / (v * m + p - 1)

    def textbook_over_ideal(self, p: int, m: int, virtual: int = 1) -> float:
        """(p-1)/(v*m): the textbook bubble over the ideal time, not the step (Narayanan et al.
        2021 sec 2.2.1: t_pb / t_id = (p-1)/m; sec 2.2.2: (1/v)(p-1)/m interleaved)."""
        v = virtual if self.interleaved else 1
        return (p - 1) / (v * m)

    def ledger_label(self, virtual: int) -> str:
        return (self.ledger_name or self.name).format(virtual=virtual)


def _flush_1f1b(p: int, m: int, v: int) -> Flush:
    # 1F1B's timeline at these costs in closed form (PipeDream-Flush, Narayanan et al.
    # 2021 sec 2.2.1): m + p − 1 slots of f + b = 3, rank r's first forward at r·f, its
    # last backward 2r before the end; bubble (p−1)/(m+p−1). The simulator gives the
    # same figures (tests/labs/test_recipe_uneven.py), in O(p·m) instead of O(p).
    span = 3 * (m + p - 1)
    return (p - 1) / (m + p - 1), tuple((r / span, 2 * r / span) for r in range(p))


def _flush_interleaved(p: int, m: int, v: int) -> Flush | None:
    # The same with v chunks (Narayanan et al. 2021 sec 2.2.2: the warm-up and drain
    # shrink v-fold) when the micro-batches fill whole rounds of p: span 3(m + (p−1)/v),
    # rank r's first forward at r·f/v and its last backward 2r/v before the end.
    if m % p:
        return None
    span = 3 * (m + (p - 1) / v)
    return (p - 1) / (v * m + p - 1), tuple((r / v / span, 2 * r / v / span)
                                            for r in range(p))


CATALOGUE: dict[str, Schedule] = {s.id: s for s in (
    Schedule(
        "gpipe", "GPipe", "all forwards, then all backwards",
        lambda p, m, v: gen.gpipe(p, m),
        in_flight=lambda p, m, r, v: float(m),
        holds_all_logits=True,  # the loss's backward waits for every forward
        torch_class="ScheduleGPipe",
    ),
    Schedule(
        "1f1b", "1F1B", "one forward, one backward",
        lambda p, m, v: gen.one_f_one_b(p, m),
        in_flight=lambda p, m, r, v: float(min(m, p - r)),
        flush=_flush_1f1b,
        megatron="plain", torch_class="Schedule1F1B",
    ),
    Schedule(
        "interleaved-1f1b", "Interleaved 1F1B", "v chunks per rank",
        gen.interleaved, interleaved=True, plain="1f1b", rounds=True,
        in_flight=lambda p, m, r, v: min(m * v, 2 * (p - r - 1) + (v - 1) * p + 1) / v,
        ledger_name="interleaved 1F1B with {virtual} chunks per rank",
        flush=_flush_interleaved,
        megatron="interleaved", torch_class="ScheduleInterleaved1F1B",
    ),
    Schedule(
        "looped-bfs", "Looped BFS", "v chunks, every micro-batch through one chunk before the next",
        gen.looped_bfs, interleaved=True, plain="gpipe",
        # Every micro-batch passes chunk 0 before any backward: all m stage-loads, as GPipe.
        in_flight=lambda p, m, r, v: float(m),
        torch_class="ScheduleLoopedBFS",
    ),
    Schedule(
        "zb-h1", "ZB-H1", "zero bubble: backward split into I and W",
        lambda p, m, v: gen.zb_h1(p, m), split_backward=True,
        # Every rank keeps min(m, p) layer inputs until their weight-gradient (W) pass.
        in_flight=lambda p, m, r, v: float(min(m, p)),
        torch_class="ScheduleInterleavedZeroBubble",
        torch_note="PyTorch has no single-chunk ZB-H1; its interleaved zero-bubble schedule "
                   "is the nearest",
    ),
    Schedule(
        "interleaved-zb", "Interleaved zero bubble", "v chunks, backward split into I and W",
        gen.interleaved_zero_bubble, interleaved=True, plain="zb-h1", rounds=True,
        split_backward=True,  # no closed form for its in-flight peak: measured
        torch_class="ScheduleInterleavedZeroBubble",
    ),
    Schedule(
        "zb-v", "ZB-V", "V-shape, zero bubble",
        lambda p, m, v: gen.zb_v(p, m), v_shape=True, split_backward=True,  # measured
        torch_class="ScheduleZBVZeroBubble",
    ),
    Schedule(
        "dualpipe-v", "DualPipeV", "V-shape, forward and backward paired",
        lambda p, m, v: gen.dualpipe_v(p, m), v_shape=True, split_backward=True,
        fill=2, fill_reason="twice as many micro-batches as stages to fill both arms of the V",
        # Both arms of the V are full at the peak: 2p + 1 half-stage chunks on every rank.
        in_flight=lambda p, m, r, v: min(2 * m, 2 * p + 1) / 2,
        torch_class="ScheduleDualPipeV",
    ),
)}

# Schedule id -> the name the field and PyTorch give it (the ids, in the page's order).
SCHEDULES: dict[str, str] = {k: s.name for k, s in CATALOGUE.items()}
# The families, as the records mark them.
INTERLEAVED = tuple(k for k, s in CATALOGUE.items() if s.interleaved)
ROUNDS = tuple(k for k, s in CATALOGUE.items() if s.rounds)
SPLIT_BACKWARD = tuple(k for k, s in CATALOGUE.items() if s.split_backward)
V_SHAPE = tuple(k for k, s in CATALOGUE.items() if s.v_shape)


def piece(schedule: str, stages: int, rank: int, chunk: int) -> int:
    """The model piece that ``chunk`` of ``rank`` holds under ``schedule`` (Schedule.piece)."""
    return CATALOGUE[schedule].piece(stages, rank, chunk)


def chunks_per_rank(schedule: str, virtual: int = 1) -> int:
    """Model chunks each rank holds under ``schedule`` (Schedule.chunks)."""
    return CATALOGUE[schedule].chunks(virtual)
