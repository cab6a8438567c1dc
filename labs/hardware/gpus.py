"""GPU presets (``labs/presets/gpus.json``): each accelerator's datasheet figures, by id, and
the achieved kernel rates the op-level step model times kernels at (``KernelRates``: what
microbenchmarks measured on that GPU, each figure with its own source)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from labs.core.data import Presets, load
from labs.core.errors import LabInputError
from labs.core.limits import HOST_LINKS
from labs.core.validate import is_int as _is_int

# Host CPU vendors NCCL tells apart in its LL cap across nodes (tuning.cc llMaxBws).
HOST_CPUS = ("intel", "amd")


@dataclass(frozen=True)
class KernelRates:
    """What one GPU's kernels reach, measured (``labs.hardware.kernels`` times kernels at them).

    ``matmul_efficiency`` is the maximum achievable matmul FLOP/s at a full wave over the dense
    peak (MAMF, Bekman's mamf-finder), ``matmul_sustain`` what a GEMM keeps of it once the GPU
    is power-saturated (MSMF/MAMF), ``hbm_efficiency`` a copy kernel's bandwidth over the
    datasheet's. ``fp8_flops`` 0: no FP8 path modelled. ``sources`` names each figure's source."""

    hbm_bandwidth: float  # bytes/s, datasheet
    hbm_efficiency: float  # achieved copy bandwidth / datasheet
    sm_count: int  # streaming multiprocessors (compute units): wave quantisation
    matmul_efficiency: float  # 16-bit MAMF / dense peak
    matmul_sustain: float  # sustained (power-limited) / burst matmul rate
    fp8_flops: float = 0.0  # dense FP8 FLOP/s, datasheet (0: none)
    matmul_efficiency_fp8: float = 0.0  # FP8 MAMF / FP8 peak
    sources: tuple[tuple[str, str], ...] = ()  # (field, source)

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "sources":
                continue
            value = getattr(self, f.name)
            low = 0.0 if f.name in ("fp8_flops", "matmul_efficiency_fp8") else None
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                    math.isfinite(value) and (value >= 0 if low == 0.0 else value > 0)):
                raise LabInputError("gpu", f"kernel rate '{f.name}' must be a positive number")
        for name in ("hbm_efficiency", "matmul_efficiency", "matmul_sustain",
                     "matmul_efficiency_fp8"):
            if getattr(self, name) > 1:
                raise LabInputError("gpu", f"kernel rate '{name}' is a fraction, at most 1")
        if not _is_int(self.sm_count):
            raise LabInputError("gpu", "sm_count must be a whole number")
        missing = {f.name for f in fields(self)} - {"sources"} - dict(self.sources).keys()
        if self.fp8_flops == 0:
            missing -= {"fp8_flops", "matmul_efficiency_fp8"}
        if missing:
            raise LabInputError("gpu", "kernel rates without a source: "
                                       f"{', '.join(sorted(missing))}")

    @classmethod
    def from_data(cls, entry: dict) -> KernelRates:
        """From a preset's ``kernels`` object: each figure as ``{"value": x, "source": s}``."""
        if not isinstance(entry, dict):
            raise LabInputError("gpu", "kernels must be an object of {value, source} figures")
        values, sources = {}, []
        for name, figure in entry.items():
            if not isinstance(figure, dict) or set(figure) != {"value", "source"}:
                raise LabInputError("gpu", f"kernel rate '{name}' must be {{value, source}}")
            values[name] = figure["value"]
            sources.append((name, figure["source"]))
        try:
            return cls(**values, sources=tuple(sources))
        except TypeError as exc:
            raise LabInputError("gpu", f"unknown kernel rate in {sorted(values)}") from exc

    def source(self, name: str) -> str:
        return dict(self.sources)[name]


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
    # What the card carries (GiB, 2^30 B) and what CUDA gives a process of it
    # (torch.cuda.get_device_properties().total_memory; on ROCm torch.cuda.mem_get_info()'s
    # total), where known, with its source: ``capacity_note`` sets them beside
    # ``memory_bytes``, the datasheet's GB the lab budgets.
    card_memory_gib: float | None = None
    cuda_memory_gib: float | None = None
    cuda_memory_source: str = ""
    # The memory pool the driver lists (rocminfo's), where a tool a student runs prints a
    # figure other than the process's: ``capacity_note`` names it beside ``cuda_memory_gib``.
    driver_memory_gib: float | None = None
    driver_memory_source: str = ""
    # Achieved rates the op-level step model uses (labs.hardware.kernels); None: not measured,
    # so that GPU's kernels cannot be timed (every preset carries them).
    kernels: KernelRates | None = None
    # The GPU's link to host memory (labs/presets/links.json), what an offload or an async
    # checkpoint copy crosses, and its source (round-18 cold reading C, finding 3: every GPU
    # was given PCIe 5, the A100 and RTX 4090 included, which have PCIe 4.0).
    host_link: str = "pcie-5"
    host_link_source: str = ""
    # The vendor of the host CPUs its reference server ships with, and its source: current
    # NCCL caps the LL protocol's bandwidth across nodes by it (labs.hardware.nccl.ll_cap).
    host_cpu: str = "intel"
    host_cpu_source: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.kernels, dict):  # as written in gpus.json
            object.__setattr__(self, "kernels", KernelRates.from_data(self.kernels))
        for name in ("id", "name", "source"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise LabInputError("gpu", f"GPU field '{name}' must be a non-empty string")
        for name in ("memory_bytes", "bf16_flops", "scale_up_bandwidth", "network_bandwidth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise LabInputError("gpu", f"{self.id}: '{name}' must be a positive number")
        if not _is_int(self.scale_up_domain) or self.scale_up_domain < 1:
            raise LabInputError("gpu", f"{self.id}: scale_up_domain must be a whole number >= 1")
        if self.host_cpu not in HOST_CPUS:
            raise LabInputError("gpu", f"{self.id}: host_cpu must be one of "
                                       f"{', '.join(HOST_CPUS)}")
        if self.host_link not in HOST_LINKS:
            raise LabInputError("gpu", f"{self.id}: host_link must be one of "
                                       f"{', '.join(HOST_LINKS)}")


GPUS = Presets(lambda: load("gpus.json", GPUSpec), "gpu", "GPU")

GIB = 2 ** 30
# What an H100 SXM 80GB's driver reports (nvidia-smi's total, 79.6 GiB as the preset's
# memory_note says) against the 80e9 B the lab reads off the datasheet: EP01 steps 1 and 5
# say how far the lab's fit verdicts err, each way round (round-12 cold reading, finding 9);
# the HBM tip joins it to the card's 80 GiB (round-31 reading A, finding 9).
H100_DRIVER_MIB = 81_559
# What a GPU's memory holds beyond what the lab's ledger counts (labs/memory: "Not counted";
# labs.runs_log.lab.reserved_unlike lists the same for a run).
UNCOUNTED = ("the CUDA context, NCCL's buffers, temporary buffers, ZeRO-3's gathered layers "
             "and the allocator's fragmentation")
# Round-27 reading A, finding 8: on an AMD GPU the runtime is HIP (PyTorch keeps the torch.cuda
# name on ROCm) and the collectives' library RCCL.
ROCM_WORDS = {"CUDA gives": "HIP (ROCm) gives", "the CUDA context": "the HIP context",
              "NCCL's buffers": "RCCL's buffers"}


# What the two outside reserved usually take on an NVIDIA GPU (round-30 reading, finding 8: the
# capacity note said "strict unless" they take more than what is left, without saying what they
# take): a CUDA context about 300 MB since CUDA 11.7's lazy module loading, over 1,000 MB before
# (ptrblck, pytorch/pytorch issue 107667); an NCCL communicator 544 MB (2 GPUs) to 688 MB (more)
# after one all-reduce on 4 A100s over NVLink (NVIDIA/nccl issue 964), more with more channels
# (an H100's NVLink), and one for each process group a 3D run makes (issue 864: "more
# communicators = more memory used").
CUDA_CONTEXT_BYTES = 300e6
NCCL_COMMUNICATOR_BYTES = (544e6, 688e6)
USUALLY = (f"a CUDA context takes about {CUDA_CONTEXT_BYTES / 1e9:.1f} GB since CUDA 11.7's lazy "
           "loading, over 1 GB before (PyTorch issue 107667), and an NCCL communicator "
           f"{NCCL_COMMUNICATOR_BYTES[0] / 1e6:.0f} to {NCCL_COMMUNICATOR_BYTES[1] / 1e6:.0f} MB "
           "(NCCL issue 964: 4 A100s over NVLink), one for each of a 3D run's groups")


def runtime_words(gpu: GPUSpec, text: str) -> str:
    """``text`` in the GPU's own runtime's names: CUDA and NCCL, or on AMD HIP and RCCL."""
    if gpu.name.startswith("AMD "):
        for cuda, rocm in ROCM_WORDS.items():
            text = text.replace(cuda, rocm)
    return text


def capacity_note(gpu: GPUSpec, cuda_bytes: float | None = None, digits: int | None = None,
                  said: str = "", above: float | None = None) -> str:
    """The GB the lab budgets beside what the card carries and what CUDA gives a process
    (``cuda_bytes``: a log's figure, ``said`` where it comes from; else the preset's), every GB
    worked from the GiB, and which way the fit verdicts err (fixB item 1: the H100's 80 × 10^9
    B against CUDA's 79.1 GiB, 84.9 GB, went unsaid where a student meets them). Both ways
    (round-26 reading A, finding 2): the margin covers what the ledger leaves out only where
    that takes less; ``above`` is a run's reserved memory above the ledger, which says which."""
    budget = gpu.memory_bytes
    out = f"The lab budgets the {gpu.name} at {budget / 1e9:,.0f} GB (GB: 10⁹ B)"
    if gpu.card_memory_gib:
        out += (f"; the card has {gpu.card_memory_gib:g} GiB "
                f"({gpu.card_memory_gib * GIB / 1e9:,.1f} GB)")
    if cuda_bytes is None and gpu.cuda_memory_gib:
        cuda_bytes = gpu.cuda_memory_gib * GIB
        digits = digits or len(f"{gpu.cuda_memory_gib:g}".partition(".")[2])  # as the preset
        if gpu.driver_memory_gib:
            # fixT item 3: the MI300X's 191.45 GiB sat unexplained beside rocminfo's 191.98.
            said = (f"; {gpu.driver_memory_gib - gpu.cuda_memory_gib:.2f} GiB under the "
                    f"{gpu.driver_memory_gib:g} GiB pool rocminfo lists")
    if cuda_bytes is None:
        return runtime_words(gpu, out)
    out += (f", {'of which' if gpu.card_memory_gib else 'and'} CUDA gives the process "
            f"{cuda_bytes / GIB:,.{1 if digits is None else digits}f} GiB "
            f"({cuda_bytes / 1e9:,.1f} GB{said})")
    gap = cuda_bytes - budget
    run = ""
    if above is not None:
        # Round-27 reading A, findings 5 and 7: a run whose ledger is above reserved says so
        # that way round, and the context and the collectives' buffers lie outside reserved,
        # so reserved below the gap is strict only until they take the rest of it.
        held = (f"{above / 1e9:,.1f} GB of reserved above the ledger" if above >= 0 else
                f"the ledger {-above / 1e9:,.1f} GB above reserved")
        left = round(gap / 1e9, 1) - round(above / 1e9, 1)  # as the printed figures give it
        way = ("lenient" if above > gap else
               f"strict unless the CUDA context and NCCL's buffers, outside reserved, take "
               f"more than the {left:,.1f} GB left")
        run = f" (this run: {held}, so {way})"
        if above <= gap and not gpu.name.startswith("AMD "):
            # What they usually take, so the verdict is taught (the sources are NVIDIA's).
            least = CUDA_CONTEXT_BYTES + NCCL_COMMUNICATOR_BYTES[0]
            more = least > left * 1e9
            run += (f". They usually {'do' if more else 'take less'}: {USUALLY}; "
                    f"{least / 1e9:.2f} GB at least, so this run's verdict is most likely "
                    f"{'lenient' if more else 'strict'}")
    if gap >= 0:
        return runtime_words(gpu, (
            f"{out}. The ledger leaves out {UNCOUNTED}; the {gap / 1e9:,.1f} GB between is "
            "left for them: the lab's fit verdicts err strict where they take less, "
            f"lenient where they take more{run}"))
    return runtime_words(gpu, (
        f"{out}: {-gap / 1e9:,.1f} GB less than the lab budgets, before {UNCOUNTED}, so "
        "the lab's fit verdicts err lenient"))


def gpus() -> dict[str, GPUSpec]:
    """All GPU presets by id, in file order."""
    return GPUS.all()


def get_gpu(gpu_id: str) -> GPUSpec:
    return GPUS.get(gpu_id)
