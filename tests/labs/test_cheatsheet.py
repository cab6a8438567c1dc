"""EP12's cheat sheet: every line's worked example is its lab's own figure (for two models), and
the lines carry the course's published figures (CURRICULUM EP01-EP09) within rounding."""

import math
import re

import pytest

from labs.cheatsheet.inputs import CheatInput
from labs.cheatsheet.lab import LINES, cheat_sheet
from labs.context_parallel.lab import mask_layout
from labs.core.errors import LabInputError
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_cluster
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory, kv_cache_bytes
from labs.model.activations import activation_bytes_per_layer
from labs.model.presets import get_model
from labs.recipe.inputs import Plan
from labs.recipe.lab import evaluate
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate
from labs.zero.inputs import ZeroInput
from labs.zero.lab import simulate_zero

H100 = get_gpu("h100-sxm")
LLAMA70 = get_model("llama-3.1-70b")


def sheet(model: str, **knobs) -> dict:
    return {ln.key: ln for ln in cheat_sheet(CheatInput(get_model(model), H100, **knobs))}


def value(lines: dict, key: str) -> float:
    assert lines[key].result is not None, lines[key].note
    return lines[key].result.value


def test_every_formula_of_the_brief_has_a_line():
    keys = {key for key, *_ in LINES}
    assert {"state16", "state18", "activations", "activations_none", "activations_full",
            "inference", "kv_cache", "ring", "zero0", "zero1", "zero2", "zero3", "tp",
            "bubble", "bubble_interleaved", "bubble_zb", "cp_contiguous", "cp_zigzag",
            "moe_params", "moe_a2a", "flops_6nd", "flops_8nd", "mfu", "step", "serving",
            "colocated", "state_fp8-delayed", "state_fp8-blockwise", "state_mxfp8",
            "lora_params", "qlora_base", "offload", "fp8_speedup", "young", "goodput"} <= keys
    assert {ep for _, ep, *_ in LINES} == {f"EP{n:02d}" for n in range(1, 12)}
    assert all(source for *_, source, _ in LINES)


@pytest.mark.parametrize("model", ["llama-3.1-70b", "qwen2.5-7b"])
def test_each_line_is_its_labs_own_figure(model):
    spec = get_model(model)
    inp = CheatInput(spec, H100, seq_len=4096, tp=4, pp=4, dp=4, cp=2, microbatches=8)
    lines = {ln.key: ln for ln in cheat_sheet(inp)}
    ledger = compute_memory(MemoryInput(spec, H100))
    assert value(lines, "state16") == ledger.state_bytes
    assert value(lines, "min_gpus") == ledger.min_gpus
    per_layer = activation_bytes_per_layer(spec, 4096, 1, recompute="selective")
    assert value(lines, "activations") == spec.layers * per_layer
    assert value(lines, "kv_cache") == kv_cache_bytes(spec, 4096, 1)
    for stage in range(4):
        zero = simulate_zero(ZeroInput(spec, H100, dp=4, zero=stage))
        assert value(lines, f"zero{stage}") == zero.state_bytes
    assert value(lines, "bubble") == simulate(PipelineInput("1f1b", 4, 8)).bubble_fraction
    assert value(lines, "bubble_zb") == simulate(PipelineInput("zb-h1", 4, 8)).bubble_fraction
    busiest = mask_layout(8, 2, "zigzag").busiest.causal_pairs
    assert value(lines, "cp_zigzag") == busiest
    plan = Plan(tp=4, pp=4, dp=4, cp=2, zero=1, microbatches=8, seq_len=4096)
    recipe = evaluate(plan, spec, get_cluster("dgx-h100"), 16)
    assert value(lines, "mfu") == recipe.mfu
    assert value(lines, "step") == recipe.step_s
    step_terms = {t.symbol: t.value for t in lines["step"].terms}
    assert math.isclose(sum(step_terms.values()), recipe.step_s, rel_tol=1e-9)


def test_published_figures_llama_70b():
    lines = sheet("llama-3.1-70b", seq_len=4096, dp=32, pp=8, microbatches=32, cp=2)
    # EP01: 16 B/param -> 1.13 TB; 18 B -> 1.27 TB; ~91 GB of activations at 4,096 tokens.
    assert value(lines, "state16") == pytest.approx(1.13e12, rel=0.005)
    assert value(lines, "state18") == pytest.approx(18 * LLAMA70.params, rel=1e-9)
    assert value(lines, "activations") == pytest.approx(91e9, rel=0.01)
    # Full recomputation keeps only each layer's input: 2·s·b·h per layer.
    assert value(lines, "activations_full") == 80 * 2 * 4096 * 8192
    assert value(lines, "inference") == pytest.approx(2 * LLAMA70.params, rel=1e-9)
    # EP02: ring all-reduce moves 2(N-1)/N of the bf16 gradients per GPU.
    assert value(lines, "ring") == pytest.approx(2 * 31 / 32 * 2 * LLAMA70.params, rel=1e-9)
    # EP03: 16P, 4P + 12P/D, 2P + 14P/D, 16P/D; 70B on 32 GPUs with ZeRO-3 -> 35 GB.
    p = LLAMA70.params
    for stage, expected in enumerate((16 * p, 4 * p + 12 * p / 32, 2 * p + 14 * p / 32,
                                      16 * p / 32)):
        assert value(lines, f"zero{stage}") == pytest.approx(expected, rel=1e-9)
    assert value(lines, "zero3") == pytest.approx(35e9, rel=0.01)
    assert value(lines, "zero_traffic") == pytest.approx(1.5, rel=0.01)
    # EP04: 4 collectives of s·b·h·2 bytes per layer.
    tp_terms = {t.symbol: t.value for t in lines["tp"].terms}
    assert tp_terms["n"] == 4 and tp_terms["s·b·h·2"] == 4096 * 8192 * 2
    # Its formula, (n + r) × 2(t−1)/t × s·b·h·2, gives the printed result (issue 36: the
    # terms gave 470 MB while the line printed the lab's 587 MB): one computation.
    t = tp_terms["t"]
    assert (tp_terms["n"] + tp_terms["r"]) * 2 * (t - 1) / t * tp_terms["s·b·h·2"] == \
        pytest.approx(value(lines, "tp"), rel=1e-3)
    assert tp_terms["r"] == pytest.approx(1.0)  # SP: the backward's 2 re-all-gathers
    r_meaning = next(t.meaning for t in lines["tp"].terms if t.symbol == "r")
    assert "all-gathered again for its weight gradient" in r_meaning
    # The same for the KV cache, CP's ring and MFU: the terms give the printed result.
    kv = {t.symbol: t.value for t in lines["kv_cache"].terms}
    assert 2 * kv["L"] * kv["kv_heads"] * kv["d_head"] * kv["s·b"] * 2 == pytest.approx(
        value(lines, "kv_cache"), rel=1e-9)
    cp = {t.symbol: t.value for t in lines["cp_kv"].terms}
    assert cp["steps"] * cp["s/c"] * cp["K,V per token"] == pytest.approx(
        value(lines, "cp_kv"), rel=1e-9)
    m = {t.symbol: t.value for t in lines["mfu"].terms}
    assert m["6·N·D + attention"] / (m["step"] * m["GPUs"] * m["peak"]) == pytest.approx(
        value(lines, "mfu"), rel=1e-9)
    # EP08's FLOP counts: the weight matmuls and the attention scores (12·L·h·s per token,
    # Korthikanti et al. 2022 sec 4) add up to the printed result, by hand.
    f6 = {t.symbol: t.value for t in lines["flops_6nd"].terms}
    assert f6["6·N·D"] == 6 * f6["N"] * 4096
    assert f6["attention"] == pytest.approx(12 * 80 * 8192 * 4096 * 4096, rel=1e-9)
    assert f6["6·N·D"] + f6["attention"] == pytest.approx(value(lines, "flops_6nd"), rel=1e-9)
    # EP02's speed-up: c from the page's tokens (b·m·s) and the stated rate, t from the gradient
    # bytes and the stated bus bandwidth (issue 36: c came from a hidden 16,384 tokens).
    d = {t.symbol: t.value for t in lines["dp_speedup"].terms}
    assert d["T"] == 1 * 32 * 4096
    assert d["c"] == pytest.approx(6 * LLAMA70.params * d["T"] / d["rate"], rel=1e-9)
    # B_bus is NVLink 4's or NDR's own figure (one link, one number), so NCCL's latency is
    # its own term (round-19 cold reading X, finding 7).
    assert d["t"] == pytest.approx(2 * 31 / 32 * 2 * LLAMA70.params / d["B_bus"] + d["α"],
                                   rel=1e-12)
    assert value(lines, "dp_speedup") == pytest.approx(32 * d["c"] / (d["c"] + d["t"]),
                                                       rel=1e-9)
    # EP05: 8 stages, 32 micro-batches -> 17.9% idle under 1F1B; interleaving shrinks it.
    assert value(lines, "bubble") == pytest.approx(7 / 39, abs=5e-4)
    assert value(lines, "bubble_interleaved") < value(lines, "bubble")
    assert value(lines, "bubble_zb") < value(lines, "bubble")
    # EP06: 8 tokens on CP=2: contiguous ranks do 10 and 26 pairs, zigzag 18 and 18.
    assert value(lines, "cp_contiguous") == 26
    assert value(lines, "cp_zigzag") == 18
    assert {t.symbol: t.value for t in lines["cp_zigzag"].terms}["s(s+1)/2"] == 36
    # EP08: full recomputation costs one more forward: about 8ND against 6ND.
    assert value(lines, "flops_8nd") / value(lines, "flops_6nd") == pytest.approx(8 / 6, rel=0.03)
    # EP09: colocated = max(M_train, M_rollout) + overhead.
    terms = {t.symbol: t.value for t in lines["colocated"].terms}
    assert value(lines, "colocated") == pytest.approx(
        max(terms["M_train"], terms["M_rollout"]) + terms["overhead"], rel=1e-9)
    serving = {t.symbol: t.value for t in lines["serving"].terms}
    assert value(lines, "serving") == pytest.approx(sum(serving.values()), rel=1e-9)


def test_moe_lines_use_the_chosen_moe_model():
    dense = sheet("llama-3.1-70b")
    mixtral = sheet("mixtral-8x7b")
    # A dense model borrows Mixtral for EP07's lines: 46.7B held, 12.9B active.
    assert value(dense, "moe_params") == value(mixtral, "moe_params")
    m = get_model("mixtral-8x7b")
    assert m.params == pytest.approx(46.7e9, rel=0.01)
    assert m.active_params == pytest.approx(12.9e9, rel=0.01)
    assert value(mixtral, "moe_params") == pytest.approx(m.params / m.active_params)
    deepseek = sheet("deepseek-v3")
    assert value(deepseek, "moe_params") == pytest.approx(671 / 37, rel=0.03)


def test_a_line_its_lab_refuses_says_why():
    lines = sheet("mixtral-8x7b")  # EP04's lab splits dense models only
    assert lines["tp"].result is None
    assert "expert" in lines["tp"].note
    lines = sheet("llama-3.1-70b", tp=3)  # 64 heads do not divide by 3
    assert lines["mfu"].result is None and lines["mfu"].note.startswith("tp")


@pytest.mark.parametrize(("field", "value"), [("seq_len", 0), ("tp", 65), ("dp", 1.5),
                                               ("microbatches", True)])
def test_bad_knobs_name_their_field(field, value):
    with pytest.raises(LabInputError) as err:
        CheatInput(LLAMA70, H100, **{field: value})
    assert err.value.field == field


@pytest.mark.parametrize("model", ["llama-3.1-70b", "qwen2.5-7b"])
def test_ep11_lines_are_the_precision_labs_own_figures(model):
    from labs.core.catalogue import RECIPES
    from labs.precision.finetune import linear_params, trainable_params
    from labs.precision.inputs import MODULE_SETS, PrecisionInput
    from labs.precision.lab import compute_precision
    from labs.precision.speed import TP8_ZERO1, amdahl, amdahl_terms, speed

    spec = get_model(model)
    lines = sheet(model, seq_len=4096)
    for recipe in ("fp8-delayed", "fp8-blockwise", "mxfp8"):
        r = RECIPES[recipe]
        # The FP8 copies are of the linear layers alone (round-17 cold reading of EP10,
        # finding 5): P × the rest + P_lin × the copies.
        assert value(lines, f"state_{recipe}") == pytest.approx(
            spec.params * (r.bytes_per_param - r.copy_bytes)
            + linear_params(spec) * r.copy_bytes, rel=1e-5)
        assert value(lines, f"state_{recipe}") < spec.params * r.bytes_per_param
        # The formula is written from the record: its parts add up to its bytes per parameter.
        formula = lines[f"state_{recipe}"].formula
        parts = [p for group in formula.split("(")[1:] for p in group.split(")")[0].split(" + ")]
        assert "P_lin ×" in formula
        assert sum(map(float, parts)) == pytest.approx(r.bytes_per_param, rel=2e-3)
    assert value(lines, "lora_params") == trainable_params(spec, 16, MODULE_SETS["qv"])
    one = {"seq_len": 4096, "dp": 1, "zero": 0}
    qlora = compute_precision(PrecisionInput(spec, H100, **one, rank=64, modules="all",
                                             recompute="full", ft_recipe="adam12"))
    b = qlora.finetune("qlora").breakdown
    assert value(lines, "qlora_base") == b["weights"] + b["quant_constants"]
    try:  # per GPU at the page's TP (cold reading: it was one GPU with no TP)
        off = compute_precision(PrecisionInput(spec, H100, **one, recipe="adam16",
                                               offload=1.0, tp=8))
    except LabInputError as exc:  # TP 8 does not divide the heads: the line says so
        assert lines["offload"].result is None and exc.message in lines["offload"].note
    else:
        assert value(lines, "offload") == off.offload.hidden_share
    # What FP8 buys in time: Amdahl's formula over the parts gives the step model's speed-up,
    # on EP10's 70B layout (fix E, finding 3: it was one GPU, which holds no 70B's state).
    try:
        fast = speed(PrecisionInput(spec, H100, seq_len=4096, recipe="fp8-delayed",
                                    **TP8_ZERO1))
    except LabInputError as exc:  # TP 8 does not divide the heads: the line says so
        assert lines["fp8_speedup"].result is None and exc.message in lines["fp8_speedup"].note
        return
    assert value(lines, "fp8_speedup") == fast.speedup
    t = {term.symbol: term.value for term in lines["fp8_speedup"].terms}
    assert t == {k: v for k, v in amdahl_terms(fast).items() if k != "speedup"}
    assert t["e"] > 0  # TP and the gradient sync: some of it no longer hidden
    assert amdahl(t["g"], t["r"], t["c"] + t["e"]) == pytest.approx(fast.speedup, rel=1e-9)


def test_fp8_speedup_line_says_why_on_a_gpu_without_fp8():
    lines = {ln.key: ln for ln in cheat_sheet(CheatInput(get_model("llama-3.1-8b"),
                                                         get_gpu("a100-80gb")))}
    assert lines["fp8_speedup"].result is None and "no FP8" in lines["fp8_speedup"].note


def test_the_interval_and_goodput_lines_are_ep11s_lab():
    """EP11's two lines: Young's interval and the goodput at Daly's, for the example's GPUs
    (TP8 x PP4 x DP2 x CP2 = 128), from labs.failures itself."""
    from labs.failures.lab import gpu_mtbi_llama3, young

    lines = sheet("llama-3.1-70b")
    delta, mtbi = (t.value for t in lines["young"].terms)
    assert mtbi == pytest.approx(gpu_mtbi_llama3() / 128)
    assert delta == pytest.approx(14 * LLAMA70.params / 2e12)  # the ledger's 14 B/param
    assert value(lines, "young") == pytest.approx(young(delta, mtbi))
    tau, d, r, m = (t.value for t in lines["goodput"].terms)
    # Daly 2006's renewal count (labs.failures.lab.goodput), by hand: a cycle of τ + δ tried
    # e^((τ+δ)/M) − 1 times too often, each failure costing M + R on average.
    assert value(lines, "goodput") == pytest.approx(tau / ((m + r) * math.expm1((tau + d) / m)))
    # Round-20 cold reading R, finding 11: the stop is δ, as on EP11's page, never b.
    assert lines["goodput"].formula == "τ / ((M + R)·(e^((τ+δ)/M) − 1))"
    assert [t.symbol for t in lines["goodput"].terms] == ["τ", "δ", "R", "M"]


@pytest.mark.parametrize("model", ["llama-3.1-70b", "llama-3.1-8b", "llama-3.1-405b"])
def test_round20_the_goodput_lines_interval_says_it_is_dalys_and_how_far_from_youngs(model):
    """Round-20 cold reading R, finding 12: the interval line gave Young's √(2δM) 19.8 min and
    the goodput line below 'τ = 19.8 min Daly's interval', unsaid whether they differ. The
    goodput line's τ says it is Daly's and how far it lies from Young's, off the same lab."""
    lines = sheet(model)
    young_tau = value(lines, "young")
    tau = lines["goodput"].terms[0]
    # Round-22 cold reading R, finding 2: τ is Daly's optimum rounded up to whole steps
    # (round 21), so the line compares Daly's own optimum with Young's (the rounding made
    # the 70B's '5.2% longer') and names the step and how many: k steps give τ.
    said = re.fullmatch(r"Daly's best interval, ([\d.]+) min \((.*)\), rounded up to whole "
                        r"steps of ([\d,.]+) s \((\d+)\): a save starts between steps\. "
                        r"The step is Llama 3's rate: .*", tau.meaning)
    assert said, tau.meaning
    daly_min, versus, step, k = said.groups()
    step, k = float(step.replace(",", "")), int(k)
    assert abs(tau.value - k * step) <= k * 0.05 + 1e-9  # the step printed to 0.1 s
    assert (k - 1) * step < (float(daly_min) + 0.05) * 60
    assert re.fullmatch(r"the same as Young's above to 0\.1%|[\d.]+% (longer|shorter) than "
                        r"Young's above", versus), versus
    assert abs(float(daly_min) * 60 / young_tau - 1) < 0.01  # Daly's refines Young's a little
    assert "5.2%" not in tau.meaning


def test_round20_the_unfused_line_says_its_34_is_gpts_count_for_a_model_without_dropout():
    """Round-20 cold reading R, finding 15: 'k = 2 bytes a score keeps: the softmax output,
    no dropout' sat beside GPT's 34, which counts two dropout masks: the line says the 34
    stays GPT's count, as EP01 charges Llama."""
    k = next(t for t in sheet("llama-3.1-70b")["activations_none"].terms if t.symbol == "k")
    assert k.value == 2
    assert "the 34 stays GPT's count, its dropout masks included, as EP01 charges Llama" \
        in k.meaning


def test_the_serving_line_is_ep09s_rollout_gpu_of_the_recipe_it_links():
    """The serving line is the rollout engine GPU of the model's EP09 recipe (GLM-4-9B's for a
    model without one), part by part as EP09 step 3 shows it at the line's link: a MoE's
    weights placed under DP attention with its recipe's SGLang flags (issue 36, s45), more
    than the even split. Round-18 cold reading C, finding 6: the line worked the chosen model
    on TP GPUs while its link opened GLM-4-9B's recipe, and the colocated line below it used
    GLM's rollout GPU: two serving GPUs on two neighbouring lines."""
    from labs.rl.lab import compute_rl_placement
    from labs.rl.recipes import get_recipe
    from tests.labs.test_rl import recipe_input

    for model, recipe in (("deepseek-r1", "deepseek-r1"), ("llama-3.1-70b", "glm-4-9b")):
        lines = sheet(model)
        terms = {t.symbol: t for t in lines["serving"].terms}
        r = compute_rl_placement(recipe_input(recipe))
        for symbol, part in (("weights", "weights"), ("KV", "kv_cache"),
                             ("workspace", "workspace")):
            assert terms[symbol].value == pytest.approx(r.rollout_breakdown[part], rel=1e-12)
        assert lines["serving"].result.value == r.rollout_memory_bytes == \
            {t.symbol: t for t in lines["colocated"].terms}["M_rollout"].value
    r1 = get_model("deepseek-r1")
    weights = {t.symbol: t for t in sheet("deepseek-r1")["serving"].terms}["weights"]
    assert "DP attention" in weights.meaning and weights.value > 1.1 * 2 * r1.params / \
        get_recipe("deepseek-r1").engine_gpus


def test_the_colocated_line_is_ep09s_colocated_need():
    """The colocated line built its recipe's placement without the recipe's SGLang layout, so
    its rollout GPU split R1's weights evenly (21.8 GB) where EP09 places them under DP
    attention (36.6 GB): its need was not EP09's. It is now EP09's own figure."""
    from labs.rl.lab import compute_rl_placement
    from labs.rl.recipes import get_recipe
    from tests.labs.test_rl import recipe_input

    r1 = compute_rl_placement(recipe_input("deepseek-r1"))
    assert get_recipe("deepseek-r1").serving is not None
    lines = sheet("deepseek-r1")
    terms = {t.symbol: t.value for t in lines["colocated"].terms}
    assert terms["M_rollout"] == pytest.approx(r1.rollout_memory_bytes, rel=1e-12)
    assert value(lines, "colocated") == pytest.approx(r1.colocated_bytes, rel=1e-12)


@pytest.mark.parametrize(("model", "k"), [("llama-3.1-70b", 2), ("gpt-3-175b", 5)])
def test_no_recomputation_names_the_bytes_a_score_keeps(model, k):
    """L × s·b·h·(34 + k·a·s/h): k = 5 for a model trained with dropout (Korthikanti's softmax
    output, mask and dropout output), 2 without (the softmax output alone)."""
    spec = get_model(model)
    lines = {ln.key: ln for ln in cheat_sheet(CheatInput(spec, H100, seq_len=2048))}
    line = lines["activations_none"]
    assert "k·a·s/h" in line.formula
    assert {t.symbol: t.value for t in line.terms}["k"] == k
    s, h, a = 2048, spec.hidden, spec.heads
    assert value(lines, "activations_none") == pytest.approx(
        spec.layers * s * h * (34 + k * a * s / h), rel=1e-12)
