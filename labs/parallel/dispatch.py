"""How many copies of a token an expert-parallel dispatch sends, and over which link.

A MoE layer sends each of its T tokens (hidden h) to the GPUs holding its top-k experts and
brings the k outputs back (dispatch and combine). Two ways are timed (``EP_DISPATCHES``):

- "alltoall": NCCL's all-to-all of the tokens permuted by expert (Megatron Core's
  ``MoEAlltoAllTokenDispatcher``, torchtitan's expert parallelism): a token goes once per
  chosen expert, so a GPU sends k·(e−1)/e copies of each of its tokens.
- "deepep": DeepEP's normal kernels (deepseek-ai/DeepEP, Megatron Core's flex dispatcher
  with --moe-enable-deepep), the scheme of DeepSeek-V3 sec 3.2.2: a token crosses the
  network once per destination node, to the GPU of the same in-node index, which forwards it
  over NVLink to the GPUs of that node holding its experts; inside a node it goes once per
  destination GPU (``is_token_in_rank``), not once per expert. The combine reduces the same
  way back. DeepEP's published normal-kernel bandwidths (H800, CX7 400 Gb/s, DeepSeek-V3's
  setting: 153-158 GB/s on NVLink of the ~160 GB/s maximum at EP 8; 43-58 GB/s "bottleneck
  bandwidth" on the RDMA link of ~50 GB/s at EP 16-64, docs/legacy.md) are what the NICs and
  NVLink carry, so the copies are timed at the cluster's measured link bandwidths, the
  network and NVLink legs running side by side (the kernels forward while they receive).

Routing is uniform (the lab's balanced assumption, ``labs.model.ops``): every token picks k
distinct experts at random, or, with DeepSeek-V3's node-limited routing (``route_groups``
G and ``route_group_limit`` M: config.json n_group and topk_group; sec 2.1.2, "each token
will be sent to at most M nodes"), k experts at random among the experts of M groups chosen
at random. Experts sit on the EP ranks in order (Megatron's ``local_expert_indices``), so a
node or a GPU holds a contiguous block of them. The chance that a block of s experts holds
none of a token's k is hypergeometric (``block_missed``); its complement, summed over the
blocks, is the expected number of destinations a token has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.hardware.links import Cluster
from labs.hardware.nccl import nccl_time, pairwise
from labs.model.spec import ModelSpec

EP_DISPATCHES = ("alltoall", "deepep")


def check_ep_dispatch(value: object) -> None:
    if value not in EP_DISPATCHES:
        raise LabInputError("ep_dispatch", "EP dispatch must be one of "
                                           f"{', '.join(EP_DISPATCHES)}")


def _none_of(pool: int, block: int, k: int) -> float:
    """P(k distinct picks from ``pool`` avoid a ``block`` of it): C(pool − block, k) /
    C(pool, k)."""
    if block >= pool:
        return 0.0
    return math.comb(pool - block, k) / math.comb(pool, k)


@lru_cache(maxsize=1024)
def block_missed(experts: int, k: int, block: int, groups: int = 0, limit: int = 0) -> float:
    """P(a token's k experts all miss a contiguous, aligned ``block`` of the experts), under
    uniform routing, or node-limited routing over ``groups`` groups of which the token takes
    ``limit`` (0: no limit). A block inside one group is missed when its group is not chosen,
    or is chosen and the k picks among the chosen groups' experts avoid it; a block of whole
    groups is missed as the sum over how many of its groups are chosen (hypergeometric)."""
    block = max(1, min(block, experts))
    if not groups or not limit or limit >= groups or experts % groups:
        return _none_of(experts, block, k)
    size = experts // groups
    pool = limit * size
    if block <= size and size % block == 0:
        chosen = limit / groups
        return (1 - chosen) + chosen * _none_of(pool, block, k)
    if block % size == 0:
        a = block // size  # the block's whole groups
        total = math.comb(groups, limit)
        return math.fsum(math.comb(a, j) * math.comb(groups - a, limit - j) / total
                         * _none_of(pool, j * size, k)
                         for j in range(max(0, limit - (groups - a)), min(a, limit) + 1))
    return _none_of(experts, block, k)  # a block across group edges: the limit left out


@dataclass(frozen=True)
class Copies:
    """Copies of one token a GPU sends per dispatch (and takes back per combine)."""

    network: float  # over the NICs, to other nodes
    nvlink: float  # over the scale-up link, inside a node (forwarding included)


@lru_cache(maxsize=1024)
def copies(model: ModelSpec, dispatch: str, ep: int, per_node: int) -> Copies:
    """Copies of each token one GPU of an EP group of ``ep`` (``per_node`` of them on each
    node) sends, by ``dispatch``."""
    check_ep_dispatch(dispatch)
    e, k = model.experts, model.top_k
    g = max(1, min(per_node, ep))
    nodes = max(1, math.ceil(ep / g))
    if dispatch == "alltoall":  # one copy per expert not on this GPU, split by where it sits
        return Copies(k * (ep - g) / ep, k * (g - 1) / ep)
    groups, limit = model.route_groups, model.route_group_limit
    per_rank = e / ep
    rank_hit = 1 - block_missed(e, k, max(1, round(per_rank)), groups, limit)
    node_hit = 1 - block_missed(e, k, max(1, round(per_rank * g)), groups, limit)
    # Every node hit but its own once over the network; on each node hit (its own included)
    # the GPUs hit but the one receiving there, over NVLink: each GPU forwards as much for
    # the others' tokens as they forward for its own.
    return Copies((nodes - 1) * node_hit, nodes * (g - 1) * rank_hit)


@dataclass(frozen=True)
class DispatchTime:
    """One dispatch (or combine) of a micro-batch's tokens on one GPU."""

    seconds: float
    bytes_sent: float
    bottleneck: str  # the link id that bounds it


def dispatch_time(model: ModelSpec, dispatch: str, token_bytes: float, tokens: float,
                  ep: int, per_node: int, cluster: Cluster) -> DispatchTime:
    """``tokens`` tokens of ``token_bytes`` each, dispatched (or combined) over an EP group of
    ``ep`` GPUs with ``per_node`` on a node: "alltoall" as NCCL runs its all-to-all
    (``labs.hardware.nccl``), "deepep" as its copies (``copies``) sent the same way
    (``labs.hardware.nccl.pairwise``: the NIC's and NVLink's measured bandwidths, both legs
    side by side, after one send's latency)."""
    g = min(ep, per_node, cluster.gpus_per_node)
    c = copies(model, dispatch, ep, g)
    sent = (c.network + c.nvlink) * token_bytes * tokens
    if dispatch == "alltoall":
        t = nccl_time("all_to_all", model.top_k * token_bytes * tokens, ep, cluster, per_node)
    else:
        t = pairwise(c.nvlink * token_bytes * tokens, c.network * token_bytes * tokens,
                     math.ceil(ep / g), cluster)
    return DispatchTime(t.seconds, sent, t.bottleneck)
