"""The pipeline lab composed with the memory ledger: each rank's bill at its *measured* peak.

The pipeline simulator (``labs.schedules.simulate``) measures how many micro-batch-chunk activations
each rank holds at its peak. One such unit is one micro-batch through one model chunk of that
rank; the ledger (``labs.memory.lab``) supplies the rest of each rank's bill for the same state
(TP = t, PP = p, the same schedule and micro-batches): its weights, gradients, master weights
and Adam moments (the first rank also the embedding, the last the output head), and the
embedding and logits activations. The ledger's closed-form in-flight counts
(``labs.model.activations.in_flight``) equal the simulator's measured peaks; tests pin that.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.hardware.gpus import GPUSpec
from labs.hardware.links import Cluster, node_cluster
from labs.hardware.nccl import send_latency
from labs.memory.inputs import STATE_KEYS, MemoryInput
from labs.memory.lab import compute_memory
from labs.model.activations import layers_activation_bytes
from labs.model.head import head_ops
from labs.model.spec import ModelSpec
from labs.parallel.layer_time import Group, layer_time, weight_grad_seconds
from labs.pipeline.inputs import (
    BackwardSplit,
    ForwardParts,
    PipelineLabInput,
    PipelineLabResult,
    StageMemory,
)
from labs.schedules.inputs import PipelineInput, PipelineResult
from labs.schedules.simulate import simulate
from labs.schedules.stages import chunk_problems
from labs.schedules.wire import boundary_bytes

# Ledger fields whose errors mean "this model cannot fill this pipeline": the schedule still
# stands and the memory panel explains why it is absent.
PIPELINE_FIELDS = ("pp", "virtual")


def stage_memory(result: PipelineResult, model: ModelSpec, gpu: GPUSpec, *, tp: int = 1,
                 recompute: str = "selective", seq_len: int = 4096, micro_batch: int = 1,
                 recipe: str = "adam16", activation_model: str = "classic",
                 uneven_pp: bool | None = None) -> StageMemory:
    """The bill of every pipeline rank for ``result``'s measured activation peaks.

    ``uneven_pp`` None allows uneven stages whenever the layers do not divide (the pipeline
    page always shows them); errors name the ledger's canonical fields (``pp``, ``tp``).
    """
    pin = result.input
    p = pin.stages
    ledger = compute_memory(MemoryInput(
        model=model, gpu=gpu, recipe=recipe, seq_len=seq_len, micro_batch=micro_batch,
        recompute=recompute, tp=tp, pp=p, activation_model=activation_model,
        uneven_pp=model.layers % p != 0 if uneven_pp is None else uneven_pp,
        schedule=pin.schedule, microbatches=pin.microbatches, virtual=pin.virtual,
    ))
    sp = ledger.input.sequence_parallel
    chunks = pin.chunks
    check_chunks(ledger.stage_layers, chunks)
    states, units, acts, edges, totals = [], [], [], [], []
    for bill, peak in zip(ledger.stages, result.peak_activations, strict=True):
        rank_bytes = layers_activation_bytes(
            model, seq_len, micro_batch, tp, 1, recompute, sp=sp,
            activation_model=activation_model, dense_layers=bill.layers - bill.moe_layers,
            moe_layers=bill.moe_layers)
        unit = rank_bytes / chunks
        state = sum(bill.breakdown[k] for k in STATE_KEYS)
        edge = bill.breakdown["embedding_and_logits"]
        states.append(state)
        units.append(unit)
        acts.append(peak * unit)
        edges.append(edge)
        totals.append(state + peak * unit + edge)
    return StageMemory(
        state_per_rank=tuple(states), unit_bytes_per_rank=tuple(units),
        layers_per_rank=ledger.stage_layers, activation_bytes=tuple(acts),
        embedding_and_logits=tuple(edges), total_bytes=tuple(totals),
        gpu_memory_bytes=gpu.memory_bytes, recipe_description=ledger.recipe_description,
        ledger=ledger,
    )


def check_chunks(layers_per_rank: tuple[int, ...], chunks: int) -> None:
    """Refuse model chunks that do not split a rank's layers evenly, by the rule EP08's plans
    keep too (``labs.schedules.stages.chunk_problems``; round-18 cold reading of EP05, finding
    7: v = 4 on Llama 3.1 70B's 10 layers a rank priced chunks of 2.5 layers)."""
    for error in chunk_problems(layers_per_rank, chunks):
        raise error


def stage_forward_seconds(model: ModelSpec, gpu: GPUSpec, *, stages: int, tp: int,
                          seq_len: int, micro_batch: int) -> float:
    """Seconds one micro-batch's forward takes through one stage (what f stands for), from the
    step model's own kernels (``labs.parallel.layer_time``, as EP08 times a stage): every
    layer's GEMMs at their shape's achieved rate, the attention core at its kernel's published
    rate, the memory-bound ops at achieved HBM bandwidth and the forward's blocking TP
    collectives (sequence parallel with TP > 1, Megatron Core's default) on the GPU's node
    (``labs.hardware.links.node_cluster``), plus the embedding and the output layer and loss
    (``labs.model.head.head_ops``): the whole forward's share of one of the p stages.
    """
    return forward_parts(model, gpu, tp=tp, seq_len=seq_len,
                         micro_batch=micro_batch).seconds / stages


def forward_parts(model: ModelSpec, gpu: GPUSpec, *, tp: int, seq_len: int,
                  micro_batch: int) -> ForwardParts:
    """The whole forward ``stage_forward_seconds`` divides by the stages, by part: each kind
    of layer's kernels and the blocking TP collectives it waits for, the embedding, the
    output layer and loss."""
    return _forward_parts(model, node_cluster(gpu), tp, seq_len, micro_batch)


@lru_cache(maxsize=256)
def _forward_parts(model: ModelSpec, cluster: Cluster, tp: int, seq_len: int,
                   micro_batch: int) -> ForwardParts:
    kw = dict(tp=Group(tp, min(tp, cluster.gpus_per_node)), cp=Group(), ep=Group(),
              micro_batch=micro_batch, seq_len=seq_len, sp=tp > 1, recompute="none")
    layers = [(model.layers - model.moe_layers, layer_time(model, cluster, **kw))]
    if model.is_moe:
        layers.append((model.moe_layers, layer_time(model, cluster, moe=True, **kw)))
    head = head_ops(model, cluster.gpu, tp=tp, cp=1, micro_batch=micro_batch,
                    seq_len=seq_len, sp=tp > 1)
    return ForwardParts(tuple((n, lt.forward.compute, lt.forward.exposed) for n, lt in layers),
                        head.embedding_forward.seconds, head.output_forward.seconds)


@lru_cache(maxsize=16)
def backward_split(model: ModelSpec, gpu: GPUSpec, *, tp: int, seq_len: int,
                   micro_batch: int) -> BackwardSplit:
    """One dense layer's F, I and W on one GPU of the TP group, timed as ``forward_parts``
    times the forward (the step model's kernels, sequence parallel with TP > 1, on the GPU's
    node): why W is shorter than I (EP05 step 5). The two backward GEMMs of a matrix run the
    forward's FLOPs each, so their GEMMs match; I alone runs attention's backward and the
    memory-bound ops' (Qi et al. 2024 sec 2: B and W; the lesson writes I for B)."""
    cluster = node_cluster(gpu)
    lt = layer_time(model, cluster, tp=Group(tp, min(tp, cluster.gpus_per_node)), cp=Group(),
                    ep=Group(), micro_batch=micro_batch, seq_len=seq_len, sp=tp > 1,
                    recompute="none")
    fwd, bwd = lt.ops.forward.kernels, lt.ops.backward.kernels
    wgrad = [k for k in bwd if k.name.endswith(".wgrad")]
    rest = [k for k in bwd if not k.name.endswith(".wgrad")]
    dgrad = [k for k in rest if k.name.endswith(".dgrad")]
    return BackwardSplit(
        forward_s=math.fsum(k.seconds for k in fwd),
        input_grad_s=math.fsum(k.seconds for k in rest),
        weight_grad_s=weight_grad_seconds(lt),
        dgrad_gemm_s=math.fsum(k.seconds for k in dgrad),
        attention_backward_s=math.fsum(k.seconds for k in rest if k.kind == "attention"),
        forward_gemm_flops=math.fsum(k.flops for k in fwd if k.kind == "gemm"),
        dgrad_flops=math.fsum(k.flops for k in dgrad),
        wgrad_flops=math.fsum(k.flops for k in wgrad))


def on_link(inp: PipelineLabInput) -> PipelineInput:
    """The pipeline with its sends sized on ``inp.link`` (s·b·h·2/t bytes each way), priced by
    the lab's one send model (``labs.hardware.nccl.send_latency``, the p2p of ``nccl_time``
    that EP06-EP08 use): NCCL's Simple start-up and one network hop, then the bytes at the
    link's send rate (what NCCL reaches on it, EP02; round-20 cold reading Q, finding 3:
    until then EP05 left out the start-up)."""
    pipe = inp.pipeline
    if inp.link is None or pipe.p2p is not None:
        return pipe
    if inp.model.heads % inp.tp:  # the stage's layers are timed TP-split, heads whole per GPU
        raise LabInputError("tp", f"Timing the stages for the {inp.link.name} sends splits "
                                  f"attention by heads: {inp.model.heads} heads do not divide "
                                  f"by TP={inp.tp}", also=("link",))
    return replace(
        pipe,
        boundary_bytes=boundary_bytes(inp.seq_len, inp.micro_batch, inp.model.hidden, tp=inp.tp),
        link_bandwidth=inp.link.send_bandwidth, link_latency=send_latency(inp.link),
        forward_seconds=stage_forward_seconds(
            inp.model, inp.gpu, stages=pipe.stages, tp=inp.tp, seq_len=inp.seq_len,
            micro_batch=inp.micro_batch),
    )


def run_pipeline_lab(inp: PipelineLabInput) -> PipelineLabResult:
    """Simulate the schedule; add each rank's memory unless the model cannot fill it."""
    result = simulate(on_link(inp))
    try:
        memory = stage_memory(result, inp.model, inp.gpu, tp=inp.tp, recompute=inp.recompute,
                              seq_len=inp.seq_len, micro_batch=inp.micro_batch,
                              recipe=inp.recipe, activation_model=inp.activation_model)
    except LabInputError as exc:
        if exc.field not in PIPELINE_FIELDS:
            raise
        return PipelineLabResult(result, None, exc.message, exc.field)
    return PipelineLabResult(result, memory, "")
