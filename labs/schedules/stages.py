"""Which weights each pipeline rank holds: layers per stage, embedding first, head last.

Megatron-LM's layout (megatron/core/transformer/transformer_block.py and
models/gpt/gpt_model.py): the first pipeline stage holds the word (and position) embedding,
the last holds the final norm and the output layer; with tied embeddings and PP > 1 the last
stage keeps its own copy of the embedding matrix as the output layer (synchronised by an
all-reduce of their gradients). Layers split evenly unless uneven stages are asked for
(--decoder-first/last-pipeline-num-layers): ``uneven_pp`` in the ledger gives the first
L mod p stages one extra layer; ``first``/``last`` set the first and last stages' layers as
Megatron's two flags do, the middle stages splitting the rest evenly
(``stage_layer_counts``). A rank's layers split over its model chunks as evenly as they can,
the earlier chunks taking the extra layer. Megatron-LM's virtual pipeline asks every stage's
layers to divide by its chunks (``chunk_problems``) unless an explicit
--pipeline-model-parallel-layout string (NVIDIA Megatron-LM MR 2795) lists each chunk's
layers: the lab holds even stages and the planner's plans to that rule (round-20 cold
reading Q, finding 2) and takes the layout string for a plan with uneven first/last stages
(Llama 3 405B's 7, 8, .., 8, 7 layers in 7 chunks).
Under TP, projections and the embedding are split (vocab-parallel), while norms,
routers, learned position embeddings and the row-split projections' biases are replicated on
every TP rank. A MoE model's first
``dense_layers`` layers are dense, so a stage's routed experts follow the MoE layers *it*
holds. With interleaved or V-shaped schedules a rank holds several model pieces
(``Schedule.piece`` in ``labs.schedules.catalogue``); its layers are the union of theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.core.validate import is_int
from labs.model.spec import ModelSpec
from labs.schedules.catalogue import chunks_per_rank, piece


@dataclass(frozen=True)
class StageParams:
    """Parameters on one pipeline rank, before TP/EP division (whole-model counts)."""

    rank: int
    layers: int
    moe_layers: int
    tp_split: float  # divided by TP: projections, dense/shared MLPs, embedding, output head
    replicated: float  # on every TP rank: norms, routers, position embeddings, row biases
    experts: float  # routed experts, divided by EP x expert-TP
    first: bool  # holds the embedding (and the first layer)
    last: bool  # holds the final norm and output layer (and the loss)
    # The embedding and output head within ``tp_split``: the TP-split parameters that are no
    # linear layer's (an FP8 recipe casts only the linear layers: labs.memory.lab).
    embedding: float = 0.0

    @property
    def linear(self) -> float:
        """The stage's TP-split parameters in linear layers (projections, dense and shared
        MLPs), before TP division; the routed experts (``experts``) are linear layers too."""
        return self.tp_split - self.embedding

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers


def split_layers(layers: int, pieces: int) -> tuple[int, ...]:
    """Layers per model piece: even, or the first ``layers % pieces`` pieces one more."""
    q, extra = divmod(layers, pieces)
    return tuple(q + (i < extra) for i in range(pieces))


@lru_cache(maxsize=1024)
def uneven_problems(layers: int, pp: int, first: int, last: int,
                    chunks: int = 1) -> list[LabInputError]:
    """The rules of Megatron's --decoder-first/last-pipeline-num-layers (0: not set), as its
    get_num_layers_to_build asserts them: the layers left after the first and last stages
    must divide evenly over the stages left; here also every stage holds at least one layer
    per model chunk. Empty when the split is possible."""
    found: list[LabInputError] = []
    for field, value, where in (("first_stage_layers", first, "first"),
                                ("last_stage_layers", last, "last")):
        if not is_int(value) or not 0 <= value < layers:
            found.append(LabInputError(field, f"layers on the {where} pipeline stage must be "
                                              f"a whole number from 0 (even split) to "
                                              f"{layers - 1}; got {value!r}"))
    if found or not (first or last):
        return found
    field = "first_stage_layers" if first else "last_stage_layers"
    if pp == 1:
        return [LabInputError(field, "uneven first/last stages need a pipeline: set PP to 2 "
                                     "or more, or the stage layers to 0")]
    rest = layers - first - last
    left = pp - (first > 0) - (last > 0)
    if left == 0:
        if rest:
            found.append(LabInputError(field, f"with PP = 2 the first and last stages are the "
                                              f"whole model: {first} + {last} layers must be "
                                              f"the {layers}"))
    elif rest < left or rest % left:
        found.append(LabInputError(field, f"Megatron's uneven stages: the {rest} layers left "
                                          f"after the first and last stages must split evenly "
                                          f"over the {left} stages left (at least one each); "
                                          f"{rest} does not divide by {left}"))
    if not found and min(stage_slots(layers, pp, first, last)) < chunks:
        found.append(LabInputError("virtual", f"a stage of "
                                              f"{min(stage_layer_counts(layers, pp, first, last))}"
                                              f" layers cannot fill {chunks} model chunks"))
    return found


def stage_slots(layers: int, pp: int, first: int = 0, last: int = 0) -> tuple[int, ...]:
    """Model-chunk slots per stage: its layers, and where the first (last) stage is set
    uneven, one more for the embedding (the output head and loss), which there fill a chunk
    of their own. Llama 3 405B (arXiv:2407.21783 sec 3.3.2): "we reduce one Transformer layer
    each from the first and the last stages ... the first model chunk on the first stage has
    only the embedding, and the last model chunk on the last stage has only output projection
    and loss calculation", so 16 stages x 8 chunks = 128 slots = 126 layers + embedding +
    head (Megatron-LM's --pipeline-model-parallel-layout writes such chunks as "E" and "L")."""
    counts = list(stage_layer_counts(layers, pp, first, last))
    if pp > 1 and first:
        counts[0] += 1
    if pp > 1 and last:
        counts[-1] += 1
    return tuple(counts)


def chunk_problems(layers_per_rank: tuple[int, ...], chunks: int) -> list[LabInputError]:
    """Model chunks that do not split a rank's layers evenly: Megatron-LM builds each of a
    rank's v chunks with the same number of layers and raises "number of layers on each
    pipeline stage must be divisible by virtual pipeline parallel degree" otherwise
    (megatron/core/transformer/transformer_config.py, ``__post_init__``), so no stack runs
    such a split. One rule for EP05's memory panel (``labs.pipeline.lab.check_chunks``) and
    EP08's plans (``labs.recipe.lab.rule_problems``, the planner's search). Empty when every
    rank's layers divide (or one chunk a rank); else the first rank that does not."""
    if chunks < 2:
        return []
    for rank, layers in enumerate(layers_per_rank):
        if layers % chunks:
            divisors = [v for v in range(2, layers + 1) if layers % v == 0]
            return [LabInputError(
                "virtual", f"Megatron-LM gives each of a rank's {chunks} model chunks the "
                           f"same number of layers, and rank {rank}'s {layers} layers do not "
                           f"divide by {chunks}: use {' or '.join(map(str, divisors))} chunks "
                           "a rank, or another number of stages")]
    return []


def uneven_split(layers: int, pp: int) -> tuple[int, int] | None:
    """Megatron's first and last stage layers for ``pp`` stages that do not divide ``layers``:
    the middle stages take ceil(L/p), the first and last share the rest (the last, which
    also holds the output head and the loss, the lighter), each at most the middle's; None
    when no such split exists (or the layers divide evenly: no flags needed)."""
    if pp < 2 or layers % pp == 0:
        return None
    middle = -(-layers // pp)
    rest = layers - (pp - 2) * middle
    if not 2 <= rest <= 2 * middle:
        return None
    last = rest // 2
    split = (rest - last, last)
    return None if uneven_problems(layers, pp, *split) else split


@lru_cache(maxsize=1024)
def stage_layer_counts(layers: int, pp: int, first: int = 0, last: int = 0) -> tuple[int, ...]:
    """Layers per pipeline stage: Megatron's first/last counts (0: not set) and the rest split
    evenly over the middle; neither set, even (the first L mod p stages one more). Assumes
    ``uneven_problems`` found nothing."""
    if pp == 1 or not (first or last):
        return split_layers(layers, pp)
    left = pp - (first > 0) - (last > 0)
    middle = (layers - first - last) // left if left else 0
    counts = [middle] * pp
    if first:
        counts[0] = first
    if last:
        counts[-1] = last
    return tuple(counts)


def piece_layer_counts(layers: int, pp: int, chunks: int, schedule: str, first: int = 0,
                       last: int = 0) -> tuple[int, ...]:
    """Layers per model piece (pp x chunks pieces, in model order)."""
    if not (first or last) or pp == 1:
        return split_layers(layers, pp * chunks)
    counts = [0] * (pp * chunks)
    for r, stage in enumerate(stage_layer_counts(layers, pp, first, last)):
        for j, n in enumerate(split_layers(stage, chunks)):
            counts[piece(schedule, pp, r, j)] = n
    return tuple(counts)


@lru_cache(maxsize=1024)  # pure in its (frozen, hashable) inputs; the page asks again and again
def stage_params(model: ModelSpec, pp: int, schedule: str = "1f1b", virtual: int = 1,
                 first: int = 0, last: int = 0) -> tuple[StageParams, ...]:
    """Per-rank parameter counts for ``pp`` ranks under ``schedule`` (pp <= model.layers);
    ``first``/``last``: Megatron's uneven first and last stages (0: not set)."""
    m, h = model, model.hidden
    chunks = chunks_per_rank(schedule, virtual) if pp > 1 else 1
    pieces = pp * chunks
    counts = piece_layer_counts(m.layers, pp, chunks, schedule, first, last)
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
        # A row-split matrix's bias (the attention output projection's, the MLP's down
        # projection's) is added after its all-reduce: whole on every TP rank
        # (megatron/core/tensor_parallel/layers.py, RowParallelLinear: a bias of output_size).
        row_biases = (layers + dense + moe * m.shared_experts) * h if m.linear_bias else 0
        tp_split = layers * m.attention_params + dense * dense_mlp + moe * shared - row_biases
        replicated = layers * 2 * norm + moe * router + row_biases
        first, last = 0 in held, pieces - 1 in held
        embedding = 0
        if first:
            embedding += m.vocab * h
            replicated += m.max_positions * h
        if last:
            replicated += norm
            if not m.tied_embeddings or not first:
                embedding += m.vocab * h  # untied head, or the tied copy on a later stage
        tp_split += embedding
        experts = moe * m.experts * m.expert_size
        out.append(StageParams(r, layers, moe, tp_split * scale, replicated * scale,
                               experts * scale, first, last, embedding * scale))
    return tuple(out)
