"""EP02's shapes: the data-parallel question (``DataParallelInput``, every control checked
where it is built, in page order) and its answer (``DataParallelResult``, one
``DataParallelPoint`` per GPU count and link). ``labs.data_parallel.lab`` computes them."""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.limits import DP_OVERLAPS as OVERLAPS
from labs.core.limits import DP_SCALINGS as SCALINGS
from labs.core.limits import MAX_DP_BUCKET_BYTES as MAX_BUCKET_BYTES
from labs.core.limits import MAX_DP_COMPUTE_S as MAX_COMPUTE_S
from labs.core.limits import MAX_DP_GLOBAL_BATCH as MAX_GLOBAL_BATCH
from labs.core.limits import MAX_DP_GPUS as MAX_GPUS
from labs.core.limits import MAX_DP_GRAD_BYTES as MAX_GRAD_BYTES
from labs.core.limits import MAX_MICRO_BATCH, MAX_MICROBATCHES, MAX_NICS_PER_NODE, MAX_SEQ_LEN
from labs.core.limits import MIN_DP_BUCKET_BYTES as MIN_BUCKET_BYTES
from labs.core.limits import MIN_DP_COMPUTE_S as MIN_COMPUTE_S
from labs.core.limits import MIN_DP_GRAD_BYTES as MIN_GRAD_BYTES
from labs.core.validate import WHOLE_PLAIN, number, one_of, whole
from labs.hardware.gpus import get_gpu
from labs.hardware.links import check_peer_link, get_link
from labs.memory.inputs import MemoryResult
from labs.model.spec import ModelSpec

# PyTorch DDP's default bucket_cap_mb=25, in MiB (bucket_bytes_cap = int(25 * 1024 * 1024)).
DDP_BUCKET_BYTES = 25 * 1024 * 1024


@dataclass(frozen=True)
class DataParallelInput:
    model: ModelSpec  # whose replica the ledger shows
    grad_bytes: float  # gradient bytes all-reduced per step (bf16: 2 x params)
    gpus: int = 8
    link: str = "nvlink-4"
    # The GPU preset id; None: the link's own (lab.timed_gpu: the H100 PCIe on PCIe, the H100
    # SXM on NVLink 4 and the networks). A GPU whose peers never talk over a scale-up link is
    # refused on it, as EP04 refuses it (labs.hardware.links.check_peer_link).
    gpu: str | None = None
    # An override (old links): weak, one GPU's step; strong, the global batch on 1 GPU.
    # None: computed from the tokens each GPU takes and the GPU's achieved rate (lab.py).
    compute_s: float | None = None
    scaling: str = "weak"
    overlap: str = "none"
    bucket_bytes: float = DDP_BUCKET_BYTES
    nics_per_node: int = 1
    global_batch: int = 1024  # sequences per step (strong scaling splits it N ways)
    seq_len: int = 4096  # tokens per sequence
    micro_batch: int = 4  # sequences per micro-batch, per GPU
    microbatches: int = 1  # micro-batches per step (gradient accumulation; weak scaling)

    def __post_init__(self) -> None:  # one check per control, in page order
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset or a gradient size")
        number("grad_bytes", self.grad_bytes, MIN_GRAD_BYTES, MAX_GRAD_BYTES, "gradient bytes")
        whole("gpus", self.gpus, 1, MAX_GPUS, "the GPU count", WHOLE_PLAIN)
        link = get_link(self.link)
        if self.gpu is not None:
            check_peer_link(get_gpu(self.gpu), link, "link")
        if link.kind == "scale-up" and link.domain and self.gpus > link.domain:
            # Round-17 cold reading, finding 1: NVLink 4 was drawn as one NVLS domain of
            # 1,024 H100s; an HGX board joins 8. Refused by both controls, as a GPU on a
            # fabric it never ships with is (labs.hardware.links.check_pairing).
            raise LabInputError("link", f"GPUs and link do not match: {link.name} joins at "
                                        f"most {link.domain} GPUs (one server), not "
                                        f"{self.gpus}. Choose {link.domain} GPUs or fewer, or "
                                        "InfiniBand or Ethernet to join servers.",
                                also=("gpus",))
        if self.compute_s is not None:
            number("compute_s", self.compute_s, MIN_COMPUTE_S, MAX_COMPUTE_S,
                   "compute seconds per step")
        one_of("scaling", self.scaling, SCALINGS, "scaling")
        one_of("overlap", self.overlap, OVERLAPS, "overlap")
        number("bucket_bytes", self.bucket_bytes, MIN_BUCKET_BYTES, MAX_BUCKET_BYTES,
               "the bucket size in bytes")
        whole("nics_per_node", self.nics_per_node, 1, MAX_NICS_PER_NODE,
              "network ports per server", WHOLE_PLAIN)
        whole("global_batch", self.global_batch, 1, MAX_GLOBAL_BATCH, "the global batch",
              WHOLE_PLAIN)
        whole("seq_len", self.seq_len, 1, MAX_SEQ_LEN, "the sequence length", WHOLE_PLAIN)
        whole("micro_batch", self.micro_batch, 1, MAX_MICRO_BATCH, "the micro-batch",
              WHOLE_PLAIN)
        whole("microbatches", self.microbatches, 1, MAX_MICROBATCHES,
              "the micro-batches per step", WHOLE_PLAIN)
        if self.scaling == "strong" and self.gpus > self.global_batch:
            raise LabInputError("gpus", f"a fixed global batch of {self.global_batch} sequences "
                                        f"gives at most {self.global_batch} GPUs one each "
                                        f"(got {self.gpus} GPUs)")


@dataclass(frozen=True)
class DataParallelPoint:
    """One GPU count on one link."""

    link: str
    gpu: str  # the GPU preset timed on it (lab.timed_gpu)
    gpus: int
    compute_s: float  # per GPU per step
    comm_s: float  # every all-reduce of the step, overlapped or not
    exposed_comm_s: float  # what the step waits for after compute
    overlapped_comm_s: float
    step_s: float
    speedup: float
    efficiency: float
    allreduce_bytes_per_gpu: float
    buckets: int
    algorithm: str
    bottleneck: str
    bucket_s: float  # one full bucket's all-reduce (the whole gradient's without overlap)
    bucket_algorithm: str  # NCCL's algorithm for it (labs.hardware.comm.CommCost.algorithm)
    bucket_across: str  # and for its part across servers ("ring", "tree"; "" inside one)
    # The window bucketed all-reduces hide behind (the last micro-batch's backward) and how far
    # into it the first bucket is full, when the all-reduce stream can start (0 without overlap).
    backward_s: float = 0.0
    first_bucket_fill_s: float = 0.0


@dataclass(frozen=True)
class ComputeToComm:
    """Compute against communication for the chosen state (``lab.compute_to_comm``): one
    GPU's step, 6·P FLOPs per token (Kaplan et al. 2020) at the GPU's achieved rate, against
    the whole gradient's all-reduce, and the tokens per GPU where the two are equal."""

    tokens_per_gpu: float  # per step: micro-batch x micro-batches x sequence (strong: B·s/N)
    global_batch_tokens: float  # every GPU's tokens in one step
    flops_per_gpu: float  # 6·P·tokens_per_gpu
    gpu: str  # the GPU preset timed (lab.timed_gpu)
    gpu_name: str
    peak_flops: float  # the GPU's dense bf16 datasheet FLOP/s
    achieved_share: float  # matmul_efficiency x matmul_sustain (the GPU preset's kernels)
    rate: float  # peak_flops x achieved_share, FLOP/s
    compute_s: float  # flops_per_gpu / rate (or the compute_s override)
    allreduce_s: float  # the whole gradient's all-reduce, one per step
    busbw: float  # bytes sent per GPU / allreduce_s: the bus bandwidth the all-reduce reaches
    crossover_tokens: float  # (2/3)·(D−1)/D·rate/busbw: compute = all-reduce (0 on 1 GPU)
    ratio: float  # compute_s / allreduce_s (inf on 1 GPU)
    sweep: tuple[tuple[float, float], ...]  # (tokens per GPU, compute s) for the chart


@dataclass(frozen=True)
class DataParallelResult:
    input: DataParallelInput
    point: DataParallelPoint
    curve: tuple[DataParallelPoint, ...]  # one per GPU count per link, N ≤ max_gpus
    curve_links: tuple[str, ...]
    max_gpus: int  # strong scaling: the global batch; weak: the axis' end
    replica: MemoryResult  # the EP01 ledger of one replica (what every GPU holds)
    # A scale-out link read as in the textbook: a port per GPU, one flat ring through all N.
    flat_ring: DataParallelPoint | None
    ratio: ComputeToComm
    assumptions: tuple[str, ...]
