"""Context parallelism: who computes which cells of one sequence's causal attention mask, and
what the keys and values cost to move.

Layouts of ``s`` tokens over ``c`` ranks (the rank that holds a query token computes its row):
- ``contiguous``: c consecutive slices, the first s mod c one token longer (torch.tensor_split's
  rule). Causal rows grow with position, so the last rank does the most work.
- ``zigzag``: the sequence cut into 2c equal chunks, rank r keeping chunks r and 2c−r−1
  (Megatron-LM's ``get_batch_on_this_cp_rank`` in megatron/training/utils.py: a view of 2·CP
  chunks and ``index_select([cp_rank, 2·cp_size − cp_rank − 1])``; zhuzilin/ring-flash-attention's
  ``extract_local``: ``chunk(2·world_size)`` then chunks rank and 2·world_size − rank − 1). An
  early chunk and its mirror always sum to the same work, so the split is exactly balanced.
- ``allgather``: contiguous slices of a packed stream whose keys and values are all-gathered
  before attention (slime's ``--allgather-cp``: "global concat then contiguous CP split", each
  rank owning positions [rank·local, (rank+1)·local); Megatron/Transformer Engine's
  ``cp_comm_type="all_gather"``; Llama 3, arXiv:2407.21783 sec 3.3.2).
- ``ulysses``: DeepSpeed-Ulysses (Jacobs et al. 2023, arXiv:2309.14509): outside attention each
  rank holds a contiguous sequence shard; an all-to-all turns it into h/c whole heads over the
  whole sequence, attention runs, a second all-to-all turns it back. Every rank computes every
  cell of the mask for its own heads, so its work is the mask's 1/c: the heads must divide by c.

Causal pairs count (query, key) cells with key ≤ query, s(s+1)/2 in all, per head; a Ulysses
rank's h/c heads count as 1/c of the mask. Costs are per transformer layer, forward pass, one
sequence, bf16 (2 bytes), on one link as NCCL runs it (``labs.hardware.comm``, ``nccl``), the
busiest rank's attention at its fused kernel's published rate (``labs.hardware.kernels``):
- ring (contiguous, zigzag): c − 1 steps, each sending this rank's K/V block to the next rank
  (Liu et al. 2023, "Ring Attention", arXiv:2310.01889), overlapped with the attention of the
  block in hand, round by round: exposed (c − 1)·max(0, t_send − t_block);
- all-gather: (c − 1)/c of the whole sequence's K/V (same bytes as the ring, one collective that
  attention waits for; Llama 3 sec 3.3.2 keeps it because GQA makes K/V small);
- Ulysses: four all-to-alls (Q, K, V in, the output back), each sending (c − 1)/c of the local
  shard: (c − 1)/c · (s/c) · (2·h·d + 2·h_kv·d) · 2 bytes, falling as c grows, where the ring's
  (c − 1)/c · s · 2·h_kv·d · 2 bytes does not (DeepSpeed-Ulysses sec 3.2).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from labs.context_parallel.inputs import (
    CPCost,
    CPInput,
    CPResult,
    MaskResult,
    RankWork,
    attention_heads,
    check_cost,
    check_layout,
)
from labs.core.errors import LabInputError
from labs.core.limits import CP_LAYOUTS, MAX_CP, MAX_CP_TOKENS, MAX_SEQ_LEN
from labs.core.validate import whole
from labs.hardware.comm import nccl_collective as priced
from labs.hardware.gpus import GPUSpec
from labs.hardware.kernels import attention_rate, best_attention
from labs.hardware.links import Link, link_alone
from labs.hardware.nccl import nccl_time
from labs.model.activations import activation_bytes_per_layer
from labs.model.spec import ModelSpec
from labs.parallel.ring import ring_exposed

BYTES = 2  # bf16 queries, keys, values and outputs
# The busiest rank's attention runs at the GPU's fastest fused kernel's published forward
# rate for its block length (labs.hardware.kernels: FlashAttention-2/-3 curves), the same
# kernel model EP08 times its plans with.
RING_LAYOUTS = ("contiguous", "zigzag")
LAYOUT_NAMES = {
    "contiguous": "Contiguous (ring)", "zigzag": "Zigzag (ring, mirrored chunks)",
    "allgather": "All-gather K/V", "ulysses": "DeepSpeed-Ulysses (all-to-all)",
}


def pairs_of_ranges(ranges) -> int:
    """Causal (query, key) cells of the query rows in ``ranges`` ([start, stop) pairs): row q
    sees keys 0..q, so a range adds Σ(q + 1) = (stop(stop+1) − start(start+1)) / 2."""
    return sum((stop * (stop + 1) - start * (start + 1)) // 2 for start, stop in ranges)


def split_points(s: int, parts: int) -> list[int]:
    """Boundaries of ``parts`` contiguous slices of ``s`` tokens, the first s mod parts one
    longer (torch.tensor_split)."""
    base, extra = divmod(s, parts)
    points = [0]
    for i in range(parts):
        points.append(points[-1] + base + (1 if i < extra else 0))
    return points


def rank_ranges(s: int, c: int, layout: str) -> list[tuple[tuple[int, int], ...]]:
    """The token ranges each rank holds (outside attention, for Ulysses)."""
    if layout == "zigzag":
        chunk = s // (2 * c)
        return [((r * chunk, (r + 1) * chunk), ((2 * c - r - 1) * chunk, (2 * c - r) * chunk))
                for r in range(c)]
    points = split_points(s, c)
    return [((points[r], points[r + 1]),) for r in range(c)]


def mask_layout(tokens: int, cp: int, layout: str, heads: int = 1,
                kv_heads: int | None = None, field: str = "tokens") -> MaskResult:
    """Which rank computes which rows of the causal mask of ``tokens`` tokens."""
    whole(field, tokens, 1, MAX_SEQ_LEN, "the number of tokens")
    whole("cp", cp, 1, MAX_CP, "the context parallel degree")
    check_layout(field, tokens, cp, layout, heads if layout == "ulysses" else None, kv_heads)
    ranges = rank_ranges(tokens, cp, layout)
    total = tokens * (tokens + 1) // 2
    owner = [0] * tokens if tokens <= MAX_CP_TOKENS else []
    ranks = []
    for r, spans in enumerate(ranges):
        held = tuple(t for a, b in spans for t in range(a, b)) if owner else ()
        for t in held:
            owner[t] = r
        if layout == "ulysses":
            per = heads // cp
            ranks.append(RankWork(r, held, Fraction(total, cp), (r * per, (r + 1) * per - 1)))
        else:
            ranks.append(RankWork(r, held, pairs_of_ranges(spans)))
    return MaskResult(tokens, cp, layout, heads, tuple(ranks), tuple(owner), total)


def head_dims(model: ModelSpec) -> tuple[int, int]:
    """(d_qk, d_v) per head (MLA: nope + rope query/key dims, and v_head_dim)."""
    if model.uses_mla:
        return model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
    return model.head_dim, model.head_dim


SWEEP_CP = (2, 4, 8, 16, 32, 64)


def cp_cost(model: ModelSpec, seq_len: int, cp: int, layout: str, link: Link,
            gpu: GPUSpec) -> CPCost:
    """Bytes and seconds per GPU, per layer forward, for one ``seq_len`` sequence."""
    check_cost(model, seq_len, cp, layout, link)
    m, s, c = model, seq_len, cp
    heads, kv = attention_heads(m)
    d_qk, d_v = head_dims(m)
    kv_token = kv * (d_qk + d_v) * BYTES
    local = s / c
    big = mask_layout(s, c, layout, heads, kv, field="seq_len")
    busiest = max(r.causal_pairs for r in big.ranks)
    # QKᵀ and AV: 2·d_qk + 2·d_v FLOPs per causal cell per head (PaLM appendix B, halved for
    # causality because only the computed cells count here).
    flops = 2 * (d_qk + d_v) * heads * busiest
    impl = best_attention(gpu)
    attention_s = float(flops) / (attention_rate(gpu, impl, max(1, round(local)),
                                                 (d_qk + d_v) / 2, False)
                                  if impl != "unfused" else gpu.bf16_flops / 2)
    if layout in RING_LAYOUTS:
        block = local * kv_token
        steps = c - 1
        sent = steps * block
        hop = nccl_time("p2p", block, c, link_alone(gpu, link, c), None)
        comm = steps * hop.seconds if c > 1 else 0.0
        # Per round (labs.parallel.ring.ring_exposed). t_block is the busiest rank's mean
        # round, its attention ÷ c: the engine counts a rank's pairs, not each round's.
        # Zigzag's rounds are equal (each pairs an early chunk with a late one,
        # ring-flash-attention's zigzag_ring_flash_attn); a contiguous last rank's own round
        # is half the others, so there the mean is a little short of its other rounds and
        # the exposure a little high.
        exposed = ring_exposed(steps, hop.seconds, attention_s / c)
        collective, held = "ring p2p", 2 * block  # the block in use and the one arriving
    elif layout == "allgather":
        whole_kv = s * kv_token
        block, steps = whole_kv, c - 1
        sent = (c - 1) / c * whole_kv
        comm = priced("all_gather", whole_kv, c, link_alone(gpu, link, c)).seconds
        exposed, collective, held = comm, "all-gather", whole_kv
    else:
        kv_sent = max(kv, c)  # fewer KV heads than ranks: each is replicated c/kv times
        shards = (local * heads * d_qk, local * kv_sent * d_qk, local * kv_sent * d_v,
                  local * heads * d_v)  # Q, K, V in; the output back
        block = local * (heads * (d_qk + d_v) + kv_sent * (d_qk + d_v)) * BYTES
        steps = 4 * (c - 1)
        sent = (c - 1) / c * block
        comm = sum(priced("all_to_all", x * BYTES, c, link_alone(gpu, link, c)).seconds
                   for x in shards)
        exposed, collective = comm, "all-to-all"
        held = s * (kv_sent // c) * (d_qk + d_v) * BYTES  # whole sequence, own KV heads
    per_layer = activation_bytes_per_layer(m, s, cp=c)
    return CPCost(
        collective=collective, steps=steps, kv_bytes_per_token=kv_token, block_bytes=block,
        comm_bytes_per_gpu=sent if c > 1 else 0.0, comm_s=comm, attention_s=attention_s,
        attention_flops=float(flops),
        exposed_s=exposed if c > 1 else 0.0, kv_held_bytes=held if c > 1 else 0.0,
        busiest_pairs=float(busiest), imbalance=big.imbalance,
        activation_bytes_per_gpu=m.layers * per_layer,
        activation_bytes_no_cp=m.layers * activation_bytes_per_layer(m, s),
    )


@lru_cache(maxsize=512)  # the sweep depends on neither the picture nor the chosen CP
def sweep_cp(model: ModelSpec, seq_len: int, link: Link, gpu: GPUSpec):
    """Each layout's cost at every CP degree of ``SWEEP_CP`` (None where it is refused)."""
    out = {}
    for layout in CP_LAYOUTS:
        points = []
        for c in SWEEP_CP:
            try:
                points.append((c, cp_cost(model, seq_len, c, layout, link, gpu)))
            except LabInputError:
                points.append((c, None))
        out[layout] = tuple(points)
    return out


def simulate_cp(inp: CPInput) -> CPResult:
    heads, kv = attention_heads(inp.model)
    mask = mask_layout(inp.tokens, inp.cp, inp.layout, heads, kv)
    cost = cp_cost(inp.model, inp.seq_len, inp.cp, inp.layout, inp.link, inp.gpu)
    return CPResult(inp, mask, cost, sweep_cp(inp.model, inp.seq_len, inp.link, inp.gpu))
