"""`errors.py` (`LabInputError`, which may name a second control it clashes with: `also`, said by
both on the page and in the 422), `recomputation.py` (one record per recomputation mode, with
what each keeps and runs again and what the exports write: none, flash, selective, full; the
layer-granular every-2nd, torchtitan's selective layer AC: `Recomputation.groups` splits each
pipeline rank's layers as torchtitan's counter does, floor(L/2) fully recomputed, the rest kept
as with FlashAttention, every reader summing a stage through it; and op, torchtitan's selective
op AC, whose `policy` is counted op by op in `model/op_checkpoint.py`), `catalogue.py` (one
record per other shared choice: precision recipes with their bytes per parameter and names, the
FP8 ones summed from the storage formats of what they keep (`Stored`: FP8 per tensor, 1×128 and
128×128 blocks, MXFP8, NF4 with double quantization), activation models; read by the engine, the
option lists and the charts), `limits.py` (every enumeration's ids and every bound, read by
routers and pages too), `validate.py` (the shared validators: `whole`, `number`, `one_of`,
`flag`, each lab's wording a template), `data.py` (reading the preset files; `Presets`, one
table of them by id)"""

FLOOR = 1  # imports only labs packages of floors <= 1 (tests/test_project.py)
