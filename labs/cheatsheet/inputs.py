"""EP12's cheat sheet, its shapes: the worked example's input and one line of the sheet."""

from dataclasses import dataclass

from labs.core.errors import LabInputError
from labs.core.limits import (
    MAX_CHEAT_DEGREE,
    MAX_CHEAT_DP,
    MAX_CHEAT_MICRO_BATCH,
    MAX_CHEAT_MICROBATCHES,
    MAX_SEQ_LEN,
)
from labs.core.validate import WHOLE_BARE, whole
from labs.hardware.gpus import GPUSpec
from labs.hardware.links import Cluster, clusters, get_cluster
from labs.model.spec import ModelSpec


@dataclass(frozen=True)
class CheatInput:
    """The worked example's shared knobs: a model, a GPU, a sequence and a plan."""

    model: ModelSpec
    gpu: GPUSpec
    seq_len: int = 4096
    micro_batch: int = 1
    tp: int = 8
    pp: int = 4
    dp: int = 2
    cp: int = 2
    microbatches: int = 16

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset")
        if not isinstance(self.gpu, GPUSpec):
            raise LabInputError("gpu", "choose a GPU preset")
        for name, high in (("seq_len", MAX_SEQ_LEN), ("micro_batch", MAX_CHEAT_MICRO_BATCH),
                           ("tp", MAX_CHEAT_DEGREE), ("pp", MAX_CHEAT_DEGREE),
                           ("dp", MAX_CHEAT_DP), ("cp", MAX_CHEAT_DEGREE),
                           ("microbatches", MAX_CHEAT_MICROBATCHES)):
            whole(name, getattr(self, name), 1, high, name, WHOLE_BARE)

    @property
    def cluster(self) -> Cluster:
        """The GPU's node preset (labs/presets/clusters.json); DGX H100 for a GPU without one."""
        found = [c for c in clusters().values() if c.gpu.id == self.gpu.id]
        return found[0] if found else get_cluster("dgx-h100")

    @property
    def nodes(self) -> int:
        per = self.cluster.gpus_per_node
        return -(-self.tp * self.pp * self.cp * self.dp // per)


@dataclass(frozen=True)
class Term:
    symbol: str
    value: float
    unit: str  # bytes, s (shown in ms), duration (s, shown in its unit), flops, flop/s, B/s,
    # count, fraction, gain (a ratio to 3 places), or "" (a plain number)
    meaning: str


@dataclass(frozen=True)
class CheatLine:
    key: str
    episode: str  # EP01 ... EP09
    title: str
    formula: str
    source: str
    terms: tuple[Term, ...]
    result: Term | None  # None: the example's inputs break a rule of the lab (see note)
    note: str = ""
