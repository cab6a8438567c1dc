"""EP07's routing: the experts a token's k copies pick under a skewed router, and the copies
each EP rank receives and sends in DeepEP's dispatch. No time here: ``labs.experts.layer``
times the layer on these counts.

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
many as its own tokens and its forwarding make (``labs.experts.layer`` times both legs side
by side, ``labs.hardware.nccl.pairwise``, the slower of receiving and sending). Dropped copies
(over capacity) thin a GPU's in proportion.
"""

from __future__ import annotations

import math

from labs.experts.inputs import MoEInput
from labs.model.spec import ModelSpec
from labs.parallel.dispatch import block_missed


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


def ep_span(ep: int, per_node: int) -> tuple[int, int]:
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
    g, nodes = ep_span(ep, per_node)
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
