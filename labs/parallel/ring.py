"""CP's ring (ring attention, Liu et al. 2023, arXiv:2310.01889; Megatron's context
parallelism): each of the c−1 rounds sends on the K and V chunk in hand (forward) or, in
backward, that chunk and its K and V gradients, beside the attention block it feeds; what a
round's send outlasts of its block is exposed (``ring_exposed``). EP06's ``cp_cost`` and the
step model's ``cp_comms`` both time the ring with it."""

from __future__ import annotations

from labs.hardware.links import Cluster
from labs.hardware.nccl import nccl_time
from labs.model.ops import LayerOps
from labs.model.spec import ModelSpec
from labs.parallel.layer_parts import ACT_BYTES, Comm, Group, Piece


def ring_exposed(rounds: int, t_send: float, t_block: float) -> float:
    """Seconds a ring of ``rounds`` sends puts on the critical path.

    Per round (Liu et al. 2023, Ring Attention, sec 3: a block hides its transfer when its
    compute outlasts it): round i attends the block in hand while sending it on, and round
    i + 1 needs the block that send delivers, so the ring takes
    rounds·max(t_send, t_block) + t_block and exposes rounds·max(0, t_send − t_block).
    Comparing totals (rounds·t_send − attention) counts one block's attention too many as
    cover and lets a slow send hide behind other rounds' compute."""
    return rounds * max(0.0, t_send - t_block)


def cp_comms(model: ModelSpec, ops: LayerOps, cluster: Cluster, g: Group,
             tp: int) -> tuple[Comm | None, Comm | None]:
    """The ring's forward and backward ``Comm`` of one layer on one GPU of a CP group ``g``.

    A round's block is the pass's attention ÷ c (the rank's mean round, as ``cp_cost``
    takes it); backward sends two chunks a round (K and V, and their gradients back) against
    the backward attention's block."""
    if g.size == 1:
        return None, None
    kv_heads = model.heads if model.uses_mla else model.kv_heads
    width = (model.qk_nope_head_dim + model.v_head_dim if model.uses_mla
             else 2 * model.head_dim)
    chunk = ops.tokens * max(1, kv_heads // tp) * width * ACT_BYTES  # K and V of s/c tokens
    hop = nccl_time("p2p", chunk, g.size, cluster, g.per_node)
    hops = g.size - 1
    out = []
    for attention, blocks in ((ops.forward.of("attention"), 1),
                              (ops.backward.of("attention"), 2)):
        total = blocks * hops * hop.seconds
        exposed = ring_exposed(hops, blocks * hop.seconds, attention / g.size)
        sent = blocks * hops * chunk
        out.append(Comm("cp", "ring send/recv", total, exposed, sent, hop.bottleneck, 0.0,
                        (Piece("ring send/recv", "attention", "after", total, exposed,
                               sent=sent),)))
    return out[0], out[1]
