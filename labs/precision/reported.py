"""The published figures EP10 quotes and its tests hold the lab to (tests/labs/
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
    # What FP8 buys in time: torchtitan's Llama 3 8B runs on 8 H100s (FSDP, bf16 + compile
    # against float8 + compile), tokens per second per GPU.
    ("titan_table1_bf16_tps", Reported(
        6_667, "Llama 3.1 8B, 8 H100s, FSDP, local batch 2, selective AC: FSDP + compile",
        "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md, Table 1")),
    ("titan_table1_fp8_tps", Reported(
        8_532, "the same with Float8 (tensorwise, FP8 all-gather)",
        "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md, Table 1")),
    ("titan_pr808_bf16_tps", Reported(
        5_760, "Llama 3 8B, 8 H100s, bf16 + compile (step 20: tps 5,760, mfu 33.73%)",
        "pytorch/torchtitan PR 808")),
    ("titan_pr808_tensorwise_tps", Reported(
        7_186, "tensorwise float8 with float8 all-gather + compile (step 20: tps 7,186)",
        "pytorch/torchtitan PR 808")),
    ("titan_pr808_rowwise_tps", Reported(
        6_468, "rowwise float8 + compile (step 30: tps 6,468)", "pytorch/torchtitan PR 808")),
    ("titan_tp_bf16_tps", Reported(
        5_378, "Llama 3 8B, 4 H100s, FSDP 2 x TP 2, per-op SAC: bf16",
        "pytorch/torchtitan issue 1207")),
    ("titan_tp_rowwise_tps", Reported(
        5_189, "the same in rowwise float8: slower than bf16", "pytorch/torchtitan issue 1207")),
    ("torchao_70b_speedup", Reported(
        1.5, "float8 throughput speed-up 'of up to 1.5x on 128 GPU LLaMa 3 70B pretraining "
        "jobs' (torch.compile on)", "pytorch/ao torchao/float8/README.md, introduction")),
    ("torchao_small_linear", Reported(
        0.80, "float8 linear speed-up, M, K, N = 1,024, 2,048, 1,024 on H100",
        "pytorch/ao torchao/float8/README.md, Performance, example 1")),
    ("torchao_large_linear", Reported(
        1.39, "float8 linear speed-up, M, K, N = 4,096, 8,192, 16,384 on H100",
        "pytorch/ao torchao/float8/README.md, Performance, example 2")),
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
