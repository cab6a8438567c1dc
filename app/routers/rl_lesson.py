"""EP09's lesson facts: the states its steps link to and quote (``facts``), slime's R1 run set
beside them (``SLIME_R1``, ``slime_split``), and the derivations the notes print from them: the
busiest engine GPU's odds (step 5), the rates the rollout is timed at, step 3's workspace part by
part, steps 2's and 6's FLOPs, step 4's heaviest training GPU and step 6's training sum.
``app.routers.rl`` puts them in the page's context."""

from dataclasses import replace
from functools import lru_cache

from app.charts.units import fmt_bytes, worked_digits
from app.labkit import lesson_state
from app.routers.rl_state import RLQuery, run, to_api
from labs.memory.lab import compute_memory
from labs.rl.inputs import RLPlacementResult
from labs.rl.lab import training_bill
from labs.rl.recipes import memory_bandwidth
from labs.rl.serving import (
    CHUNKED_PREFILL_TOKENS,
    WEIGHT_BYTES,
    kv_bytes_per_token,
    serving_workspace,
)
from labs.rl.serving_time import HBM_EFFICIENCY, PREFILL_MFU, busiest_terms

# slime's run-deepseek-r1.sh (THUDM/slime 57f3c59), which EP09 step 3 sets beside the lab's own
# experiment: --rollout-batch-size 128 x --n-samples-per-prompt 8, --rollout-max-response-len
# 32768, --sglang-mem-fraction-static 0.7.
SLIME_R1 = {"samples": 128 * 8, "response_len": 32768, "mem_fraction_static": 0.7,
            "last_stage_layers": 13}  # --decoder-last-pipeline-num-layers 13


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes (one
    ``params`` dict feeds the try link and the numbers, through the API's own path)."""
    state = lesson_state(RLQuery, run, to_api)

    return {
        "glm9": state(preset="glm-4-9b"),
        # Step 8: the training pool of separate pools, 8 and 16 GPUs: its memory is the
        # bench's training figure alone (colocated, the need row is step 4's answer too).
        "glm9_16": state(preset="glm-4-9b", placement="separate", train_gpus=16),
        "glm9_sep": state(preset="glm-4-9b", placement="separate"),
        "r1": state(preset="deepseek-r1"),
        "r1_sep": state(preset="deepseek-r1", placement="separate"),
        # Step 3: the same engines at slime's R1 response limit (--rollout-max-response-len
        # 32768), where the cache is no longer small beside the weights (round-9 item 2).
        "r1_sep_long": state(preset="deepseek-r1", placement="separate",
                             response_len=SLIME_R1["response_len"]),
        "r1_sep4": state(preset="deepseek-r1", placement="separate", engines=4),
        "r1_pd": state(preset="deepseek-r1", placement="separate-pd", engines=4,
                       prefill_engines=1),
        "glm47": state(preset="glm-4.7"),
        "glm47_128": state(preset="glm-4.7", train_gpus=128),
        "glm47_128_pp8": state(preset="glm-4.7", train_gpus=128, pp=8),
        "glm47_96": state(preset="glm-4.7", train_gpus=96),
        "glm53": state(preset="glm-5.3"),
        # The same recipe under another guess of its shape: DeepSeek-V3's, the other published
        # 256-expert MLA model of that size (round-4 cold reading of EP09, item 4).
        "glm53_v3": state(preset="glm-5.3", model="deepseek-v3"),
        "qwen": state(preset="qwen3.8-27b"),
        "flash": state(preset="glm-4.7-flash"),
    }


@lru_cache(maxsize=1)
def slime_split() -> dict:
    """R1's trainer with its stages as slime's script splits them (13 layers on the last, 16
    on each other), which the lab's default split (16/15/15/15, the first stages one more)
    does not follow: the same ledger on the same layout, for EP09 step 3 to say which way and
    by how much the lab errs."""
    r = facts()["r1_sep"]["result"]
    bill = training_bill(r.input, r.input.train_gpus)
    alt = compute_memory(replace(bill.input, last_stage_layers=SLIME_R1["last_stage_layers"]))
    worst = alt.stages[alt.heaviest_stage]
    return {"stage_layers": [s.layers for s in alt.stages], "rank": worst.rank,
            "moe_layers": worst.moe_layers, "total_bytes": alt.total_bytes,
            "weights": alt.breakdown["weights"]}


@lru_cache(maxsize=1)
def busiest() -> dict[str, list[float]]:
    """The chance the busiest engine GPU visits more than 0, 1, ... of its experts in a decode
    step, for the states EP09 step 5 derives R1's rollout from (their sum is the API's
    busiest_experts)."""
    out = {}
    for key in ("r1_sep4", "r1_pd"):
        r = facts()[key]["result"]
        out[key] = busiest_terms(r.input.model, r.input.engine_gpus,
                                 r.rollout_parts["decode_requests"])
    return out


def serving_terms(result: RLPlacementResult) -> dict:
    """The rates the rollout's parts are timed at, as the lesson names them (EP09 step 5)."""
    inp = result.input
    return {"hbm_bandwidth": memory_bandwidth(inp.gpu), "hbm_efficiency": HBM_EFFICIENCY,
            "prefill_mfu": PREFILL_MFU, "weight_bytes": WEIGHT_BYTES * inp.model.params,
            "kv_bytes_per_token": kv_bytes_per_token(inp.model, inp.kv_dtype)}


def workspace_view(inp) -> dict:
    """Step 3's workspace (labs.rl.serving.serving_workspace, the figure the memory chart
    stacks), as its limit writes it: the sum that sets it, and the other kind of layer's MLP,
    with the routed copies a GPU receives worked."""
    m, e = inp.model, inp.engine_gpus
    ws = serving_workspace(m, e, inp.serving)
    other = next((parts for parts in ws.mlps if parts != ws.mlp), ())
    t, group = ws.attention.tokens, ws.attention.splits[0]

    def split(p) -> str:
        # Round-26 reading B, finding 1: a part on whole weights runs on the GPU's scattered
        # share of its group's chunk (SGLang's SCATTERED mode), which the page works.
        if p.splits[0] != 1:
            return f"÷ {p.splits[0]}"
        return f"whole, on {t:,.0f} ÷ {group} = {p.tokens:,.0f} tokens"

    def words(p) -> str:
        if p.name == "dense MLP":
            return f"a dense layer's MLP, 2 × its {m.ffn:,} width, {split(p)}"
        if p.name == "shared experts":
            n = m.shared_experts
            width = f"{n} × 2 × {m.expert_ffn:,}" if n > 1 else f"2 × {m.expert_ffn:,}"
            return f"the shared expert{'s' if n > 1 else ''}, {width}, {split(p)}"
        return (f"the copies a GPU's experts receive, {ws.chunks} groups × "
                f"{ws.attention.tokens:,.0f} tokens × {m.top_k} ÷ {e} GPUs = "
                f"{p.tokens:,.0f} copies, 2 × {m.expert_ffn:,} each")

    other_bytes = sum(p.bytes for p in other)
    return {"formula": ws.formula(), "bytes": ws.bytes, "group": group,
            "tokens": t, "mla": m.uses_mla, "groups": ws.chunks,
            "chunk": CHUNKED_PREFILL_TOKENS,
            "other_as": "narrower" if other_bytes < sum(p.bytes for p in ws.mlp) else "as wide",
            "mlp_words": ", and ".join(words(p) for p in ws.mlp),
            "other_words": ", and ".join(words(p) for p in other),
            "other_formula": f"({' + '.join(p.formula() for p in other)}) × 2 B",
            "other_bytes": other_bytes}


def flops_text(parts: dict, m, worked: bool = True) -> dict[str, str]:
    """Steps 2's and 6's FLOPs a matmul parameter a token, printed so that each sum the notes
    write redoes from what they print (round-25 reading F, finding 2: step 2's "9.387 ... 6 +
    1.859 + 1.529" added to 9.388, step 6's "10.744 = 6 + 1.949 + 2.794" to 10.743). The
    total prints as the sum of its printed parts and the forward as 2 plus its attention, at
    the fewest places (3 at least) at which the log-probability factor redoes to the engine's
    3 decimals. ``worked`` (step 2, which writes the quotients out): the attention prints as
    its forwards' worth times a forward's printed share, and the recomputed forward's and a
    forward's attention quotients (matmul parameters and the layers' in B, a place fewer)
    give the printed parts."""
    r, fa = parts["recompute_per_param"], parts["forward_attention_per_param"]
    a = parts["attention_per_param"]
    k = round(a / fa)  # a forward's attention, times the forwards the step runs it
    x = f"{parts['log_prob']:.3f}"
    d_qk = m.qk_nope_head_dim + m.qk_rope_head_dim if m.uses_mla else m.head_dim
    d_v = m.v_head_dim if m.uses_mla else m.head_dim
    core = 2 * parts["seq_len"] * m.heads * (d_qk + d_v) * m.layers
    for d in range(3, 7):
        def at(v: float, places: int = d) -> str:
            return f"{v:.{places}f}"
        fa_p, r_p = round(fa, d), round(r, d)
        a_p = k * fa_p if worked else round(a, d)
        h_p, f_p = 6 + r_p + a_p, 2 + fa_p
        b = d - 1  # the parameters' places, in billions
        n_p = round(parts["matmul_params"] / 1e9, b)
        layers_p = round(parts["layer_params"] / 1e9, b)
        quotients = (at(2 * layers_p / n_p) == at(r) and at(core / (n_p * 1e9)) == at(fa)
                     ) if worked else True
        if at((h_p + parts["forwards"] * f_p) / h_p, 3) == x and quotients:
            break
    return {"total": at(h_p), "recompute": at(r_p), "attention": at(a_p),
            "forward": at(f_p), "forward_attention": at(fa_p), "worth": str(k),
            "log_prob": x, "params": f"{n_p:.{b}f}B", "layers": f"{layers_p:.{b}f}B"}


def stage_text(api: dict) -> dict[str, str]:
    """Step 4's heaviest training GPU, its parameters in B printed to the fewest places (2 at
    least) at which each sum the note writes redoes from what it prints (round-25 reading F,
    finding 2: "16 B × (5.28B ÷ 1 + 0.58B ÷ 4) = 86.9 GB" gave 86.8): the experts' share
    (the stage's ÷ EP), the two together (printed as their sum), its bf16 weights and fp32
    gradients, and CPU Adam's host bytes."""
    st, t = api["train_stage"], api["pools"][0]["breakdown"]
    host, per = api["pools"][0]["host_bytes_per_gpu"], st["host_bytes_per_param"]
    for extra in range(4):
        d = 2 + extra
        total = round(st["expert_params"] / 1e9, d - 1)
        e = round(st["expert_params_per_gpu"] / 1e9, d)
        o = round(st["dense_params_per_gpu"] / 1e9, d)
        held = e + o
        if (f"{total / api['ep']:.{d}f}" == f"{e:.{d}f}"
                and fmt_bytes(per * (e / st["expert_shard"] + o / st["dense_shard"]) * 1e9)
                == fmt_bytes(host)
                and fmt_bytes(2 * held * 1e9) == fmt_bytes(t["weights"])
                and fmt_bytes(4 * held * 1e9) == fmt_bytes(t["gradients"])):
            break
    return {"stage": f"{total:.{d - 1}f}B", "experts": f"{e:.{d}f}B", "rest": f"{o:.{d}f}B",
            "held": f"{held:.{d}f}B"}


def train_sum(parts: dict, factor: str) -> dict[str, str]:
    """Step 6's training time, "× factor × step + swap + offload = seconds", its parts
    printed to the places (2 at least) at which the sum redoes to the engine's seconds at 2
    decimals (round-25 reading F, finding 2: 1.502 × 10.09 + 0.37 + 0.55 = 16.08 against the
    printed 16.07)."""
    step, swap, offload = worked_digits(
        (parts["step_s"], parts["ref_swap_s"], parts["offload_s"]), (2, 2, 2),
        [(lambda s, w, o: float(factor) * s + w + o, parts["seconds"], lambda v: f"{v:.2f}")])
    return {"step": step, "swap": swap, "offload": offload}


def step_places(parts, colocated: bool, step: float) -> int:
    """The places (1 at least) at which a step's printed parts add to its printed total:
    rollout + training + sync (colocated, in turn) or max(rollout, training) + sync (separate,
    at once). Step 2's why, step 6's and the timeline table print each figure once, at these
    places (round-26 reading B, finding 3: "16.20 + 10.56 + 0.93 = 27.69 s" where the step is
    27.685 s, 27.68; at one place 16.2 + 10.6 + 0.9 = 27.7 holds)."""
    for places in (1, 2, 3):
        r, t, y = (round(x, places) for x in parts)
        if f"{(r + t if colocated else max(r, t)) + y:.{places}f}" == f"{step:.{places}f}":
            return places
    return 3
