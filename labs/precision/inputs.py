"""EP10's shapes: what the precision lab is asked (``PrecisionInput``, every control checked
where it is built, in page order) and what it answers (``PrecisionResult``: the FP8 ledger
against BF16, each recipe's bytes per parameter, the fine-tuning bills, the offload).
``labs.precision.lab`` computes them, ``labs.precision.speed`` the step times."""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.catalogue import RECIPES, Recipe
from labs.core.errors import LabInputError
from labs.core.limits import (
    GPU_HOST_LINK,
    HOST_LINKS,
    MAX_GPUS_PER_NODE,
    MAX_LORA_RANK,
    MAX_MICROBATCHES,
    TRAIN_RECIPES,
)
from labs.core.validate import UNKNOWN_BARE, flag, number, one_of, whole
from labs.hardware.gpus import GPUSpec
from labs.memory.inputs import MemoryInput, MemoryResult, check_activation_controls
from labs.model.spec import ModelSpec

BASELINE = "adam16"  # what every recipe is drawn against: bf16 mixed-precision Adam
# The recipes a fine-tune's trainable weights may use: 16-bit GEMMs only.
FT_RECIPES = tuple(k for k in TRAIN_RECIPES if RECIPES[k].family == "bf16")
# LoRA's target modules, by the names PEFT's target_modules use for Llama-style layers.
MODULE_SETS = {
    "qv": ("q", "v"),  # LoRA (Hu et al. 2021) sec 7.1: Wq and Wv
    "attention": ("q", "k", "v", "o"),
    "mlp": ("gate", "up", "down"),
    "all": ("q", "k", "v", "o", "gate", "up", "down"),  # QLoRA sec 4: every linear layer
}
METHODS = ("full", "lora", "qlora")
# The fine-tune's bill, bottom first (labs.precision.finetune).
FT_KEYS = ("weights", "quant_constants", "dequant_workspace", "adapter_weights", "gradients",
           "master_weights", "optimizer_moments", "activations", "embedding_and_logits")
# The FP8 ledger's itemised bill, bottom first (labs.precision.lab.itemise).
LEDGER_KEYS = ("weights", "fp8_weights", "scaling_state", "gradients", "master_weights",
               "optimizer_moments", "activations_fp8", "activations", "embedding_and_logits")


@dataclass(frozen=True)
class PrecisionInput:
    model: ModelSpec
    gpu: GPUSpec
    recipe: str = "fp8-delayed"
    seq_len: int = 8192
    micro_batch: int = 1
    recompute: str = "selective"
    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 8
    ep: int = 1
    zero: int = 3
    # Micro-batches per step (gradient accumulation), as EP08 times a step: real runs take
    # 16 to 64 (Megatron-LM's --global-batch-size over micro-batch x DP), and the gradient
    # sync is paid once per step, behind the last backward.
    microbatches: int = 16
    # Fine-tuning (one GPU): the adapters' rank and modules, their recipe, paged optimizer.
    rank: int = 16
    modules: str = "qv"
    ft_recipe: str = "adam16"
    paged: bool = False
    # Activation offload: the share of saved activations sent to host memory, over host_link
    # (GPU_HOST_LINK: the GPU preset's own, PCIe 4.0 on an A100 or RTX 4090, PCIe 5 after).
    offload: float = 0.0
    host_link: str = GPU_HOST_LINK
    gpus_per_node: int = 8

    def __post_init__(self) -> None:  # one check per control, in page order
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset or a custom parameter count")
        if not isinstance(self.gpu, GPUSpec):
            raise LabInputError("gpu", "choose a GPU preset")
        one_of("recipe", self.recipe, TRAIN_RECIPES, "training recipe", UNKNOWN_BARE)
        check_activation_controls(self.seq_len, self.micro_batch, self.recompute, "classic")
        whole("microbatches", self.microbatches, 1, MAX_MICROBATCHES, "micro-batches per step")
        self.ledger_input()  # the ledger checks the layout, naming each degree's control
        whole("rank", self.rank, 1, MAX_LORA_RANK, "LoRA rank")
        one_of("modules", self.modules, MODULE_SETS, "module set", UNKNOWN_BARE)
        if self.ft_recipe not in FT_RECIPES:
            raise LabInputError("ft_recipe", "the trainable weights of a fine-tune use a "
                                             f"16-bit recipe: one of {', '.join(FT_RECIPES)}")
        flag("paged", self.paged, "paged optimizer")
        number("offload", self.offload, 0.0, 1.0, "the offloaded share")
        if self.host_link == GPU_HOST_LINK:
            object.__setattr__(self, "host_link", self.gpu.host_link)
        one_of("host_link", self.host_link, HOST_LINKS, "the host link")
        whole("gpus_per_node", self.gpus_per_node, 1, MAX_GPUS_PER_NODE, "GPUs per node")

    @property
    def recipe_record(self) -> Recipe:
        return RECIPES[self.recipe]

    @property
    def module_names(self) -> tuple[str, ...]:
        return MODULE_SETS[self.modules]

    def ledger_input(self, recipe: str | None = None) -> MemoryInput:
        """EP01's input for the FP8 ledger's layout, in ``recipe`` (default: the chosen)."""
        return MemoryInput(model=self.model, gpu=self.gpu, mode="train",
                           recipe=recipe or self.recipe, seq_len=self.seq_len,
                           micro_batch=self.micro_batch, recompute=self.recompute, tp=self.tp,
                           pp=self.pp, cp=self.cp, dp=self.dp, ep=self.ep, zero=self.zero,
                           microbatches=self.microbatches)


@dataclass(frozen=True)
class Ledger:
    """One recipe's bill on the heaviest GPU, itemised (keys in ``LEDGER_KEYS``)."""

    recipe: str
    memory: MemoryResult  # the ledger's own answer (labs.memory.lab.compute_memory)
    parts: dict[str, float]
    copies: tuple[tuple[str, float], ...]  # each low-precision weight copy's bytes

    @property
    def total_bytes(self) -> float:
        return self.memory.total_bytes


@dataclass(frozen=True)
class PerParam:
    """A recipe's bytes per parameter, by what holds them (the ``bytes`` diagram)."""

    recipe: str
    parts: tuple[tuple[str, float], ...]  # (what, bytes per parameter), bottom first

    @property
    def total(self) -> float:
        return sum(b for _, b in self.parts)


@dataclass(frozen=True)
class FineTune:
    """One fine-tuning method's bill on one GPU (keys in ``FT_KEYS``)."""

    method: str
    breakdown: dict[str, float]
    host_bytes: float  # paged out to host RAM
    trainable: int
    gpu_memory_bytes: float
    offloaded_bytes: float = 0.0  # saved activations offloaded to host RAM

    @property
    def total_bytes(self) -> float:
        return sum(self.breakdown.values())

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.gpu_memory_bytes


@dataclass(frozen=True)
class PaperCheck:
    """LoRA's own accounting (Hu et al. 2021): full fine-tuning keeps the weights and Adam's
    two moments in 16-bit, LoRA the frozen weights and its adapters' three copies."""

    trainable: int
    full_bytes: float
    lora_bytes: float
    checkpoint_bytes: float  # the adapters alone, in 16-bit

    @property
    def reduction(self) -> float:
        return self.full_bytes / self.lora_bytes


@dataclass(frozen=True)
class OffloadPoint:
    share: float
    copy_s: float  # one layer's saved activations over the host link, one micro-batch


@dataclass(frozen=True)
class Offload:
    """Saved activations moved to host memory while the next layers compute."""

    share: float
    link_name: str
    link_bandwidth: float
    activation_bytes: float  # saved activations on the heaviest GPU, before offload
    freed_bytes: float
    host_bytes_per_gpu: float
    host_bytes_per_node: float
    layer_bytes: float  # one layer's saved activations, one micro-batch
    copy_s: float  # their copy at the chosen share
    forward_s: float  # one layer's forward, one micro-batch: kernels + blocking collectives
    backward_s: float
    forward_kernels_s: float  # of forward_s, the kernels
    forward_comms_s: float  # and the collectives (TP, CP, EP) the pass waits for
    hidden_share: float  # the largest share the forward hides
    exposed_s: float  # per step
    points: tuple[OffloadPoint, ...]

    @property
    def hidden(self) -> bool:
        return self.copy_s <= self.forward_s


@dataclass(frozen=True)
class SpeedPart:
    name: str
    label: str
    bf16_s: float
    fp8_s: float
    why: str

    @property
    def saved_s(self) -> float:
        return self.bf16_s - self.fp8_s

    @property
    def sped_up(self) -> bool:
        return self.fp8_s < self.bf16_s * (1 - 1e-9)


@dataclass(frozen=True)
class SpeedResult:
    recipe: str
    timed: bool  # False: the step could not be timed (reason says why)
    fp8_path: bool  # the GPU runs this recipe's GEMMs in FP8
    reason: str  # why FP8 equals BF16 here, or why nothing was timed ("" otherwise)
    parts: tuple[SpeedPart, ...]
    bf16_step_s: float
    fp8_step_s: float
    bf16_mfu: float
    fp8_mfu: float
    tokens_per_step: int
    gpus: int
    notes: tuple[str, ...]
    dp_bytes: tuple[float, float] = (0.0, 0.0)  # DP / ZeRO bytes one GPU sends per step
    microbatches: int = 1  # per step, as EP08 times it
    global_batch: int = 0  # sequences per step

    @property
    def speedup(self) -> float:
        """BF16's step over the recipe's (1.25: 25% more tokens per second)."""
        return self.bf16_step_s / self.fp8_step_s if self.fp8_step_s else 1.0

    @property
    def bf16_tokens_per_gpu_s(self) -> float:
        return self.tokens_per_step / self.bf16_step_s / self.gpus if self.bf16_step_s else 0.0

    @property
    def fp8_tokens_per_gpu_s(self) -> float:
        return self.tokens_per_step / self.fp8_step_s / self.gpus if self.fp8_step_s else 0.0

    @property
    def unchanged(self) -> tuple[SpeedPart, ...]:
        """The parts that did not speed up (those that take time in BF16 or FP8)."""
        return tuple(p for p in self.parts if not p.sped_up and (p.bf16_s or p.fp8_s))

    def part(self, name: str) -> SpeedPart:
        return next(p for p in self.parts if p.name == name)

    def bf16_share(self, *names: str) -> float:
        """The named parts' share of the BF16 step (0 when nothing was timed)."""
        if not self.bf16_step_s:
            return 0.0
        return sum(p.bf16_s for p in self.parts if p.name in names) / self.bf16_step_s

    @property
    def linear_share(self) -> float:
        """The linear GEMMs' share of the BF16 step: all that FP8 runs faster."""
        return self.bf16_share("linear")

    @property
    def comm_share(self) -> float:
        """Exposed communication's share of the BF16 step (DP / ZeRO sync and the TP, CP, EP
        and pipeline traffic): no faster in FP8."""
        return self.bf16_share("zero", "comms")


@dataclass(frozen=True)
class PrecisionResult:
    input: PrecisionInput
    baseline: Ledger
    ledger: Ledger
    per_param: tuple[PerParam, ...]
    finetunes: tuple[FineTune, ...]  # full, LoRA, QLoRA
    paper: PaperCheck
    offload: Offload
    assumptions: tuple[str, ...]
    speed: SpeedResult | None = None  # what FP8 buys in time (labs.precision.speed)

    @property
    def extra_bytes(self) -> float:
        """The recipe's bill minus BF16's (negative: it saves)."""
        return self.ledger.total_bytes - self.baseline.total_bytes

    def finetune(self, method: str) -> FineTune:
        return next(f for f in self.finetunes if f.method == method)
