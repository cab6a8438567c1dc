"""EP12's cheat sheet, its lines of EP08-EP10, a whole run: its FLOPs, MFU, HFU and step (the 3D
recipe), RL serving and colocation, low precision and fine-tuning (EP11's failures and goodput
are failure_lines.py). As in lines.py (EP01-EP07): one function per formula, each returning the
worked example's inputs and result as the lab that teaches the formula computes them; each group
cites its papers."""

import math
from collections.abc import Callable
from dataclasses import replace

from labs.cheatsheet.inputs import Term
from labs.cheatsheet.lines import ledger_of
from labs.core.catalogue import RECIPES
from labs.core.errors import LabInputError
from labs.hardware.links import make_cluster
from labs.memory.lab import (
    compute_memory,
    kv_cache_bytes,
    linear_weight_params,
    local_params,
    weight_parts,
)
from labs.model.flops import (
    hardware_flops_per_token,
    head_matmul_params,
    matmul_params,
    model_flops_per_token,
)
from labs.precision.finetune import finetunes, linears, trainable_params
from labs.precision.inputs import MODULE_SETS, PrecisionInput
from labs.precision.lab import compute_precision
from labs.precision.speed import TP8_ZERO1, amdahl_terms, speed
from labs.recipe.inputs import SEGMENT_LABELS, Plan
from labs.recipe.lab import evaluate
from labs.rl.inputs import RLPlacementInput
from labs.rl.lab import compute_rl_placement, rollout_pools
from labs.rl.recipes import recipes
from labs.rl.serving import KV_DTYPE_BYTES, attention_groups, serving_workspace
from labs.schedules.stages import stage_params

RL_EXAMPLE = "glm-4-9b"  # EP09's colocation line needs an RL recipe (labs/presets/rl_recipes)


# ---- EP08 the 3D recipe (Narayanan et al. 2021 sec 5; Kaplan et al. 2020 for 6ND) ----

def _plan(inp, **change):
    plan = Plan(tp=inp.tp, pp=inp.pp, dp=inp.dp, cp=inp.cp, zero=1,
                microbatches=inp.microbatches, micro_batch=inp.micro_batch, seq_len=inp.seq_len,
                **change)
    # EP08's cluster at the link's controls: the node's links with a port per GPU (EP08 has no
    # port-count control; the RTX 4090 preset's one port a node would time another run).
    c = inp.cluster
    return evaluate(plan, inp.model, make_cluster(c.gpu, c.gpus_per_node, c.intra, c.inter),
                    inp.nodes)


def _legal(r):
    if not r.legal:
        raise LabInputError(r.problems[0].field, r.problems[0].message)
    return r


def _flop_terms(inp, matmul: int, per_token: float, tokens: int) -> tuple:
    """N, D and the attention score FLOPs: what the FLOP count adds to matmul·N·D, so the
    terms sum to the result."""
    n = matmul_params(inp.model)
    head = ((Term("head once", -2 * head_matmul_params(inp.model) * tokens, "flops",
                  "less 2·V·h·D: the output head's forward is not recomputed (Megatron "
                  "checkpoints the layers only; Narayanan et al. 2021 eq. 3)"),)
            if matmul == 8 else ())
    # Round-29 reading C, finding 5: a MoE's N is its active matmul parameters, not its
    # total less the embedding.
    return (Term("N", n, "count",
                 f"active matmul parameters of {inp.model.params / 1e9:.1f}B (the routed "
                 "experts a token skips and the input embedding, a lookup, left out)"
                 if inp.model.is_moe else
                 f"matmul parameters ({inp.model.params / 1e9:.1f}B less the input "
                 "embedding, a lookup)"),
            Term("D", tokens, "", "tokens"),
            Term(f"{matmul}·N·D", matmul * n * tokens, "flops", "the weight matmuls"),
            *head,
            Term("attention", per_token * tokens - (matmul * n - 2 * (matmul == 8)
                                                     * head_matmul_params(inp.model)) * tokens,
                 "flops", "QKᵀ and AV, 4·L·h·s per token forward, twice that backward: "
                 "12·L·h·s per token (16·L·h·s with full recomputation's second forward)"))


def flops_6nd(inp):
    per = model_flops_per_token(inp.model, inp.seq_len)
    return (_flop_terms(inp, 6, per, inp.seq_len),
            Term("6·N·D + attention", per * inp.seq_len, "flops", "training FLOPs, one "
                 "sequence"))


def flops_8nd(inp):
    per = hardware_flops_per_token(inp.model, inp.seq_len, "full")
    return (_flop_terms(inp, 8, per, inp.seq_len),
            Term("8·N·D + attention", per * inp.seq_len, "flops", "hardware FLOPs, one sequence "
                 "run with full recomputation: HFU's numerator, never MFU's"))


def mfu(inp):
    r = _legal(_plan(inp))
    return ((Term("6·N·D + attention", r.timing.model_flops_per_token * r.tokens_per_step,
                  "flops", f"model FLOPs of the step's D = b·m·DP·s = {r.tokens_per_step:,} "
                           "tokens, as the Training FLOPs line counts them"),
             Term("step", r.step_s, "s", "simulated"), Term("GPUs", r.gpus, "", "in the plan"),
             Term("peak", inp.gpu.bf16_flops, "flops", "per GPU per second")),
            Term("MFU", r.mfu, "fraction", "model FLOPs over step × GPUs × peak"))


def hfu(inp):
    """HFU (Korthikanti et al. 2022 sec 4.1): every FLOP the GPUs run, the recomputed forward
    too, over step x GPUs x peak; the page's plan run with full recomputation, where it
    differs most from the MFU of the same run."""
    r = _legal(_plan(inp, recompute="full"))
    base = _legal(_plan(inp))  # the MFU line's run
    hardware = r.timing.hardware_flops_per_token * r.tokens_per_step
    hfu_value = hardware / (r.step_s * r.gpus * inp.gpu.bf16_flops)
    # Round-29 reading C, finding 12: at the default the two lines both printed 33.2%. They
    # time two runs: the MFU line's recomputes no whole forward, so its step is shorter.
    chance = (f" The MFU line's run recomputes no whole forward ({base.plan.recompute}): its "
              f"step is {base.step_s * 1e3:,.0f} ms, not {r.step_s * 1e3:,.0f} ms, so its "
              f"{base.mfu:.1%} "
              + ("matches this HFU only by chance." if f"{base.mfu:.1%}" == f"{hfu_value:.1%}"
                 else "is another run's figure."))
    return ((Term("8·N·D + attention", hardware, "flops",
                  f"hardware FLOPs of the step's {r.tokens_per_step:,} tokens, the forward run "
                  "twice"),
             Term("step", r.step_s, "s", "simulated, with full recomputation"),
             Term("GPUs", r.gpus, "", "in the plan"),
             Term("peak", inp.gpu.bf16_flops, "flops", "per GPU per second")),
            Term("HFU", hfu_value, "fraction",
                 f"hardware FLOPs over step × GPUs × peak; the same run's MFU is "
                 f"{r.mfu:.1%}: never quote an HFU as an MFU." + chance))


def step_time(inp):
    r = _legal(_plan(inp))
    seg = r.segments or {}
    terms = tuple(Term(k, v, "s", SEGMENT_LABELS.get(k, k).lower()) for k, v in seg.items())
    return terms, Term("step", r.step_s, "s", "the sum")


# ---- EP09 RL placement (slime/verl recipes; vLLM/SGLang serving memory) ----

def _rl_run(inp):
    """The model's EP09 recipe (GLM-4-9B's for a model without one) placed on the chosen GPU,
    as EP09 places it at ``?preset=<its id>&gpu=<the GPU>``: its engines placed as EP09 step 3
    places them, not split evenly. (recipe, the lab's input, its answer)."""
    rec = next((r for r in recipes().values() if r.model == inp.model.id),
               recipes()[RL_EXAMPLE])
    rl_in = RLPlacementInput(
        rec.spec, inp.gpu, rec.train_gpus, tp=rec.tp, pp=rec.pp, cp=rec.cp, ep=rec.ep,
        engine_gpus=rec.engine_gpus, cpu_adam=rec.cpu_adam, recompute=rec.recompute,
        ref_model=rec.kl_loss,
        serving=rec.serving)
    return rec, rl_in, compute_rl_placement(rl_in)


def _borrowed_recipe(inp, rec) -> str:
    return "" if rec.model == inp.model.id else f" ({inp.model.name} has no EP09 recipe)"


def _workspace(model, gpus: int, layout) -> str:
    """The workspace's formula at its figures, from the function the engine bills it with
    (round-21 cold reading R, finding 9; round-25 reading F, finding 1: each part split as
    its weights are, GQA's K and V at their own width)."""
    w = serving_workspace(model, gpus, layout)
    # Round-26 reading B, finding 1: under DP attention SGLang divides the chunk among the
    # groups and runs whole-weight MLPs on the GPU's scattered share of its group's tokens.
    chunk = (f"one {w.attention.tokens:,.0f}-token prefill chunk" if w.chunks == 1 else
             f"its group's {w.attention.tokens:,.0f} tokens (SGLang's "
             f"{w.attention.tokens * w.chunks:,.0f}-token prefill chunk ÷ {w.chunks} attention "
             f"groups)")
    t, group = w.attention.tokens, w.attention.splits[0]

    def part(p) -> str:
        # Round-27 reading B, finding 6: each MLP term named, with the tokens it runs on.
        if p.name == "routed experts":
            return (f"the routed experts' {w.chunks} × {t:,.0f} × {model.top_k} ÷ {gpus} = "
                    f"{p.tokens:,.0f} copies")
        if p.splits[0] == 1:
            return f"the {p.name} whole, on {t:,.0f} ÷ {group} = {p.tokens:,.0f} tokens"
        name = "shared expert" if p.name == "shared experts" and model.shared_experts == 1 \
            else p.name
        if w.chunks > 1 and p.tokens == t * w.chunks:  # SGLang gathers them (no DeepEP)
            return (f"the {name} ÷ {p.splits[0]} GPUs on the engine's gathered "
                    f"{p.tokens:,.0f} tokens (no DeepEP)")
        return f"the {name} ÷ {p.splits[0]} GPUs on {p.tokens:,.0f} tokens"

    attention = "Q, K, V and attention output" + (f" ÷ {group}" if group > 1 else "")
    return (f"the lab's estimate of one layer's forward intermediates for {chunk}, each part "
            f"split as its weights are ({attention}; {', '.join(part(p) for p in w.mlp)}): "
            f"{w.formula()}; SGLang leaves it room outside --mem-fraction-static's share "
            "(weights and KV cache) of the free memory CUDA reports at engine start")


def serving(inp):
    """The rollout engine GPU of the model's EP09 recipe, the figure EP09 step 3 shows at the
    line's link (round-18 cold reading C, finding 6: the line worked the chosen model on TP
    GPUs while its link opened GLM-4-9B's recipe, and the next line used GLM's)."""
    rec, rl_in, r = _rl_run(inp)
    e = max((mem for _, mem in rollout_pools(rl_in).values()), key=lambda m: m.total)
    g, m = rl_in.engine_gpus, rec.spec
    # A token's cache on one GPU, worked (round-23 cold reading R, finding 6: "16 requests x
    # 5,120 tokens / 2 GPUs = 1.68 GB" left its 41 kB a token to be divided out). MLA's latent
    # has no heads, so TP does not split it (labs.memory.lab.kv_cache_bytes).
    split = attention_groups(g, rl_in.serving)[1] if m.is_moe else g
    dtype_bytes = KV_DTYPE_BYTES[rl_in.kv_dtype]
    per_token = kv_cache_bytes(m, 1, 1, tp=split) * dtype_bytes / 2
    if m.uses_mla:
        shape = f"({m.kv_lora_rank} + {m.qk_rope_head_dim}) latent"
        note = f": whole on each of {split} GPUs, a latent has no heads to split"
    else:
        shape = f"2 × {math.ceil(m.kv_heads / split)} KV heads × {m.head_dim}"
        note = f": {m.kv_heads} KV heads over {split} GPUs"
    token = (f" × {per_token / 1e3:.1f} kB a token on a GPU ({m.layers} layers × {shape} × "
             f"{dtype_bytes:g} B{note if split > 1 else ''})")
    if m.is_moe:  # DP attention: whole requests a group (EP09 step 3)
        groups, _ = attention_groups(g, rl_in.serving)
        held = (f"⌈{e.concurrency} / {groups}⌉ whole requests × {e.context:,} tokens (DP "
                f"attention){token}")
        placed = f"experts ÷ {g} GPUs, the rest as DP attention places it (EP09 step 3)"
    else:
        held = f"{e.concurrency} requests × {e.context:,} tokens{token}"
        placed = f"2·P ÷ {g} GPUs"
    return ((Term("weights", e.weights, "bytes", f"{rec.name}{_borrowed_recipe(inp, rec)}: "
                                                 f"{placed}"),
             Term("KV", e.kv_cache, "bytes", held),
             Term("workspace", e.workspace, "bytes", _workspace(m, g, rl_in.serving))),
            Term("per GPU", r.rollout_memory_bytes, "bytes", "one rollout engine GPU"))


def colocated(inp):
    rec, _, r = _rl_run(inp)
    if r.colocated_bytes is None:
        raise LabInputError("model", f"{rec.name}'s training layout is broken on this GPU")
    return ((Term("M_train", r.train_memory_bytes, "bytes",
                  f"{rec.name} training GPU{_borrowed_recipe(inp, rec)}"),
             Term("M_rollout", r.rollout_memory_bytes, "bytes", "rollout GPU (the line above)"),
             Term("overhead", r.transition_overhead_bytes, "bytes", "phase switch")),
            Term("max + overhead", r.colocated_bytes, "bytes", "per colocated GPU"))


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
