"""The cluster and plan controls EP08's recipe, EP08's planner and EP10's playground share,
declared once: bounds, type and description as annotated types, each query restating only its
own default in place (``gpus_per_node: GpusPerNode = 8``).

Types, not a base class: pydantic puts a base class's fields first, so a shared base would
move these controls ahead of ``model`` and reorder every query's fields, its OpenAPI
parameters and its canonical URL (``model_dump`` in field order). The GPU control is
``app.model_controls.gpu_field``, shared by every lab with a GPU.
"""

from typing import Annotated, Literal

from pydantic import Field

from labs.core.limits import (
    MAX_DEGREE,
    MAX_GPUS_PER_NODE,
    MAX_JOB_NODES,
    MAX_MICRO_BATCH,
    MAX_MICROBATCHES,
    MAX_SEQ_LEN,
    MAX_STAGES,
    MAX_VIRTUAL,
    RECOMPUTE,
)
from labs.hardware.links import links
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
Schedule = Annotated[Literal[tuple(SCHEDULES)], Field(description="Pipeline schedule.")]
Virtual = Annotated[int, Field(ge=1, le=MAX_VIRTUAL, description="Model chunks per rank.")]
MicroBatch = Annotated[int, Field(ge=1, le=MAX_MICRO_BATCH,
                                  description="Sequences per micro-batch.")]
Microbatches = Annotated[int, Field(ge=1, le=MAX_MICROBATCHES,
                                    description="Micro-batches per step.")]
