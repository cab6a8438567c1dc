"""What a layer's timing is made of: where a rank group sits (``Group``), one collective of a
pass where it runs (``Piece``) and one collective kind over a pass (``Comm``), which
``layer_time`` (TP, EP, recomputation) and ``ring`` (CP) build and ``labs.recipe`` reads."""

from __future__ import annotations

from dataclasses import dataclass, field

ACT_BYTES = 2  # 16-bit activations on the wire


@dataclass(frozen=True)
class Group:
    """Where one kind of rank group sits: its size and the fewest members on one node."""

    size: int = 1
    per_node: int = 1


@dataclass(frozen=True)
class Piece:
    """One collective of a pass, where it runs: beside (or blocking) ``anchor``, the kernel it
    can hide behind or the op it feeds (``where``: "before") or follows ("after"); "pass":
    beside the whole pass (EP overlap: another micro-batch's compute), "recompute": beside the
    forward run again. ``labs.recipe.layer_view`` lays them out; they sum to their ``Comm``."""

    collective: str
    anchor: str
    where: str  # "before", "after" or "pass"
    seconds: float
    exposed: float
    sm: float = 0.0
    # TP overlap "all" (``decomposed``): of ``exposed``, the compute lost by cutting the GEMM
    # into chunks (the rest a wait), and the GEMM's seconds so cut (0: not decomposed).
    split: float = 0.0
    chunked: float = 0.0
    sent: float = 0.0  # bytes one GPU sends for it


@dataclass(frozen=True)
class Comm:
    """One collective kind over a layer's pass (or a step's), on one GPU."""

    name: str  # "tp", "cp", "ep", "pp", "dp", ...
    collective: str
    seconds: float  # if nothing overlapped
    exposed: float  # on the critical path
    bytes_per_gpu: float
    link: str  # the link id that bounds it
    # Of ``exposed``: the compute it ran beside slowed by the SMs its kernels took (charged
    # only where the model charges them: EP overlap, COMM_SMS); the rest outlasts the compute.
    sm: float = 0.0
    # Each collective of it, where it runs (a layer's pass; empty for a step's parts).
    pieces: tuple[Piece, ...] = field(default=(), compare=False)

    @property
    def hidden(self) -> float:
        return self.seconds - self.exposed
