"""One layer on one GPU of a layout: its kernels (``labs.model.ops``) and the collectives its
TP, CP and EP groups run (``labs.hardware.nccl``, where each group sits), exposed or hidden.

- TP (Megatron-LM, Shoeybi et al. 2019 sec 3): the s·b·h activations (16-bit) are
  all-reduced after each row-split GEMM in forward (proj, fc2) and after each column-split
  GEMM's input gradient in backward (fc1, qkv). With sequence parallelism (Korthikanti et al.
  2022, arXiv:2205.05198, sec 4.2.2) forward runs an all-gather before each column-split
  GEMM and a reduce-scatter after each row-split one; backward all-gathers dY before each
  row-split input gradient, all-gathers the input again for each column-split weight
  gradient and reduce-scatters its input gradient: 2 + 2 + 2 collectives. Forward blocks
  (its output is the next op's input). ``tp_overlap``:
  - "none": every collective blocks;
  - "backward": the column-split layers' backward collectives run beside their other GEMM
    (Korthikanti sec 6.2: the input-gradient all-reduce overlaps the weight-gradient GEMM;
    Megatron's LinearWithGradAccumulationAndAsyncCommunication, the default since 2022;
    with SP, the input's all-gather runs beside dgrad and dgrad's reduce-scatter beside
    wgrad); only what outlasts that GEMM is exposed;
  - "all": Transformer Engine's userbuffers overlap (Megatron Core --tp-comm-overlap; Wang
    et al. 2023, "Overlap Communication with Dependent Computation via Decomposition"):
    every TP collective runs beside the GEMM it feeds or follows, decomposed into the TP
    degree's chunks (``decomposed``): the pair takes max(t·g, g + A), g one chunk's GEMM at
    its own (smaller) shape's rate; what exceeds the whole GEMM is exposed, the chunks' lost
    rate (``Piece.split``) and any wait; where that is more than the collective, it runs whole
    and blocks. The backward's column-split collectives run beside the other GEMM whole, as
    with "backward" (TE's "bulk" overlap of qkv/fc1 dgrad and wgrad). A MoE layer's
    MLP collectives pair with its shared experts' GEMMs; its routed experts' grouped GEMMs
    take no TP overlap at any setting (``_tp``), so without shared experts those block.
- CP: the ring's c−1 rounds, each send exposed past its round's attention block
  (``labs.parallel.ring``).
- EP (GShard, Lepikhin et al. 2020; Megatron Core MoE): a dispatch and a combine of the T/t
  tokens per MoE layer in forward and again in backward, on the critical path, each as
  ``ep_dispatch`` sends it (``labs.parallel.dispatch``: NCCL's all-to-all, a copy per routed
  expert, or DeepEP's, a copy per destination node over the network); ``ep_overlap``
  (DeepSeek-V3's DualPipe, arXiv:2412.19437 sec 3.2.1; Megatron Core's
  --overlap-moe-expert-parallel-comm) runs them beside a second
  micro-batch's compute of the same pass, which meanwhile loses the SMs the communication
  kernels take: DeepSeek-V3 sec 3.2.2 gives 20 SMs (``COMM_SMS``). Compute C and
  communication A side by side then take max(A, C + f·A), f = 20 / SMs; what exceeds C is
  what EP costs.
Recomputation runs the forward again before backward (full: every kernel and TP collective;
selective: the attention core, Korthikanti sec 5; torchtitan's op-level policy: the matmuls
it drops, the memory-bound ops and the TP collectives it does not keep, ``_op_replay``). A
layer follows one per-layer mode; the layers of a layer-granular mode are timed in their two
(``Recomputation.groups``) by whoever sums a stage (``labs.recipe.stage_time``,
``labs.zero.lab``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.core.recomputation import layer_rules
from labs.hardware.comm import nccl_collective
from labs.hardware.gpus import GPUSpec
from labs.hardware.kernels import gemm_time
from labs.hardware.links import Cluster
from labs.model.op_checkpoint import recomputed_matmuls
from labs.model.ops import DEFAULT_OPTIONS, ComputeOptions, LayerOps, layer_ops
from labs.model.passes import Kernel, Pass, PassBuilder
from labs.model.spec import ModelSpec
from labs.parallel.dispatch import check_ep_dispatch, dispatch_time
from labs.parallel.layer_parts import ACT_BYTES, Comm, Group, Piece
from labs.parallel.ring import cp_comms

TP_OVERLAPS = ("none", "backward", "all")
COMM_SMS = 20  # SMs DeepSeek-V3's all-to-all kernels take (arXiv:2412.19437 sec 3.2.2)


def _again(pieces: tuple[Piece, ...], share: float = 1.0) -> tuple[Piece, ...]:
    """A forward's collectives run again before backward (recomputation), ``share`` of each."""
    return tuple(Piece(p.collective, "recompute", "after", share * p.seconds,
                       share * p.exposed, share * p.sm, share * p.split, 0.0,
                       share * p.sent) for p in pieces)


@dataclass(frozen=True)
class PassTime:
    """One pass of one layer on one GPU: kernel seconds by kind, and its collectives."""

    gemm: float
    attention: float
    memory: float
    comms: tuple[Comm, ...]

    @property
    def compute(self) -> float:
        return self.gemm + self.attention + self.memory

    @property
    def exposed(self) -> float:
        return math.fsum(c.exposed for c in self.comms)

    @property
    def seconds(self) -> float:
        """On the critical path: compute plus exposed communication."""
        return self.compute + self.exposed

    def comm(self, name: str) -> Comm | None:
        return next((c for c in self.comms if c.name == name), None)


@dataclass(frozen=True)
class LayerTime:
    """One layer, one micro-batch: forward, and backward with its recomputation."""

    ops: LayerOps
    forward: PassTime
    backward: PassTime  # recomputation included

    @property
    def seconds(self) -> float:
        return self.forward.seconds + self.backward.seconds


def weight_grad_seconds(lt: LayerTime) -> float:
    """The layer's weight-gradient GEMMs (every matrix's dW = Xᵀ·dY, the kernels named
    ``.wgrad``): the W a zero-bubble schedule defers (Qi et al. 2024 sec 2). One split for
    EP05's ``labs.pipeline.lab.backward_split`` and EP08's ZB-H1 (``labs.recipe.stage_time``
    ``Stage.split``)."""
    return math.fsum(k.seconds for k in lt.ops.backward.kernels if k.name.endswith(".wgrad"))


def _pass_time(p: Pass, comms: tuple[Comm, ...]) -> PassTime:
    return PassTime(p.of("gemm"), p.of("attention"), p.of("memory"),
                    tuple(c for c in comms if c.seconds > 0))


def _merge(a: PassTime, b: PassTime) -> PassTime:
    """Two passes one after the other (recomputation, ``a``, before backward)."""
    comms = {c.name: replace(c, pieces=_again(c.pieces)) for c in a.comms}
    for c in b.comms:
        if c.name in comms:
            o = comms[c.name]
            c = Comm(c.name, o.collective if o.collective == c.collective
                     else f"{o.collective}; {c.collective}", o.seconds + c.seconds,
                     o.exposed + c.exposed, o.bytes_per_gpu + c.bytes_per_gpu, c.link,
                     o.sm + c.sm, o.pieces + c.pieces)
        comms[c.name] = c
    return PassTime(a.gemm + b.gemm, a.attention + b.attention, a.memory + b.memory,
                    tuple(comms.values()))


def check_tp_overlap(value: object) -> None:
    if value not in TP_OVERLAPS:
        raise LabInputError("tp_overlap", f"TP overlap must be one of {', '.join(TP_OVERLAPS)}")


@lru_cache(maxsize=8192)
def layer_time(model: ModelSpec, cluster: Cluster, *, tp: Group, cp: Group, ep: Group,
               micro_batch: int, seq_len: int, sp: bool, recompute: str,
               options: ComputeOptions = DEFAULT_OPTIONS, moe: bool = False, etp: int = 1,
               tp_overlap: str = "backward", ep_overlap: bool = False,
               ep_dispatch: str = "alltoall") -> LayerTime:
    """One layer's time on one GPU for one micro-batch, by cause."""
    check_tp_overlap(tp_overlap)
    check_ep_dispatch(ep_dispatch)
    ops = layer_ops(model, cluster.gpu, tp=tp.size, cp=cp.size, micro_batch=micro_batch,
                    seq_len=seq_len, sp=sp and tp.size > 1, options=options, moe=moe,
                    ep=ep.size, etp=etp)
    tokens = ops.tokens
    act = tokens * model.hidden * ACT_BYTES
    tp_f, tp_b = _tp(act, ops, cluster, tp, sp, tp_overlap, options.fp8)
    cp_f, cp_b = cp_comms(model, ops, cluster, cp, tp.size)
    ep_f, ep_b = _ep(model, ops, cluster, ep, tp.size, options, moe, ep_overlap,
                     ep_dispatch) if moe else (None, None)
    fwd = _pass_time(ops.forward, tuple(c for c in (tp_f, cp_f, ep_f) if c))
    bwd = _pass_time(ops.backward, tuple(c for c in (tp_b, cp_b, ep_b) if c))
    again = layer_rules(recompute)
    if again.forward_again:
        bwd = _merge(fwd, bwd)
    elif again.attention_again:
        bwd = _merge(_pass_time(ops.attention_core, ()), bwd)
    elif again.policy:
        bwd = _merge(_op_replay(model, cluster, ops, tp.size, sp and tp.size > 1, options,
                                tp_f), bwd)
    return LayerTime(ops, fwd, bwd)


def _op_replay(model: ModelSpec, cluster: Cluster, ops: LayerOps, tp: int, sp: bool,
               options: ComputeOptions, tp_f: Comm | None) -> PassTime:
    """What torchtitan's op-level policy runs again before a layer's backward
    (``labs.model.op_checkpoint``): the dropped matmuls' forward GEMMs, every memory-bound op
    of the forward but the ring attention's merge (inside the kept attention kernel), and the
    forward's TP collectives it does not keep (with SP the all-gathers, half; without, the
    all-reduces, all)."""
    again = PassBuilder(cluster.gpu, options.fp8)
    for name, n, k in recomputed_matmuls(model, tp):
        again.gemm(name, ops.tokens, n, k)
    memory = math.fsum(k.seconds for k in ops.forward.kernels
                       if k.kind == "memory" and k.name != "cp-merge")
    comms = ()
    if tp_f is not None:
        share = 0.5 if sp else 1.0
        comms = (Comm("tp", tp_f.collective, share * tp_f.seconds, share * tp_f.exposed,
                      share * tp_f.bytes_per_gpu, tp_f.link, 0.0, _again(tp_f.pieces, share)),)
    return PassTime(again.done().of("gemm"), 0.0, memory, comms)


def decomposed(gemm: Kernel, comm: float, chunks: int, gpu: GPUSpec,
               fp8: bool) -> tuple[float, float, float]:
    """What a collective decomposed with the GEMM it feeds or follows adds to that GEMM
    (Wang et al. 2023, "Overlap Communication with Dependent Computation via Decomposition
    in Large Deep Learning Models", ASPLOS: the collective's ``chunks`` steps each paired
    with a GEMM on 1/chunks of the rows; Transformer Engine's ring-exchange userbuffers
    overlap and PyTorch's async TP split by the TP degree): (exposed, of it the chunks' lost
    rate, the GEMM's seconds in chunks). The first chunk's GEMM cannot wait on nothing and
    the last chunk's sends cannot hide behind anything, so the pair takes
    max(chunks · g, g + A), g one chunk's GEMM at its own (smaller) shape's rate and A the
    whole collective; what exceeds the undivided GEMM G is exposed: chunks · g − G of it the
    smaller GEMMs' lost waves, the rest a wait. Where splitting costs more than it hides (a
    short collective beside a GEMM whose chunks lose their waves), the collective runs whole
    and blocks, as a per-GEMM overlap setting chooses (TE's userbuffers configuration names a
    method per GEMM; Megatron's --disable-tp-comm-split-ag/-rs): the smaller of the two."""
    m, n, k, batch = gemm.shape
    sub = gemm_time(gpu, math.ceil(m / chunks), n, k, batch, fp8)
    cut = chunks * sub
    exposed = max(0.0, max(cut, sub + comm) - gemm.seconds)
    if exposed >= comm:
        return comm, 0.0, cut
    return exposed, min(exposed, max(0.0, cut - gemm.seconds)), cut


def decomposed_exposed(gemm: Kernel, comm: float, chunks: int, gpu: GPUSpec,
                       fp8: bool) -> float:
    """``decomposed``'s exposed seconds alone."""
    return decomposed(gemm, comm, chunks, gpu, fp8)[0]


def tp_schedule(sp: bool, f: Pass | None = None, b: Pass | None = None, attn: str = "qkv",
                mlp: str = "fc1", fc2: str = "fc2") -> tuple[tuple, tuple]:
    """A layer's TP collectives, forward and backward, in order: (collective, the pass, the
    GEMM it can run beside, the overlap setting that lets it, and where it blocks without it:
    before the GEMM it feeds or after the one it follows). Without SP, 2 + 2 all-reduces;
    with SP, 4 forward and 6 backward (the module docstring). EP04 counts a layer's
    collectives here (``tp_collective_count``), so its count is the one the engine times."""
    if not sp:
        return ((("all_reduce", f, "proj", "all", "after"),
                 ("all_reduce", f, fc2, "all", "after")),
                (("all_reduce", b, attn + ".wgrad", "backward", "after"),
                 ("all_reduce", b, mlp + ".wgrad", "backward", "after")))
    return ((("all_gather", f, attn, "all", "before"),
             ("reduce_scatter", f, "proj", "all", "after"),
             ("all_gather", f, mlp, "all", "before"),
             ("reduce_scatter", f, fc2, "all", "after")),
            (("all_gather", b, "proj.dgrad", "all", "before"),
             ("all_gather", b, fc2 + ".dgrad", "all", "before"),
             ("all_gather", b, attn + ".dgrad", "backward", "after"),
             ("reduce_scatter", b, attn + ".wgrad", "backward", "after"),
             ("all_gather", b, mlp + ".dgrad", "backward", "after"),
             ("reduce_scatter", b, mlp + ".wgrad", "backward", "after")))


def tp_collective_count(sp: bool) -> int:
    """The TP collectives one layer runs per step, forward and backward: 4, or 10 with SP."""
    return sum(len(p) for p in tp_schedule(sp))


def _tp(act: float, ops: LayerOps, cluster: Cluster, g: Group, sp: bool,
        overlap: str, fp8: bool = False) -> tuple[Comm | None, Comm | None]:
    if g.size == 1:
        return None, None
    f, b = ops.forward, ops.backward
    attn = next(n for n in ("qkv", "q-up", "q") if f.named(n))
    # A MoE layer's MLP collectives run beside its shared experts' GEMMs (TP-split linears,
    # as a dense MLP's). Its routed experts' grouped GEMMs are not: Megatron Core builds them
    # with parallel_mode=None and moves their tokens itself, so neither the async backward
    # all-reduce nor Transformer Engine's userbuffers (TransformerEngine PR #1055) runs a TP
    # collective beside them; with no shared experts (Mixtral, Qwen3) those collectives block.
    mlp = "fc1" if f.named("fc1") else "shared.fc1"
    fc2 = "fc2" if f.named("fc2") else "shared.fc2"
    fwd, bwd = tp_schedule(sp, f, b, attn, mlp, fc2)
    level = TP_OVERLAPS.index(overlap)
    out = []
    for entries in (fwd, bwd):
        total = exposed = sent = 0.0
        pieces = []
        for kind, pass_, beside, needs, where in entries:
            t = nccl_collective(kind, act, g.size, cluster, g.per_node).seconds
            total += t
            moved = (2 if kind == "all_reduce" else 1) * (g.size - 1) / g.size * act
            sent += moved
            gemm = next((k for k in pass_.kernels if k.name == beside), None)
            split = cut = 0.0
            if gemm is not None and needs == "all" and overlap == "all":
                e, split, cut = decomposed(gemm, t, g.size, cluster.gpu, fp8)
            else:
                hidden_by = pass_.named(beside) if level >= TP_OVERLAPS.index(needs) else 0.0
                e = max(0.0, t - hidden_by)
            exposed += e
            pieces.append(Piece(kind, beside, where, t, e, 0.0, split, cut, moved))
        name = "all_reduce" if not sp else "all_gather + reduce_scatter"
        out.append(Comm("tp", name, total, exposed, sent, cluster.intra.id, 0.0,
                        tuple(pieces)))
    return out[0], out[1]


def _ep(model: ModelSpec, ops: LayerOps, cluster: Cluster, g: Group, tp: int,
        options: ComputeOptions, moe: bool, overlap: bool,
        dispatch: str) -> tuple[Comm | None, Comm | None]:
    if g.size == 1 or not moe:
        return None, None
    tokens = ops.tokens / tp
    # DeepSeek-V3 dispatches in FP8 (sec 3.3.2), and every one combines in 16 bits.
    d = dispatch_time(model, dispatch, model.hidden * (1 if options.fp8 else ACT_BYTES), tokens,
                      g.size, g.per_node, cluster)
    c = dispatch_time(model, dispatch, model.hidden * ACT_BYTES, tokens, g.size, g.per_node,
                      cluster)
    total = d.seconds + c.seconds
    sent = d.bytes_sent + c.bytes_sent
    share = min(1.0, COMM_SMS / cluster.gpu.kernels.sm_count) if cluster.gpu.kernels else 0.0
    name = "all_to_all" if dispatch == "alltoall" else "DeepEP"
    out = []
    for compute, forward in ((ops.forward.seconds, True), (ops.backward.seconds, False)):
        exposed = max(total - compute, share * total) if overlap else total
        # Overlapped, the compute runs f·A longer for the SMs lent; past that it waits.
        sm = min(exposed, share * total) if overlap else 0.0
        # Without overlap the dispatch blocks before the experts' first GEMM and the combine
        # after their last (backward: the combine's gradient first, before fc2's dgrad);
        # overlapped, both run beside the pass, sharing its exposure and SMs by their time.
        first, last = ("experts.fc1", "experts.fc2") if forward \
            else ("experts.fc2.dgrad", "experts.fc1.wgrad")
        pieces = tuple(
            Piece(f"{name} {what}", anchor, "pass" if overlap else where, a.seconds,
                  exposed * a.seconds / total if total else 0.0,
                  sm * a.seconds / total if total else 0.0, sent=a.bytes_sent)
            for what, a, anchor, where in (
                ("dispatch" if forward else "combine's gradient", d if forward else c, first,
                 "before"),
                ("combine" if forward else "dispatch's gradient", c if forward else d, last,
                 "after")))
        out.append(Comm("ep", f"{name} (dispatch + combine)", total, exposed, sent,
                        d.bottleneck, sm, pieces))
    return out[0], out[1]
