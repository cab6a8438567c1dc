"""Failures at scale: how often a job stops, what a checkpoint costs, the best interval between
checkpoints, and the share of wall time spent on steps that count (goodput).

Sources, each used where named below:
- Interruptions: Llama Team 2024, "The Llama 3 Herd of Models" (arXiv:2407.21783), sec 3.3.4
  and Table 5: 419 unexpected interruptions in a 54-day snapshot of pre-training on 16,384
  H100s (466 with the 47 planned ones), effective training time above 90%. Failures are taken
  as independent, at a constant rate per GPU (a Poisson process), so a job of N GPUs stops N
  times as often: its mean time between interruptions is M = M_gpu / N, where
  M_gpu = 54 days x 16,384 / 419 (``LLAMA3``) is the GPU's share of the cluster (its host,
  network and software included: Table 5 counts them all).
- The checkpoint's bytes: EP01's ledger (``labs.memory.lab.compute_memory``) for the model
  with no parallelism: the 16-bit weights, FP32 master weights and the two FP32 Adam moments
  (2 + 4 + 8 = 14 bytes per parameter; gradients are not saved). Each rank writes its own
  shard, bytes ÷ N, as PyTorch Distributed Checkpoint and Megatron-LM's distributed
  checkpointing do; the write runs at the file system's aggregate bandwidth.
- Llama 3's storage: Tectonic, 2 TB/s sustained, 7 TB/s peak (arXiv:2407.21783 sec 3.3.1).
- An asynchronous save (PyTorch DCP ``async_save``, Megatron-LM ``--async-save``) stops
  training only for the copy of the rank's shard to host memory over its host link
  (``labs/presets/links.json``: PCIe 5.0 x16, 64 GB/s per direction); the write to storage
  runs behind training. Only one save is in flight: a save that finds the last one still
  writing waits for it. Until the write ends the newest durable checkpoint is the previous
  one, so a failure loses that much more work.
- A save to peer memory (Gemini: Wang et al., "Gemini: Fast Failure Recovery in Distributed
  Training with In-Memory Checkpoints", SOSP 2023) copies the shard to host memory as an
  async save does, then sends it to a peer machine's CPU memory over the GPU's network port
  (``PEER_LINK``: InfiniBand NDR, 50 GB/s, one port per GPU as in a DGX H100) instead of
  writing it to storage: the lag is that send. A failure recovers from the peer's copy; the
  lab leaves out the rarer case where a machine and its peer fail together (Gemini falls back
  to storage then) and keeps the restart control as given.
- The interval: Young 1974 ("A first order approximation to the optimum checkpoint interval",
  CACM 17(9)): τ = sqrt(2·δ·M), δ the time a save costs; Daly 2006 ("A higher order estimate of
  the optimum checkpoint interval for restart dumps", FGCS 22(3), eq. 37):
  τ = sqrt(2δM)·[1 + (1/3)·sqrt(δ/2M) + (1/9)·(δ/2M)] − δ for δ < 2M, else τ = M. A save
  starts only between steps, so the best interval is Daly's (no shorter than the save allows)
  rounded up to whole steps, as a run that saves every k steps has it.
- Goodput (Daly 2006, sec 3, the exponential renewal model): each interval of τ seconds of
  training is followed by a save that stops training for b seconds, a cycle of c = τ + b.
  Failures come at random, every M seconds of wall time on average; each costs the restart R,
  what ran of the cycle, and the async lag L (the work behind the newest durable checkpoint).
  A cycle then takes E = (M + R + L)(e^(c/M) − 1) of wall time on average, and goodput is
  τ/E. While c, R and L are short against M it is Young's first order,
  τ/c · (1 − (R + c/2 + L)/M); as jobs grow M shrinks and the first order falls far below it.
  It leaves out failures during a restart (which would add a factor e^(R/M)) and counts L as
  if the write never failed.
"""

from __future__ import annotations

import math
from functools import lru_cache

from labs.core.limits import SAVE_MODES
from labs.failures.inputs import Checkpoint, FailuresInput, FailuresResult, Goodput, ScalePoint
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.spec import ModelSpec

DAY = 86_400.0
# Llama 3 405B's pre-training snapshot (arXiv:2407.21783 sec 3.3.4, Table 5).
LLAMA3 = {"interruptions": 419, "days": 54, "gpus": 16_384}
# Its storage (sec 3.3.1: Tectonic, 2 TB/s sustained) and its step (sec 3.3.2, Table 4: a
# batch of 16M tokens, 2,048 sequences of 8,192; 400 TFLOP/s per GPU on 16,384 H100s).
LLAMA3_STORAGE_BW = 2e12
LLAMA3_BATCH_TOKENS = 2048 * 8192
LLAMA3_TFLOPS = 400e12
LLAMA3_TOKENS = 15.6e12  # pre-training tokens (sec 3.1)
PEER_LINK = "ib-ndr"  # the port a peer save's send crosses (labs/presets/links.json)
SWEEP_GPUS = tuple(2**k for k in range(10, 19))  # 1,024 ... 262,144
SWEEP_POINTS = 72  # the interval sweep's points, log-spaced


def gpu_mtbi_llama3() -> float:
    """Seconds between interruptions per GPU: 54 days x 16,384 GPUs / 419 (about 5.8 years)."""
    return LLAMA3["days"] * DAY * LLAMA3["gpus"] / LLAMA3["interruptions"]


def llama3_step_s(params: float) -> float:
    """Llama 3 405B's step from its published rate: 6 FLOPs per parameter per token (Kaplan et
    al. 2020) x 16M tokens ÷ (16,384 GPUs x 400 TFLOP/s)."""
    return 6 * params * LLAMA3_BATCH_TOKENS / (LLAMA3["gpus"] * LLAMA3_TFLOPS)


def llama3_steps() -> int:
    """Pre-training's steps at the final batch: 15.6T tokens ÷ 16M tokens a step."""
    return round(LLAMA3_TOKENS / LLAMA3_BATCH_TOKENS)


# Its batch ramp (sec 3.4.1): 4M tokens a step (sequences of 4,096) for the first 252M
# tokens, 8M (sequences of 8,192) up to 2.87T, then the final 16M. (tokens a step, up to).
LLAMA3_RAMP = ((1024 * 4096, 252e6), (1024 * 8192, 2.87e12),
               (LLAMA3_BATCH_TOKENS, LLAMA3_TOKENS))


def llama3_ramp_steps() -> int:
    """Pre-training's steps with Llama 3's batch ramp (``LLAMA3_RAMP``): each stage's tokens
    ÷ its tokens a step, summed. More than ``llama3_steps``: the early steps are smaller."""
    steps, done = 0.0, 0.0
    for batch, until in LLAMA3_RAMP:
        steps += (until - done) / batch
        done = until
    return round(steps)


def young(cost: float, mtbi: float) -> float:
    """Young 1974: τ = sqrt(2·δ·M)."""
    return math.sqrt(2 * cost * mtbi)


def daly(cost: float, mtbi: float) -> float:
    """Daly 2006, eq. 37: the higher-order optimum (M when δ ≥ 2M)."""
    if cost >= 2 * mtbi:
        return mtbi
    x = cost / (2 * mtbi)
    return math.sqrt(2 * cost * mtbi) * (1 + math.sqrt(x) / 3 + x / 9) - cost


@lru_cache(maxsize=64)
def state_bytes(model: ModelSpec) -> tuple[float, float, float]:
    """(weights, master weights, Adam moments) of the whole model, EP01's ledger's bill with no
    parallelism (the mixed-precision Adam recipe, adam16)."""
    bill = compute_memory(MemoryInput(model=model, gpu=get_gpu("h100-sxm"))).breakdown
    return bill["weights"], bill["master_weights"], bill["optimizer_moments"]


def checkpoint(model: ModelSpec, gpus: int, save: str, storage_bw: float, host_bw: float,
               interval: float) -> Checkpoint:
    """One save's bytes and seconds at ``interval`` seconds of training between saves."""
    weights, master, moments = state_bytes(model)
    total = weights + master + moments
    per_gpu = total / gpus
    write = total / storage_bw
    copy = per_gpu / host_bw
    send = per_gpu / get_link(PEER_LINK).bandwidth
    if save == "sync":
        cost, block, lag = write, write, 0.0
    else:  # the copy, and the wait for the last write (or send) when the interval is shorter
        behind = write if save == "async" else send
        cost, block, lag = copy, copy + max(0.0, behind - interval), behind
    return Checkpoint(weights, master, moments, total, per_gpu, write, copy, send, cost, block,
                      lag)


def goodput(interval: float, block: float, lag: float, restart: float, mtbi: float,
            work_s: float) -> Goodput:
    """Each share of wall time at one interval: Daly's renewal accounting for failures that
    come at random (a Poisson process of mean M). A cycle of c = τ + b seconds (τ training, b
    the save's stop) is tried until it runs to its end without a failure: e^(c/M) − 1 failed
    tries on average, each costing what ran of the cycle, the restart R and the async lag L
    (the work behind the newest durable checkpoint), so a cycle takes
    E = (M + R + L)·(e^(c/M) − 1) of wall time (Daly 2006, eq. 10, with L added to R).
    Goodput = τ/E. Where c, R and L are short against M it is the first-order
    τ/c · (1 − (R + c/2 + L)/M); where they are not, the first order drops far below it."""
    cycle = interval + block
    if cycle / mtbi > 700:  # e^(c/M) past a float: no cycle ever ends
        return Goodput(interval, 0.0, 0.0, 1.0 - restart / (mtbi + restart + lag),
                       restart / (mtbi + restart + lag), None)
    tries = math.expm1(cycle / mtbi)  # failed tries per cycle that ends
    wall = (mtbi + restart + lag) * tries
    useful = interval / wall
    blocking = block / wall
    restart_share = restart * tries / wall
    # A share of ~1e-260 (a cycle hundreds of M long) leaves the job's days past a float:
    # as good as never, said as the None the past-a-float branch above gives.
    days = work_s / useful / DAY if useful > 0 else math.inf
    return Goodput(interval, useful, blocking, 1.0 - useful - blocking - restart_share,
                   restart_share, days if math.isfinite(days) else None)


def floor_s(step: float, save: str, ckpt: Checkpoint) -> float:
    """The shortest interval: a save waits for the step to end; async and peer saves go one
    at a time, so no sooner than the last one's write (or send) ends."""
    return step if save == "sync" else max(step, ckpt.lag_s)


def whole_steps(interval: float, step: float) -> float:
    """``interval`` rounded up to whole steps: a save starts only between steps."""
    return step * max(1, math.ceil(interval / step - 1e-9))


def at_best(model: ModelSpec, gpus: int, save: str, storage_bw: float, host_bw: float,
            restart: float, mtbi: float, step_s: float, work_s: float) -> tuple[float, Goodput]:
    """Daly's interval (no shorter than the floor) rounded up to whole steps, and the goodput
    there."""
    ckpt = checkpoint(model, gpus, save, storage_bw, host_bw, 0.0)
    best = whole_steps(max(daly(ckpt.cost_s, mtbi), floor_s(step_s, save, ckpt)), step_s)
    ckpt = checkpoint(model, gpus, save, storage_bw, host_bw, best)
    return best, goodput(best, ckpt.block_s, ckpt.lag_s, restart, mtbi, work_s)


def interval_sweep(inp: FailuresInput, mtbi: float, marks: tuple[float, ...]) -> tuple:
    """Goodput at log-spaced intervals from a step (or 1 s) to 4 M, and at each mark."""
    low, high = max(1.0, inp.step_here), max(4 * mtbi, 2 * max(marks))
    points = {low * (high / low) ** (i / (SWEEP_POINTS - 1)) for i in range(SWEEP_POINTS)}
    out = []
    work = inp.steps * inp.step_here
    for t in sorted(points | set(marks)):
        ckpt = checkpoint(inp.model, inp.gpus, inp.save, inp.storage_bw,
                          inp.host_link.bandwidth, t)
        out.append(goodput(t, ckpt.block_s, ckpt.lag_s, inp.restart, mtbi, work))
    return tuple(out)


def _each_save(inp: FailuresInput, gpus: int, step: float) -> tuple[Goodput, ...]:
    """Sync, async and peer saves (SAVE_MODES' order) on ``gpus`` GPUs at a step of ``step``
    seconds, each at its best interval."""
    mtbi = inp.gpu_mtbi / gpus
    return tuple(at_best(inp.model, gpus, save, inp.storage_bw, inp.host_link.bandwidth,
                         inp.restart, mtbi, step, inp.steps * step)[1] for save in SAVE_MODES)


def scale_sweep(inp: FailuresInput) -> tuple[ScalePoint, ...]:
    """Each cluster size of SWEEP_GPUS and the chosen one: interruptions, and the goodput and
    finish time of sync, async and peer saves, each at its best interval. The step at each
    size is ``FailuresInput.step_at``'s: timed where the job's step model timed it (the batch
    fixed), ideal (1/N) elsewhere, where each save is also run with the step held at the size
    it is scaled from (``step_held``: no speed-up), the range's other edge."""
    out = []
    for n in sorted(set(SWEEP_GPUS) | {inp.gpus}):
        mtbi = inp.gpu_mtbi / n
        step, timed = inp.step_at(n)
        held = inp.step_held(n)
        out.append(ScalePoint(n, mtbi, DAY / mtbi, step, timed, *_each_save(inp, n, step),
                              held=_each_save(inp, n, held) if held is not None else ()))
    return tuple(out)


def simulate_failures(inp: FailuresInput) -> FailuresResult:
    mtbi = inp.gpu_mtbi / inp.gpus
    bw = inp.host_link.bandwidth
    ckpt = checkpoint(inp.model, inp.gpus, inp.save, inp.storage_bw, bw, inp.interval)
    step = inp.step_here
    work = inp.steps * step
    chosen = goodput(inp.interval, ckpt.block_s, ckpt.lag_s, inp.restart, mtbi, work)
    best_s, best = at_best(inp.model, inp.gpus, inp.save, inp.storage_bw, bw, inp.restart,
                           mtbi, step, work)
    young_s, daly_s = young(ckpt.cost_s, mtbi), daly(ckpt.cost_s, mtbi)
    return FailuresResult(
        input=inp, mtbi_s=mtbi, per_day=DAY / mtbi, step_s=step, checkpoint=ckpt,
        young_s=young_s, daly_s=daly_s, floor_s=floor_s(step, inp.save, ckpt),
        best_s=best_s,
        chosen=chosen, best=best,
        intervals=interval_sweep(inp, mtbi, (inp.interval, best_s, young_s)),
        scale=scale_sweep(inp),
    )
