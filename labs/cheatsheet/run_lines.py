"""EP12's cheat sheet, its lines of EP08-EP09, a whole run: its FLOPs, MFU, HFU and step (the 3D
recipe), RL serving and colocation (EP10's low precision and fine-tuning are precision_lines.py,
EP11's failures and goodput failure_lines.py). As in lines.py (EP01-EP07): one function per
formula, each returning the worked example's inputs and result as the lab that teaches the
formula computes them; each group cites its papers."""

import math

from labs.cheatsheet.inputs import Term
from labs.context_parallel.lab import head_dims
from labs.core.errors import LabInputError
from labs.hardware.links import make_cluster
from labs.memory.lab import (
    kv_cache_bytes,
)
from labs.model.flops import (
    hardware_flops_per_token,
    head_matmul_params,
    matmul_params,
    model_flops_per_token,
)
from labs.recipe.inputs import SEGMENT_LABELS, Plan
from labs.recipe.lab import evaluate
from labs.rl.inputs import RLPlacementInput
from labs.rl.lab import compute_rl_placement, rollout_pools
from labs.rl.recipes import recipes
from labs.rl.serving import KV_DTYPE_BYTES, attention_groups, serving_workspace

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
                 "12·L·h·s per token (16·L·h·s with full recomputation's second forward); "
                 + attention_width(inp.model)))


def attention_width(m) -> str:
    """What the h of the attention term is (round-31 reading B, finding 8: DeepSeek-V3's
    2.52e14 needs 128 heads x (192 + 128)/2 = 20,480, where a reader took the hidden size,
    7,168): heads x head dim, the query-key and value dims averaged where they differ (MLA)."""
    d_qk, d_v = head_dims(m)
    dim = (d_qk + d_v) / 2
    h = m.heads * dim
    return ("h = heads × head dim"
            + (f" (QK {d_qk} and V {d_v} averaged)" if d_qk != d_v else "")
            + f" = {m.heads} × {dim:g} = {h:,.0f}"
            + (", the hidden size here" if h == m.hidden else f", not the hidden size "
               f"{m.hidden:,}"))


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
