"""One RL step in time (EP09): rollout, training and weight sync, per placement.

- Rollout: ``labs.rl.serving_time`` (prefill compute-bound, decode bound by HBM reads); with a
  prefill/decode split the two pools work as a pipeline, so the slower one sets the pace
  (DistServe, arXiv:2401.09670), plus moving the prompts' KV cache over the network once, at
  the network's achieved send rate (busBW, as the weight sync below).
- Training: EP08's step model (``labs.recipe``: the training layout's kernels op by op, its
  collectives as NCCL runs them, the bubble, DP and the optimizer) for the samples as one
  global batch of one sequence per micro-batch, plus one forward for the log-probabilities of
  the samples (a forward's FLOPs a token, 2·N and a third of the attention core, on top of the
  step's hardware FLOPs, both from ``labs.model.flops``; slime recomputes them before the
  update), and where the recipe runs a KL loss against a reference model (``ref_model``:
  slime's --use-kl-loss, even at --kl-loss-coef 0) that forward again under the reference's
  weights: slime's train.py keeps a reference whenever ``args.kl_coef != 0 or
  args.use_kl_loss``, and its actor's train_actor (THUDM/slime 028e290,
  slime/backends/megatron_utils/actor.py) restores the reference's weights from their host
  backup, runs ``compute_log_prob(..., store_prefix="ref_")``, then restores the actor's: two
  copies of the rank's bf16 weights over PCIe (``ref_swap_s``); a layout the recipe refuses
  is timed at TRAIN_MFU of the peak (an
  estimate, said in the notes); CPU Adam adds the trip of each rank's gradients down
  (fp32, as the bill keeps them) and bf16 weights up over PCIe (slime overlaps part of
  it: --overlap-cpu-optimizer-d2h-h2d; counted whole here, an upper bound).
- Weight sync: bf16 weights, 2 B x params, at NCCL's bus bandwidth (busBW, the achieved
  rate EP02 teaches: ``Link.ring_busbw``), never the datasheet's. Colocated (slime's update
  through CUDA IPC): each GPU all-gathers its pipeline stage's weights over NVLink, counted
  whole at the scale-up link's busBW (an all-gather over N GPUs moves (N-1)/N of them: the
  lab errs slow by 1/N), then the engine on the same GPU maps them. A step switches phases
  twice, and each switch crosses PCIe at its datasheet rate (no NCCL there); the gather's
  link is named after the node's own scale-up link (NVLink, or PCIe for an H100 PCIe
  server: ``labs.hardware.links.peer_links``). slime's train.py
  (THUDM/slime 005bd1a, with --offload) offloads the trainer's weights and gradients to host
  after training (actor_model.offload()) and wakes them back before the next training; the
  engine's weights are not kept (rollout_manager.offload() releases them after the rollout,
  onload(WEIGHTS) allocates them again and update_weights refills them: the gather above), so
  a step copies the trainer's state down and up, twice its bytes. Separate pools (NCCL
  broadcast from the trainer to every engine): each rollout GPU receives all 2 B x params over
  its network port at that port's busBW (for a broadcast NCCL's busBW equals its algorithm
  bandwidth: NCCL's doc/PERFORMANCE.md), InfiniBand NDR's 48 of 50 GB/s on an H100.
- Steps: colocated runs rollout, train, sync in turn; separate pools overlap rollout k+1 with
  training k (slime's train_async.py: one step off-policy), and the sync waits for both, so a
  step takes max(rollout, train) + sync.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from labs.core.errors import LabInputError
from labs.hardware.kernels import matmul_rate
from labs.hardware.links import get_link, gpu_cluster, make_cluster, peer_links
from labs.model.flops import (
    forward_flops_per_token,
    hardware_flops_per_token,
    layer_matmul_params,
    matmul_params,
)
from labs.recipe.inputs import Plan, RecipeResult
from labs.recipe.lab import evaluate
from labs.rl.recipes import memory_bandwidth
from labs.rl.serving import WEIGHT_BYTES, kv_bytes_per_token, per_engine
from labs.rl.serving_time import DecodeParts, decode_parts, prefill_seconds
from labs.schedules.stages import stage_layer_counts, uneven_split

TRAIN_MFU = 0.35  # estimate, only for layouts EP08's recipe refuses
PCIE_LINK = "pcie-5"  # host <-> GPU (labs/presets/links.json)
STEPS_DRAWN = 3


@dataclass(frozen=True)
class SyncTimes:
    """One weight update (``sync_seconds``)."""

    seconds: float
    bytes_per_gpu: float  # what each receiving GPU takes in
    link: str
    rate: float  # bytes/s those bytes move at (the link's busBW)
    switch_seconds: float = 0.0  # colocated: a step's two switches over PCIe, in ``seconds``
    # colocated: the trainer's state copied down after training and up before the next
    switch_bytes: tuple[float, float] = (0.0, 0.0)
    switch_link: str = ""  # colocated: the PCIe link's name (PCIE_LINK's preset)
    switch_rate: float = 0.0  # colocated: bytes/s of that switch, PCIE_LINK's datasheet rate


@dataclass(frozen=True)
class StepTimes:
    rollout: float
    train: float
    weight_sync: SyncTimes
    step: float
    train_parts: dict | None = None  # the training's parts (train_parts)

    @property
    def sync(self) -> float:
        return self.weight_sync.seconds


def rollout_seconds(inp) -> float:
    if inp.placement == "separate-pd":
        prefill, decode, kv_move, _ = pd_parts(inp)
        return max(prefill, decode.seconds) + kv_move
    prefill, decode = rollout_parts(inp)
    return prefill + decode.seconds


def pd_parts(inp) -> tuple[float, DecodeParts, float, int]:
    """A prefill/decode split (EP09 step 5): (seconds the prefill engines take over every
    prompt, the fullest decode engine's parts, seconds moving the prompts' KV cache to the
    decode engines, requests per decode engine). The two pools run as a pipeline, so the
    rollout takes max(prefill, decode) + the move."""
    m, g, e = inp.model, inp.gpu, inp.engine_gpus
    p = inp.prefill_count
    d = max(inp.engine_count - p, 1)
    batch = per_engine(inp.samples, d + inp.external_engines)
    prefill = prefill_seconds(m, g, inp.samples * inp.prompt_len, p * e)
    decode = decode_parts(m, g, memory_bandwidth(g), e, batch, inp.prompt_len,
                          inp.response_len, inp.kv_dtype, inp.serving)
    kv_move = (inp.samples * inp.prompt_len * kv_bytes_per_token(m, inp.kv_dtype)
               / (p * e * gpu_cluster(g).inter.send_bandwidth))
    return prefill, decode, kv_move, batch


def rollout_parts(inp) -> tuple[float, DecodeParts]:
    """(prefill seconds, the fullest engine's decode parts) where every engine prefills and
    decodes its own requests (colocated and separate pools; EP09 step 6 quotes them)."""
    m, g, e = inp.model, inp.gpu, inp.engine_gpus
    n = inp.engine_count + inp.external_engines
    prefill = prefill_seconds(m, g, inp.samples * inp.prompt_len, n * e)
    return prefill, decode_parts(m, g, memory_bandwidth(g), e, per_engine(inp.samples, n),
                                 inp.prompt_len, inp.response_len, inp.kv_dtype, inp.serving)


def _uneven(inp) -> tuple[int, int]:
    """Megatron's uneven first and last stages where the layers do not divide (as EP08's
    planner takes them: labs.schedules.stages.uneven_split); (0, 0): even."""
    return (uneven_split(inp.model.layers, inp.pp) or (0, 0)) \
        if inp.model.layers % inp.pp else (0, 0)


def train_step(inp) -> RecipeResult | None:
    """EP08's evaluation of the training layout for one update over the samples (None when
    the recipe's rules refuse the layout on the GPU's own nodes)."""
    g = min(inp.gpu.scale_up_domain, inp.train_gpus)
    share = inp.tp * inp.pp * inp.cp
    if inp.train_gpus % g or inp.train_gpus % share:
        return None
    own = gpu_cluster(inp.gpu)
    cluster = make_cluster(inp.gpu, g, replace(own.intra, domain=None), own.inter)
    dp = inp.train_gpus // share
    first, last = _uneven(inp)
    try:
        plan = Plan(tp=inp.tp, pp=inp.pp, cp=inp.cp, ep=inp.ep, dp=dp, zero=1,
                    recompute=inp.recompute, micro_batch=1,
                    microbatches=max(1, -(-inp.samples // dp)), seq_len=inp.seq_len,
                    first_stage_layers=first, last_stage_layers=last)
    except LabInputError:
        return None
    r = evaluate(plan, inp.model, cluster, inp.train_gpus // g)
    return r if r.legal else None


def train_parts(inp, weights_per_gpu: float, gradients_per_gpu: float | None = None) -> dict:
    """The training phase's parts (EP09 steps 2 and 6 derive its time from them): EP08's step
    for the samples' tokens (``step_s``, its bar's ``segments`` scaled alike, on the plan's
    ``microbatches`` of one ``seq_len`` sequence each; 0 and none where the recipe refuses the
    layout, timed at TRAIN_MFU instead: ``estimated``), ``log_prob`` the factor the
    log-probability forward adds (its FLOPs a token over the step's hardware FLOPs a token,
    which are ``flops_per_param``·N: 6N, ``recompute_per_param``·N for a recomputed forward's
    matmuls, and ``attention_per_param``·N of attention; the forward adds
    ``forward_per_param``·N, 2N and ``forward_attention_per_param``·N of attention),
    ``compute_s`` the two together (``forwards`` of them with a reference model, 1 without:
    ``log_prob`` counts each), ``offload_s`` CPU Adam's PCIe trip at ``offload_rate`` (0
    without it) and ``ref_swap_s`` the reference's weights swapped in and the actor's back,
    2 x ``ref_swap_bytes`` at ``ref_swap_rate`` (0 without a reference); ``seconds`` =
    compute_s + offload_s + ref_swap_s. ``matmul_params`` is N, ``layer_params`` the
    layers' share of it (what a recomputed forward runs again)."""
    m, g = inp.model, inp.gpu
    tokens = inp.samples * (inp.prompt_len + inp.response_len)
    hardware = hardware_flops_per_token(m, inp.seq_len, inp.recompute,
                                        stage_layer_counts(m.layers, inp.pp, *_uneven(inp)))
    n = matmul_params(m)
    # The step's attention: its hardware FLOPs less the same step's at no sequence (the
    # attention core is linear in the sequence, the matmuls do not depend on it).
    attention = hardware - hardware_flops_per_token(
        m, 0, inp.recompute, stage_layer_counts(m.layers, inp.pp, *_uneven(inp)))
    forward = forward_flops_per_token(m, inp.seq_len)
    # The old policy's log-probabilities, and with a KL loss the reference model's too.
    forwards = 2 if inp.ref_model else 1
    factor = (hardware + forwards * forward) / hardware
    step = train_step(inp)
    parts = {"step_s": 0.0, "segments": {}, "microbatches": 0, "seq_len": inp.seq_len,
             "log_prob": factor, "forwards": forwards, "flops_per_param": hardware / n,
             "matmul_params": n, "layer_params": layer_matmul_params(m),
             "attention_per_param": attention / n,
             "recompute_per_param": (hardware - attention) / n - 6,
             "forward_per_param": forward / n,
             "forward_attention_per_param": forward / n - 2,
             "estimated": step is None}
    if step is not None:  # the step's time per token, and the log-probability forward
        scale = tokens / step.tokens_per_step
        parts.update(step_s=step.step_s * scale, microbatches=step.plan.microbatches,
                     segments={k: v * scale for k, v in (step.segments or {}).items()},
                     **utilisation(step))
        compute = parts["step_s"] * factor
    else:
        compute = tokens * hardware * factor / (inp.train_gpus * g.bf16_flops * TRAIN_MFU)
    # CPU Adam: the rank's own parameters' gradients down, in the dtype the bill keeps them
    # (fp32 main gradients, what the CPU's Adam reads: round-18 cold reading B, finding 10),
    # and its bf16 weights up; bf16 gradients where no bill gives them.
    rate = get_link(PCIE_LINK).bandwidth if inp.cpu_adam else 0.0
    grads = weights_per_gpu if gradients_per_gpu is None else gradients_per_gpu
    offload = (grads + weights_per_gpu) / rate if rate else 0.0
    # The reference's bf16 weights in from host before its forward, the actor's back after
    # (slime's TensorBackuper restore, module docstring), at PCIe's datasheet rate.
    pcie = get_link(PCIE_LINK).bandwidth
    swap = 2 * weights_per_gpu / pcie if inp.ref_model else 0.0
    return {**parts, "compute_s": compute, "offload_s": offload, "offload_rate": rate,
            "ref_swap_s": swap, "ref_swap_bytes": weights_per_gpu if inp.ref_model else 0.0,
            "ref_swap_rate": pcie, "seconds": compute + offload + swap}


def utilisation(step: RecipeResult) -> dict:
    """How much of the GPUs' peak the training step uses, and why (EP09 step 6's note): its
    ``mfu`` (model FLOPs over the whole step, ``RecipeResult.mfu``); ``compute_hfu``, the
    share of peak its compute segment runs at, counting the recomputed forward (the step's
    hardware FLOPs over that segment); and, for a MoE layer of the busiest stage, the tokens
    each routed expert's GEMMs take a micro-batch (``expert_tokens``, the grouped GEMM's rows)
    and the rate its first weight-gradient GEMM reaches (``expert_wgrad_flops``, FLOP/s: a
    weight gradient added into fp32 over few tokens is bound by memory,
    ``labs.hardware.kernels``), beside the full-wave GEMM rate (``matmul_flops``)."""
    t = step.timing
    peak = step.plan.world_size * step.cluster.gpu.bf16_flops
    compute = (step.segments or {}).get("compute", 0.0)
    out = {"mfu": step.mfu, "matmul_flops": matmul_rate(step.cluster.gpu),
           "compute_hfu": (t.hardware_flops_per_token * step.tokens_per_step / (compute * peak)
                           if compute else 0.0)}
    stage = max(t.stages, key=lambda st: st.forward + st.backward)
    for _, layer, *_ in stage.layers:
        kernels = {k.name: k for p in (layer.ops.forward, layer.ops.backward)
                   for k in p.kernels}
        if "experts.fc1" in kernels and "experts.fc1.wgrad" in kernels:
            wgrad = kernels["experts.fc1.wgrad"]
            out.update(expert_tokens=kernels["experts.fc1"].shape[0],
                       expert_wgrad_flops=wgrad.flops / wgrad.seconds)
    return out


def sync_seconds(inp, resident_train_bytes: float) -> SyncTimes:
    """One weight update; colocated, it includes a step's two phase switches over PCIe (the
    trainer's state, weights, gradients and any optimizer state on the GPU, offloaded after
    training and back before the next; the engine's weights are refilled by the update
    itself, not copied from host)."""
    m, g = inp.model, inp.gpu
    full = WEIGHT_BYTES * m.params
    pcie = get_link(PCIE_LINK)
    own = gpu_cluster(g)
    if inp.colocated:
        gathered = full / inp.pp
        rate = own.intra.ring_busbw
        switch = 2 * resident_train_bytes / pcie.bandwidth  # down, and up again
        fabric = get_link(peer_links(g)[0])
        name = "NVLink" if fabric.hw == "nvlink" else fabric.name
        return SyncTimes(gathered / rate + switch, gathered, f"{name} (CUDA IPC)", rate, switch,
                         (resident_train_bytes, resident_train_bytes), pcie.name,
                         pcie.bandwidth)
    rate = own.inter.ring_busbw
    return SyncTimes(full / rate, full, "network (NCCL broadcast)", rate)


def step_times(inp, weights_per_gpu: float, resident_train_bytes: float,
               gradients_per_gpu: float | None = None) -> StepTimes:
    """``resident_train_bytes``: what a colocated switch moves (``labs.rl.lab``: weights,
    gradients and the optimizer state on the GPU); ``gradients_per_gpu``: CPU Adam's trip."""
    r = rollout_seconds(inp)
    parts = train_parts(inp, weights_per_gpu, gradients_per_gpu)
    t = parts["seconds"]
    sync = sync_seconds(inp, resident_train_bytes)
    step = r + t + sync.seconds if inp.colocated else max(r, t) + sync.seconds
    return StepTimes(r, t, sync, step, parts)


def phases(colocated: bool, times: StepTimes) -> list[tuple[str, str, int, float, float]]:
    """(lane, phase, step, start, end) for the first STEPS_DRAWN steps."""
    r, t, s = times.rollout, times.train, times.sync
    out = []
    if colocated:
        clock = 0.0
        for k in range(STEPS_DRAWN):
            for name, length in (("rollout", r), ("train", t), ("weight_sync", s)):
                out.append(("colocated", name, k, clock, clock + length))
                clock += length
        return out
    # slime's train_async.py: rollout k+1 starts as soon as rollout k is handed to training
    # (with the old weights: one step off-policy); sync k waits for training k and for the
    # rollout in flight (engines must be idle), then rollout k+2 starts with the new weights.
    rollout_start = {0: 0.0, 1: r}
    sync_end = 0.0
    for k in range(STEPS_DRAWN):
        out.append(("rollout", "rollout", k, rollout_start[k], rollout_start[k] + r))
        train_start = max(rollout_start[k] + r, sync_end)
        out.append(("training", "train", k, train_start, train_start + t))
        sync_start = max(train_start + t, rollout_start[k + 1] + r)
        sync_end = sync_start + s
        out.append(("training", "weight_sync", k, sync_start, sync_end))
        out.append(("rollout", "weight_sync", k, sync_start, sync_end))
        rollout_start[k + 2] = sync_end
    out.append(("rollout", "rollout", STEPS_DRAWN, rollout_start[STEPS_DRAWN],
                rollout_start[STEPS_DRAWN] + r))
    return out
