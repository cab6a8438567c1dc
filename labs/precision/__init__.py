"""EP11 low precision and fine-tuning: where every byte of an FP8 recipe, a LoRA or QLoRA
fine-tune and an activation offload lives (``labs.precision.lab``).

Composed from the ledger (``labs.memory``): the FP8 recipes are records of
``labs.core.catalogue`` that every lab accepts, so this package only itemises what the ledger
bills and adds what fine-tuning (``finetune``) and offload (``offload``) change.

What FP8 buys in time (the issue's item 2) is not built here yet: it needs the op-level step
model (GEMM rates by shape with FP8 peaks, memory-bound ops at HBM bandwidth, NCCL
collectives). Its interface, for when that model lands: ``speed(inp: PrecisionInput) ->
SpeedResult`` with one ``SpeedPart(name, bf16_s, fp8_s, why)`` per part of a step: the linear
layers' GEMMs (FP8 peak), the GEMMs a recipe keeps 16-bit (attention core, output head), the
casts and scale searches (memory-bound, at HBM bandwidth), the ZeRO-3/FSDP all-gathers
(``Recipe.gathered_bytes``: FP8 parameters halve them) and the step time and MFU of each
recipe against the same BF16 peak. The recipe records already carry what it needs
(``family``, ``copies``, ``gathered_bytes``).
"""
