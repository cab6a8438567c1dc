"""A pass's kernels on one GPU, each timed as it is added (``PassBuilder``: GEMMs at their
shape's achieved rate, memory-bound ops at achieved HBM bandwidth, the attention core at its
kernel's rate; ``labs.hardware.kernels``), and their totals by kind and by name (``Pass``).
The layer's ops (``labs.model.ops``), the head and optimizer (``labs.model.head``) and the
recomputed replays (``labs.parallel.layer_time``) are built with it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from labs.hardware.gpus import GPUSpec
from labs.hardware.kernels import gemm_time, mem_time

KINDS = ("gemm", "attention", "memory")


@dataclass(frozen=True)
class Kernel:
    """One kernel of one pass on one GPU."""

    name: str
    kind: str  # "gemm", "attention" or "memory"
    seconds: float
    flops: float = 0.0
    nbytes: float = 0.0
    shape: tuple[int, int, int, int] | None = None  # GEMM (m, n, k, batch)


@dataclass(frozen=True)
class Pass:
    """A pass's kernels, in order, with their total by kind."""

    kernels: tuple[Kernel, ...]

    # The totals are read many times per pass (each collective's overlap, each cause), so
    # each is summed once (math.fsum: correctly rounded, whatever the order).
    @cached_property
    def seconds(self) -> float:
        return math.fsum(k.seconds for k in self.kernels)

    @cached_property
    def _totals(self) -> tuple[dict[str, float], dict[str, float]]:
        by_kind: dict[str, list[float]] = {}
        by_name: dict[str, list[float]] = {}
        for k in self.kernels:
            by_kind.setdefault(k.kind, []).append(k.seconds)
            by_name.setdefault(k.name, []).append(k.seconds)
        return ({kind: math.fsum(v) for kind, v in by_kind.items()},
                {name: math.fsum(v) for name, v in by_name.items()})

    def of(self, kind: str) -> float:
        return self._totals[0].get(kind, 0.0)

    def named(self, name: str) -> float:
        return self._totals[1].get(name, 0.0)

    @property
    def flops(self) -> float:
        return math.fsum(k.flops for k in self.kernels)


class PassBuilder:
    """A pass's kernels as they are added, each timed on ``gpu`` (GEMMs in FP8 when ``fp8``)."""

    def __init__(self, gpu: GPUSpec, fp8: bool):
        self.gpu, self.fp8 = gpu, fp8
        self.kernels: list[Kernel] = []

    def gemm(self, name: str, m: int, n: int, k: int, batch: int = 1,
             fp8: bool | None = None, accumulate: bool = False) -> float:
        low = self.fp8 if fp8 is None else fp8
        secs = gemm_time(self.gpu, m, n, k, batch, low, accumulate)
        self.kernels.append(Kernel(name, "gemm", secs, 2.0 * m * n * k * batch,
                                   shape=(m, n, k, batch)))
        return secs

    def mem(self, name: str, nbytes: float) -> None:
        if nbytes > 0:
            self.kernels.append(Kernel(name, "memory", mem_time(self.gpu, nbytes),
                                       nbytes=nbytes))

    def attn(self, name: str, secs: float, flops: float) -> None:
        self.kernels.append(Kernel(name, "attention", secs, flops))

    def done(self) -> Pass:
        return Pass(tuple(self.kernels))
