"""The ledger's assumptions, in words, for the page and the API (``MemoryResult.assumptions``).

Every modelling choice the ledger makes is named here so a reader can check it against the
source (``labs.model.activations``, ``labs.schedules.stages``, ``labs.memory.lab``).
"""

from __future__ import annotations

from collections.abc import Sequence

from labs.core.catalogue import RECIPES
from labs.core.recomputation import RECOMPUTATION
from labs.memory.inputs import PREFILL_CHUNK_TOKENS, MemoryInput, StageBill
from labs.model.op_checkpoint import recomputed_matmuls
from labs.schedules.catalogue import CATALOGUE


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _layer_granular_note(inp: MemoryInput, bills: Sequence[StageBill]) -> str:
    """What a layer-granular mode keeps, with each stage's split (Recomputation.groups)."""
    mode = RECOMPUTATION[inp.recompute]
    split = []
    for b in bills:
        _, dense, moe = mode.groups(b.layers - b.moe_layers, b.moe_layers)[0]
        split.append(f"{dense + moe} of {b.layers}")
    where = (f"{split[0]} layers" if len(set(split)) == 1 else
             f"{', '.join(split)} layers on its {len(split)} stages")
    spelled = ", ".join(f'{k} = "{v}"' for k, v in mode.torchtitan)
    return (f"{mode.phrase.capitalize()}, counted as torchtitan's selective layer AC "
            f"({spelled}) counts a rank's blocks: every {mode.nth} block of a stage, {where}, "
            "keeps its input only (2·s·b·h"
            + (", split by TP through sequence parallelism" if inp.sequence_parallel else "")
            + ") and runs its forward again; the others keep what the "
            f"'{RECOMPUTATION[mode.others].label}' mode keeps (no attention scores) and run "
            "nothing again.")


def _activation_notes(inp: MemoryInput, bills: Sequence[StageBill]) -> list[str]:
    m = inp.model
    notes = []
    if inp.activation_model == "classic":
        shape = [x for x, on in (("GQA", m.kv_heads < m.heads and not m.uses_mla),
                                 ("MLA", m.uses_mla), ("SwiGLU", m.gated_mlp),
                                 ("MoE routing", m.is_moe)) if on]
        notes.append("Activation model: classic, the GPT formulas of Korthikanti et al. 2022 "
                     "(selective: 34·s·b·h bytes per layer)"
                     + (f"; this model's {_and(shape)} "
                        f"{'make' if len(shape) > 1 else 'makes'} them approximate."
                        if shape else "."))
    else:
        notes.append("Activation model: megatron, Megatron-LM's theoretical memory estimate "
                     f"(18·s·b·h + 4·s·b·ffn per dense layer, ffn = {m.ffn:,}"
                     + (f"; MoE layers keep top-{m.top_k} dispatched tokens over EP"
                        if m.is_moe else "")
                     + "); like Megatron's, it keeps full-width K and V (no GQA narrowing).")
    mode = RECOMPUTATION[inp.recompute]
    if mode.every > 1:
        notes.append(_layer_granular_note(inp, bills))
    elif mode.policy:
        dropped = ", ".join(name for name, _, _ in recomputed_matmuls(m))
        notes.append(f"{mode.phrase.capitalize()}, counted from torchtitan's save list: each "
                     "layer keeps its input, the outputs of every other matmul and of the "
                     "attention kernel (its output and log-sum-exp), and with TP the "
                     f"reduce-scatters'; its backward runs {dropped}, every elementwise op and "
                     "the TP all-gathers again, the attention core not.")
    elif mode.stores_scores:
        notes.append("No recomputation stores the attention scores, i.e. assumes attention "
                     "without FlashAttention: "
                     + ("5·a·s²·b bytes per layer (the softmax output, the dropout mask and the "
                        "dropout's output)." if m.dropout else
                        f"2·a·s²·b bytes per layer, the softmax output alone ({m.name} trains "
                        "without dropout, so no mask and no dropout output)."))
    elif not (mode.attention_again or mode.forward_again):
        notes.append("No recomputation, with FlashAttention: the fused kernel never stores the "
                     "s x s attention scores (Dao et al. 2022), so a layer keeps what selective "
                     "recomputation keeps and nothing is run again.")
    elif mode.input_only:
        notes.append("Full recomputation keeps each layer's input only (2·s·b·h"
                     + (", split by TP through sequence parallelism" if inp.sequence_parallel
                        else "") + ") and recomputes the rest: about one extra forward.")
    if inp.tp > 1:
        ids = ("." if inp.activation_model == "megatron"
               else " but the token ids, which every TP rank holds whole.")
        notes.append("Sequence parallelism is on with TP, so every activation term divides "
                     "by TP" + ids if inp.sequence_parallel else
                     "Sequence parallelism is off: norms, dropout masks and layer inputs "
                     "(10·s·b·h of the 34) stay whole on every TP rank (Korthikanti Table 2).")
    mask = m.dropout or inp.activation_model == "megatron"
    notes.append(("Token ids and the embedding dropout mask (8·s·b + s·b·h) are counted"
                  if mask else f"Token ids (8·s·b; {m.name} trains without dropout, so no "
                  "embedding dropout mask) are counted")
                 + " on the first stage, the final norm's bf16 input and output and fp32 logits "
                 "(4·s·b·h + 4·s·b·vocab) on the last.")
    return notes


def _pipeline_note(inp: MemoryInput, bills: Sequence[StageBill]) -> str:
    p, m = inp.pp, inp.pipeline_microbatches
    layers = ", ".join(str(b.layers) for b in bills)
    held = ", ".join(f"{b.in_flight:g}" for b in bills)
    name = CATALOGUE[inp.schedule].ledger_label(inp.virtual)
    return (f"Pipeline: {name}, {m} micro-batches over {p} stages holding {layers} layers; "
            f"activations in flight per stage (in micro-batches of its layers): {held}.")


def assumptions(inp: MemoryInput, bills: Sequence[StageBill], worst: int) -> tuple[str, ...]:
    m, train = inp.model, inp.mode == "train"
    notes: list[str] = []
    if m.params_override is not None:
        notes.append(f"Custom model: exactly {m.params:,} parameters; layer sizes come from the "
                     f"nearest Llama-style shape ({m.layers} layers x {m.hidden:,} hidden, whose "
                     f"own count is {m.shape_params / 1e9:.2f}B).")
    if m.notes:
        notes.append(m.notes)
    if m.is_moe:
        notes.append("MoE: memory holds all experts (total parameters); compute uses only the "
                     f"active ones ({m.active_params / 1e9:.1f}B of {m.params / 1e9:.1f}B).")
    r = RECIPES[inp.recipe]
    if r.family == "fp8":
        copies = " and ".join(c.what for c in r.copies)
        notes.append(f"{r.label}: the weights' bill holds "
                     + ("the 16-bit weights, " if r.weights else "no 16-bit weights, ")
                     + f"{copies}"
                     + (" and the amax history of every FP8 tensor" if r.amax_history else "")
                     + f"; the linear layers' inputs are saved in {r.saved_inputs} "
                     f"({r.saved_input_bytes:.3g} B an element). EP10 itemises each byte.")
    if train:
        notes += _activation_notes(inp, bills)
        if inp.pp > 1:
            notes.append(_pipeline_note(inp, bills))
        lay = inp.layout
        if inp.zero and inp.replicas > 1:
            dense, expert = inp.shard_groups
            notes.append(f"HSDP: ZeRO-3 shards dense state over DP x CP / {inp.replicas} "
                         f"replicas = {dense} ranks"
                         + (f" and expert state over expert-DP / {inp.replicas} = {expert}"
                            if m.is_moe else "")
                         + f"; each of the {inp.replicas} replicas holds a full copy.")
        elif inp.zero:
            notes.append(f"ZeRO-{inp.zero} shards dense state over DP x CP = "
                         f"{lay.dense_shard_group} ranks (Megatron's distributed optimizer "
                         "includes CP)"
                         + (f" and expert state over expert-DP = {lay.expert_dp}"
                            if m.is_moe else "") + ".")
        if inp.offload:
            notes.append("Optimizer offload: master weights and Adam moments live in host RAM "
                         "and the update runs on the CPU; the gradients are made on the GPU and "
                         "stay there until copied to the host for the update (counted on the "
                         "GPU). PCIe bandwidth and host memory become the limits.")
    else:
        notes.append("KV cache in bf16 for every token of every sequence; "
                     + ("MLA caches one compressed latent per token and layer, not split by TP."
                        if m.uses_mla else
                        "with TP > KV heads each GPU keeps a replica of one KV head."))
        notes.append("Workspace is an estimate of one layer's forward intermediates for the "
                     "tokens of one forward pass, tokens x (4h + 2 x MLP width) x 2 B, at most "
                     f"one prefill chunk of {PREFILL_CHUNK_TOKENS:,} tokens however many "
                     "sequences are cached (vLLM profiles a forward pass to reserve it).")
    if m.is_moe:
        notes.append(f"Experts: each GPU holds experts/(EP x expert-TP) of the MoE layers its "
                     f"stage holds, replicated over expert-DP = {inp.layout.expert_dp}.")
    notes.append("The first stage holds the embedding, the last the final norm and output "
                 "head; norms and routers are replicated on every TP rank.")
    if inp.pp > 1:
        layers = ", ".join(str(b.layers) for b in bills)
        notes.append(f"Stages hold {layers} layers; stage {worst} is the heaviest "
                     f"({bills[worst].layers} layers, {bills[worst].total_bytes / 1e9:,.1f} GB) "
                     "and is the one sized here.")
    extra = m.layers % inp.pp
    if inp.uneven_pp and extra:
        first = "the first stage holds" if extra == 1 else f"the first {extra} stages hold"
        notes.append(f"Uneven stages: {m.layers} layers over {inp.pp} stages, so {first} one "
                     f"more layer; the largest stage holds {max(b.layers for b in bills)} "
                     "layers.")
    notes.append("Not counted: CUDA context, communication buffers and allocator "
                 "fragmentation (often a few GB per GPU).")
    return tuple(notes)
