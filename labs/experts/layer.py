"""EP07: one MoE layer's forward pass under expert parallelism, timed on the routing of
``labs.experts.routing`` (the skewed router's picks, DeepEP's copies).

A MoE layer replaces the MLP with E experts and a router: y(x) = Σ_{i in top-k(x)} g_i(x)·E_i(x)
(Shazeer et al. 2017, arXiv:1701.06538; GShard, Lepikhin et al. 2020, arXiv:2006.16668).
Memory holds every expert (total parameters); a token computes with k of them (active).

Expert parallelism (EP) puts E/EP experts on each GPU of an EP group; experts are numbered
contiguously, EP rank r holding experts r·E/EP ... (r+1)·E/EP − 1 (Megatron Core MoE,
``local_expert_indices``). One MoE layer's forward pays two all-to-alls over the EP group
(Megatron's ``MoEAlltoAllTokenDispatcher``; GShard sec 2.2):
- dispatch: every GPU sends each of its T tokens' k copies to the GPUs holding their experts;
- expert compute: each GPU runs its experts on what it received;
- combine: the results travel back the same way, and the k outputs are summed with their gates.
Each all-to-all is a collective, so each phase ends when its slowest member ends: the layer
takes max(dispatch) + max(compute) + max(combine) over the GPUs, and one hot expert makes one
GPU the slowest in all three.

Capacity (Switch Transformer, Fedus et al. 2021, arXiv:2101.03961 sec 2.2): each expert takes
at most C = ceil(capacity_factor · T·k / E) tokens from each GPU (Megatron's
``get_capacity`` on the local tokens x top-k); the rest are dropped and pass through the
residual connection only. A capacity factor of 0 means no limit (dropless, as Megatron's
default and DeepSeek-V3 train).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypeVar

from labs.experts.inputs import MoEInput, Routing
from labs.experts.routing import deepep_traffic, ep_span, pick_chances, whole_tokens
from labs.hardware.comm import nccl_collective
from labs.hardware.gpus import GPUSpec
from labs.hardware.kernels import grouped_gemm_time, with_matmul_efficiency
from labs.hardware.nccl import pairwise
from labs.model.spec import ModelSpec

ACTIVATION_BYTES = 2  # bf16 hidden states on the wire (DeepSeek-V3 sends FP8 in dispatch)


def expert_seconds(model: ModelSpec, gpu: GPUSpec, tokens: int | tuple[int, ...],
                   etp: int = 1) -> float:
    """The forward of a GPU's routed experts, ``tokens`` copies to each (one count, or one per
    expert): the up (and gate) GEMM and the down GEMM, each 1/etp wide, each one grouped GEMM
    over the experts (``labs.hardware.kernels.grouped_gemm_time``), as Megatron
    (``--moe-grouped-gemm``) and DeepSeek (DeepGEMM) run them. One count is one expert alone
    (a shared expert)."""
    rows = (tokens,) if isinstance(tokens, int) else tokens
    if sum(rows) <= 0:
        return 0.0
    width = model.expert_ffn // etp
    up = (2 if model.gated_mlp else 1) * width
    return (grouped_gemm_time(gpu, rows, up, model.hidden)
            + grouped_gemm_time(gpu, rows, model.hidden, width))


Traffic = tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
PerExpert = TypeVar("PerExpert", list[int], tuple[int, ...])


def _by_rank(per_expert: PerExpert, ep: int) -> list[PerExpert]:
    """``per_expert`` (one value per expert) cut into each EP rank's experts: rank r holds
    experts r·E/EP ... (r+1)·E/EP − 1 (module docstring)."""
    size = len(per_expert) // ep
    return [per_expert[r * size:(r + 1) * size] for r in range(ep)]


def _deepep(inp: MoEInput, skew: float, per_node: int, local: list[int], kept: list[int],
            token_bytes: float) -> Traffic:
    """Bytes each EP rank receives and sends in one DeepEP dispatch, and its time: the
    network and NVLink legs side by side, the slower of receiving and sending."""
    m, ep = inp.model, inp.ep
    share = [sum(k) / max(1, sum(n))
             for k, n in zip(_by_rank(kept, ep), _by_rank(local, ep), strict=True)]
    legs = deepep_traffic(inp, pick_chances(m.experts, m.top_k, skew)[0], per_node, share)
    nodes = ep_span(ep, per_node)[1]
    received = tuple((a + b) * token_bytes for a, b, _, _ in legs)
    sent = tuple((c + d) * token_bytes for _, _, c, d in legs)
    # The slower of receiving and sending; ranks with the same legs are timed once.
    timed = {leg: max(pairwise(b * token_bytes, a * token_bytes, nodes, inp.cluster).seconds,
                      pairwise(d * token_bytes, c * token_bytes, nodes, inp.cluster).seconds)
             for leg in dict.fromkeys(legs) for a, b, c, d in (leg,)}
    return received, sent, tuple(timed[leg] for leg in legs)


def _alltoall(inp: MoEInput, on_gpu: list[int], total_kept: int,
              token_bytes: float, per_node: int) -> Traffic:
    """Bytes each EP rank receives and sends in one NCCL all-to-all (a copy per routed
    expert), and its time for the larger of the two."""
    ep = inp.ep
    received = tuple((ep - 1) * on_gpu[g] * token_bytes for g in range(ep))
    sent = tuple((total_kept - on_gpu[g]) * token_bytes for g in range(ep))
    # A receiver hears equally from every peer, which is the even spread labs.hardware.comm's
    # all-to-all prices: (N−1)/N·S per GPU, split between NVLink and the network by how many
    # members share the node. S is the tensor whose (N−1)/N share is this traffic. Ranks with
    # the same traffic (all but the hot expert's, at most a few apart) are timed once.
    traffic = [max(r, s) for r, s in zip(received, sent, strict=True)]
    timed = {t: nccl_collective("all_to_all", t * ep / (ep - 1), ep, inp.cluster, per_node).seconds
             if ep > 1 and t else 0.0 for t in dict.fromkeys(traffic)}
    return received, sent, tuple(timed[t] for t in traffic)


def expert_compute(inp: MoEInput, model: ModelSpec, copies: tuple[int, ...]) -> tuple[float, ...]:
    """Each EP rank's expert forward (``expert_seconds``) on ``copies``, the token copies
    each of ``model``'s experts keeps over the EP group, at the state's GEMM rates."""
    gpu = with_matmul_efficiency(inp.cluster, inp.mfu).gpu
    # Every GPU but the hot expert's keeps the same counts, or one more on a few experts (the
    # chances are equal past expert 0): each distinct set of counts is timed once.
    counts = _by_rank(copies, inp.ep)
    timed = {c: expert_seconds(model, gpu, c, inp.etp) for c in dict.fromkeys(counts)}
    return tuple(timed[c] for c in counts)


@dataclass(frozen=True)
class _RouteKey:
    """What a routing depends on: these of the input's fields, the skew and the EP members a
    node holds; not the rank map's colouring (``group``) nor the input's own skew (the
    caller's wins). The input rides along, left out of the key."""

    fields: tuple
    inp: MoEInput = field(compare=False, hash=False)


def route(inp: MoEInput, skew: float, per_node: int) -> Routing:
    """One MoE layer's routing at ``skew`` (``_route``), kept per what it depends on: a
    state's own routing, its balanced one and its balance curve's are asked for by one page
    more than once, and a colouring or skew move asks them again."""
    return _route_kept(_RouteKey((inp.model, inp.cluster, inp.ep, inp.etp, inp.tokens,
                                  inp.capacity_factor, inp.ep_dispatch, inp.mfu, skew,
                                  per_node), inp))


@lru_cache(maxsize=2048)  # a state asks 2 routings, its balance curve 11, sharing 1-2
def _route_kept(key: _RouteKey) -> Routing:
    return _route(key.inp, key.fields[-2], key.fields[-1])


def _route(inp: MoEInput, skew: float, per_node: int) -> Routing:
    m, ep = inp.model, inp.ep
    local = whole_tokens(inp.tokens, pick_chances(m.experts, m.top_k, skew))
    cap = (math.ceil(inp.capacity_factor * inp.tokens * m.top_k / m.experts)
           if inp.capacity_factor else None)
    kept = [n if cap is None else min(n, cap) for n in local]
    # Every GPU of the group routes alike, so each expert gets EP times one GPU's share.
    on_gpu = [sum(block) for block in _by_rank(kept, ep)]
    token_bytes = m.hidden * ACTIVATION_BYTES
    # The local experts' forward GEMMs on the tokens each keeps, one grouped GEMM at the
    # shapes' measured rates (labs.hardware.kernels: few tokens an expert leave it waiting on
    # the experts' weights). Expert-TP
    # splits each expert's matmuls over etp GPUs (Megatron's expert-tensor-parallel group);
    # the all-gather of tokens inside that group is not priced here.
    compute = expert_compute(inp, m, tuple(ep * n for n in kept))
    if inp.ep_dispatch == "deepep" and ep > 1:
        received, sent, dispatch = _deepep(inp, skew, per_node, local, kept, token_bytes)
    else:
        received, sent, dispatch = _alltoall(inp, on_gpu, sum(kept), token_bytes, per_node)
    # Combine sends the same bytes back the other way: the same time per GPU.
    layer = 2 * max(dispatch) + max(compute)
    return Routing(
        pick_chance=pick_chances(m.experts, m.top_k, skew),
        routed_per_expert=tuple(ep * n for n in local),
        dropped_per_expert=tuple(ep * (n - k) for n, k in zip(local, kept, strict=True)),
        capacity=None if cap is None else ep * cap,
        tokens_per_gpu=tuple(ep * n for n in on_gpu),
        received_bytes=received, sent_bytes=sent, dispatch_s=dispatch,
        compute_s=compute, layer_s=layer)
