"""EP10: composes EP01's ledger and EP08's step model: the FP8 recipes' ledger against BF16
itemised from EP01's, `finetune.py` full fine-tuning beside LoRA and QLoRA (with the
offloaded share of their saved activations in host RAM), `offload.py` activation offload,
`speed.py` what FP8 buys in time: EP08's op-level step (the same plan, with the page's
micro-batches per step: gradient accumulation) run in BF16 and in the recipe, split by part,
`reported.py` the published figures its tests hold it to

Composed from the ledger (``labs.memory``): the FP8 recipes are records of
``labs.core.catalogue`` that every lab accepts, so this package only itemises what the ledger
bills and adds what fine-tuning (``finetune``) and offload (``offload``) change.

What FP8 buys in time: ``speed(inp: PrecisionInput) -> SpeedResult``, EP08's op-level step
model (``labs.recipe.lab.evaluate``) run for BF16 and for the chosen recipe on the same model,
GPU and layout, with one ``SpeedPart(name, bf16_s, fp8_s, why)`` per part of a step: the
linear layers' GEMMs (FP8 peak), the GEMMs a recipe keeps 16-bit (attention core, output
head), the casts and each recipe's scaling work (memory-bound, at HBM bandwidth), the
ZeRO-3/FSDP all-gathers (``Recipe.gathered_bytes``: FP8 parameters halve them), the
communication, bubble and optimizer that do not change, and the step time and MFU of each
against the same BF16 peak. The published figures it is held to: ``reported``.
"""

FLOOR = 6  # imports only labs packages of floors <= 6 (tests/test_project.py)
