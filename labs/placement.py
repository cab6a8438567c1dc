"""Which weights each pipeline rank holds: layers per stage, embedding first, head last.

Megatron-LM's layout (megatron/core/transformer/transformer_block.py and
models/gpt/gpt_model.py): the first pipeline stage holds the word (and position) embedding,
the last holds the final norm and the output layer; with tied embeddings and PP > 1 the last
stage keeps its own copy of the embedding matrix as the output layer (synchronised by an
all-reduce of their gradients). Layers split evenly unless uneven stages are asked for
(--decoder-first/last-pipeline-num-layers); here the first L mod p stages take one extra
layer. Under TP, projections and the embedding are split (vocab-parallel), while norms,
routers and learned position embeddings are replicated on every TP rank. A MoE model's first
``dense_layers`` layers are dense, so a stage's routed experts follow the MoE layers *it*
holds. With interleaved or V-shaped schedules a rank holds several model pieces
(``labs.schedules.piece``); its layers are the union of theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from labs.activations import chunks_per_rank
from labs.presets import ModelSpec
from labs.schedules import piece


@dataclass(frozen=True)
class StageParams:
    """Parameters on one pipeline rank, before TP/EP division (whole-model counts)."""

    rank: int
    layers: int
    moe_layers: int
    tp_split: float  # divided by TP: projections, dense/shared MLPs, embedding, output head
    replicated: float  # copied on every TP rank: norms, routers, position embeddings
    experts: float  # routed experts, divided by EP x expert-TP
    first: bool  # holds the embedding (and the first layer)
    last: bool  # holds the final norm and output layer (and the loss)

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers


def split_layers(layers: int, pieces: int) -> tuple[int, ...]:
    """Layers per model piece: even, or the first ``layers % pieces`` pieces one more."""
    q, extra = divmod(layers, pieces)
    return tuple(q + (i < extra) for i in range(pieces))


@lru_cache(maxsize=256)  # pure in its (frozen, hashable) inputs; the page asks again and again
def stage_params(model: ModelSpec, pp: int, schedule: str = "1f1b",
                 virtual: int = 1) -> tuple[StageParams, ...]:
    """Per-rank parameter counts for ``pp`` ranks under ``schedule`` (pp <= model.layers)."""
    m, h = model, model.hidden
    chunks = chunks_per_rank(schedule, virtual) if pp > 1 else 1
    pieces = pp * chunks
    counts = split_layers(m.layers, pieces)
    starts = [sum(counts[:k]) for k in range(pieces)]
    norm = h if m.norm == "rmsnorm" else 2 * h
    router = (m.experts * h + (m.experts if m.router_bias else 0)) if m.is_moe else 0
    shared = m.shared_experts * m.expert_size
    dense_mlp = m._mlp_params(m.ffn)  # noqa: SLF001 (the spec's own counting rule)
    # Custom models keep the exact requested total: scale the nearby shape's counts.
    scale = m.params / m.shape_params
    out = []
    for r in range(pp):
        held = [piece(schedule, pp, r, j) if pp > 1 else 0 for j in range(chunks)]
        layers = sum(counts[k] for k in held)
        moe = sum(max(0, starts[k] + counts[k] - max(starts[k], m.dense_layers))
                  for k in held) if m.is_moe else 0
        dense = layers - moe
        tp_split = layers * m.attention_params + dense * dense_mlp + moe * shared
        replicated = layers * 2 * norm + moe * router
        first, last = 0 in held, pieces - 1 in held
        if first:
            tp_split += m.vocab * h
            replicated += m.max_positions * h
        if last:
            replicated += norm
            if not m.tied_embeddings or not first:
                tp_split += m.vocab * h  # untied head, or the tied copy on a later stage
        experts = moe * m.experts * m.expert_size
        out.append(StageParams(r, layers, moe, tp_split * scale, replicated * scale,
                               experts * scale, first, last))
    return tuple(out)
