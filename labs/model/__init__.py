"""`spec.py` (`ModelSpec`: the shape, whether it trains with dropout, and its counts),
`presets.py` (model presets, custom sizes), `code.py` (a shape as a short URL-safe code),
`hf_config.py` (a Hugging Face `config.json` → `ModelSpec`), `flops.py` (FLOPs per token, time
at an MFU), `activations.py` (classic or Megatron activation bytes, SP on/off, unfused
attention's scores at 5 bytes with dropout and 2 without: `score_bytes_per_element`; a rank's
layers in their recomputation modes: `layers_activation_bytes`; Korthikanti's count redone for
a model's own dense layer, which the lessons quote beside GPT's 34: `own_layer_terms`),
`ops.py` (one layer's compute kernel by kernel after the
TP/CP/EP split: every GEMM with its shape, the attention core, every memory-bound op with its
bytes, as fused (Megatron / TE), torch.compile'd or eager PyTorch kernels move them),
`passes.py` (a pass's kernels, each timed as it is added, and their totals), `head.py`
(the same outside the layers: embedding, output layer and loss, optimizer step, gradient
accumulation), `op_checkpoint.py` (torchtitan's selective op checkpointing from its save list:
the matmuls a layer's backward runs again and the tensors it keeps, `kept_tensors`, which
EP10 step 7 sums)"""

FLOOR = 2  # imports only labs packages of floors <= 2 (tests/test_project.py)
