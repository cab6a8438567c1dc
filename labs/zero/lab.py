"""EP03 Sharding state: ZeRO stages against the data-parallel degree, their wire traffic, and
the two knobs beside them (activation checkpointing, optimizer offload).

Composed from the other labs, never re-derived:
- the per-GPU bill of every (DP degree, ZeRO stage) is EP01's ledger (``labs.memory.lab``), whose
  ZeRO sharding follows Rajbhandari et al. 2020, "ZeRO" (arXiv:1910.02054) Figure 1: with D
  replicas, 16-byte recipe 16P, 4P + 12P/D, 2P + 14P/D, 16P/D; 18-byte 18P, 6P + 12P/D,
  2P + 16P/D, 18P/D. Activations are not sharded by any stage;
- collective times are NCCL's (``labs.hardware.comm``) on a cluster of its ``links``;
- compute per step is the layer's kernels one by one (``labs.parallel.layer_time``, the same
  model EP08 times its plans with), recomputation adding its forward again.

Wire volume per GPU per step (ZeRO paper sec 7.2; PyTorch FSDP, Zhao et al. 2023,
arXiv:2304.11277 sec 3): with S the gradient (= bf16 weight) bytes, plain DP all-reduces
the gradients, 2(D−1)/D·S. ZeRO-1/2 reduce-scatter the gradients and all-gather the updated
weights: (D−1)/D·S each, the same 2(D−1)/D·S. ZeRO-3/FSDP frees the weights after use and
all-gathers them again in forward and in backward, then reduce-scatters the gradients:
3(D−1)/D·S, 1.5x. Gradients travel in bf16 in both recipes (DeepSpeed's default
``communication_data_type`` is the model's dtype; the 18-byte recipe's fp32 gradients are the
local accumulation buffer), so the ratios hold for both.

Hiding (overlap of communication with compute, FSDP paper sec 3.3, Megatron-LM's
``--overlap-grad-reduce`` / ``--overlap-param-gather``): forward collectives hide behind the
forward pass (a third of the model FLOPs), backward ones behind the backward pass (the rest,
recomputation included); what exceeds its window is exposed. ZeRO-1/2's weight all-gather runs
during the next forward (Megatron's overlapped parameter gather).

Optimizer offload (Ren et al. 2021, "ZeRO-Offload", arXiv:2101.06840 sec 4): the rank's
optimizer shard lives in host RAM and the CPU runs Adam; each step its gradients cross PCIe
down during backward (hidden while they fit that window), the CPU updates the shard, and its
updated bf16 weights cross back up before the next forward. CPU Adam is bound by host memory
bandwidth (the paper's CPU-Adam is vectorised to stream memory): per parameter it reads the
fp32 weight, gradient and two moments and writes the weight and moments back,
``ADAM_HOST_BYTES`` = 7 x 4 = 28 B, and the ranks of a node share its memory bandwidth
(``labs.zero.inputs.HOST_MEMORY_BANDWIDTH``). In the step all three are exposed; the paper's
one-step delayed parameter update (sec 5, "DPU") runs the CPU step and the upload beside the
next step's compute, which is why it exists (``delayed_exposed_seconds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from labs.core.catalogue import RECIPES
from labs.core.limits import RECOMPUTE, ZERO_DP_SHOWN, ZERO_STAGES
from labs.core.recomputation import RECOMPUTATION
from labs.hardware.comm import nccl_collective
from labs.hardware.gpus import GPUSpec
from labs.hardware.links import Cluster, get_link
from labs.memory.inputs import STATE_KEYS, MemoryInput, MemoryResult
from labs.memory.lab import compute_memory
from labs.model.flops import model_flops_per_token
from labs.model.head import head_ops
from labs.model.spec import ModelSpec
from labs.parallel.layer_time import Group, layer_time
from labs.zero.deepspeed import (
    DeepSpeedEstimate,
    largest_layer_params,
    zero2_estimate,
    zero3_estimate,
)
from labs.zero.inputs import (
    OffloadPlan,
    RecomputeRow,
    StageBar,
    TrafficRow,
    Transfer,
    ZeroInput,
    ZeroResult,
)

GRAD_COMM_BYTES = 2  # bf16 on the wire (DeepSpeed's default communication_data_type)
ACTIVATION_KEYS = ("activations", "embedding_and_logits")

# ZeRO stage -> (collective, what it moves, the pass it hides behind); ZeRO paper sec 7.2.
COLLECTIVES = {
    0: (("all_reduce", "gradients", "backward"),),
    1: (("reduce_scatter", "gradients", "backward"), ("all_gather", "weights", "forward")),
    2: (("reduce_scatter", "gradients", "backward"), ("all_gather", "weights", "forward")),
    3: (("all_gather", "weights (forward)", "forward"),
        ("all_gather", "weights (backward)", "backward"),
        ("reduce_scatter", "gradients", "backward")),
}
# FSDP2 / DeviceMesh names beside ZeRO's (PyTorch FSDP docs, ShardingStrategy; FSDP2's
# fully_shard with reshard_after_forward; HYBRID_SHARD = a 2-D DeviceMesh (replicate, shard),
# ZeRO-3 inside a node and replicas across nodes).
FSDP_NAMES = {
    0: "NO_SHARD (DDP)",
    1: "none (ZeroRedundancyOptimizer)",
    2: "SHARD_GRAD_OP",
    3: "FULL_SHARD",
}


def ledger(inp: ZeroInput, **changes) -> MemoryResult:
    """EP01's bill for this plan, with ``changes`` (dp, zero, recompute, offload). A render
    asks about twenty (each bar's DP degree and stage, each recomputation mode, offload on and
    off); they depend on the model, GPU, recipe and activation controls only, not on the links
    or node size, so a student moving those, or the DP degree, reuses them (bounded cache)."""
    fields = {"dp": inp.dp, "zero": inp.zero, "recompute": inp.recompute,
              "offload": inp.offload, **changes}
    return _ledger(inp.model, inp.gpu, inp.recipe, inp.seq_len, inp.micro_batch,
                   inp.activation_model, fields["dp"], fields["zero"], fields["recompute"],
                   fields["offload"])


@lru_cache(maxsize=4096)  # ~2.6 kB each: ~200 states' bills (issue 31: a class reuses 73%)
def _ledger(model: ModelSpec, gpu: GPUSpec, recipe: str, seq_len: int, micro_batch: int,
            activation_model: str, dp: int, zero: int, recompute: str,
            offload: bool) -> MemoryResult:
    return compute_memory(MemoryInput(model=model, gpu=gpu, mode="train", recipe=recipe,
                                      seq_len=seq_len, micro_batch=micro_batch,
                                      activation_model=activation_model, dp=dp, zero=zero,
                                      recompute=recompute, offload=offload))


def compute_windows(inp: ZeroInput, recompute: str) -> tuple[float, float]:
    """(forward, backward) seconds of one micro-batch on one GPU, op by op
    (``labs.parallel.layer_time``: every kernel at the GPU's measured rates, no model
    parallelism); backward includes any recomputed forward."""
    return _windows(inp.model, inp.cluster, inp.seq_len, inp.micro_batch, recompute)


@lru_cache(maxsize=2048)
def _windows(model: ModelSpec, cluster: Cluster, seq_len: int, micro_batch: int,
             recompute: str) -> tuple[float, float]:
    kw = dict(tp=Group(), cp=Group(), ep=Group(), micro_batch=micro_batch, seq_len=seq_len,
              sp=False)
    layers = []  # (count, one layer's time) of each kind, in each per-layer mode
    for mode, dense, moe in RECOMPUTATION[recompute].groups(model.layers - model.moe_layers,
                                                            model.moe_layers):
        layers.append((dense, layer_time(model, cluster, recompute=mode, **kw)))
        if model.is_moe:
            layers.append((moe, layer_time(model, cluster, moe=True, recompute=mode, **kw)))
    head = head_ops(model, cluster.gpu, tp=1, cp=1, micro_batch=micro_batch, seq_len=seq_len,
                    sp=False)
    forward = sum(n * lt.forward.compute for n, lt in layers) \
        + head.embedding_forward.seconds + head.output_forward.seconds
    backward = sum(n * lt.backward.compute for n, lt in layers) \
        + head.embedding_backward.seconds + head.output_backward.seconds
    return forward, backward


def achieved_mfu(inp: ZeroInput, seconds: float) -> float:
    """Model FLOPs of one micro-batch over its compute seconds and the GPU's dense peak."""
    flops = model_flops_per_token(inp.model, inp.seq_len) * inp.seq_len * inp.micro_batch
    return flops / (seconds * inp.gpu.bf16_flops) if seconds else 0.0


def traffic_row(inp: ZeroInput, stage: int, windows: tuple[float, float]) -> TrafficRow:
    size = GRAD_COMM_BYTES * inp.model.params
    d, cluster = inp.dp, inp.cluster
    transfers = []
    for kind, moves, phase in COLLECTIVES[stage]:
        volume = (2 if kind == "all_reduce" else 1) * (d - 1) / d * size
        cost = nccl_collective(kind, size, d, cluster)
        transfers.append(Transfer(kind, moves, phase, volume, cost.seconds, cost.algorithm))
    exposed = 0.0
    for phase, window in zip(("forward", "backward"), windows, strict=True):
        busy = sum(t.seconds for t in transfers if t.phase == phase)
        exposed += max(0.0, busy - window)
    return TrafficRow(stage, tuple(transfers), sum(t.bytes_per_gpu for t in transfers),
                      sum(t.seconds for t in transfers), exposed)


ADAM_HOST_BYTES = 7 * 4  # CPU Adam: read fp32 weight, gradient, m, v; write weight, m, v


def offload_plan(inp: ZeroInput, backward_seconds: float,
                 compute_seconds: float) -> OffloadPlan:
    recipe = RECIPES[inp.recipe]
    without = ledger(inp, offload=False)
    with_ = ledger(inp, offload=True)
    shard = inp.model.params / (inp.dp if inp.zero >= 1 else 1)  # the rank's optimizer shard
    down, up = recipe.gradients * shard, recipe.gathered_bytes * shard  # updated weights up
    bandwidth = get_link(inp.host_link).bandwidth
    down_s, up_s = down / bandwidth, up / bandwidth
    adam = ADAM_HOST_BYTES * shard
    adam_s = adam * inp.gpus_on_node / inp.host_memory_bandwidth  # the node's ranks share it
    overrun = max(0.0, down_s - backward_seconds)
    return OffloadPlan(
        gpu_bytes_without=without.total_bytes, gpu_bytes_with=with_.total_bytes,
        breakdown_without=dict(without.breakdown), breakdown_with=dict(with_.breakdown),
        host_bytes_per_gpu=with_.host_bytes,
        host_bytes_per_node=with_.host_bytes * inp.gpus_on_node,
        pcie_down_bytes=down, pcie_up_bytes=up, pcie_seconds=down_s + up_s,
        adam_bytes=adam, adam_seconds=adam_s, host_memory_bandwidth=inp.host_memory_bandwidth,
        exposed_seconds=overrun + adam_s + up_s,
        delayed_exposed_seconds=overrun + max(0.0, adam_s + up_s - compute_seconds),
        pcie_bandwidth=bandwidth,
        download_hidden=down_s <= backward_seconds)


def deepspeed_estimates(inp: ZeroInput) -> tuple[DeepSpeedEstimate, ...]:
    params = inp.model.params
    n, nodes = inp.gpus_on_node, inp.nodes
    return (zero2_estimate(params, n, nodes, inp.offload),
            zero3_estimate(params, largest_layer_params(inp.model), n, nodes, inp.offload))


def shown_degrees(dp: int) -> tuple[int, ...]:
    return tuple(sorted({*ZERO_DP_SHOWN, dp}))


# The recomputation modes the lesson compares, each priced against the first: no recomputation
# with fused attention (FlashAttention, TE, SDPA: no s x s scores stored, their backward rebuilt
# inside the kernel), what current stacks run; then Korthikanti et al. 2022's selective (the
# attention core's forward again, which a fused kernel has no need of) and full (the whole
# forward again). Compute of "flash" is that of the unfused "none" (labs.core.recomputation).
BASELINE_RECOMPUTE = "flash"
SHOWN_RECOMPUTE = (BASELINE_RECOMPUTE, "selective", "full")


def simulate_zero(inp: ZeroInput) -> ZeroResult:
    """Every figure of the ZeRO lesson for ``inp``."""
    chosen = ledger(inp)
    bars = []
    for d in shown_degrees(inp.dp):
        for stage in ZERO_STAGES:
            bill = ledger(inp, dp=d, zero=stage)
            bars.append(StageBar(d, stage, dict(bill.breakdown), bill.total_bytes, bill.host_bytes))
    windows = compute_windows(inp, inp.recompute)
    baseline = sum(compute_windows(inp, BASELINE_RECOMPUTE))
    rows = []
    # Fused attention with nothing recomputed, Korthikanti's selective and full, and the
    # chosen mode where it is another (the unfused "none", which stores the s² scores): the
    # chart compares them and marks the one the state runs.
    for mode in (m for m in RECOMPUTE if m in SHOWN_RECOMPUTE or m == inp.recompute):
        bill = ledger(inp, recompute=mode)
        seconds = sum(compute_windows(inp, mode))
        rows.append(RecomputeRow(mode, sum(bill.breakdown[k] for k in ACTIVATION_KEYS),
                                 bill.total_bytes, seconds, seconds / baseline - 1, bill.fits))
    offload = offload_plan(inp, windows[1], sum(windows))
    return ZeroResult(
        input=inp, params=inp.model.params, bytes_per_param=RECIPES[inp.recipe].bytes_per_param,
        ledger=chosen, breakdown=dict(chosen.breakdown), total_bytes=chosen.total_bytes,
        state_bytes=sum(chosen.breakdown[k] for k in STATE_KEYS),
        gpu_memory_bytes=chosen.gpu_memory_bytes, fits=chosen.fits, bars=tuple(bars),
        traffic=tuple(traffic_row(inp, s, windows) for s in ZERO_STAGES),
        compute_seconds=sum(windows), forward_seconds=windows[0], backward_seconds=windows[1],
        recompute=tuple(rows), offload=offload,
        host_bytes_per_node=offload.host_bytes_per_node if inp.offload else 0.0,
        deepspeed=deepspeed_estimates(inp), cluster=inp.cluster,
    )




@dataclass(frozen=True)
class Crossover:
    """The chosen stage's communication against the step's compute, as in EP02's ratio: the
    stage moves k(D−1)/D x 2P bytes a step (k = 2 for stages 0-2, 3 for ZeRO-3), compute is
    6·P FLOPs a token at the rate the lab's op-level compute reaches, so the two are equal at
    T* = (k/3)·(D−1)/D·R/busBW tokens per GPU (P cancels; ZeRO-3's is 1.5x plain DP's).

    T* is where the two are equal, not where the traffic hides: each collective hides behind
    its own pass only (``traffic_row``), so the traffic hides from ``hidden_tokens`` on, the
    tokens where every pass's collectives fit that pass, the passes scaled in the tokens at
    this state's rate. ZeRO-3 splits its traffic a third and two thirds as the compute splits,
    so it hides near its T*; plain DP's all-reduce has the backward pass only, two thirds of
    the compute, so it hides from 1.5 x its T* (round-8 cold reading of EP03, item 11)."""

    tokens_per_gpu: int  # micro_batch x seq_len (one micro-batch a step)
    compute_s: float  # the step's compute, op by op (``compute_windows``)
    comm_s: float  # the stage's collectives, all of them, one after another
    comm_bytes: float  # what each GPU sends
    busbw: float  # comm_bytes / comm_s
    rate: float  # 6·P·tokens / compute_s: the lab's compute as 6·P FLOPs a token
    factor: float  # k/3
    crossover_tokens: float  # factor·(D−1)/D·rate/busbw (0 on one GPU)
    hidden_tokens: float  # every pass's collectives fit that pass from here on (0 on one GPU)
    sweep: tuple[tuple[float, float], ...]  # (tokens, compute s) at this rate


def crossover(result: ZeroResult) -> Crossover:
    inp, row = result.input, result.chosen_traffic
    tokens = inp.micro_batch * inp.seq_len
    rate = 6 * inp.model.params * tokens / result.compute_seconds
    per_token = result.compute_seconds / tokens
    busbw = row.bytes_per_gpu / row.seconds if row.seconds else 0.0
    k = 3 if inp.zero == 3 else 2
    return Crossover(
        tokens_per_gpu=tokens, compute_s=result.compute_seconds, comm_s=row.seconds,
        comm_bytes=row.bytes_per_gpu, busbw=busbw, rate=rate, factor=k / 3,
        crossover_tokens=row.seconds / per_token,
        hidden_tokens=hidden_tokens(result, row),
        sweep=tuple((2.0 ** e, 2.0 ** e * per_token) for e in range(8, 21)))


def hidden_tokens(result: ZeroResult, row: TrafficRow) -> float:
    """Tokens per GPU from which ``traffic_row`` exposes nothing: for each pass, its
    collectives' seconds over its window's seconds a token (this state's forward and backward
    passes, straight in the tokens as the crossover's compute is); the latest pass decides."""
    tokens = result.input.micro_batch * result.input.seq_len
    windows = {"forward": result.forward_seconds, "backward": result.backward_seconds}
    return max((sum(t.seconds for t in row.transfers if t.phase == phase) * tokens / window
                for phase, window in windows.items()), default=0.0)
