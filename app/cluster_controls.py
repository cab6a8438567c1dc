"""The cluster and plan controls EP08's recipe, EP08's planner and EP12's playground share,
declared once: bounds, type and description as annotated types, each query restating only its
own default in place (``gpus_per_node: GpusPerNode = 8``).

Types, not a base class: pydantic puts a base class's fields first, so a shared base would
move these controls ahead of ``model`` and reorder every query's fields, its OpenAPI
parameters and its canonical URL (``model_dump`` in field order). The one exception is the
run's software, the same ten controls with the same defaults in the recipe's query and the
planner's: ``SoftwareControls``, a base listed first so that its fields keep their place (see
its docstring). The GPU control is ``app.model_controls.gpu_field``, shared by every lab with
a GPU.
"""

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from labs.core.limits import (
    MAX_DEGREE,
    MAX_GPUS_PER_NODE,
    MAX_JOB_NODES,
    MAX_MICRO_BATCH,
    MAX_MICROBATCHES,
    MAX_PLAN_GPUS,
    MAX_SEQ_LEN,
    MAX_STAGES,
    MAX_VIRTUAL,
    RECOMPUTE,
    TRAIN_RECIPES,
)
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link, links, own_fabric, ships_with
from labs.recipe.inputs import SOFTWARE
from labs.schedules.catalogue import SCHEDULES

# The link presets by where they run: inside a node (NVLink) or between nodes (InfiniBand).
INTRA = tuple(k for k, v in links().items() if v.kind == "scale-up")
INTER = tuple(k for k, v in links().items() if v.kind == "scale-out")

# The cluster. The inter-node link is a port per GPU: labs.hardware.links.make_cluster's default.
# The recipe and the planner take the same jobs: up to MAX_PLAN_GPUS GPUs (the recipe checks
# nodes x GPUs per node against it).
Nodes = Annotated[int, Field(ge=1, le=MAX_JOB_NODES, description="Nodes in the cluster.")]
GpusPerNode = Annotated[int, Field(ge=1, le=MAX_GPUS_PER_NODE, description="GPUs per node.")]
IntraLink = Annotated[Literal[INTRA], Field(description="Link inside a node.")]
InterLink = Annotated[Literal[INTER], Field(description="Link between nodes (a port per GPU).")]
SeqLen = Annotated[int, Field(ge=1, le=MAX_SEQ_LEN, description="Tokens per sequence.")]

# The plan's decisions (the data-parallel degree is each query's own: the recipe states the
# rule it must meet). Bounds from labs.core.limits, as labs.recipe.inputs.Plan checks them.
TensorParallel = Annotated[int, Field(ge=1, le=MAX_DEGREE, description="Tensor-parallel degree.")]
PipelineStages = Annotated[int, Field(ge=1, le=MAX_STAGES, description="Pipeline stages.")]
ContextParallel = Annotated[int, Field(ge=1, le=MAX_DEGREE,
                                       description="Context-parallel degree.")]
ExpertParallel = Annotated[int, Field(ge=1, le=MAX_DEGREE, description="Expert-parallel degree.")]
ZeroStage = Annotated[int, Field(ge=0, le=3, description="ZeRO stage (1 = distributed optimizer).")]
Recompute = Annotated[Literal[RECOMPUTE], Field(description="Activation recomputation.")]
# The precision recipe (labs.core.catalogue: mixed precision, 16-bit Adam or FP8, EP10): the
# ledger bills it, ZeRO-3 gathers its weights' bytes, and an FP8 recipe's linear layers run
# FP8 GEMMs with their casts (labs.recipe.inputs.Plan.fp8_gemms).
PrecisionRecipe = Annotated[Literal[TRAIN_RECIPES], Field(
    description="Precision recipe (GET /api/precision itemises each): memory and ZeRO-3's "
                "gathered bytes follow it; an FP8 recipe's linear layers are timed as FP8 "
                "GEMMs with their casts.")]
Schedule = Annotated[Literal[tuple(SCHEDULES)], Field(description="Pipeline schedule.")]
Virtual = Annotated[int, Field(ge=1, le=MAX_VIRTUAL, description="Model chunks per rank.")]
MicroBatch = Annotated[int, Field(ge=1, le=MAX_MICRO_BATCH,
                                  description="Sequences per micro-batch.")]
Microbatches = Annotated[int, Field(ge=1, le=MAX_MICROBATCHES,
                                    description="Micro-batches per step.")]

# The run's software (labs.recipe.inputs.SOFTWARE): what a published run's configuration sets,
# each query restating its default (Megatron Core's today) in place. The recipe times one plan
# with them; the planner times every candidate with them.
Attention = Annotated[Literal["auto", "unfused", "flash2", "flash3"], Field(
    description="Attention kernel: auto (the GPU's fastest fused one), unfused "
                "(Megatron 2021-22), flash2, flash3.")]
Dropout = Annotated[bool, Field(description="GPT-3-style hidden and attention dropout.")]
Fp8Layers = Annotated[bool, Field(description="FP8 linear layers (Transformer Engine).")]
SequenceParallel = Annotated[bool, Field(description="Sequence parallelism with TP > 1.")]
TpOverlap = Annotated[Literal["none", "backward", "all"], Field(
    description="TP collectives beside GEMMs: none, backward (Megatron's default), all "
                "(--tp-comm-overlap).")]
EpOverlap = Annotated[bool, Field(description="EP all-to-all beside another micro-batch's "
                                              "compute (DualPipe, Megatron's EP overlap).")]
EpDispatch = Annotated[Literal["alltoall", "deepep"], Field(
    description="How a MoE layer's tokens travel to their experts: alltoall (NCCL's "
                "all-to-all, a copy per routed expert: Megatron Core's alltoall dispatcher, "
                "torchtitan) or deepep (DeepEP's kernels: a copy per destination node over the "
                "network, forwarded on NVLink; Megatron Core's flex dispatcher, DeepSeek-V3).")]
DpOverlap = Annotated[bool, Field(description="Gradient buckets reduced during the last "
                                              "backward (false: after it).")]
FsdpPrefetch = Annotated[bool, Field(
    description="ZeRO-3 only: each layer's backward all-gather issued ahead, beside the layer "
                "before (FSDP2's default backward prefetch); false: at the layer's own "
                "pre-backward hook, so the layer waits for it (set_modules_to_backward_"
                "prefetch([]), FSDP1's backward_prefetch=None). The forward's gathers overlap "
                "either way (FSDP's implicit forward prefetching).")]
ReshardAfterForward = Annotated[bool, Field(
    description="ZeRO-3 only: free each layer's gathered weights after its forward (FSDP2's "
                "reshard_after_forward); false: keep them until its backward, which then "
                "gathers nothing, for every layer's whole weights in memory.")]
DpShard = Annotated[int, Field(
    ge=0, le=MAX_PLAN_GPUS,
    description="ZeRO-3 only: HSDP's shard degree, the data-parallel ranks each shard group "
                "spans (torchtitan's data_parallel_shard_degree; PyTorch FSDP2's fully_shard "
                "on a 2-D mesh, FSDP1's HYBRID_SHARD). It must divide DP; DP / dp_shard "
                "replicas each hold a full copy of the sharded state, and all-reduce their "
                "gradient shards across the replicas once a step. 0 (or DP): plain FSDP, "
                "sharded over all of DP.")]
GradAccumFusion = Annotated[bool, Field(description="Weight-gradient GEMMs accumulate into "
                                                    "fp32 main_grad.")]
Kernels = Annotated[Literal["fused", "compiled", "eager"], Field(
    description="The memory-bound ops' kernels and the stack around them: fused (Megatron "
                "Core / Transformer Engine: one kernel per norm, activation, rotary, "
                "bias-dropout-add), compiled (PyTorch with torch.compile: Inductor fuses each "
                "elementwise chain; SDPA's K and V copied to every query head) or eager "
                "(PyTorch eager as torchtitan runs it: every elementwise op its own kernel at "
                "HBM speed). The PyTorch ones shard ZeRO-3 with FSDP2, whose all-gather "
                "copy-out and reduce-scatter copy-in are timed too.")]


class SoftwareControls(BaseModel):
    """The run's software (labs.recipe.inputs.SOFTWARE), defaults Megatron Core's today: what
    a published run's configuration sets (tests/labs/test_step_time.py's 2021 runs). The
    recipe times its plan with them, the planner every candidate.

    A query lists it first among its bases, before a base holding the controls that come
    before these: pydantic orders fields by the reversed MRO, so the software lands after
    that base's fields and before the query's own, the order the query had when it declared
    them itself (its OpenAPI parameters and canonical URL unchanged)."""

    attention: Attention = "auto"
    dropout: Dropout = False
    fp8: Fp8Layers = False
    sequence_parallel: SequenceParallel = True
    tp_overlap: TpOverlap = "backward"
    ep_overlap: EpOverlap = False
    ep_dispatch: EpDispatch = "alltoall"
    dp_overlap: DpOverlap = True
    grad_accum_fusion: GradAccumFusion = True
    kernels: Kernels = "fused"

    def software(self) -> tuple[tuple[str, object], ...]:
        """The software settings (labs.recipe.inputs.SOFTWARE) as (field, value) pairs."""
        return tuple((name, getattr(self, name)) for name in SOFTWARE)


def off_defaults(query: BaseModel, names) -> dict:
    """``query``'s values of ``names`` that differ from their defaults: what a link carries
    (a page's URL leaves its defaults out)."""
    fields = type(query).model_fields
    return {n: getattr(query, n) for n in names if getattr(query, n) != fields[n].default}


class LinkFollowsGpu(BaseModel):
    """A scale-up link control left out follows the chosen GPU: asked for a B200 alone, a
    query whose default is the A100's NVLink 3 times the B200's own NVLink 5
    (``labs.hardware.links.own_fabric``), as the page's link select does when the GPU changes
    (``data-filter-by="gpu"``). A mismatched link the student gave is refused, naming both
    controls (``labs.hardware.links.check_pairing``), the default's own value included:
    ``gpu=h100-pcie&link=nvlink-4`` is a 422, never an answer for PCIe 5.0 (round-22 cold
    reading P, finding 2; pydantic's ``model_fields_set`` holds what was given). No fields:
    mixed in after a query's base, it leaves the field order alone. A query whose GPU is
    optional (EP02's) leaves its link alone when no GPU is chosen."""

    follow_gpu: ClassVar[tuple[str, ...]] = ("intra_link",)

    @model_validator(mode="after")
    def _link_follows_gpu(self):
        if self.gpu is None:
            return self
        gpu = get_gpu(self.gpu)
        fields = type(self).model_fields
        for name in self.follow_gpu:
            value = getattr(self, name)
            default = fields[name].default
            if (name in self.model_fields_set or value is None or value != default
                    or value not in links() or ships_with(gpu, get_link(value))):
                continue
            object.__setattr__(self, name, own_fabric(gpu))
        return self
