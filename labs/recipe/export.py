"""A plan written out for three frameworks: Megatron-LM arguments, a DeepSpeed config and a
PyTorch FSDP2/DeviceMesh snippet. Each says the same degrees, batch sizes and ZeRO stage.

- Megatron-LM (megatron/training/arguments.py): TP and PP are flags
  (--tensor-model-parallel-size, --pipeline-model-parallel-size, with
  --context-parallel-size and --expert-model-parallel-size); DP is not a flag, it is what
  divides the rest of the launched world, and shows in --global-batch-size = micro-batch x
  micro-batches x DP. ZeRO-1 is --use-distributed-optimizer; ZeRO-2/3 are Megatron-FSDP's
  --data-parallel-sharding-strategy optim_grads / optim_grads_params. Interleaving is
  --num-layers-per-virtual-pipeline-stage. A recipe with bf16 gradients adds
  --grad-reduce-in-bf16 (Megatron's default keeps and reduces them in fp32). What each
  schedule writes (Megatron's flags, PyTorch's class) is its record's
  (``labs.schedules.catalogue``).
- DeepSpeed (deepspeed.ai/docs/config-json): the ZeRO stage is one value,
  zero_optimization.stage; train_batch_size = micro-batch x gradient_accumulation_steps x
  DP; AutoTP's degree sits under "tensor_parallel.autotp_size" (documented for TP x DP, so
  written only where PP = 1). The pipeline engine takes its grid from the model,
  PipelineModule(layers=..., topology=PipeModelDataParallelTopology(num_pp=PP, num_mp=TP,
  num_dp=DP)) (deepspeed/runtime/pipe/module.py, topology.py), which the export's notes write
  out; its "pipeline" section holds only the checkpoint interval, the one key of it the engine
  reads (the partition is the module's partition_method).
- Recomputation: each mode's record (``labs.core.recomputation``) holds its arguments; the
  layer-granular one's Megatron count is the block method's --recompute-num-layers, the first
  N layers of each model chunk (megatron/core/transformer/transformer_block.py,
  ``_checkpointed_forward``), set to half a chunk's layers and checked against the lab's
  count on every rank (torchtitan's, ``Recomputation.groups``).
- PyTorch FSDP2 (torch.distributed.fsdp.fully_shard) on a DeviceMesh
  (torch.distributed.device_mesh.init_device_mesh): sharding is one fully_shard call per
  transformer block (in place, no wrapper: FSDP1's was the wrapper);
  reshard_after_forward=True is ZeRO-3, False keeps the gathered weights between forward and
  backward (ZeRO-2); no sharding at all is DDP's replicate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from labs.core.catalogue import RECIPES
from labs.core.limits import EXPORT_FORMATS
from labs.core.recomputation import RECOMPUTATION
from labs.core.validate import one_of
from labs.model.spec import ModelSpec
from labs.recipe.inputs import Plan
from labs.schedules.catalogue import CATALOGUE, chunks_per_rank, piece
from labs.schedules.stages import piece_layer_counts, stage_params

FORMATS = EXPORT_FORMATS


@dataclass(frozen=True)
class Export:
    format: str
    text: str
    notes: tuple[str, ...]  # what the framework cannot say exactly as the plan does


def megatron(plan: Plan, model: ModelSpec) -> Export:
    notes = []
    args = [
        ("--tensor-model-parallel-size", plan.tp),
        ("--pipeline-model-parallel-size", plan.pp),
        ("--context-parallel-size", plan.cp),
        ("--expert-model-parallel-size", plan.ep),
        ("--micro-batch-size", plan.micro_batch),
        ("--global-batch-size", plan.global_batch),
        ("--seq-length", plan.seq_len),
        ("--num-layers", model.layers),
        ("--hidden-size", model.hidden),
        ("--ffn-hidden-size", model.ffn),
        ("--num-attention-heads", model.heads),
    ]
    flags = ["--bf16"]
    if model.kv_heads != model.heads and not model.uses_mla:
        flags.append("--group-query-attention")
        args.append(("--num-query-groups", model.kv_heads))
    if model.is_moe:
        args += [("--num-experts", model.experts), ("--moe-router-topk", model.top_k)]
    if plan.tp > 1 and plan.sequence_parallel:
        flags.append("--sequence-parallel")
    if plan.uneven and plan.pp > 1:
        args += [(f"--decoder-{where}-pipeline-num-layers", n) for where, n in (
            ("first", plan.first_stage_layers), ("last", plan.last_stage_layers)) if n]
    runs = CATALOGUE[plan.schedule].megatron  # "plain", "interleaved" or "" (not Megatron's)
    if runs == "interleaved" and plan.pp > 1 and plan.uneven:
        args.append(("--num-virtual-stages-per-pipeline-rank", plan.virtual))
        notes.append("uneven stages with virtual stages: where a stage's layers do not divide "
                     "by the chunks, Megatron needs the split spelled out with "
                     "--pipeline-model-parallel-layout")
    elif runs == "interleaved" and plan.pp > 1:
        args.append(("--num-layers-per-virtual-pipeline-stage",
                     model.layers // (plan.pp * plan.virtual)))
    elif not runs and plan.pp > 1:
        notes.append(f"Megatron-LM runs 1F1B or interleaved 1F1B; {plan.schedule} is not one "
                     "of its options, so it falls back to 1F1B")
    args += _megatron_recompute(plan, model, notes)
    flags += _megatron_grad_dtype(plan, notes)
    if plan.zero >= 1:
        flags += ["--use-distributed-optimizer", "--overlap-grad-reduce",
                  "--overlap-param-gather"]
    if plan.zero >= 2:
        flags.append("--use-megatron-fsdp")
        args.append(("--data-parallel-sharding-strategy",
                     "optim_grads" if plan.zero == 2 else "optim_grads_params"))
    elif plan.zero == 0 and plan.dp > 1:
        flags.append("--overlap-grad-reduce")
    lines = [f"  {k} {v}" for k, v in args] + [f"  {f}" for f in flags]
    world = plan.world_size
    head = (f"# {world} GPUs: DP = {world} / (TP x PP x CP) = {plan.dp}\n"
            "torchrun ... pretrain_gpt.py \\\n")
    return Export("megatron", head + " \\\n".join(lines) + "\n", tuple(notes))


def _megatron_grad_dtype(plan: Plan, notes: list[str]) -> list[str]:
    """The gradients' dtype as the recipe holds and reduces them (``RECIPES[...].gradients``,
    the bytes the lab's DP sync moves). Megatron-LM keeps its main gradients and reduces them
    in fp32 for bf16 training unless --grad-reduce-in-bf16 (megatron/training/arguments.py: a
    store_true flag; without it accumulate_allreduce_grads_in_fp32 is set), so a recipe with
    2-byte (bf16) gradients needs the flag; 4-byte (fp32) ones are the default."""
    grad_bytes = RECIPES[plan.recipe].gradients
    if grad_bytes == 2:
        return ["--grad-reduce-in-bf16"]
    if grad_bytes != 4:
        notes.append(f"the recipe holds {grad_bytes:g}-byte gradients; Megatron-LM reduces "
                     "them in fp32 or, with --grad-reduce-in-bf16, in bf16")
    return []


def _megatron_recompute(plan: Plan, model: ModelSpec, notes: list[str]) -> list:
    """The recomputation's arguments; a layer-granular mode's block count, N = half (1 /
    every) of the commonest chunk's layers, with a note naming the ranks where Megatron's
    first-N-of-each-chunk count differs from the lab's."""
    record = RECOMPUTATION[plan.recompute]
    args = list(record.megatron)
    if record.megatron_note:
        notes.append(record.megatron_note)
    if record.every == 1:
        return args
    chunks = chunks_per_rank(plan.schedule, plan.virtual) if plan.pp > 1 else 1
    pieces = piece_layer_counts(model.layers, plan.pp, chunks, plan.schedule,
                                plan.first_stage_layers, plan.last_stage_layers)
    n = max(set(pieces), key=lambda c: (pieces.count(c), c)) // record.every
    args.append(("--recompute-num-layers", n))
    stages = stage_params(model, plan.pp, plan.schedule, plan.virtual, plan.first_stage_layers,
                          plan.last_stage_layers)
    differ = []
    for sp in stages:
        held = [pieces[piece(plan.schedule, plan.pp, sp.rank, j)] if plan.pp > 1 else pieces[0]
                for j in range(chunks)]
        megatron_count = sum(min(n, c) for c in held)
        _, dense, moe = record.groups(sp.dense_layers, sp.moe_layers)[0]
        if megatron_count != dense + moe:
            differ.append(f"stage {sp.rank} {megatron_count} of {sp.layers} (the lab "
                          f"{dense + moe})")
    if differ:
        notes.append("--recompute-method block recomputes the first --recompute-num-layers "
                     "layers of each model chunk, so its count differs from the lab's (every "
                     f"{record.nth} layer of a rank, as torchtitan counts) on: "
                     + ", ".join(differ))
    return args


def deepspeed_pipeline_module(plan: Plan) -> str:
    """How DeepSpeed's pipeline engine is told the plan's grid: the model wrapped as a
    PipelineModule (deepspeed/runtime/pipe/module.py) given its topology and partition_method,
    whose activation_checkpoint_interval the config's "pipeline" section repeats. Round-26
    reading A, finding 1: with num_stages alone, PipelineModule builds
    PipeDataParallelTopology(num_pp=PP, num_dp=world // PP), counting the TP ranks as data
    parallel (TP8 x PP4 x DP2 became PP4 x DP16, and the engine's batch check fails); the
    explicit PipeModelDataParallelTopology(num_pp, num_mp, num_dp)
    (deepspeed/runtime/pipe/topology.py) names all three axes."""
    interval = RECOMPUTATION[plan.recompute].deepspeed_interval
    grid = (f"topology=PipeModelDataParallelTopology(num_pp={plan.pp}, num_mp={plan.tp}, "
            f"num_dp={plan.dp})" if plan.tp > 1 else f"num_stages={plan.pp}")
    return (f'model = PipelineModule(layers=..., {grid}, '
            f'partition_method="uniform", activation_checkpoint_interval={interval})')


# Round-26 reading A, finding 1: what the student must supply for TP under the pipeline engine.
PIPELINE_TP_NOTE = ("DeepSpeed documents AutoTP (tensor_parallel.autotp_size) for TP x DP "
                    "only, not with its pipeline engine, so this config leaves it out: the "
                    "TP{tp} that the topology's num_mp names must come from the model code's "
                    "own tensor-parallel layers and mpu (Megatron-DeepSpeed's way)")


def deepspeed(plan: Plan, model: ModelSpec) -> Export:
    notes = []
    config: dict = {
        "train_batch_size": plan.global_batch,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.microbatches,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": plan.zero, "overlap_comm": True,
                              "contiguous_gradients": True},
        # No "stages" and no "partition": the engine takes the degree and the partition from
        # the model's PipelineModule (the notes write it out); of this section it reads
        # activation_checkpoint_interval, overriding the module's where > 0
        # (deepspeed/runtime/pipe/engine.py; round-27 reading A, finding 10).
        "pipeline": {"activation_checkpoint_interval":
                     RECOMPUTATION[plan.recompute].deepspeed_interval},
        "gradient_clipping": 1.0,
    }
    if plan.pp == 1:  # AutoTP beside the pipeline engine is not documented (PIPELINE_TP_NOTE)
        config["tensor_parallel"] = {"autotp_size": plan.tp}
    if plan.zero == 3:
        config["zero_optimization"]["stage3_prefetch_bucket_size"] = model.hidden * model.hidden
    if RECOMPUTATION[plan.recompute].deepspeed_note:
        notes.append(RECOMPUTATION[plan.recompute].deepspeed_note)
    if plan.pp > 1:
        # Fix E, finding 4: the pipeline engine's degree is the model's, not the config's
        # (deepspeed/runtime/pipe/module.py: PipelineModule(layers, num_stages=...); the
        # engine reads its stages from the module's topology).
        notes.append(f"The pipeline degree is the model's, not this config's: "
                     f"{deepspeed_pipeline_module(plan)}")
        if plan.tp > 1:
            notes.append(PIPELINE_TP_NOTE.format(tp=plan.tp))
    if plan.pp > 1 and plan.zero > 1:
        notes.append("DeepSpeed's pipeline engine accepts ZeRO stage 0 or 1 only; "
                     f"stage {plan.zero} needs PP = 1")
    if plan.cp > 1:
        notes.append("DeepSpeed's sequence parallelism is Ulysses (all-to-all), not ring "
                     "context parallelism; the CP degree is not written here")
    if plan.ep > 1:
        notes.append("DeepSpeed-MoE sets ep_size on each MoE layer in the model code")
    return Export("deepspeed", json.dumps(config, indent=2) + "\n", tuple(notes))


def fsdp(plan: Plan, model: ModelSpec) -> Export:
    notes = []
    # HSDP: DP splits into (replicate, shard), replicas outermost (torchtitan's mesh order);
    # fully_shard on the 2-D dp mesh replicates across its 0th dim and shards across its 1st.
    dp_dims = [("dp_replicate", plan.replicas), ("dp_shard", plan.shard_degree)] \
        if plan.hybrid else [("dp", plan.dp)]
    dims = [("pp", plan.pp), *dp_dims, ("cp", plan.cp), ("tp", plan.tp)]
    shape = tuple(n for _, n in dims)
    names = tuple(k for k, _ in dims)
    dp_mesh = 'mesh["dp_replicate", "dp_shard"]' if plan.hybrid else 'mesh["dp"]'
    if plan.hybrid:
        notes.append(f"HSDP: {plan.replicas} replicas of {plan.shard_degree}-way FSDP; with "
                     "gradient accumulation, call model.set_requires_all_reduce(False) before "
                     "every micro-batch's backward but the last, as the lab times it (one "
                     "all-reduce across the replicas a step)")
    if plan.zero == 1:
        # Round-26 reading A, finding 10: PyTorch has ZeRO-1, outside FSDP2.
        notes.append("FSDP2 has no ZeRO-1: the nearest is ZeRO-2 "
                     "(reshard_after_forward=False), which also shards gradients; PyTorch's "
                     "ZeRO-1 is ZeroRedundancyOptimizer (torch.distributed.optim) over "
                     "replicate, which this snippet does not write")
    if plan.zero == 3 and not plan.fsdp_prefetch:
        notes.append("FSDP backward prefetch off: after fully_shard, call "
                     "block.set_modules_to_backward_prefetch([]) on every block, so each "
                     "block's backward all-gather is issued at its own pre-backward hook")
    record = CATALOGUE[plan.schedule]
    schedule = record.torch_class
    if record.torch_note:
        notes.append(record.torch_note)
    recompute = RECOMPUTATION[plan.recompute]
    if recompute.torchtitan:
        settings = ", ".join(f'{k} = "{v}"' for k, v in recompute.torchtitan)
        how = (f"wrap every {recompute.nth} block of stage.layers in checkpoint_wrapper "
               "(torch.distributed.algorithms._checkpoint.checkpoint_wrapper)"
               if recompute.every > 1 else
               "wrap every block of stage.layers in checkpoint_wrapper with a "
               "create_selective_checkpoint_contexts policy (torch.utils.checkpoint) that "
               "saves matmul, SDPA and reduce-scatter outputs but every 2nd matmul's")
        notes.append(f"{recompute.phrase}: torchtitan writes it as [activation_checkpoint] "
                     f"{settings}; this snippet checkpoints no block, so to match {how} "
                     "before fully_shard")
    if plan.tp > 1 and plan.sequence_parallel:
        notes.append("sequence parallelism (on in this plan; Megatron's --sequence-parallel): "
                     "this TP_PLAN leaves it out. torchtitan adds SequenceParallel() on the "
                     "norms and Shard(1) input and output layouts around the attention and "
                     "MLP blocks; without them every GPU of a TP group keeps the norms' and "
                     "dropouts' activations whole, more memory than the plan's")
    wrap = "replicate(block, device_mesh=dp_mesh)" if plan.zero == 0 else \
        "fully_shard(block, mesh=dp_mesh, reshard_after_forward=RESHARD_AFTER_FORWARD)"
    top = "replicate(stage, device_mesh=dp_mesh)" if plan.zero == 0 else \
        "fully_shard(stage, mesh=dp_mesh, reshard_after_forward=RESHARD_AFTER_FORWARD)"
    degrees = f"TP{plan.tp} x PP{plan.pp} x CP{plan.cp} x DP{plan.dp}"
    # Round-27 reading A, finding 9: the stage the script runs, which RESHARD_AFTER_FORWARD
    # reads (FSDP2 has no ZeRO-1; ZeRO-3 that keeps its gathered weights is ZeRO-2's memory),
    # only the wrapper it calls imported, and the MLP's own matrices (GELU two, SwiGLU three).
    runs = 0 if plan.zero == 0 else 3 if plan.zero == 3 and plan.reshard_after_forward else 2
    why = "" if runs == plan.zero else (
        "  # FSDP2's nearest to the plan's ZeRO-1 (notes)" if plan.zero == 1 else
        "  # the plan's ZeRO-3 keeping its gathered weights")
    wrapper = ("from torch.distributed._composable.replicate import replicate"
               if plan.zero == 0 else "from torch.distributed.fsdp import fully_shard")
    mlp = ('"feed_forward.w1": ColwiseParallel(), "feed_forward.w3": ColwiseParallel(),'
           if model.gated_mlp else '"feed_forward.w1": ColwiseParallel(),')
    text = f'''# {model.name}: {degrees} = {plan.world_size} GPUs
import torch
from torch.distributed.device_mesh import init_device_mesh
{wrapper}
from torch.distributed.pipelining import PipelineStage, {schedule}
from torch.distributed.tensor.parallel import (
    ColwiseParallel, RowwiseParallel, parallelize_module)

ZERO_STAGE = {runs}{why}
RESHARD_AFTER_FORWARD = ZERO_STAGE == 3
MICRO_BATCH = {plan.micro_batch}
MICROBATCHES = {plan.microbatches}
GLOBAL_BATCH = {plan.global_batch}
SEQ_LEN = {plan.seq_len}

# TP fastest (one node's GPUs), then CP, DP, PP: Megatron's rank order.
mesh = init_device_mesh("cuda", {shape!r}, mesh_dim_names={names!r})
tp_mesh, dp_mesh, pp_mesh = mesh["tp"], {dp_mesh}, mesh["pp"]

TP_PLAN = {{
    "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
    "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),
    {mlp}
    "feed_forward.w2": RowwiseParallel(),
}}


def build(stage: torch.nn.Module) -> torch.nn.Module:
    """stage: this pipeline rank's layers ({model.layers} // PP each)."""
    for block in stage.layers:
        if tp_mesh.size() > 1:
            parallelize_module(block, tp_mesh, TP_PLAN)
        {wrap}  # one call per transformer block (in place, no wrapper)
    {top}
    return stage


def pipeline(stage: torch.nn.Module, loss_fn):
    pipe = PipelineStage(stage, pp_mesh.get_local_rank(), pp_mesh.size(), torch.device("cuda"))
    return {schedule}(pipe, n_microbatches=MICROBATCHES, loss_fn=loss_fn)
'''
    return Export("fsdp", text, tuple(notes))


def export(plan: Plan, model: ModelSpec, fmt: str) -> Export:
    """The plan for ``fmt`` (one of FORMATS)."""
    one_of("format", fmt, FORMATS, "format")
    return {"megatron": megatron, "deepspeed": deepspeed, "fsdp": fsdp}[fmt](plan, model)
