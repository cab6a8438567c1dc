"""GPU placement for RL training (EP09): training ranks and rollout engines on one cluster.

Composes the memory ledger (``labs.memory.lab``) for the training pool, ``labs.rl.serving`` for
the rollout engines and ``labs.parallel`` for the divisibility rules, then lays every GPU out by
role and times one step. Sources:
- placements as slime runs them (THUDM/slime docs, "Usage": --colocate puts training and
  rollout on the same GPUs and switches between them; without it --actor-num-gpus-per-node and
  --rollout-num-gpus reserve two pools; train_async.py overlaps them, one step off-policy);
- colocation: each phase offloads the other's state (torch_memory_saver frees SGLang's weights
  and KV; Megatron's weights, gradients and optimizer go to host memory), so a GPU needs
  about max(training, rollout) plus what survives the switch: TRANSITION_OVERHEAD;
- training: Megatron's distributed optimizer (slime sets use_distributed_optimizer, i.e.
  ZeRO-1 over DP x CP) with fp32 gradient accumulation (--accumulate-allreduce-grads-in-fp32,
  the ledger's 18-byte recipe); CPU Adam (--optimizer-cpu-offload) moves master weights and
  moments to host RAM; uneven stages when the layers do not divide by PP;
- prefill/decode disaggregation (Zhong et al. 2024, "DistServe", arXiv:2401.09670): the rollout
  pool splits into whole prefill engines and whole decode engines.
"""

from __future__ import annotations

import math

from labs.core.catalogue import RECIPES
from labs.core.limits import MAX_TRAIN_GPUS
from labs.memory.inputs import MemoryInput
from labs.memory.lab import HOST_GRAD_BYTES, compute_memory
from labs.model.flops import matmul_params
from labs.parallel.layout import ParallelLayout, problems
from labs.rl.cluster import engine_checks, gpu_roles, layout_checks
from labs.rl.inputs import Check, Phase, Pool, RLPlacementInput, RLPlacementResult
from labs.rl.serving import (
    EngineMemory,
    attention_groups,
    engine_memory,
    fp8_serving_weight_bytes,
    per_engine,
    serving_weight_parts,
)
from labs.rl.serving_time import (
    PREFILL_MFU,
    busiest_experts,
    decode_weight_bytes,
    experts_per_gpu,
    touched_expert_share,
)
from labs.rl.timeline import pd_parts, phases, rollout_parts, step_times
from labs.schedules.stages import stage_params

# What stays on a colocated GPU across the switch (our estimate): the sleeping process's CUDA
# context and NCCL communicators (~0.5 GB) and one weight-update bucket (slime's
# --update-weight-buffer-size default, 512 MB).
CONTEXT_BYTES = 0.5e9
UPDATE_BUCKET_BYTES = 0.5e9
TRANSITION_OVERHEAD = CONTEXT_BYTES + UPDATE_BUCKET_BYTES


def training_bill(inp: RLPlacementInput, gpus: int):
    """The ledger for ``gpus`` training GPUs at the recipe's degrees (None if broken)."""
    mp = inp.tp * inp.pp * inp.cp
    if gpus % mp or gpus % (inp.ep * inp.pp):
        return None
    dp = gpus // mp
    mem_in = dict(model=inp.model, gpu=inp.gpu, mode="train", recipe="adam18",
                  seq_len=inp.seq_len, micro_batch=1, recompute=inp.recompute, tp=inp.tp,
                  pp=inp.pp, cp=inp.cp, dp=dp, ep=inp.ep, zero=1, offload=inp.cpu_adam,
                  uneven_pp=inp.model.layers % inp.pp != 0, schedule="1f1b",
                  # 1F1B holds at most PP micro-batches in flight (Narayanan et al. 2021), so
                  # more than PP of them change no byte of the bill, only the simulation's cost.
                  microbatches=max(1, min(math.ceil(inp.samples / dp), inp.pp)))
    if problems(inp.model, ParallelLayout(tp=inp.tp, pp=inp.pp, cp=inp.cp, dp=dp, ep=inp.ep),
                seq_len=inp.seq_len, uneven_pp=True):
        return None
    return compute_memory(MemoryInput(**mem_in))


def rollout_pools(inp: RLPlacementInput) -> dict[str, tuple[int, EngineMemory]]:
    """Engines and per-GPU bill of each serving role."""
    ctx = inp.prompt_len + inp.response_len
    ext = inp.external_engines
    if inp.placement == "separate-pd":
        p = inp.prefill_count
        d = max(inp.engine_count - p, 0)
        return {"prefill": (p, engine_memory(inp.model, inp.engine_gpus,
                                             per_engine(inp.samples, p), inp.prompt_len,
                                             inp.kv_dtype, inp.serving)),
                "decode": (d, engine_memory(inp.model, inp.engine_gpus,
                                            per_engine(inp.samples, d + ext), ctx,
                                            inp.kv_dtype, inp.serving))}
    n = inp.engine_count
    return {"rollout": (n, engine_memory(inp.model, inp.engine_gpus,
                                         per_engine(inp.samples, n + ext), ctx, inp.kv_dtype,
                                         inp.serving))}


def _replicas(inp: RLPlacementInput, bill) -> dict:
    """The same degrees on twice the GPUs: DP doubles; what each GPU holds barely moves."""
    if bill is None:
        return {}
    double = training_bill(inp, 2 * inp.train_gpus) if 2 * inp.train_gpus <= MAX_TRAIN_GPUS \
        else None
    if double is None:
        return {}
    same = ("weights", "gradients", "activations", "embedding_and_logits")
    unchanged = all(abs(bill.breakdown[k] - double.breakdown[k]) < 1 for k in same)
    return {"gpus": 2 * inp.train_gpus, "dp": double.world_size // (inp.tp * inp.pp * inp.cp),
            "memory_per_gpu_bytes": double.total_bytes, "before_bytes": bill.total_bytes,
            "model_state_unchanged": unchanged,
            "freed_bytes": bill.total_bytes - double.total_bytes}


def _rollout_parts(inp: RLPlacementInput) -> dict:
    """The rollout's parts (EP09 step 5 derives its times from them): prefill, the fullest
    decode engine's weight reads (and the bytes one of its GPUs reads a step), cache reads and
    GEMMs, its requests, the chance its decode step visits a given routed expert, the routed
    experts of a layer a GPU holds, of them the busiest GPU's visits, and the GPUs holding
    distinct experts; with a prefill/decode split, the KV move too."""
    if inp.placement == "separate-pd":
        prefill, decode, kv_move, batch = pd_parts(inp)
        extra = {"kv_move_s": kv_move}
    else:
        prefill, decode = rollout_parts(inp)
        engines = inp.engine_count + inp.external_engines
        batch = per_engine(inp.samples, engines)
        # What the prefill's seconds are made of (EP09 step 5 derives them): 2 FLOPs per
        # matmul parameter per prompt token over every engine GPU at PREFILL_MFU.
        extra = {"prefill_matmul_params": matmul_params(inp.model),
                 "prefill_tokens": inp.samples * inp.prompt_len,
                 "prefill_gpus": engines * inp.engine_gpus, "prefill_mfu": PREFILL_MFU}
    read = decode_weight_bytes(inp.model, inp.engine_gpus, batch, inp.serving)
    return {"prefill_s": prefill, "decode_weights_s": decode.weights,
            "decode_weight_bytes": read,
            "decode_kv_s": decode.kv_cache, "decode_compute_s": decode.compute,
            "decode_requests": batch, "experts_touched": touched_expert_share(inp.model, batch),
            **_busiest(inp, batch), **extra}


def _busiest(inp: RLPlacementInput, batch: int) -> dict:
    """A MoE engine's experts per GPU and the busiest GPU's visits (``labs.rl.serving_time``)."""
    if not inp.model.is_moe:
        return {}
    n, g = experts_per_gpu(inp.model, inp.engine_gpus)
    return {"experts_per_gpu": n, "expert_gpus": g,
            "busiest_experts": busiest_experts(inp.model, inp.engine_gpus, batch)}


def compute_rl_placement(inp: RLPlacementInput) -> RLPlacementResult:
    """Pools, checks, the GPU map and a step's timeline for one RL placement."""
    bill = training_bill(inp, inp.train_gpus)
    serving = rollout_pools(inp)
    gpu_mem = inp.gpu.memory_bytes
    pools: list[Pool] = []
    train_bytes = bill.total_bytes if bill else None
    rollout_bytes = max(mem.total for _, mem in serving.values())
    colocated_bytes = None
    if inp.colocated:
        # Ideal phase offload: the larger phase plus what survives the switch.
        engines, mem = serving["rollout"]
        if train_bytes is not None:
            colocated_bytes = max(train_bytes, mem.total) + TRANSITION_OVERHEAD
        pools.append(Pool("colocated", inp.train_gpus,
                          colocated_bytes if colocated_bytes is not None else math.inf, gpu_mem,
                          {"training": train_bytes or 0.0, "rollout": mem.total,
                           "transition": TRANSITION_OVERHEAD},
                          bill.host_bytes if bill else 0.0, engines,
                          "max(training, rollout) + transition"))
    else:
        pools.append(Pool("training", inp.train_gpus,
                          train_bytes if train_bytes is not None else math.inf, gpu_mem,
                          dict(bill.breakdown) if bill else {},
                          bill.host_bytes if bill else 0.0))
        for role, (engines, mem) in serving.items():
            pools.append(Pool(role, engines * inp.engine_gpus, mem.total, gpu_mem,
                              mem.as_dict(), 0.0, engines,
                              f"{mem.concurrency} requests x {mem.context:,} tokens per engine"))
    checks = layout_checks(inp, bill) + engine_checks(inp)
    for pool in pools:
        checks.append(Check(f"{pool.role} memory fits", pool.fits,
                            f"{pool.memory_per_gpu_bytes / 1e9:.1f} GB of "
                            f"{gpu_mem / 1e9:.0f} GB per GPU" if bill or pool.role not in
                            ("training", "colocated") else "the layout does not divide"))
    replicas = _replicas(inp, bill)
    if replicas:
        checks.append(Check("more GPUs add replicas", replicas["model_state_unchanged"],
                            # No GB here: EP09 step 8 asks what comes free (the memory
                            # chart gives it once its 16-GPU link is followed).
                            f"{replicas['gpus']} GPUs at the same degrees: DP {replicas['dp']}, "
                            + ("fits" if replicas["memory_per_gpu_bytes"] <= gpu_mem
                               else "does not fit")))
    dp = inp.train_gpus // (inp.tp * inp.pp * inp.cp)
    fits = {p.role: p.fits for p in pools}
    gpus = gpu_roles(inp, dp if inp.train_gpus % (inp.tp * inp.pp * inp.cp) == 0 else 0,
                      fits, divides=bill is not None)
    # What a colocated switch moves: all the trainer holds that the engine does not, its
    # weights, fp32 gradients and whatever optimizer state sits on the GPU (none under CPU
    # Adam: that lives in host RAM). Activations are freed when training ends.
    held = ("weights", "gradients", "master_weights", "optimizer_moments")
    weights = bill.breakdown["weights"] if bill else 0.0
    gradients = bill.breakdown["gradients"] if bill else 0.0
    resident = sum(bill.breakdown[k] for k in held) if bill else 0.0
    times = step_times(inp, weights, resident, gradients)
    sync = times.weight_sync
    timeline = tuple(Phase(*row) for row in phases(inp.colocated, times))
    notes = []
    if inp.model.stand_in:
        notes.append(f"stand-in shape: {inp.model.notes}")
    if inp.external_engines:
        notes.append(f"{inp.external_engines} external engines of {inp.engine_gpus} GPUs take "
                     "their share of the requests; they are not drawn in the cluster")
    return RLPlacementResult(
        input=inp, checks=tuple(checks), pools=tuple(pools), gpus=gpus, timeline=timeline,
        rollout_seconds=times.rollout, train_seconds=times.train, sync_seconds=times.sync,
        sync_bytes_per_gpu=sync.bytes_per_gpu, sync_link=sync.link, sync_rate=sync.rate,
        sync_switch_seconds=sync.switch_seconds, sync_switch_bytes=sync.switch_bytes,
        sync_switch_link=sync.switch_link, sync_switch_rate=sync.switch_rate,
        rollout_parts=_rollout_parts(inp), train_parts=times.train_parts,
        step_seconds=times.step, samples_per_second=inp.samples / times.step, dp=dp,
        stage_layers=bill.stage_layers if bill else (), train_memory_bytes=train_bytes,
        rollout_memory_bytes=rollout_bytes, colocated_bytes=colocated_bytes,
        transition_overhead_bytes=TRANSITION_OVERHEAD, replicas=replicas,
        train_breakdown=dict(bill.breakdown) if bill else {},
        rollout_breakdown=max((mem for _, mem in serving.values()),
                              key=lambda mem: mem.total).as_dict(),
        serving_weights=_serving_weights(inp),
        train_stage=_train_stage(bill),
        notes=tuple(notes),
    )


def _serving_weights(inp: RLPlacementInput) -> dict:
    """One engine GPU's weights by part, the attention groups they come from (EP09 step 3
    derives its weights from them), and its bytes loaded from an FP8 release (None for an even
    split)."""
    groups, group = (attention_groups(inp.engine_gpus, inp.serving) if inp.model.is_moe
                     else (1, inp.engine_gpus))
    return {"attention_groups": groups, "group_gpus": group,
            "params": serving_weight_parts(inp.model, inp.engine_gpus, inp.serving),
            "fp8_bytes": fp8_serving_weight_bytes(inp.model, inp.engine_gpus, inp.serving)}


def _train_stage(bill) -> dict:
    """The heaviest training GPU's pipeline stage as the ledger counts it (EP09 step 3 derives
    its trainer's bill from it): its layers, and the parameters one of its GPUs holds, the
    routed experts over EP x expert-TP and the rest over TP (norms, routers and the like
    whole), with the groups the optimizer state is sharded over (DP x CP for the rest,
    expert-DP for the experts) and the host RAM CPU Adam keeps a parameter."""
    if bill is None:
        return {}
    inp = bill.input
    sp = stage_params(inp.model, inp.pp, inp.schedule, inp.virtual, inp.first_stage_layers,
                      inp.last_stage_layers)[bill.heaviest_stage]
    dense_group, expert_group = inp.shard_groups
    r = RECIPES[inp.recipe]
    return {"rank": sp.rank, "layers": sp.layers, "moe_layers": sp.moe_layers,
            "first": sp.first, "last": sp.last, "tp_split_params": sp.tp_split,
            "replicated_params": sp.replicated, "expert_params": sp.experts,
            "dense_params_per_gpu": sp.tp_split / inp.tp + sp.replicated,
            "expert_params_per_gpu": sp.experts / (inp.ep * inp.etp),
            "dense_shard": dense_group, "expert_shard": expert_group,
            # CPU Adam's host RAM a parameter: the fp32 master and moments, and the fp32
            # gradient copy the CPU's Adam reads (labs.memory.lab.HOST_GRAD_BYTES)
            "host_bytes_per_param": r.master_weights + r.optimizer_moments + HOST_GRAD_BYTES}
