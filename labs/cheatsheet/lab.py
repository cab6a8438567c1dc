"""EP12's cheat sheet: every formula of EP01-EP11 with a worked example for one model
and GPU.

Each line states a formula (in the symbols of the paper it comes from, cited in ``source``) and
its example is *computed by the lab that teaches it*: the ledger (labs.memory.lab), the DP and ZeRO
labs, the TP cost model, the pipeline simulator, the CP mask, the MoE router, the 3D recipe and
the RL placement. Nothing here re-derives a figure; the inputs a line shows are read off the
same engine objects, so a line cannot disagree with its episode.
"""

from collections.abc import Callable

from labs.cheatsheet.failure_lines import goodput_line, young_interval
from labs.cheatsheet.inputs import CheatInput, CheatLine, Term
from labs.cheatsheet.lines import (
    MOE_EXAMPLE,
    activations_flash,
    activations_full,
    activations_none,
    activations_selective,
    bubble,
    bubble_interleaved,
    bubble_zb,
    cp_kv,
    cp_pairs,
    dp_speedup,
    inference,
    kv_cache,
    min_gpus,
    moe_a2a,
    moe_params,
    ring,
    state16,
    state18,
    tp_layer,
    zero_stage,
    zero_traffic,
)
from labs.cheatsheet.precision_lines import (
    fp8_speedup,
    lora_params,
    offload_host,
    qlora_base,
    recipe_state,
)
from labs.cheatsheet.run_lines import (
    RL_EXAMPLE,
    colocated,
    flops_6nd,
    flops_8nd,
    hfu,
    mfu,
    serving,
    step_time,
)
from labs.core.catalogue import RECIPES
from labs.core.errors import LabInputError

__all__ = ["LINES", "MOE_EXAMPLE", "RL_EXAMPLE", "CheatInput", "CheatLine",
           "Term", "cheat_sheet"]

def _per_param(recipe: str) -> str:
    """A recipe's formula, written from its record: P × (each part's bytes) B, and its
    low-precision copies on the linear layers' P_lin alone (labs.memory.lab weight_parts)."""
    r = RECIPES[recipe]
    parts = [r.weights, r.gradients, r.master_weights, r.optimizer_moments]
    copies = [c.bytes_per_param for c in r.copies]
    return ("P × (" + " + ".join(f"{b:.3g}" for b in parts if b) + ") B + P_lin × ("
            + " + ".join(f"{b:.3g}" for b in copies) + ") B")


LINES: tuple[tuple[str, str, str, str, str, Callable], ...] = (
    ("state16", "EP01", "Training state, mixed-precision Adam", "P × (2 + 2 + 4 + 8) B",
     "ZeRO (Rajbhandari et al. 2020) sec 3.1; Micikevicius et al. 2018", state16),
    ("state18", "EP01", "Training state with fp32 gradients", "P × (2 + 4 + 4 + 8) B",
     "Mixed-precision training, fp32 gradient accumulation", state18),
    ("activations", "EP01", "Activations, selective recomputation", "L × 34·s·b·h B",
     "Korthikanti et al. 2022, Reducing Activation Recomputation, sec 4", activations_selective),
    # Round-18 cold reading C, finding 10: the k·a·s/h term is the s×s scores that the unfused
    # attention kernels of 2021-22 kept (EP01 step 3); fused attention keeps none.
    ("activations_none", "EP01", "Activations, no recomputation, unfused attention "
     "(2021–22 kernels)", "L × s·b·h·(34 + k·a·s/h) B",
     "Korthikanti et al. 2022, eq. 1 (k = 5 with dropout; 2 without, sec 4.1)",
     activations_none),
    ("activations_flash", "EP01", "Activations, no recomputation, fused (flash) attention",
     "L × 34·s·b·h B: no s×s scores kept", "Dao et al. 2022 (FlashAttention) sec 3.1; "
     "Korthikanti et al. 2022 eq. 1 without its scores term", activations_flash),
    ("activations_full", "EP01", "Activations, full recomputation", "L × 2·s·b·h B",
     "Korthikanti et al. 2022 sec 4.1 (Chen et al. 2016 checkpointing)", activations_full),
    ("inference", "EP01", "Inference weights", "P × 2 B (bf16); 1 B int8; 0.5 B int4",
     "Weight-only quantisation (LLM.int8, GPTQ)", inference),
    ("kv_cache", "EP01", "KV cache", "2 × L × kv_heads × d_head × s·b × 2 B",
     "vLLM (Kwon et al. 2023); GQA (Ainslie et al. 2023)", kv_cache),
    ("min_gpus", "EP01", "Fewest GPUs for the state", "⌈16·P / M_GPU⌉",
     "the ledger: state alone, before any activation", min_gpus),
    ("ring", "EP02", "Ring all-reduce, bytes per GPU", "2·(N−1)/N × G",
     "Patarasuk & Yuan 2009; NCCL ring algorithm", ring),
    ("dp_speedup", "EP02", "DP speedup, weak scaling", "N × c / (c + t_allreduce)",
     "PyTorch DDP (Li et al. 2020)", dp_speedup),
    ("zero0", "EP03", "ZeRO-0 (plain DP)", "16·P", "Rajbhandari et al. 2020 fig 1",
     zero_stage(0)),
    ("zero1", "EP03", "ZeRO-1: optimizer states sharded", "4·P + 12·P/D",
     "Rajbhandari et al. 2020 sec 5.1", zero_stage(1)),
    ("zero2", "EP03", "ZeRO-2: + gradients", "2·P + 14·P/D", "Rajbhandari et al. 2020 sec 5.2",
     zero_stage(2)),
    ("zero3", "EP03", "ZeRO-3 / FSDP: + weights", "16·P/D", "Rajbhandari et al. 2020 sec 5.3",
     zero_stage(3)),
    ("zero_traffic", "EP03", "ZeRO-3 traffic against DP", "≈ 1.5 × DP's all-reduce",
     "Rajbhandari et al. 2020 sec 7.2", zero_traffic),
    ("tp", "EP04", "TP collectives per layer", "(n + r) × 2(t−1)/t × s·b·h·2 B",
     "Shoeybi et al. 2019 (Megatron-LM) sec 3", tp_layer),
    ("bubble", "EP05", "Pipeline bubble (1F1B)", "(p−1) / (m+p−1)",
     "Huang et al. 2019 (GPipe); Narayanan et al. 2021 sec 2.2", bubble),
    ("bubble_interleaved", "EP05", "Interleaved 1F1B", "(p−1) / (v·m+p−1)",
     "Narayanan et al. 2021 sec 2.2.1", bubble_interleaved),
    ("bubble_zb", "EP05", "Zero bubble (ZB-H1)",
     "(p−1)(F+I−W) / (m(F+I+W) + (p−1)(F+I−W)), F = I = W",
     "Qi et al. 2024 (ICLR 2024; arXiv:2401.10241), Zero Bubble Pipeline Parallelism",
     bubble_zb),
    ("cp_contiguous", "EP06", "Causal pairs, contiguous CP",
     "busiest rank: Σ of its rows, row q adding q + 1 pairs (of s(s+1)/2)",
     "Liu et al. 2023 (ring attention)", cp_pairs("contiguous")),
    ("cp_zigzag", "EP06", "Causal pairs, zigzag CP",
     "rank r holds chunks r and 2c−r−1; busiest rank: Σ of its rows",
     "Megatron-LM context parallelism (zigzag load balance)", cp_pairs("zigzag")),
    ("cp_kv", "EP06", "CP ring traffic", "(c−1) K/V blocks per GPU per layer",
     "Liu et al. 2023; Megatron-LM CP", cp_kv),
    ("moe_params", "EP07", "MoE: memory counts total, compute active", "P_total vs P_active",
     "Shazeer et al. 2017; Jiang et al. 2024 (Mixtral)", moe_params),
    ("moe_a2a", "EP07", "All-to-all dispatch", "T × k × h × 2 B × (EP−1)/EP",
     "Lepikhin et al. 2020 (GShard); DeepSpeed-MoE", moe_a2a),
    ("flops_6nd", "EP08", "Training FLOPs", "6·N·D (+ attention)",
     "Kaplan et al. 2020 sec 2.1", flops_6nd),
    ("flops_8nd", "EP08", "Hardware FLOPs with full recomputation (for HFU, not MFU)",
     "8·N·D (+ attention)", "Korthikanti et al. 2022 sec 4.1; Narayanan et al. 2021 app.",
     flops_8nd),
    ("mfu", "EP08", "Model FLOPs utilisation", "6·N·D / (step × GPUs × peak)",
     "Chowdhery et al. 2022 (PaLM) app. B", mfu),
    ("hfu", "EP08", "Hardware FLOPs utilisation (HFU), full recomputation",
     "8·N·D / (step × GPUs × peak)", "Korthikanti et al. 2022 sec 4.1; Chowdhery et al. "
     "2022 app. B", hfu),
    ("step", "EP08", "Step time", "compute + bubble + exposed communication",
     "Narayanan et al. 2021 sec 3", step_time),
    ("serving", "EP09", "Serving GPU", "weights + KV cache + workspace",
     "vLLM (Kwon et al. 2023); SGLang", serving),
    ("colocated", "EP09", "Colocated RL placement", "max(M_train, M_rollout) + overhead",
     "slime / verl colocated mode", colocated),
    *((f"state_{recipe}", "EP10", title, _per_param(recipe), source, recipe_state(recipe))
      for recipe, title, source in (
          ("fp8-delayed", "FP8 state, bf16 weights kept (TE)",
           "TransformerEngine DelayedScaling; TE issues 1261, 1429"),
          ("fp8-blockwise", "FP8 state, fine-grained (DeepSeek-V3)",
           "DeepSeek-V3 report sec 3.3"),
          ("mxfp8", "MXFP8 state (Blackwell)", "OCP MX spec v1.0; TE MXFP8BlockScaling"))),
    ("lora_params", "EP10", "LoRA trainable parameters", "Σ r·(d_in + d_out), adapted matrices",
     "Hu et al. 2021 (LoRA) sec 4.1", lora_params),
    ("qlora_base", "EP10", "QLoRA frozen base", "P_lin × (4 + 8/64 + 32/(64·256)) / 8 + "
     "P_rest × 2 B", "Dettmers et al. 2023 (QLoRA) sec 3", qlora_base),
    ("fp8_speedup", "EP10", "What FP8 buys in time", "1 / ((1 − g) + g/r + c + e)",
     "Amdahl 1967; FP8 GEMMs at the dense FP8 peak (H100: 1,979 vs 989 TFLOP/s)", fp8_speedup),
    ("offload", "EP10", "Activation offload", "host = f·A × GPUs/node; hidden while "
     "A_layer / B_host ≤ t_fwd", "Megatron-LM CPU offloading; PyTorch save_on_cpu",
     offload_host),
    ("young", "EP11", "Checkpoint interval", "τ = √(2·δ·M)",
     "Young 1974 (CACM 17(9)); Daly 2006 (FGCS 22(3)) refines it", young_interval),
    # Round-20 cold reading R, finding 11: the save's stop is δ here as on EP11's page.
    ("goodput", "EP11", "Goodput", "τ / ((M + R)·(e^((τ+δ)/M) − 1))",
     "Daly 2006 (FGCS 22(3)) eq. 10; Llama 3 (arXiv:2407.21783) sec 3.3.4",
     goodput_line),
)


def cheat_sheet(inp: CheatInput) -> tuple[CheatLine, ...]:
    """Every line, its example computed by its lab; a lab that refuses the example (TP that
    does not divide the heads, a pipeline shape a schedule cannot take) says why instead."""
    lines = []
    for key, episode, title, formula, source, compute in LINES:
        try:
            terms, result = compute(inp)
            lines.append(CheatLine(key, episode, title, formula, source, tuple(terms), result))
        except LabInputError as exc:
            lines.append(CheatLine(key, episode, title, formula, source, (), None,
                                   f"{exc.field}: {exc.message}"))
    return tuple(lines)
