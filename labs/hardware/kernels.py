"""How long one kernel takes on one GPU: GEMMs, memory-bound ops and the attention core.

- A GEMM C[m,n] = A[m,k]·B[k,n] is a roofline (Williams, Waterman & Patterson 2009,
  "Roofline", CACM): max(2mnk / R, bytes / B), B the achieved HBM bandwidth
  (``KernelRates.hbm_efficiency`` x datasheet) and R the achieved matmul rate

      R = peak · matmul_efficiency · matmul_sustain · wave(m, n),

  peak the dense datasheet figure, matmul_efficiency the maximum achievable matmul FLOP/s
  at a full wave (MAMF), matmul_sustain what a power-saturated GPU keeps of it (both in
  ``labs/presets/gpus.json`` with their sources), and wave(m, n) = tiles / (⌈tiles / SMs⌉ ·
  SMs), the wave quantisation of NVIDIA's "Matrix Multiplication Background User's Guide"
  (DU-09799-001 sec 3.2; sec 2.3: 256x128 is cuBLAS's most efficient tile), taking the
  better of its 256x128 and 128x256 tiles: a matrix whose tiles leave the last wave part
  empty runs slower, which is why small (TP- and CP-split) matrices do. Bytes: both inputs
  and the 16-bit output, once; a weight gradient accumulated into fp32 in the GEMM
  (Megatron's --gradient-accumulation-fusion, ``wgrad_gemm_accum_fp32``; Transformer
  Engine's grouped GEMM for the experts does the same) reads and writes its fp32 output
  instead, so a weight gradient over few tokens (an expert's, K = its tokens) is
  memory-bound. A synchronous job runs at its slowest GPU's pace, and the GPUs
  of one node differ chip to chip: ``SLOWEST_GPU`` scales every compute-bound kernel (GEMMs,
  attention) to the slowest of a node.
- A memory-bound op (norm, activation, dropout, residual add, softmax, cast, optimizer) moves
  its bytes at the achieved HBM bandwidth.
- The attention core, fused (FlashAttention), runs at the kernel's published throughput for
  its sequence length, held to the power limit as a GEMM is (``matmul_sustain``: the papers'
  bars are short benchmarks at burst clocks) (``labs/presets/attention.json``: the
  FlashAttention-2/-3 papers' bars, fitted per pass to rate(s) = P·s / (s + s½), least
  squares on 1/rate), on the FLOPs its papers count: forward 4·s_q·s_k·d·heads (d the mean
  of the query/key and value head dims), halved when causal; backward 2.5 x forward (Dao
  2023 sec 4.1). The unfused path of Megatron 2021-22 (two batched GEMMs and the softmax
  and dropout between them) is timed op by op in ``labs.model.ops``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache, lru_cache

from labs.core.data import read
from labs.core.errors import LabInputError
from labs.hardware.gpus import GPUSpec, KernelRates, get_gpu
from labs.hardware.links import Cluster

# cuBLAS's large-GEMM CTA tiles (NVIDIA matmul guide sec 2.3), (rows, columns) of C.
TILES = ((256, 128), (128, 256))
ATTENTION_IMPLS = ("unfused", "flash2", "flash3")
# FlashAttention's FLOP convention (Dao 2023 sec 4.1): backward is 2.5 x forward.
FLASH_BACKWARD = 2.5
# The slowest GPU of a node against the median one, sustained matmul rate with every GPU of
# the node busy (mamf-finder-all-gpus.py): 745 against 755 TFLOP/s on 8 x H200 and 1,421
# against 1,439 on 8 x B200 (stas00/ml-engineering compute/accelerator/benchmarks/README.md:
# "a full-node synchronous training run still waits on its slowest GPU"). Both 0.987; taken
# for every GPU, no other generation's spread being published.
SLOWEST_GPU = 745 / 755


def rates(gpu: GPUSpec) -> KernelRates:
    """A GPU's measured kernel rates, or a clear refusal for one without them."""
    if gpu.kernels is None:
        raise LabInputError("gpu", f"{gpu.name} has no measured kernel rates: its step "
                                   "cannot be timed op by op")
    return gpu.kernels


def hbm_rate(gpu: GPUSpec) -> float:
    """Achieved HBM bandwidth, bytes/s."""
    k = rates(gpu)
    return k.hbm_bandwidth * k.hbm_efficiency


def matmul_rate(gpu: GPUSpec, fp8: bool = False) -> float:
    """Achieved dense matmul FLOP/s at a full wave (16-bit, or FP8 where modelled), on the
    slowest GPU of a node."""
    k = rates(gpu)
    if fp8 and k.fp8_flops:
        return k.fp8_flops * k.matmul_efficiency_fp8 * k.matmul_sustain * SLOWEST_GPU
    return gpu.bf16_flops * k.matmul_efficiency * k.matmul_sustain * SLOWEST_GPU


def burst_matmul_rate(gpu: GPUSpec) -> float:
    """``matmul_rate`` before the power limit bites (MAMF alone): what a short benchmark,
    as the FlashAttention papers' bars are, measures."""
    return matmul_rate(gpu) / rates(gpu).matmul_sustain


def wave(sms: int, m: int, n: int, batch: int = 1) -> float:
    """Share of the SMs busy over a GEMM's waves, the better of the two tiles."""
    best = 0.0
    for tm, tn in TILES:
        tiles = batch * math.ceil(m / tm) * math.ceil(n / tn)
        best = max(best, tiles / (math.ceil(tiles / sms) * sms))
    return best


@lru_cache(maxsize=65536)
def gemm_time(gpu: GPUSpec, m: int, n: int, k: int, batch: int = 1,
              fp8: bool = False, accumulate: bool = False) -> float:
    """Seconds of ``batch`` GEMMs C[m,n] = A[m,k]·B[k,n] (16-bit inputs, or FP8), or, with
    ``accumulate``, C += A·B into fp32 (a weight gradient into Megatron's main_grad: C read
    and written, 4 + 4 bytes per element)."""
    if m <= 0 or n <= 0 or k <= 0 or batch <= 0:
        return 0.0
    r = rates(gpu)
    fp8 = fp8 and bool(r.fp8_flops)
    flops = 2.0 * m * n * k * batch
    moved = batch * ((1 if fp8 else 2) * (m * k + k * n) + (8 if accumulate else 2) * m * n)
    return max(flops / (matmul_rate(gpu, fp8) * wave(r.sm_count, m, n, batch)),
               moved / hbm_rate(gpu))


@lru_cache(maxsize=16384)
def grouped_gemm_time(gpu: GPUSpec, rows: tuple[int, ...], n: int, k: int) -> float:
    """Seconds of one grouped GEMM: C_g[m_g,n] = A_g[m_g,k]·B_g[k,n] for each group g, in
    one kernel (Megatron's ``--moe-grouped-gemm``, Transformer Engine's ``GroupedLinear``;
    DeepSeek's DeepGEMM ``m_grouped`` kernels), as a GPU runs its local experts. The
    groups' tiles share the waves, Σ_g ⌈m_g/tm⌉·⌈n/tn⌉ tiles over the SMs, so many small
    experts fill the GPU where one alone would leave most SMs idle; every group still reads
    its own weights. Equal groups give ``gemm_time(m, n, k, batch=len(rows))``."""
    rows = tuple(m for m in rows if m > 0)
    if not rows or n <= 0 or k <= 0:
        return 0.0
    r = rates(gpu)
    flops = 2.0 * sum(rows) * n * k
    moved = sum(2 * (m * k + k * n) + 2 * m * n for m in rows)
    best = 0.0
    for tm, tn in TILES:
        tiles = sum(math.ceil(m / tm) for m in rows) * math.ceil(n / tn)
        best = max(best, tiles / (math.ceil(tiles / r.sm_count) * r.sm_count))
    return max(flops / (matmul_rate(gpu) * best), moved / hbm_rate(gpu))


def mem_time(gpu: GPUSpec, nbytes: float) -> float:
    """Seconds a memory-bound op moving ``nbytes`` takes."""
    return nbytes / hbm_rate(gpu)


@dataclass(frozen=True)
class AttentionKernel:
    """One fused attention kernel on one GPU: (P, s½) per pass, and where it comes from."""

    gpu: str
    impl: str
    forward: tuple[float, float]
    forward_causal: tuple[float, float]
    backward: tuple[float, float]
    head_dim_64: tuple[float, float]  # forward and backward at head dim 64 over 128
    source: str


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(P, s½) of rate(s) = P·s/(s + s½), least squares on 1/rate = 1/P + (s½/P)/s."""
    xs = [1.0 / s for s, _ in points]
    ys = [1.0 / (r * 1e12) for _, r in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) \
        / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    return 1.0 / intercept, slope / intercept


def _at(curve: tuple[float, float], s: float) -> float:
    peak, half = curve
    return peak * s / (s + half)


@cache
def attention_kernels() -> dict[tuple[str, str], AttentionKernel]:
    """Every (GPU id, implementation) with a fused attention kernel, from the data file."""
    data = read("attention.json")
    curves = {}
    for c in data["curves"]:
        curves[c["id"]] = {k: fit(list(zip(c["seq"], c[k], strict=True))) if c[k] else None
                           for k in ("forward", "forward_causal", "backward")}
    hd64 = curves["fa3-h100-hd64"]
    hd128 = curves["fa3-h100"]
    head64 = (hd64["forward"][0] / hd128["forward"][0],
              hd64["backward"][0] / hd128["backward"][0])
    out = {}
    for k in data["kernels"]:
        c = curves[k["curves"]]
        scale = 1.0
        if "forward_peak" in k:
            scale = k["forward_peak"] / c["forward"][0]
        if "matmul_ratio_of" in k:  # burst against burst: flash_time applies the sustain
            scale = burst_matmul_rate(get_gpu(k["gpu"])) \
                / burst_matmul_rate(get_gpu(k["matmul_ratio_of"]))
        scaled = {name: (p * scale, half) for name, (p, half) in c.items()}
        out[(k["gpu"], k["impl"])] = AttentionKernel(
            k["gpu"], k["impl"], scaled["forward"], scaled["forward_causal"],
            scaled["backward"], head64, f"{k['source']} ({k['curves']})")
    return out


def attention_kernel(gpu: GPUSpec, impl: str) -> AttentionKernel | None:
    """The fused kernel ``impl`` on ``gpu``: "flash3" falls back to "flash2" where there is
    no FlashAttention-3 (it needs Hopper); None when the GPU has neither."""
    table = attention_kernels()
    if impl == "flash3" and (gpu.id, "flash3") not in table:
        impl = "flash2"
    return table.get((gpu.id, impl))


def best_attention(gpu: GPUSpec) -> str:
    """The fastest fused attention the GPU has (flash3, else flash2, else unfused)."""
    table = attention_kernels()
    for impl in ("flash3", "flash2"):
        if (gpu.id, impl) in table:
            return impl
    return "unfused"


def flash_flops(s_q: int, s_k: int, d: float, heads: int, causal: bool) -> float:
    """Forward FLOPs of the attention core by FlashAttention's count (Dao 2023 sec 4.1)."""
    return 4.0 * s_q * s_k * d * heads * (0.5 if causal else 1.0)


def attention_rate(gpu: GPUSpec, impl: str, s_k: int, d: float, causal: bool) -> float:
    """Forward FLOP/s of the fused attention kernel ``impl`` on ``gpu`` for ``s_k`` keys (by
    FlashAttention's FLOP count), as ``flash_time`` times it."""
    f, _ = flash_time(gpu, impl, s_k, s_k, d, 1, causal)
    return flash_flops(s_k, s_k, d, 1, causal) / f


@lru_cache(maxsize=16384)
def flash_time(gpu: GPUSpec, impl: str, s_q: int, s_k: int, d: float, heads: int,
               causal: bool) -> tuple[float, float]:
    """(forward, backward) seconds of one fused attention call: ``heads`` (x batch) query
    heads of ``s_q`` queries over ``s_k`` keys, head dim ``d``, at the kernel's published
    rate for a sequence of ``s_k`` (causal: the causal forward curve; backward at the
    non-causal curve scaled by the same causal/non-causal ratio, since no causal backward
    was published)."""
    kern = attention_kernel(gpu, impl)
    if kern is None:
        raise LabInputError("attention", f"no fused attention kernel for {gpu.name}")
    # The papers' bars are short benchmarks, at burst clocks; in a training run the fused
    # attention keeps the tensor cores as busy as a GEMM does (FA3: 75% of the H100's peak),
    # so the power limit slows it as it slows a GEMM: the GPU's matmul_sustain (MSMF/MAMF).
    f = flash_flops(s_q, s_k, d, heads, causal) / (SLOWEST_GPU * rates(gpu).matmul_sustain)
    forward = _at(kern.forward, s_k)
    ratio = 1.0
    if causal and kern.forward_causal is not None:
        ratio = _at(kern.forward_causal, s_k) / forward
    backward = _at(kern.backward, s_k) * ratio
    # Below head dim 128 the kernels run slower (FA3's head-dim-64 bars), linear between.
    share = min(1.0, max(0.0, (128 - d) / 64))
    f64, b64 = kern.head_dim_64
    return (f / (forward * ratio * (1 - share + share * f64)),
            FLASH_BACKWARD * f / (backward * (1 - share + share * b64)))


def with_matmul_efficiency(cluster: Cluster, efficiency: float | None) -> Cluster:
    """``cluster`` whose GPU's GEMMs reach ``efficiency`` of the dense peak at a full wave
    (None: as measured)."""
    if efficiency is None or cluster.gpu.kernels is None:
        return cluster
    kernels = replace(cluster.gpu.kernels, matmul_efficiency=efficiency, matmul_sustain=1.0)
    gpu = replace(cluster.gpu, kernels=kernels)
    return replace(cluster, gpu=gpu)
