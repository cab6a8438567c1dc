"""EP03's shapes: the sharding question (``ZeroInput``, every control checked where it is built,
in page order) and its answer (``ZeroResult``: the
memory bars, the traffic of each stage, recomputation and offload). ``labs.zero.lab``
computes them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.core.limits import (
    GPU_HOST_LINK,
    HOST_LINKS,
    MAX_DP,
    MAX_GPUS_PER_NODE,
    TRAIN_RECIPES,
    ZERO_STAGES,
)
from labs.core.validate import flag, one_of, whole
from labs.hardware.gpus import GPUSpec
from labs.hardware.links import Cluster, get_link, gpu_cluster, paired_cluster
from labs.memory.inputs import STATE_KEYS, MemoryResult, check_activation_controls
from labs.model.spec import ModelSpec
from labs.zero.deepspeed import DeepSpeedEstimate

# Host memory bandwidth of one node, bytes/s: a DGX H100 has two Intel Xeon Platinum 8480C
# (NVIDIA DGX H100 user guide), each with 8 channels of DDR5-4800 (Intel ARK: 307.2 GB/s a
# socket at 4,800 MT/s). Its 2 TB is 32 x 64 GB RDIMMs (NVIDIA's MLPerf Inference v3.1 system
# list, DGX_H100: "32x 64GB MTC40F2046S1RC48BA1"), two on each of the 16 channels, and with two
# DIMMs a channel Sapphire Rapids runs DDR5-4800 at 4,400 MT/s (Dell PowerEdge XE9680's memory
# matrix, the same CPUs: "4800 MT/s" at 1 DPC, "4400 MT/s" at 2 DPC; round-29 reading A,
# finding 4): 2 x 8 x 4,400 MT/s x 8 B = 563.2 GB/s. The peak: a STREAM-style kernel such as
# CPU Adam reaches less, so the lab's update is a lower bound.
HOST_SOCKETS, HOST_CHANNELS, HOST_DIMMS = 2, 8, 32  # 32 x 64 GB
HOST_RATED_MT_S, HOST_MT_S = 4800e6, 4400e6  # DDR5-4800; its rate at 2 DIMMs a channel
HOST_MEMORY_BANDWIDTH = HOST_SOCKETS * HOST_CHANNELS * HOST_MT_S * 8


@dataclass(frozen=True)
class ZeroInput:
    model: ModelSpec
    gpu: GPUSpec
    recipe: str = "adam16"
    dp: int = 32
    zero: int = 3
    offload: bool = False
    gpus_per_node: int = 8
    link: str = "ib-ndr"  # the link under test: scale-up inside a node or scale-out across
    seq_len: int = 4096
    micro_batch: int = 1
    recompute: str = "selective"
    host_link: str = GPU_HOST_LINK  # the GPU's link to host RAM, for offload (its preset's)
    host_memory_bandwidth: float = HOST_MEMORY_BANDWIDTH  # a node's host RAM, for CPU Adam
    activation_model: str = "classic"  # EP01's: Korthikanti's 34·s·b·h or Megatron's estimate

    def __post_init__(self) -> None:  # one check per control, in page order
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset or a custom parameter count")
        if not isinstance(self.gpu, GPUSpec):
            raise LabInputError("gpu", "choose a GPU preset")
        if self.recipe not in TRAIN_RECIPES:
            raise LabInputError("recipe", f"ZeRO shards training state: choose one of "
                                          f"{', '.join(TRAIN_RECIPES)} (got {self.recipe!r})")
        whole("dp", self.dp, 1, MAX_DP, "data parallel degree")
        if self.zero not in ZERO_STAGES:
            raise LabInputError("zero", f"ZeRO stage must be 0, 1, 2 or 3 (got {self.zero!r})")
        flag("offload", self.offload, "offload")
        whole("gpus_per_node", self.gpus_per_node, 1, MAX_GPUS_PER_NODE, "GPUs per node")
        if self.dp > self.gpus_per_node and self.dp % self.gpus_per_node:
            raise LabInputError("dp", f"{self.dp} GPUs do not fill whole nodes of "
                                      f"{self.gpus_per_node}: choose a multiple of "
                                      f"{self.gpus_per_node}")
        self.cluster  # noqa: B018 -- validates link and gpus_per_node against the link's domain
        check_activation_controls(self.seq_len, self.micro_batch, self.recompute,
                                  self.activation_model)
        if self.host_link == GPU_HOST_LINK:  # round-18 cold reading C, finding 3
            object.__setattr__(self, "host_link", self.gpu.host_link)
        one_of("host_link", self.host_link, HOST_LINKS, "the host link")
        if not (isinstance(self.host_memory_bandwidth, int | float)
                and self.host_memory_bandwidth > 0):
            raise LabInputError("host_memory_bandwidth",
                                "host memory bandwidth must be a positive number of bytes/s")

    @property
    def cluster(self) -> Cluster:
        """The GPU's node with the chosen link swapped in: a scale-out link joins the nodes,
        a scale-up link (NVLink, PCIe) joins the GPUs inside one (the GPU's own datasheet
        link takes the other place)."""
        return _cluster(self.gpu, self.gpus_per_node, self.link)

    @property
    def gpus_on_node(self) -> int:
        """GPUs of this job per node: a small job sits on one node."""
        return min(self.dp, self.gpus_per_node)

    @property
    def nodes(self) -> int:
        return max(1, self.dp // self.gpus_per_node)


@lru_cache(maxsize=64)
def _cluster(gpu: GPUSpec, gpus_per_node: int, link_id: str) -> Cluster:
    """``ZeroInput.cluster``, built once per (GPU, node size, link): a render asks it a few
    dozen times (bounded: the lab's GPUs x node sizes x links a class visits)."""
    own = gpu_cluster(gpu)
    link = get_link(link_id)
    intra, inter = (own.intra, link) if link.kind == "scale-out" else (link, own.inter)
    return paired_cluster(gpu, gpus_per_node, intra, inter, intra_field="link")


@dataclass(frozen=True)
class StageBar:
    """One bar of the memory chart: the ledger's bill at one DP degree and ZeRO stage."""

    dp: int
    zero: int
    breakdown: dict[str, float]
    total_bytes: float
    host_bytes: float  # per GPU, in host RAM (optimizer offload)

    @property
    def state_bytes(self) -> float:
        return sum(self.breakdown[k] for k in STATE_KEYS)


@dataclass(frozen=True)
class Transfer:
    collective: str
    moves: str
    phase: str  # "forward" | "backward": the pass it hides behind
    bytes_per_gpu: float
    seconds: float
    algorithm: str


@dataclass(frozen=True)
class TrafficRow:
    zero: int
    transfers: tuple[Transfer, ...]
    bytes_per_gpu: float
    seconds: float
    exposed_seconds: float

    @property
    def hidden_seconds(self) -> float:
        return self.seconds - self.exposed_seconds


@dataclass(frozen=True)
class RecomputeRow:
    recompute: str
    activation_bytes: float
    total_bytes: float
    compute_seconds: float
    extra_compute: float  # fraction over no recomputation with fused attention ("flash")
    fits: bool


@dataclass(frozen=True)
class OffloadPlan:
    """Optimizer offload for the chosen stage and DP degree, whether or not it is on."""

    gpu_bytes_without: float
    gpu_bytes_with: float
    breakdown_without: dict[str, float]
    breakdown_with: dict[str, float]
    host_bytes_per_gpu: float
    host_bytes_per_node: float
    pcie_down_bytes: float  # gradients to the host, per GPU per step
    pcie_up_bytes: float  # updated bf16 weights back
    pcie_seconds: float
    # CPU Adam on the node's host RAM: ADAM_HOST_BYTES per parameter of the rank's shard, the
    # node's ranks sharing its memory bandwidth (labs.zero.lab.offload_plan).
    adam_bytes: float  # host-memory traffic of one rank's update
    adam_seconds: float
    host_memory_bandwidth: float  # the node's, bytes/s
    exposed_seconds: float  # the update in the step: gradients' overrun + CPU Adam + upload
    # With ZeRO-Offload's one-step delayed parameter update the CPU Adam and the upload run
    # while the GPU computes the next step: only what outlasts that step's compute is exposed.
    delayed_exposed_seconds: float
    pcie_bandwidth: float
    download_hidden: bool  # the gradients reach the host within the backward pass


@dataclass(frozen=True)
class ZeroResult:
    input: ZeroInput
    params: int
    bytes_per_param: float
    ledger: MemoryResult  # the chosen plan's bill
    breakdown: dict[str, float]
    total_bytes: float
    state_bytes: float  # per GPU: weights + gradients + master + moments on the GPU
    gpu_memory_bytes: float
    fits: bool
    bars: tuple[StageBar, ...]
    traffic: tuple[TrafficRow, ...]  # one per ZeRO stage
    compute_seconds: float
    forward_seconds: float
    backward_seconds: float
    recompute: tuple[RecomputeRow, ...]
    offload: OffloadPlan
    host_bytes_per_node: float  # the chosen plan's (0 without offload)
    deepspeed: tuple[DeepSpeedEstimate, ...]  # stages 2 and 3
    cluster: Cluster

    @property
    def chosen_traffic(self) -> TrafficRow:
        return self.traffic[self.input.zero]

    @property
    def step_seconds(self) -> float:
        return self.compute_seconds + self.chosen_traffic.exposed_seconds + (
            self.offload.exposed_seconds if self.input.offload else 0.0)
