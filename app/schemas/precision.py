"""EP10's JSON answer (GET /api/precision): the FP8 ledger against BF16, every recipe's bytes
per parameter, the fine-tuning bills, LoRA's own accounting and the activation offload."""

from pydantic import BaseModel, Field


class PrecisionCopy(BaseModel):
    what: str
    bytes: float = Field(description="Bytes of this weight copy per GPU.")


class PrecisionLedger(BaseModel):
    recipe: str
    label: str
    bytes_per_param: float
    total_bytes: float = Field(description="Bytes on the heaviest GPU.")
    fits: bool
    parts: dict[str, float] = Field(description="Bytes per GPU by what holds them.")
    copies: list[PrecisionCopy]


class PrecisionPart(BaseModel):
    what: str
    bytes_per_param: float


class PrecisionRecipe(BaseModel):
    id: str
    label: str
    family: str = Field(description="bf16 (16-bit GEMMs) or fp8.")
    bytes_per_param: float = Field(description="Summed from the formats of what it keeps.")
    parts: list[PrecisionPart]
    saved_input_bytes: float = Field(description="Bytes per element of a saved linear input.")
    formats: str
    scaling: str
    source: str


class PrecisionFineTune(BaseModel):
    method: str = Field(description="full, lora or qlora.")
    total_bytes: float = Field(description="Bytes on the one GPU.")
    breakdown: dict[str, float]
    host_bytes: float = Field(description="Optimizer state paged out to host RAM.")
    offloaded_bytes: float = Field(description="Saved activations offloaded to host RAM.")
    trainable_params: int
    fits: bool


class PrecisionPaper(BaseModel):
    trainable_params: int
    params_over_trainable: float
    full_bytes: float = Field(description="16-bit weights and two 16-bit Adam moments.")
    lora_bytes: float = Field(description="Frozen 16-bit weights and the adapters' three.")
    reduction: float
    checkpoint_bytes: float


class PrecisionOffloadPoint(BaseModel):
    share: float
    copy_s: float


class PrecisionOffload(BaseModel):
    share: float = Field(description="Share of the saved activations offloaded, 0 to 1.")
    link: str
    link_bandwidth: float = Field(description="Bytes/s per direction.")
    activation_bytes: float
    freed_bytes: float
    host_bytes_per_gpu: float
    host_bytes_per_node: float
    layer_bytes: float = Field(description="One layer's saved activations, one micro-batch.")
    copy_s: float
    forward_s: float = Field(description="One layer's forward, one micro-batch, as EP08's step "
                             "model times it: kernels and the collectives it waits for.")
    backward_s: float = Field(description="Its backward, recomputation included.")
    forward_kernels_s: float = Field(description="Of forward_s, the kernels.")
    forward_comms_s: float = Field(description="Of forward_s, the TP, CP and EP collectives.")
    hidden: bool
    hidden_share: float = Field(description="The largest share the forward hides.")
    exposed_s: float = Field(description="Copy time no compute hides, per step.")
    points: list[PrecisionOffloadPoint]


class PrecisionSpeedPart(BaseModel):
    name: str
    label: str
    bf16_s: float = Field(description="Seconds per step in BF16, on the slowest GPU.")
    fp8_s: float = Field(description="Seconds per step in the chosen recipe.")
    sped_up: bool
    why: str


class PrecisionSpeed(BaseModel):
    recipe: str
    timed: bool = Field(description="False: the step could not be timed (reason says why).")
    fp8_path: bool = Field(description="The GPU runs this recipe's GEMMs in FP8.")
    reason: str = Field(description="Why the recipe's step equals BF16's, or why nothing was "
                        "timed; empty otherwise.")
    microbatches: int = Field(description="Micro-batches per step (gradient accumulation), "
                              "as EP08 times the step.")
    global_batch: int = Field(description="Sequences per step: micro-batch x micro-batches x "
                              "DP.")
    linear_share: float = Field(description="The linear GEMMs' share of the BF16 step: what "
                                "FP8 can speed up.")
    comm_share: float = Field(description="Exposed communication's share of the BF16 step "
                              "(DP / ZeRO sync, TP, CP, EP and pipeline traffic): what FP8 "
                              "cannot.")
    bf16_step_s: float
    fp8_step_s: float
    speedup: float = Field(description="BF16's step over the recipe's.")
    bf16_mfu: float = Field(description="Model FLOPs over step x GPUs x the BF16 dense peak.")
    fp8_mfu: float = Field(description="The same, against the same BF16 peak.")
    bf16_tokens_per_gpu_s: float
    fp8_tokens_per_gpu_s: float
    dp_bytes: list[float] = Field(description="DP / ZeRO bytes one GPU sends per step, BF16 "
                                  "and the recipe.")
    unchanged: list[str] = Field(description="The parts that did not speed up.")
    parts: list[PrecisionSpeedPart]
    notes: list[str]


class PrecisionAnswer(BaseModel):
    model: str
    model_name: str
    gpu: str
    params: int
    gpu_memory_bytes: float
    ledger: PrecisionLedger
    baseline: PrecisionLedger
    extra_bytes: float = Field(description="The recipe's bill minus BF16's (negative: less).")
    recipes: list[PrecisionRecipe]
    finetune: list[PrecisionFineTune]
    rank: int
    modules: list[str]
    lora_paper: PrecisionPaper
    offload: PrecisionOffload
    speed: PrecisionSpeed
    assumptions: list[str]
