"""EP07 Experts: a mixture-of-experts layer laid out by expert parallelism, one forward pass.

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

Routing here is deterministic, not sampled: a ``skew`` from 0 to 1 moves each token's chance of
picking expert 0 from k/E (uniform) to 1 (every token picks it), the other experts sharing
the remaining k − p_0 equally (a token picks k *distinct* experts, so no expert can receive
more than every token once). Every GPU routes its T tokens with that distribution; counts are
whole tokens by largest remainder, so a URL fully describes the state.

DeepEP (``ep_dispatch="deepep"``; deepseek-ai/DeepEP's normal kernels, DeepSeek-V3 sec 3.2.2,
as EP08 times it in ``labs.parallel.dispatch``): a token crosses the network once per
destination node, to the GPU of the same in-node index, which forwards it on NVLink to the
GPUs there that hold its experts; inside a node it goes once per destination GPU, not once per
expert. Under the skew above a token's picks are a mixture: with the hot chance p_0 it takes
expert 0 and k − 1 of the other E − 1 at random, else k of the other E − 1 at random (the same
marginals; at skew 0 exactly uniform routing), so the chance a token reaches a GPU's (or a
node's) block of experts is hypergeometric within each branch (``block_hit``). Each GPU then
receives, per dispatch, (N − 1)·T·P(node) copies over the network (one from each other node's
same-index GPU) and (EP − N)·T·P(GPU) on NVLink, N the nodes the group spans, and sends as
many as its own tokens and its forwarding make; both legs side by side
(``labs.hardware.nccl.pairwise``), the slower of receiving and sending. Dropped copies (over
capacity) thin a GPU's in proportion.

Capacity (Switch Transformer, Fedus et al. 2021, arXiv:2101.03961 sec 2.2): each expert takes
at most C = ceil(capacity_factor · T·k / E) tokens from each GPU (Megatron's
``get_capacity`` on the local tokens x top-k); the rest are dropped and pass through the
residual connection only. A capacity factor of 0 means no limit (dropless, as Megatron's
default and DeepSeek-V3 train).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

from labs.core.limits import MAX_RANK_MAP_GPUS
from labs.experts.inputs import MoEInput, MoEResult, Routing
from labs.hardware.comm import nccl_collective
from labs.hardware.gpus import GPUSpec
from labs.hardware.kernels import (
    grouped_gemm_time,
    hbm_rate,
    matmul_rate,
    with_matmul_efficiency,
)
from labs.hardware.nccl import pairwise
from labs.model.flops import expert_flops_per_token, model_flops_per_token
from labs.model.spec import ModelSpec
from labs.parallel.dispatch import block_missed
from labs.parallel.rank_map import (
    GroupLink,
    group_colouring,
    group_link,
    group_of_rank,
    group_place,
    group_summaries,
    members_per_node,
)
from labs.schedules.stages import stage_params

ACTIVATION_BYTES = 2  # bf16 hidden states on the wire (DeepSeek-V3 sends FP8 in dispatch)


def pick_chances(experts: int, top_k: int, skew: float) -> tuple[float, ...]:
    """Each expert's chance of being among a token's k picks: expert 0 from k/E to 1 as skew
    goes 0 -> 1, the rest sharing what is left equally (the chances sum to k)."""
    hot = top_k / experts + skew * (1 - top_k / experts)
    rest = (top_k - hot) / (experts - 1) if experts > 1 else 0.0
    return (hot, *([rest] * (experts - 1)))


def whole_tokens(tokens: int, chances: tuple[float, ...]) -> tuple[int, ...]:
    """Token copies per expert from one GPU's ``tokens``: tokens·p rounded by largest
    remainder (ties to the lower expert), so they sum to tokens·k exactly."""
    exact = [tokens * p for p in chances]
    counts = [math.floor(x + 1e-9) for x in exact]
    short = round(sum(exact)) - sum(counts)
    order = sorted(range(len(exact)), key=lambda e: (-(exact[e] - counts[e]), e))
    for e in order[:max(0, short)]:
        counts[e] += 1
    return tuple(counts)


def block_hit(model: ModelSpec, hot: float, lo: int, hi: int) -> float:
    """P(a token's k picks reach any of experts lo .. hi − 1) under the skewed routing: with
    chance ``hot`` it picks expert 0 and k − 1 of the other E − 1 uniformly, else k of them
    (module docstring). Uniform routing (hot = k/E) is EP08's own count
    (``labs.parallel.dispatch.block_missed``), node-limited where the model's config limits
    it; a skewed router's picks leave that limit out."""
    e, k, size = model.experts, model.top_k, hi - lo
    if math.isclose(hot, k / e):
        return 1.0 - block_missed(e, k, size, model.route_groups, model.route_group_limit)
    if k >= e or size >= e:
        return 1.0
    others = e - 1

    def avoid(block: int, picks: int) -> float:  # picks from the E − 1 avoid ``block``
        return math.comb(others - block, picks) / math.comb(others, picks) if picks else 1.0

    if lo == 0:  # the block holds expert 0: missed only when 0 is not picked
        return 1.0 - (1.0 - hot) * avoid(size - 1, k)
    return 1.0 - hot * avoid(size, k - 1) - (1.0 - hot) * avoid(size, k)


def _span(ep: int, per_node: int) -> tuple[int, int]:
    """(EP members on a node, nodes the EP group spans)."""
    g = max(1, min(per_node, ep))
    return g, math.ceil(ep / g)


def deepep_traffic(inp: MoEInput, hot: float, per_node: int,
                   kept_share: list[float]) -> list[tuple[float, float, float, float]]:
    """Per EP rank, token copies (network in, NVLink in, network out, NVLink out) of one
    DeepEP dispatch of ``inp.tokens`` tokens per GPU (module docstring), each GPU's incoming
    copies thinned by ``kept_share``, the share of its experts' copies under capacity."""
    m, ep, tokens = inp.model, inp.ep, inp.tokens
    per_gpu = m.experts // ep
    g, nodes = _span(ep, per_node)
    gpu_hit = [block_hit(m, hot, r * per_gpu, (r + 1) * per_gpu) for r in range(ep)]
    node_hit = [block_hit(m, hot, n * g * per_gpu, min(m.experts, (n + 1) * g * per_gpu))
                for n in range(nodes)]
    out = []
    for r in range(ep):
        n = r // g
        mates = [q for q in range(n * g, min(ep, (n + 1) * g)) if q != r]
        out.append(((nodes - 1) * tokens * node_hit[n] * kept_share[r],
                    (ep - nodes) * tokens * gpu_hit[r] * kept_share[r],
                    tokens * math.fsum(node_hit[q] for q in range(nodes) if q != n),
                    nodes * tokens * math.fsum(gpu_hit[q] for q in mates)))
    return out


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


def _deepep(inp: MoEInput, skew: float, per_node: int, local: list[int], kept: list[int],
            token_bytes: float) -> Traffic:
    """Bytes each EP rank receives and sends in one DeepEP dispatch, and its time: the
    network and NVLink legs side by side, the slower of receiving and sending."""
    m, ep = inp.model, inp.ep
    per_gpu = m.experts // ep
    share = [sum(kept[g * per_gpu:(g + 1) * per_gpu])
             / max(1, sum(local[g * per_gpu:(g + 1) * per_gpu])) for g in range(ep)]
    legs = deepep_traffic(inp, pick_chances(m.experts, m.top_k, skew)[0], per_node, share)
    nodes = _span(ep, per_node)[1]
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
    ep = inp.ep
    per_gpu = model.experts // ep
    gpu = with_matmul_efficiency(inp.cluster, inp.mfu).gpu
    # Every GPU but the hot expert's keeps the same counts, or one more on a few experts (the
    # chances are equal past expert 0): each distinct set of counts is timed once.
    counts = [copies[g * per_gpu:(g + 1) * per_gpu] for g in range(ep)]
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


@lru_cache(maxsize=256)  # a state asks 2 routings, its balance curve 11, sharing 1-2
def _route_kept(key: _RouteKey) -> Routing:
    return _route(key.inp, key.fields[-2], key.fields[-1])


def _route(inp: MoEInput, skew: float, per_node: int) -> Routing:
    m, ep = inp.model, inp.ep
    per_gpu = m.experts // ep
    local = whole_tokens(inp.tokens, pick_chances(m.experts, m.top_k, skew))
    cap = (math.ceil(inp.capacity_factor * inp.tokens * m.top_k / m.experts)
           if inp.capacity_factor else None)
    kept = [n if cap is None else min(n, cap) for n in local]
    # Every GPU of the group routes alike, so each expert gets EP times one GPU's share.
    on_gpu = [sum(kept[g * per_gpu:(g + 1) * per_gpu]) for g in range(ep)]
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


GEMM_SWEEP = tuple(2 ** i for i in range(4, 17))  # 16 .. 65,536 tokens to one expert


def expert_efficiency(model: ModelSpec, gpu: GPUSpec, tokens: float, split: int = 1,
                      experts: int = 1) -> float:
    """The share of the GPU's BF16 peak the forward GEMMs of ``experts`` experts, run as one
    grouped GEMM (``expert_seconds``), reach on ``tokens`` tokens each, ``split`` ways wide:
    a roofline with wave quantisation, so few tokens an expert leave it waiting on the
    weights' bytes, and a lone expert's small GEMM on part-empty waves too."""
    m = max(1, round(tokens))
    seconds = expert_seconds(model, gpu, (m,) * experts, split)
    return 2 * m * experts * model.expert_size / split / (seconds * gpu.bf16_flops)


BALANCE_SKEWS = tuple(i / 10 for i in range(11))


def balance_loss(routed: tuple[int, ...]) -> float:
    """The Switch Transformer's load-balancing loss over α (Fedus et al. 2021, eq. 4; Megatron
    Core's ``switch_load_balancing_loss_func`` for top-k): E·Σ f_i·P_i, f_i expert i's share of
    the routed copies and P_i its share of the router's probability. The lab's router is
    deterministic, so P_i = f_i and the loss is E·Σ f_i²: 1 when balanced, E when one expert
    takes every copy (top-1)."""
    total = sum(routed)
    return len(routed) * math.fsum((n / total) ** 2 for n in routed) if total else 1.0


@lru_cache(maxsize=64)
def balance_curve(inp: MoEInput, per_node: int) -> tuple[tuple[float, float, float], ...]:
    """(skew, balance loss, layer time / balanced) at skews 0, 0.1 .. 1 for ``inp``'s layout
    (its own skew ignored: the caller passes it at 0, so a skew slider reuses the curve)."""
    runs = [route(inp, skew, per_node) for skew in BALANCE_SKEWS]
    base = runs[0].layer_s  # BALANCE_SKEWS[0] is 0: uniform routing
    return tuple((skew, balance_loss(r.routed_per_expert), r.layer_s / base)
                 for skew, r in zip(BALANCE_SKEWS, runs, strict=True))


# Gradients are reduced in fp32 for bf16 training: Megatron-LM forces
# --accumulate-allreduce-grads-in-fp32 with --bf16 ("bfloat16 requires gradient accumulation
# and all-reduce to be done in fp32"; --grad-reduce-in-bf16 opts out), NeMo's bf16_mixed sets
# grad_reduce_in_fp32=True, torchtitan's FSDP2 reduces in float32, and DeepSeek-V3 keeps its
# gradients in FP32 (its report, sec 3.3).
GRAD_BYTES = 4


def network(inp: MoEInput, routing: Routing, dense_local: float,
            expert_local: float) -> tuple[GroupLink, ...]:
    """Each kind of group's traffic on the cluster (the rank map's groups, the bandwidth they
    get): TP's all-reduce of one layer's activations (T tokens x hidden x 2 B), PP's send of
    them to the next stage, DP's all-reduce of the dense gradients a GPU holds and expert-DP's
    of its experts' (fp32, 4 B each, once a step), and EP's dispatch as the layer times it above.
    ``dense_local`` and ``expert_local`` are each the most any stage's GPU holds: every stage
    reduces at once and the step waits for the slowest, and the stage with the most dense
    weights (DeepSeek-V3's first, its 3 dense layers) is not the one with the most experts.
    CP and expert-TP are left out."""
    m, lay, cl = inp.model, inp.layout, inp.cluster
    acts = inp.tokens * m.hidden * ACTIVATION_BYTES
    out = []
    for kind, kind_of, size, what in (
            ("tp", "all_reduce", acts, "one layer's activations"),
            ("pp", "p2p", acts, "activations to the next stage"),
            ("dp", "all_reduce", dense_local * GRAD_BYTES,
             "the dense gradients in fp32, once a step"),
            ("edp", "all_reduce", expert_local * GRAD_BYTES,
             "the experts' gradients in fp32, once a step")):
        if getattr(lay, {"edp": "expert_dp"}.get(kind, kind)) > 1:
            out.append(group_link(lay, kind, cl, kind_of, size, what))
    if inp.ep > 1:
        per_node, nodes, leaves, tier = group_place(lay, "ep", cl)
        slow = max(range(inp.ep), key=lambda g: routing.dispatch_s[g])
        out.insert(1 if lay.tp > 1 else 0, GroupLink(
            "ep", "all_to_all", "one layer's dispatch of token copies",
            max(routing.received_bytes[slow], routing.sent_bytes[slow]),
            routing.dispatch_s[slow], per_node, nodes, leaves, tier))
    return tuple(out)


def simulate_moe(inp: MoEInput) -> MoEResult:
    m, layout = inp.model, inp.layout
    ep_ids = group_of_rank(layout, "ep")
    ep_group = tuple(r for r, g in enumerate(ep_ids) if g == 0)
    per_node = members_per_node(ep_group, inp.cluster.gpus_per_node)
    routing = route(inp, inp.skew, per_node)
    balanced = route(inp, 0.0, per_node)
    per_gpu = routing.tokens_per_gpu
    routed = routing.routed_per_expert
    slowest = max(range(inp.ep), key=lambda g: (routing.compute_s[g] + 2 * routing.dispatch_s[g],
                                                -g))
    # The heaviest pipeline stage's weights on one GPU: TP splits projections, EP x expert-TP
    # splits the routed experts, norms and routers are copied (labs.schedules.stages).
    stages = stage_params(m, inp.pp)
    held = [(s.tp_split / inp.tp + s.replicated, s.experts / (inp.ep * inp.etp))
            for s in stages]
    dense_local, expert_local = max(held, key=sum)
    # Each group kind's traffic from the stage that holds the most of what it reduces.
    dense_most, experts_most = max(d for d, _ in held), max(e for _, e in held)
    seq = 4096
    dense_flops = model_flops_per_token(m, seq) + 6 * (m.params - m.active_params)
    gpu = with_matmul_efficiency(inp.cluster, inp.mfu).gpu
    mean_tokens = sum(routed) / len(routed)
    shared = inp.tokens if m.shared_experts else None
    local = m.experts // inp.ep
    return MoEResult(
        balance_curve=balance_curve(replace(inp, skew=0.0, group="ep"), per_node),
        balance_loss=balance_loss(routing.routed_per_expert),
        gemm_curve=tuple((t, expert_efficiency(m, gpu, t, inp.etp, local)) for t in GEMM_SWEEP),
        tokens_per_expert=mean_tokens,
        gemm_efficiency=expert_efficiency(m, gpu, mean_tokens, inp.etp, local),
        shared_tokens=shared,
        # Megatron splits the shared experts over the TP group, as the dense MLP (each shared
        # expert taken alone: DeepSeek-V3 and GLM have one).
        shared_efficiency=(None if shared is None
                           else expert_efficiency(m, gpu, shared, inp.tp)),
        shared_s=None if shared is None else expert_seconds(m, gpu, shared, inp.tp),
        gemm_curve_alone=tuple((t, expert_efficiency(m, gpu, t, inp.etp)) for t in GEMM_SWEEP),
        alone_efficiency=expert_efficiency(m, gpu, mean_tokens, inp.etp),
        matmul_rate=matmul_rate(gpu), hbm_rate=hbm_rate(gpu),
        input=inp, layout=layout, experts_per_gpu=m.experts // inp.ep, ep_group=ep_group,
        ep_per_node=per_node, routing=routing, balanced=balanced, slowest_gpu=slowest,
        max_over_mean=max(routed) / (sum(routed) / len(routed)),
        gpu_max_over_mean=max(per_gpu) / (sum(per_gpu) / len(per_gpu)) if sum(per_gpu) else 1.0,
        dropped_fraction=sum(routing.dropped_per_expert) / sum(routed),
        expert_flops_per_token=expert_flops_per_token(m),
        params=m.params, active_params=m.active_params, expert_params=m.expert_params,
        params_per_gpu=dense_local + expert_local, experts_per_gpu_params=expert_local,
        flops_per_token=model_flops_per_token(m, seq), dense_equivalent_flops=dense_flops,
        groups=group_summaries(layout, inp.cluster.gpus_per_node),
        rank_map=(group_colouring(layout, inp.group, inp.cluster.gpus_per_node)
                  if layout.world_size <= MAX_RANK_MAP_GPUS else None),
        network=network(inp, routing, dense_most, experts_most),
    )
