"""The recomputation modes several labs share, one record each: what a layer keeps for its
backward, what the backward runs again and what the exports write. Their ids
(``labs.core.limits``: RECOMPUTE), the option lists, the descriptions and the rules the engine
applies are all read from here.

Sources: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models" (arXiv:2205.05198): what each mode keeps (Table 2; formulas in
``labs.model.activations``) and what it runs again (sec 5; FLOPs in ``labs.model.flops``);
Megatron-LM's --recompute-granularity / --recompute-method and DeepSpeed's
activation_checkpoint_interval for the exports (``labs.recipe.export``); the layer-granular
mode (``every``) is torchtitan's "selective layer AC" (``Recomputation.groups``), the op-level
one (``policy``) its "selective op AC" (``labs.model.op_checkpoint``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Recomputation:
    """One activation-recomputation mode: what it keeps, what it runs again, what it exports."""

    id: str
    phrase: str  # how prose names it
    # What a layer keeps for its backward (labs.model.activations):
    # the attention scores are kept (5·a·s²·b per layer with dropout, 2·a·s²·b without:
    # labs.model.activations): no FlashAttention
    stores_scores: bool
    input_only: bool  # only the layer's input (2·s·b·h) is kept
    # What the backward runs again (labs.model.flops, the recipe's step time and TP traffic):
    attention_again: bool  # the attention core's forward runs again (+ its FLOPs / 3)
    forward_again: bool  # the whole forward runs again (+ 2·N FLOPs per token, its TP traffic)
    megatron: tuple[tuple[str, object], ...]  # Megatron-LM's arguments for it
    deepspeed_interval: int  # DeepSpeed's pipeline activation_checkpoint_interval
    text: str = ""  # the option list's text, when it is not the id
    # A layer-granular mode (every > 1) mixes two per-layer modes on each pipeline rank: its
    # every-th layers follow ``every_mode`` (whose booleans it repeats above), the others
    # ``others`` (``groups``); 1: every layer follows this record.
    every: int = 1
    every_mode: str = ""
    others: str = ""
    torchtitan: tuple[tuple[str, str], ...] = ()  # its [activation_checkpoint] settings
    deepspeed_note: str = ""  # what DeepSpeed's config cannot say of it
    megatron_note: str = ""  # what Megatron-LM's arguments cannot say of it
    # An op-level policy: what a layer keeps and runs again is counted op by op from the
    # named policy (``labs.model.op_checkpoint``), not from the booleans above (all False).
    policy: str = ""

    @property
    def keeps_attention_output(self) -> bool:
        """FlashAttention kept, its core not run again: the core saves its own output for its
        backward (FlashAttention-2's backward reads O, Dao 2023 Algorithm 2), the very tensor
        the output projection saves as its input. An unfused core (scores kept) or a
        recomputed one does not hold it (labs.model.activations)."""
        return not (self.stores_scores or self.input_only or self.attention_again
                    or self.policy or self.every > 1)

    @property
    def label(self) -> str:
        """The option list's text."""
        return self.text or self.id

    @property
    def nth(self) -> str:
        """``every`` as prose writes it: 2nd, 3rd, 4th."""
        return {1: "1st", 2: "2nd", 3: "3rd"}.get(self.every, f"{self.every}th")

    def groups(self, dense: int, moe: int = 0) -> tuple[tuple[str, int, int], ...]:
        """(per-layer mode, dense layers, MoE layers) of one pipeline rank that holds ``dense``
        dense layers followed by ``moe`` MoE layers (a MoE model's dense layers lead it, so a
        rank's come first too). A layer-granular mode counts as torchtitan's selective layer
        AC does (torchtitan/distributed/activation_checkpoint.py, ``_apply_layer_sac``: a
        module-level counter, one per process, goes up by one for each transformer block
        ``apply_ac`` visits, the rank's model chunks in order, and the block is wrapped in
        full checkpointing when count % ac_freq == 0): the every-th, 2·every-th, ... layers of
        the rank, floor(L / every) of its L layers, follow ``every_mode``."""
        if self.every == 1:
            return ((self.id, dense, moe),)
        wrapped_dense = dense // self.every
        wrapped_moe = (dense + moe) // self.every - wrapped_dense
        return ((self.every_mode, wrapped_dense, wrapped_moe),
                (self.others, dense - wrapped_dense, moe - wrapped_moe))


RECOMPUTATION: dict[str, Recomputation] = {r.id: r for r in (
    # Keeps every intermediate, the attention scores included, sbh(34 + 5as/h) (2as/h without
    # dropout); repeats nothing.
    Recomputation("none", "no recomputation", stores_scores=True, input_only=False,
                  attention_again=False, forward_again=False, megatron=(),
                  deepspeed_interval=0),
    # FlashAttention with nothing recomputed (Dao et al. 2022, arXiv:2205.14135: the fused
    # kernel never writes the s x s scores and its backward rebuilds them from the softmax
    # statistics, inside the kernel): keeps 34sbh, no score term; repeats nothing outside the
    # kernel. What Llama 3 ran at 8K tokens (Dubey et al. 2024, arXiv:2407.21783, sec 3.3).
    Recomputation("flash", "no recomputation, with FlashAttention", stores_scores=False,
                  input_only=False, attention_again=False, forward_again=False, megatron=(),
                  deepspeed_interval=0, text="none, with FlashAttention"),
    # Keeps all but the attention core's intermediates, 34sbh; repeats the core's forward.
    Recomputation("selective", "selective recomputation", stores_scores=False,
                  input_only=False, attention_again=True, forward_again=False,
                  megatron=(("--recompute-granularity", "selective"),), deepspeed_interval=0),
    # Keeps each layer's input only, 2sbh; repeats one whole forward (attention included).
    Recomputation("full", "full recomputation", stores_scores=False, input_only=True,
                  attention_again=True, forward_again=True,
                  megatron=(("--recompute-granularity", "full"),
                            ("--recompute-method", "uniform"), ("--recompute-num-layers", 1)),
                  deepspeed_interval=1),
    # torchtitan's selective layer AC with selective_ac_option = "2" (``groups``: every 2nd
    # block of a rank fully checkpointed), the others running FlashAttention/SDPA with
    # nothing recomputed: per rank of L layers, floor(L/2) keep their input only (2sbh) and
    # run their forward again, ceil(L/2) keep 34sbh. Megatron-LM's block method checkpoints
    # the first --recompute-num-layers layers of each model chunk
    # (megatron/core/transformer/transformer_block.py, ``_checkpointed_forward``): half of
    # them is the same count (the export writes it and says where a rank's differs).
    Recomputation("every-2nd", "full recomputation of every 2nd layer", stores_scores=False,
                  input_only=True, attention_again=True, forward_again=True,
                  megatron=(("--recompute-granularity", "full"),
                            ("--recompute-method", "block")),
                  deepspeed_interval=1, text="full, every 2nd layer",
                  every=2, every_mode="full", others="flash",
                  torchtitan=(("mode", "selective"), ("selective_ac_option", "2")),
                  deepspeed_note="DeepSpeed's pipeline engine checkpoints runs of "
                                 "activation_checkpoint_interval layers, every run "
                                 "(PipelineModule.forward): it cannot leave every 2nd layer "
                                 "unrecomputed, so 1 (every layer recomputed: less memory, "
                                 "one more forward on all layers) is written; recomputing half "
                                 "needs deepspeed.checkpointing.checkpoint around every 2nd "
                                 "layer in the model code"),
    # torchtitan's selective op AC (selective_ac_option = "op"), counted op by op in
    # labs.model.op_checkpoint: each layer keeps its input, every other matmul's output and
    # the attention kernel's; its backward runs the other matmuls (wk, wo, w3 of the Llama
    # block), every elementwise op and the TP all-gathers again, the attention core not.
    Recomputation("op", "torchtitan's selective op recomputation (every 2nd matmul)",
                  stores_scores=False, input_only=False, attention_again=False,
                  forward_again=False, text="op-level, torchtitan",
                  megatron=(("--recompute-granularity", "selective"),),
                  deepspeed_interval=1, policy="torchtitan-op",
                  torchtitan=(("mode", "selective"), ("selective_ac_option", "op")),
                  megatron_note="Megatron-LM has no op-level policy like torchtitan's (every "
                                "2nd matmul's output dropped and run again): the nearest, "
                                "selective (the attention core run again), is written; it "
                                "keeps every matmul's output, so more memory per layer and "
                                "less run again",
                  deepspeed_note="DeepSpeed's pipeline engine checkpoints whole layers "
                                 "(activation_checkpoint_interval): torchtitan's op-level "
                                 "policy cannot be written, so 1 (every layer recomputed "
                                 "whole: less memory, more run again) is"),
)}


def layer_rules(recompute: str) -> Recomputation:
    """The record whose rules each layer follows, for counts made one layer at a time; a
    layer-granular mode has two (its ``groups``), so it is refused here."""
    record = RECOMPUTATION[recompute]
    if record.every > 1:
        raise ValueError(f"{recompute!r} mixes two per-layer modes: count a rank's layers "
                         "with Recomputation.groups")
    return record
