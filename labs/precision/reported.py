"""The published figures EP11 quotes and its tests hold the lab to (tests/labs/
test_precision.py, each with its tolerance): typed once here, each with its source."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 2**30


@dataclass(frozen=True)
class Reported:
    value: float
    what: str
    source: str


REPORTED = {r_id: r for r_id, r in (
    # FP8 holding more than BF16.
    ("torchtitan_bf16", Reported(
        47.65 * GIB, "peak memory, Llama 3 8B, 8 H100s, FSDP, 8,192 tokens, bf16 + compile",
        "pytorch/torchtitan PR 808 (step 20: memory 47.65GiB)")),
    ("torchtitan_rowwise", Reported(
        67 * GIB, "peak memory, the same run in rowwise FP8 before the fixes",
        "pytorch/ao PR 1629: 'rowwise peak memory decreased from 67GiB to 59GiB'; "
        "pytorch/torchtitan PR 820 found the rest: abs(W) of an unsharded weight saved for "
        "the backward by per-op activation checkpointing")),
    ("torchtitan_rowwise_fixed", Reported(
        47.77 * GIB, "the same run in rowwise FP8 after the fixes",
        "pytorch/torchtitan PR 808 (step 30: memory 47.77GiB)")),
    # LoRA, Hu et al. 2021 (arXiv:2106.09685).
    ("lora_trainable_reduction", Reported(
        10_000, "GPT-3 175B: trainable parameters reduced 'by 10,000 times'", "LoRA abstract")),
    ("lora_memory_reduction", Reported(
        3, "GPU memory requirement reduced 'by 3 times'", "LoRA abstract")),
    ("lora_full_bytes", Reported(
        1.2e12, "GPT-3 175B training VRAM, full fine-tuning", "LoRA sec 4.2: 1.2TB")),
    ("lora_lora_bytes", Reported(
        350e9, "GPT-3 175B training VRAM with LoRA", "LoRA sec 4.2: 350GB")),
    ("lora_checkpoint_bytes", Reported(
        35e6, "the checkpoint with r = 4 on Wq and Wv", "LoRA sec 4.2: 350GB to 35MB")),
    # QLoRA, Dettmers et al. 2023 (arXiv:2305.14314).
    ("qlora_gpu_bytes", Reported(
        48e9, "a 65B model fine-tuned on a single 48GB GPU", "QLoRA abstract")),
    ("qlora_full_bytes", Reported(
        780e9, "16-bit fine-tuning of a 65B model needs more than 780GB", "QLoRA sec 1")),
    ("qlora_constants_bits", Reported(
        0.5, "NF4's FP32 constants per parameter, blocks of 64: 32/64 bits", "QLoRA sec 3")),
    ("qlora_dq_bits", Reported(
        0.127, "double-quantized constants per parameter: 8/64 + 32/(64·256) bits",
        "QLoRA sec 3")),
)}
