"""GPU presets (``labs/presets/gpus.json``): each accelerator's datasheet figures, by id."""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.data import Presets, load
from labs.core.errors import LabInputError
from labs.core.validate import is_int as _is_int


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator's datasheet figures (bytes and bytes/s use SI prefixes: GB = 1e9 B)."""

    id: str
    name: str
    memory_bytes: float
    bf16_flops: float  # dense tensor-core BF16, no 2:4 sparsity
    scale_up_bandwidth: float  # bytes/s per direction per GPU (NVLink, Infinity Fabric, PCIe)
    network_bandwidth: float  # bytes/s per GPU scale-out (NIC)
    scale_up_domain: int  # GPUs sharing the scale-up fabric (8 in an HGX board)
    source: str
    memory_note: str = ""

    def __post_init__(self) -> None:
        for name in ("id", "name", "source"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise LabInputError("gpu", f"GPU field '{name}' must be a non-empty string")
        for name in ("memory_bytes", "bf16_flops", "scale_up_bandwidth", "network_bandwidth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise LabInputError("gpu", f"{self.id}: '{name}' must be a positive number")
        if not _is_int(self.scale_up_domain) or self.scale_up_domain < 1:
            raise LabInputError("gpu", f"{self.id}: scale_up_domain must be a whole number >= 1")


GPUS = Presets(lambda: load("gpus.json", GPUSpec), "gpu", "GPU")


def gpus() -> dict[str, GPUSpec]:
    """All GPU presets by id, in file order."""
    return GPUS.all()


def get_gpu(gpu_id: str) -> GPUSpec:
    return GPUS.get(gpu_id)
