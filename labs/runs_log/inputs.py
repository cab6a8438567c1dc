"""The shapes of a read run: what the log measured (``Measured``), the plan it describes
(``ParsedRun``: an EP08 recipe state's controls), and the comparison with the lab's answer
(``Comparison``). Sizes are bytes, times seconds."""

from __future__ import annotations

from dataclasses import dataclass, field

from labs.model.spec import ModelSpec

MIB = 1024 * 1024  # Megatron's "MB": mega_bytes = 1024 * 1024 (megatron/training/utils.py)
GIB = 1024 ** 3  # torchtitan's GiB (torchtitan/components/metrics.py DeviceMemoryMonitor)

# The EP08 controls a log cannot state, with the value the page uses when it is not given:
# the cluster. Each one the log leaves out is named in ParsedRun.defaulted.
CLUSTER_DEFAULTS = {"gpu": "h100-sxm", "gpus_per_node": 8, "intra_link": "nvlink-4",
                    "inter_link": "ib-ndr"}
# A GPU's links when the log names the GPU (the recipe's presets of the same generation).
LINKS_OF_GPU = {"a100-80gb": ("nvlink-3", "ib-hdr"), "h100-sxm": ("nvlink-4", "ib-ndr"),
                "h800": ("nvlink-4-h800", "ib-ndr"), "h200": ("nvlink-4", "ib-ndr"),
                "b200": ("nvlink-5", "ib-xdr"), "mi300x": ("infinity-fabric-mi300x", "eth-400g"),
                "rtx-4090": ("pcie-4", "eth-100g")}


@dataclass(frozen=True)
class Measured:
    """What a run printed, per GPU. None: the log does not say."""

    step_s: float | None = None  # median over the logged iterations after the first
    steps: int = 0  # iteration lines the median is over
    tflops_per_gpu: float | None = None  # as the framework counts its FLOPs:
    # "hardware" (Megatron-DeepSpeed's TFLOPs: recomputation's extra forward counted) or
    # "model" (Megatron-LM's throughput per GPU and torchtitan's tflops: 6N + attention)
    tflops_counts: str = "model"
    tokens_per_s_per_gpu: float | None = None
    mfu: float | None = None  # torchtitan's, a fraction
    peak_allocated_bytes: float | None = None  # max over the ranks reported
    peak_reserved_bytes: float | None = None
    theory_state_bytes: float | None = None  # Megatron's weight and optimizer estimate
    theory_activation_bytes: float | None = None
    gpu_capacity_bytes: float | None = None  # torchtitan's device capacity line
    global_batch: int | None = None  # from the iteration lines


@dataclass(frozen=True)
class ParsedRun:
    """A log read into EP08's controls (``params``, strings as a URL carries them) and what it
    measured. ``defaulted``: (control, value, why) for each control the log does not give."""

    framework: str  # megatron, torchtitan, memory_stats
    model: ModelSpec | None
    params: tuple[tuple[str, str], ...]
    world_size: int
    measured: Measured
    defaulted: tuple[tuple[str, str, str], ...] = ()
    notes: tuple[str, ...] = ()
    found: tuple[str, ...] = field(default=())  # which kinds of lines were read

    @property
    def query(self) -> dict[str, str]:
        return dict(self.params)


@dataclass(frozen=True)
class Figure:
    """One quantity, measured and predicted, and their ratio (None if either is missing) in
    the validation page's convention: above 1, the lab is fast. A rate's ratio is lab /
    measured; a time's (``per_step``) is measured / lab; a size's is lab / measured (above 1,
    the lab counts more than the run held). ``derived``: how the measured figure was worked
    out when the log does not print it (empty: printed)."""

    name: str
    unit: str
    measured: float | None
    predicted: float | None
    per_step: bool = False
    derived: str = ""
    # Not like for like (the run's figure holds what the lab's does not count): no ratio, and
    # this sentence says what the run's holds beyond the lab's and which way they differ.
    unlike: str = ""
    # The log names no GPU, so the lab timed a guessed one: why the ratio is withheld (and the
    # measured figure too where it was worked out from that GPU's peak: the MFU). Empty: shown.
    withheld: str = ""

    @property
    def ratio_of(self) -> str:
        return "measured / lab" if self.per_step else "lab / measured"

    @property
    def ratio(self) -> float | None:
        if not self.measured or not self.predicted or self.unlike or self.withheld:
            return None
        if self.per_step:
            return self.measured / self.predicted
        return self.predicted / self.measured


@dataclass(frozen=True)
class Residual:
    """A named part of the gap between the lab's ledger and what the GPU held."""

    name: str
    bytes: float | None  # None: the log does not say
    detail: str


@dataclass(frozen=True)
class Comparison:
    figures: tuple[Figure, ...]
    residuals: tuple[Residual, ...]
    notes: tuple[str, ...]
    log_flops_per_token: float | None = None  # the log's TFLOP/s ÷ its tokens/s
    lab_flops_per_token: float | None = None  # the lab's, counted as the framework counts
    flops_counts_differ: bool = False  # the two apart by more than lab.FLOPS_TOLERANCE
    # The log's CUDA capacity beside the GB the lab budgets (labs.hardware.gpus.capacity_note);
    # empty where the log gives none.
    capacity: str = ""


@dataclass(frozen=True)
class TheoryActivations:
    """Megatron-LM's activation estimate for a plan, term by term, as
    ``compute_activation_memory`` counts it for the first pipeline stage (bytes per GPU, after
    its division by TP): ``layers``, every layer's s·b·h·(18 + 4·ffn/h) over all L layers (the
    first stage's PP micro-batches in flight of its L/PP layers); ``embedding``, the token ids
    (8·s·b) and the embedding's dropout mask (s·b·h) for PP micro-batches; ``output``, the
    output layer's inputs and the loss (PP = 1 only); both of the first two times ``factor``,
    the interleaved schedule's 1 + (PP − 1)/(PP·VPP) (or min(1, m/PP) without interleaving)."""

    coefficient: float  # bytes a token per unit of h a layer keeps: 18 + 4·ffn/h
    layer_loads: float  # L × factor: layers' worth of one micro-batch held
    factor: float
    layers: float
    embedding: float
    output: float

    @property
    def total(self) -> float:
        return self.layers + self.embedding + self.output
