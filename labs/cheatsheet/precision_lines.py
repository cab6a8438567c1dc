"""EP12's cheat sheet, its lines of EP10 (low precision and fine-tuning): a recipe's state, LoRA
and QLoRA, what FP8 buys in time and activation offload. Split from run_lines.py (EP08, EP09 and
EP11's are there and in failure_lines.py) as it is: one function per formula, each returning the
worked example's inputs and result as the lab that teaches the formula computes them."""

from collections.abc import Callable
from dataclasses import replace

from labs.cheatsheet.inputs import Term
from labs.cheatsheet.lines import ledger_of
from labs.core.catalogue import RECIPES
from labs.core.errors import LabInputError
from labs.memory.lab import (
    compute_memory,
    linear_weight_params,
    local_params,
    weight_parts,
)
from labs.precision.finetune import finetunes, linears, trainable_params
from labs.precision.inputs import MODULE_SETS, PrecisionInput
from labs.precision.lab import compute_precision
from labs.precision.speed import TP8_ZERO1, amdahl_terms, speed
from labs.schedules.stages import stage_params

# ---- EP10 low precision and fine-tuning (TransformerEngine; DeepSeek-V3; OCP MX; LoRA; QLoRA) ----

LORA_RANK, QLORA_RANK = 16, 64  # the examples' ranks: a common LoRA choice, QLoRA's own


def recipe_state(recipe: str) -> Callable:
    """A recipe's training state: P × its bytes per parameter but the low-precision copies
    (labs.core.catalogue's sums), and those copies on the linear layers' P_lin alone (an FP8
    recipe casts only its linear layers: labs.memory.lab ``weight_parts``)."""
    def line(inp):
        r, rec = ledger_of(inp, recipe), RECIPES[recipe]
        return ((Term("P", r.params, "count", "parameters"),
                 Term("B", rec.bytes_per_param - rec.copy_bytes, "bytes",
                      "per parameter, from its formats"),
                 Term("P_lin", linear_weight_params(inp.model), "count",
                      "the linear layers' parameters"),
                 Term("B_lin", rec.copy_bytes, "bytes", "their low-precision copies")),
                Term("P·B + P_lin·B_lin", r.state_bytes, "bytes", r.input.recipe))
    return line


def _one_gpu(inp, **kw) -> PrecisionInput:
    return PrecisionInput(inp.model, inp.gpu, seq_len=inp.seq_len, micro_batch=inp.micro_batch,
                          dp=1, zero=0, **kw)


def lora_params(inp):
    """LoRA on q and v (Hu et al. 2021 sec 7.1). Each matrix's d_in + d_out is a term (round-23
    cold reading R, finding 5: the line gave r and L but not the widths it sums)."""
    m = inp.model
    n = trainable_params(m, LORA_RANK, MODULE_SETS["qv"])
    widths = {x.module: x for x in linears(m) if x.module in MODULE_SETS["qv"]}
    return ((Term("r", LORA_RANK, "", "rank"),
             *(Term(f"d_in + d_out ({k})", x.d_in + x.d_out, "",
                    f"{x.d_in:,} in, {x.d_out:,} out, {x.count} matrices")
               for k, x in widths.items())),
            Term("Σ r·(d_in + d_out)", n, "count", "trainable parameters"))


def qlora_base(inp):
    qlora = finetunes(_one_gpu(inp, rank=QLORA_RANK, modules="all", recompute="full",
                               ft_recipe="adam12"))[2]
    b = qlora.breakdown
    return ((Term("NF4", b["weights"], "bytes", "4-bit linear layers, 16-bit the rest"),
             Term("constants", b["quant_constants"], "bytes", "double-quantized")),
            Term("base", b["weights"] + b["quant_constants"], "bytes", "frozen, on one GPU"))


def _fp8_rate_words(gpu) -> str:
    """What r is made of (round-18 cold reading C, finding 12: "1.77" against a stated 1,979
    vs 989 TFLOP/s): the timed GEMMs' BF16 time ÷ their FP8 time (``amdahl_terms``), beside
    its full-wave bound, each format's dense peak times the share of it a matmul reaches
    (MAMF, the preset's measured or assumed figure, each sourced in labs/presets/gpus.json).
    Round-27 reading B, finding 4: at 1,979 × 70.9% ÷ (989 × 80.3%) the printed digits gave
    1.767 beside the timed 1.765; the peaks and shares now print to the places that redo it."""
    k = gpu.kernels
    fp8, bf16 = k.fp8_flops * k.matmul_efficiency_fp8, gpu.bf16_flops * k.matmul_efficiency
    return (f"the linear GEMMs' BF16 time ÷ their FP8 time: at full waves "
            f"{k.fp8_flops / 1e12:,.1f} TFLOP/s × {k.matmul_efficiency_fp8:.2%} MAMF ÷ "
            f"(BF16's {gpu.bf16_flops / 1e12:,.1f} × {k.matmul_efficiency:.2%}) = "
            f"{fp8 / bf16:.3f}, less where a GEMM's waves are part empty or memory binds")


def _unfit_parts(ledger) -> str:
    """Where the refused layout's bytes a GPU come from (round-29 task fixR #1: GLM-4.7's
    2,101.9 GB could not be derived, the layout's EP 1 and expert-TP 1 unnamed): the GPU's
    parameters (a MoE's routed experts whole, at EP x expert-TP = 1, beside its share of the
    rest), their 16-bit weights and gradients, the FP8 copies of the linear layers (each
    linear parameter x the recipe's copies' bytes), the optimizer state sharded as the ledger
    shards it (``labs.memory.lab._sharded``: the experts' over expert-DP, the rest's over
    DP x CP), the amax history and the activations (round-30 reading, findings 1 and 6: "sharded
    over DP" could not give the remainder, and the copies' 2 B were unstated). A MoE's line
    ends with the bill at Megatron's default expert-TP (= TP). Every figure is the ledger's
    own (``labs.memory.lab.local_params``, ``weight_parts`` and the parts)."""
    m = ledger.memory.input
    r = RECIPES[ledger.recipe]
    sp = stage_params(m.model, m.pp, m.schedule, m.virtual, m.first_stage_layers,
                      m.last_stage_layers)[ledger.memory.stages[ledger.memory.heaviest_stage].rank]
    dense, _, _, experts = local_params(m, sp)
    _, linear = weight_parts(m, sp, r)
    p = ledger.parts
    held = p["weights"] + p["gradients"]
    state = p["master_weights"] + p["optimizer_moments"]
    acts = p["activations_fp8"] + p["activations"] + p["embedding_and_logits"]
    dense_group, expert_group = m.shard_groups
    own = f"{(dense + experts) / 1e9:,.2f}B parameters a GPU"
    sharding = f"sharded over DP {dense_group}"
    default = ""
    if experts:
        model = m.model
        each = model.experts // (m.ep * m.etp)
        own = (f"EP {m.ep}, expert-TP {m.etp}: every GPU holds all {each} experts of each of "
               f"{sp.moe_layers} MoE layers whole ({sp.moe_layers} × {each} × "
               f"{model.expert_size:,} = {experts / 1e9:,.2f}B parameters) beside "
               f"{dense / 1e9:,.2f}B of the rest (TP {m.tp} splits it): {own}")
        group = (f"TP × DP = {expert_group}" if expert_group == m.tp * m.dp
                 else f"{expert_group}")
        sharding = (f"the experts' over their expert-DP group, {group} GPUs; the rest's over "
                    f"DP {dense_group}")
        if m.etp != m.tp:
            at_default = compute_memory(replace(m, etp=m.tp)).total_bytes
            default = (f" Megatron's default, expert-TP = TP = {m.tp}, would still need "
                       f"{at_default / 1e9:,.1f} GB a GPU.")
    copies = " and ".join(c.what for c in r.copies)
    # A few MB on a dense model's GPU: said in MB, not as 0.0 GB.
    scaling = p["scaling_state"]
    amax = f"{scaling / 1e9:,.1f} GB" if scaling >= 0.05e9 else f"{scaling / 1e6:,.0f} MB"
    return (f". {own} × 4 B (16-bit weights and gradients) = {held / 1e9:,.1f} GB, + "
            f"{p['fp8_weights'] / 1e9:,.1f} GB of FP8 copies of the linear layers "
            f"({linear / 1e9:,.2f}B linear parameters × {r.copy_bytes:g} B: {copies}), + "
            f"{state / 1e9:,.1f} GB of optimizer state "
            f"({r.master_weights + r.optimizer_moments:g} B a parameter: {sharding}), + "
            f"{amax} of amax history, + "
            f"{acts / 1e9:,.1f} GB of activations.{default}")


def fp8_speedup(inp):
    """TransformerEngine's FP8 recipe against BF16 for the example's model and GPU on EP10's
    70B layout (``TP8_ZERO1``: TP 8 in a node, ZeRO-1 over DP 8), the state EP10 step 9's why
    works by step 8's formula (fix E, finding 3: the line timed the example on one GPU, a plan
    that cannot hold a 70B's state, and linked to a why that works the 8B). Its terms are
    ``amdahl_terms``, the function that why's figures come from."""
    inp_fp8 = PrecisionInput(inp.model, inp.gpu, seq_len=inp.seq_len,
                             micro_batch=inp.micro_batch, recipe="fp8-delayed", **TP8_ZERO1)
    ledger = compute_precision(inp_fp8).ledger
    if ledger.total_bytes > inp.gpu.memory_bytes:
        raise LabInputError("model", f"{inp.model.name} does not fit EP10's TP {TP8_ZERO1['tp']}"
                                     f" × ZeRO-1 DP {TP8_ZERO1['dp']} layout on the "
                                     f"{inp.gpu.name}: {ledger.total_bytes / 1e9:,.1f} GB a GPU"
                                     f"{_unfit_parts(ledger)}")
    s = speed(inp_fp8)
    if not s.timed or not s.fp8_path:
        raise LabInputError("gpu", s.reason or "no FP8 path")
    t = amdahl_terms(s)
    return ((Term("g", t["g"], "fraction", "linear GEMMs' share of the BF16 step"),
             Term("r", t["r"], "gain", _fp8_rate_words(inp.gpu)),
             Term("c", t["c"], "fraction", "casts and scaling, of the step"),
             Term("e", t["e"], "fraction",
                  f"TP collectives and gradient sync the shorter backward no longer hides "
                  f"(TP {TP8_ZERO1['tp']}, ZeRO-1 over DP {TP8_ZERO1['dp']}, "
                  f"{s.microbatches} micro-batches: EP10 step 9)")),
            Term("speed-up", t["speedup"], "", "BF16 step / FP8 step"))


def offload_host(inp):
    o = compute_precision(_one_gpu(inp, recipe="adam16", offload=1.0, tp=inp.tp)).offload
    # Round-18 cold reading C, findings 3 and 14: the link is the GPU's own (PCIe 4.0 on an
    # A100), and its rate is a term, so t_copy = A_layer / B_host can be worked out.
    return ((Term("A", o.activation_bytes, "bytes", f"saved activations per GPU at TP = "
                                                     f"{inp.tp}"),
             Term("A_layer", o.layer_bytes, "bytes", "one layer's, one micro-batch"),
             Term("B_host", o.link_bandwidth, "B/s", f"{o.link_name}, the {inp.gpu.name}'s "
                                                     "host link, one direction"),
             Term("t_copy", o.copy_s, "s", "A_layer ÷ B_host"),
             Term("t_fwd", o.forward_s, "s", "its forward, kernels and TP collectives "
                                              "(EP08's step model)")),
            Term("f_hidden", o.hidden_share, "fraction", "largest share the forward hides"))
