"""EP05's page, its shapes: the schedule with the model it carries (``PipelineLabInput``) and
the answer (``PipelineLabResult``: the simulated schedule and, when the model fills the
stages, each rank's ``StageMemory``). ``labs.pipeline.lab`` computes them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.hardware.gpus import GPUSpec
from labs.hardware.links import Link, check_pairing
from labs.memory.inputs import MemoryResult
from labs.model.spec import ModelSpec
from labs.schedules.inputs import PipelineInput, PipelineResult


@dataclass(frozen=True)
class StageMemory:
    state_per_rank: tuple[float, ...]  # weights + gradients + master weights + moments
    unit_bytes_per_rank: tuple[float, ...]  # one micro-batch through one of a rank's chunks
    layers_per_rank: tuple[int, ...]
    activation_bytes: tuple[float, ...]  # per rank, at its measured peak (layers only)
    embedding_and_logits: tuple[float, ...]  # per rank: token ids/dropout mask, logits
    total_bytes: tuple[float, ...]  # per rank
    gpu_memory_bytes: float
    recipe_description: str
    ledger: MemoryResult

    @property
    def state_bytes(self) -> float:
        """The heaviest rank's state (per rank: ``state_per_rank``)."""
        return max(self.state_per_rank)

    @property
    def unit_bytes(self) -> float:
        """The largest activation unit of any rank (per rank: ``unit_bytes_per_rank``)."""
        return max(self.unit_bytes_per_rank)

    @property
    def layers_per_chunk(self) -> int:
        """Layers in the largest chunk of any rank."""
        chunks = self.ledger.input.pipeline_chunks
        return max(-(-layers // chunks) for layers in self.layers_per_rank)

    @property
    def fits(self) -> tuple[bool, ...]:
        return tuple(total <= self.gpu_memory_bytes for total in self.total_bytes)

    @property
    def worst_rank(self) -> int:
        return max(range(len(self.total_bytes)), key=self.total_bytes.__getitem__)


@dataclass(frozen=True)
class BackwardSplit:
    """One layer's passes on one GPU as the zero-bubble schedules split them (Qi et al. 2024,
    sec 2): F the forward, I the input gradient (every matrix's dX = dY·Wᵀ GEMM, attention's
    backward, which has no weights, and the memory-bound ops' backward), W the weight gradient
    (every matrix's dW = Xᵀ·dY GEMM alone); seconds, and the GEMMs' FLOPs, from the step
    model's kernels (``labs.pipeline.lab.backward_split``)."""

    forward_s: float
    input_grad_s: float
    weight_grad_s: float
    dgrad_gemm_s: float  # of input_grad_s, its GEMMs
    attention_backward_s: float  # of input_grad_s, the attention core's backward
    forward_gemm_flops: float  # each of the three passes' GEMMs runs this many FLOPs
    dgrad_flops: float
    wgrad_flops: float


@dataclass(frozen=True)
class ForwardParts:
    """The whole forward of one micro-batch as ``labs.pipeline.lab.forward_parts`` times it:
    for each kind of layer (dense, then MoE), how many, one layer's kernels and the blocking
    collectives it waits for; the embedding's forward, and the output layer's with the loss.
    EP05 step 4 prints f from them (round-22 cold reading Q, finding 11)."""

    layers: tuple[tuple[int, float, float], ...]  # (count, kernels s, exposed collectives s)
    embedding: float
    output: float  # the output layer and the loss

    @property
    def seconds(self) -> float:
        return math.fsum([n * (kernels + comms) for n, kernels, comms in self.layers]
                         + [self.embedding, self.output])


@dataclass(frozen=True)
class PipelineLabInput:
    """The pipeline page's whole state: a schedule to simulate and the model it carries."""

    pipeline: PipelineInput
    model: ModelSpec
    gpu: GPUSpec
    tp: int = 1
    recompute: str = "selective"
    seq_len: int = 4096
    micro_batch: int = 1
    recipe: str = "adam16"
    activation_model: str = "classic"
    # The link between neighbouring stages: with it (and no typed ``pipeline.p2p``), each send
    # costs its real size on that link, in units of one stage's forward (timed op by op,
    # ``labs.pipeline.lab.stage_forward_seconds``).
    link: Link | None = None

    def __post_init__(self) -> None:  # a send on a fabric the GPU never ships with is refused
        if self.link is not None and self.link.kind == "scale-up":
            check_pairing(self.gpu, self.link, "link")


@dataclass(frozen=True)
class PipelineLabResult:
    """The simulated schedule, and its per-rank memory when the model can fill the stages."""

    result: PipelineResult
    memory: StageMemory | None
    memory_note: str  # why ``memory`` is None
    memory_field: str = ""  # the canonical field of that reason ("pp", "virtual")
