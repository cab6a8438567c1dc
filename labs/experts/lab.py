"""EP07 Experts: a mixture-of-experts layer laid out by expert parallelism, one forward pass
(``simulate_moe``), the page's whole state.

The layer itself, its two all-to-alls and its experts' GEMMs, is ``labs.experts.layer``'s, on
the routing of ``labs.experts.routing``; run at the state's skew and at none (balanced). Around
it this module adds the experts' grouped-GEMM efficiency against the tokens an expert gets, the
router's balance loss against skew, each kind of group's traffic on the cluster, and the
parameters and FLOPs a GPU holds and runs.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from labs.core.limits import MAX_RANK_MAP_GPUS
from labs.experts.inputs import MoEInput, MoEResult, Routing
from labs.experts.layer import ACTIVATION_BYTES, expert_seconds, route
from labs.hardware.gpus import GPUSpec
from labs.hardware.kernels import hbm_rate, matmul_rate, with_matmul_efficiency
from labs.hardware.links import with_network
from labs.model.flops import expert_flops_per_token, model_flops_per_token
from labs.model.spec import ModelSpec
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


def balance_of(result: MoEResult) -> tuple[tuple[float, float, float], ...]:
    """``result``'s balance curve (``balance_curve``), routed when it is asked for: by the
    balance chart, a diagram drawn on its own request, and the JSON answer. A control's answer
    never draws it, so it never routes the layer at eleven skews (issue 31: 17% of the
    experts lab's CPU in a class)."""
    return balance_curve(replace(result.input, skew=0.0, group="ep"), result.ep_per_node)


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
        network=(groups := network(inp, routing, dense_most, experts_most)),
        network_nonblocking=(groups if inp.cluster.oversubscription == 1 else
                             nonblocking_network(inp, per_node, dense_most, experts_most)),
    )


def nonblocking_network(inp: MoEInput, per_node: int, dense_local: float,
                        expert_local: float) -> tuple[GroupLink, ...]:
    """``network`` on the same leaves with a 1:1 spine (none oversubscribed): what each group
    would get without the spine's squeeze, so a chart can say which groups it slowed (EP07
    step 7; round-17 cold reading, finding 13)."""
    flat = replace(inp, cluster=with_network(inp.cluster, inp.cluster.leaf_nodes, 1.0))
    return network(flat, route(flat, inp.skew, per_node), dense_local, expert_local)
