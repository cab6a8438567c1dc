"""EP08 auto-planner: every plan it returns passes the recipe lab's own audits, its best plan
for the seed's 64 GPUs beats the seed plan, its bound never beats the lab, the Pareto front.

Seed (CURRICULUM EP08): GPT-3 175B, sequence 2048, 8 nodes x 8 GPUs with NVLink inside,
TP8 x PP4 x DP2 with 16 micro-batches (global batch 32); here on DGX H100 nodes.
"""

import dataclasses
import random

import pytest

from labs.core.errors import LabInputError
from labs.core.limits import MAX_PLAN_GPUS
from labs.hardware.links import get_cluster
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.presets import get_model, models
from labs.recipe.bounds import (
    core_bound,
    layers_bound,
    plan_stages,
    state_bytes_floor,
    textbook_bubble,
)
from labs.recipe.inputs import Plan
from labs.recipe.lab import evaluate, rule_problems
from labs.recipe.plan_space import MAX_CANDIDATES, PlanRequest, candidates, shapes, variants
from labs.recipe.planner import bound_step_s, pareto_front, search

H100 = get_cluster("dgx-h100")
GPT3 = get_model("gpt-3-175b")
LLAMA405 = get_model("llama-3.1-405b")
SEED = Plan(tp=8, pp=4, dp=2, zero=1, microbatches=16, seq_len=2048)
SEED_REQUEST = PlanRequest(GPT3, H100, 64, 2048, SEED.global_batch)


@pytest.fixture(scope="module")
def seed_search():
    return search(SEED_REQUEST)


@pytest.fixture(scope="module")
def wide_search():
    return search(PlanRequest(GPT3, H100, 64, 2048, SEED.global_batch, top=50))


def test_best_plan_is_at_least_as_fast_as_the_seed_plan(seed_search):
    seed = evaluate(SEED, GPT3, H100, 8)
    assert seed.passes
    best = seed_search.plans[0]
    assert best.exact and seed_search.complete
    assert best.tokens_per_s >= seed.tokens_per_s
    assert best.step_s <= seed.step_s
    # Same tokens per step: the global batch is the seed's.
    assert best.plan.global_batch == SEED.global_batch == 32


def test_top_plans_pass_every_audit_of_the_recipe_lab(seed_search):
    assert len(seed_search.plans) == 20
    for ranked in seed_search.plans:
        r = evaluate(ranked.plan, GPT3, H100, 8)
        assert r.passes, [a for a in r.audits if not a.ok]
        assert ranked.tokens_per_s == pytest.approx(r.tokens_per_s, rel=1e-12)
        assert ranked.memory_per_gpu_bytes == pytest.approx(r.memory_per_gpu_bytes, rel=1e-12)
        assert ranked.memory_per_gpu_bytes <= H100.gpu.memory_bytes


def test_twenty_random_returned_plans_pass_every_audit(wide_search):
    assert len(wide_search.plans) == 50
    for ranked in random.Random(8).sample(wide_search.plans, 20):
        assert evaluate(ranked.plan, GPT3, H100, 8).passes


def test_ranking_is_fastest_first_and_the_same_at_any_length(seed_search, wide_search):
    speeds = [r.tokens_per_s for r in wide_search.plans]
    assert speeds == sorted(speeds, reverse=True)
    assert [r.plan for r in seed_search.plans] == [r.plan for r in wide_search.plans[:20]]


def test_bound_never_beats_the_lab_and_floor_never_exceeds_the_ledger():
    legal = [p for p in candidates(SEED_REQUEST) if not rule_problems(p, GPT3, H100, 8)]
    for plan in random.Random(64).sample(legal, 60):
        r = evaluate(plan, GPT3, H100, 8)
        assert bound_step_s(plan, GPT3, H100) <= r.step_s * (1 + 1e-12)
        assert state_bytes_floor(plan, GPT3) <= r.memory_per_gpu_bytes * (1 + 1e-12)


def test_candidates_keep_tp_in_a_node_dividing_heads_and_the_global_batch():
    found = candidates(SEED_REQUEST)
    assert found
    for p in found:
        assert p.tp <= 8 and 8 % p.tp == 0 and GPT3.heads % p.tp == 0
        assert p.tp * p.pp * p.cp * p.dp == 64
        assert GPT3.layers % p.pp == 0
        assert p.global_batch == 32
        assert p.ep == 1  # dense model
    schedules = {p.schedule for p in found if p.pp > 1}
    assert schedules == {"1f1b", "interleaved-1f1b"}


def test_pareto_front_is_exactly_the_undominated_plans(wide_search):
    plans = wide_search.plans
    front = {i for i, r in enumerate(plans) if r.pareto}
    assert front == pareto_front(list(plans))
    # The fastest speed is on the front (a tie at less memory may take its place).
    assert max(plans[i].tokens_per_s for i in front) == plans[0].tokens_per_s

    def point(r):
        return (r.memory_per_gpu_bytes, r.tokens_per_s)

    def dominates(b, a):
        return (b.memory_per_gpu_bytes <= a.memory_per_gpu_bytes
                and b.tokens_per_s >= a.tokens_per_s and point(b) != point(a))

    for i, a in enumerate(plans):
        if i in front:
            assert not any(dominates(b, a) for b in plans)
        else:  # beaten on both, or the same point as a plan on the front
            assert any(dominates(b, a) for b in plans) or \
                any(point(plans[j]) == point(a) for j in front)


def test_405b_on_16384_gpus_every_returned_plan_is_exact_and_passes():
    """Above 1,024 GPUs too, the plans are the lab's own: timed by evaluate, every audit
    passed, the ranking complete (branch and bound on the compute + TP + bubble bound)."""
    found = search(PlanRequest(LLAMA405, H100, 16_384, 8192, 4096))
    assert found.complete and 0 < found.evaluated <= found.hopeful
    assert len(found.plans) == 20
    speeds = [r.tokens_per_s for r in found.plans]
    assert speeds == sorted(speeds, reverse=True)
    for r in found.plans:
        p = r.plan
        assert r.exact and r.passes
        lab = evaluate(p, LLAMA405, H100, 2048)
        assert lab.passes and lab.step_s == pytest.approx(r.step_s, rel=1e-12)
        assert p.global_batch == 4096 and p.tp <= 8
        memory = compute_memory(MemoryInput(
            model=LLAMA405, gpu=H100.gpu, recipe=p.recipe, seq_len=p.seq_len,
            micro_batch=p.micro_batch, recompute=p.recompute, tp=p.tp, pp=p.pp, cp=p.cp,
            dp=p.dp, ep=p.ep, zero=p.zero, schedule=p.schedule,
            microbatches=p.microbatches, virtual=p.virtual,
            first_stage_layers=p.first_stage_layers, last_stage_layers=p.last_stage_layers))
        assert memory.total_bytes == pytest.approx(r.memory_per_gpu_bytes, rel=1e-12)
        assert memory.total_bytes <= 80e9
        assert 0 < r.mfu <= 1
    # Complete: no plan the search skipped beats the slowest one shown.
    slowest = found.plans[-1].step_s
    legal = [p for p in candidates(found.request)
             if not rule_problems(p, LLAMA405, H100, 2048)]
    shown = {r.plan for r in found.plans}
    for plan in random.Random(405).sample(legal, 40):
        if plan in shown:
            continue
        r = evaluate(plan, LLAMA405, H100, 2048)
        assert not r.passes or r.step_s >= slowest * (1 - 1e-12)


def test_best_64_gpu_plan_on_the_seed_cluster_beats_tp8_pp4_dp2():
    a100 = get_cluster("dgx-a100")
    found = search(PlanRequest(GPT3, a100, 64, 2048, SEED.global_batch))
    seed = evaluate(SEED, GPT3, a100, 8)
    assert seed.passes and found.complete
    assert found.plans[0].exact and found.plans[0].passes
    assert found.plans[0].step_s <= seed.step_s


def test_bad_requests_name_their_field():
    with pytest.raises(LabInputError) as exc:
        PlanRequest(GPT3, H100, 63, 2048, 32)
    assert exc.value.field == "gpus"
    with pytest.raises(LabInputError) as exc:
        PlanRequest(GPT3, H100, 70_000, 2048, 32)
    assert exc.value.field == "gpus"
    with pytest.raises(LabInputError) as exc:
        PlanRequest(GPT3, H100, 64, 2048, 0)
    assert exc.value.field == "global_batch"


def test_moe_candidates_try_expert_parallel_degrees_that_divide_the_experts():
    mixtral = get_model("mixtral-8x7b")
    found = candidates(PlanRequest(mixtral, H100, 64, 4096, 256))
    assert {p.ep for p in found} == {1, 2, 4, 8}  # Mixtral's 8 experts
    assert all(64 % (p.ep * p.pp) == 0 for p in found)


def test_with_a_fused_attention_kernel_the_planner_tries_flash_every_2nd_and_full():
    """Where the GPU runs fused attention, "none" takes flash's time on more memory (the
    scores) and "selective" flash's memory on more time (the attention forward again): the
    planner tries flash, every-2nd and full, and Korthikanti's three where the attention is
    unfused."""
    fused = PlanRequest(GPT3, H100, 64, 2048, 32)
    unfused = PlanRequest(GPT3, H100, 64, 2048, 32, software=(("attention", "unfused"),))
    assert fused.recompute_modes == ("flash", "every-2nd", "full")
    assert unfused.recompute_modes == ("none", "selective", "full")
    plan = Plan(tp=8, pp=4, dp=2, zero=1, microbatches=16, seq_len=2048)
    times = {rc: evaluate(dataclasses.replace(plan, recompute=rc), GPT3, H100, 8)
             for rc in ("none", "flash", "selective")}
    assert times["none"].step_s == times["flash"].step_s < times["selective"].step_s
    assert times["flash"].memory_per_gpu_bytes == times["selective"].memory_per_gpu_bytes \
        < times["none"].memory_per_gpu_bytes
    assert {r.plan.recompute for r in search(fused).plans} <= {"flash", "every-2nd", "full"}


def test_planner_offers_only_the_context_parallel_sizes_asked():
    base = dict(model=get_model("gpt-3-175b"), cluster=get_cluster("dgx-a100"), gpus=64,
                seq_len=2048, global_batch=64, top=20)
    assert any(p.plan.cp > 1 for p in search(PlanRequest(**base)).plans)
    assert all(p.plan.cp == 1 for p in search(PlanRequest(**base, cp_sizes=(1,))).plans)
    for bad in ((), (2, 4), (1, 3)):
        with pytest.raises(LabInputError, match="context-parallel sizes"):
            PlanRequest(**base, cp_sizes=bad)


QWEN3 = get_model("qwen3-235b-a22b")
# Megatron Core as NVIDIA's MoE model zoo runs Qwen3-235B-A22B on 256 H100s (the validation
# runs of tests/labs/test_moe_runs.py): DeepEP's dispatch.
DEEPEP = (("ep_dispatch", "deepep"),)


@pytest.fixture(scope="module")
def qwen3_search():
    return search(PlanRequest(QWEN3, H100, 256, 4096, 2048, software=DEEPEP))


def test_a_fine_grained_moe_on_a_real_cluster_is_planned_not_refused(qwen3_search):
    """Qwen3-235B-A22B (128 experts) on 256 H100s: 43,188 candidates, every EP that divides
    the experts (with flash, every-2nd and full recomputation; 56,148 until round 20, when
    interleaving on PP 2's 47 layers a rank, which no v up to 8 divides, left the search:
    labs.schedules.stages.chunk_problems). The
    search is the lab's own to the end: complete, each plan exact, passing, timed with the
    request's software, fastest first."""
    found = qwen3_search
    assert found.candidates > 40_000 and found.complete
    assert len(found.plans) == 20 and found.evaluated < 1000
    speeds = [r.tokens_per_s for r in found.plans]
    assert speeds == sorted(speeds, reverse=True)
    for r in found.plans[:5]:
        assert r.plan.ep_dispatch == "deepep" and r.plan.global_batch == 2048
        lab = evaluate(r.plan, QWEN3, H100, 32)
        assert lab.passes and lab.step_s == pytest.approx(r.step_s, rel=1e-12)
    assert {r.plan.ep for r in found.plans} - {1}  # experts split across GPUs


def test_layers_bound_is_below_the_stages_bound_and_the_lab_for_moe_and_dense():
    """The search orders its candidates by the heaviest stage's layers alone before it builds
    any stage: that first bound must sit under the stages' one, and both under the lab."""
    for model, gpus, batch, software in ((QWEN3, 256, 2048, DEEPEP),
                                          (get_model("deepseek-v3"), 256, 512, ()),
                                          (GPT3, 64, 32, ())):
        req = PlanRequest(model, H100, gpus, 4096 if model.is_moe else 2048, batch,
                          software=software)
        legal = [p for p in candidates(req) if not rule_problems(p, model, H100, gpus // 8)]
        for plan in random.Random(gpus).sample(legal, 25):
            bubble = textbook_bubble(plan)
            first = layers_bound(plan, model, H100, None, bubble)
            second = core_bound(plan, plan_stages(plan, model, H100, None), bubble)
            assert 0 < first <= second
            r = evaluate(plan, model, H100, gpus // 8)
            assert second <= bound_step_s(plan, model, H100) <= r.step_s * (1 + 1e-12)


def test_a_search_with_no_passing_plan_says_which_audits_failed():
    """GPT-3 175B on 64 H100s with 4 sequences a step: too few micro-batches to hide the
    gradient traffic behind, so every plan checked fails an audit; the search counts which."""
    found = search(PlanRequest(GPT3, H100, 64, 2048, 4))
    assert found.plans == () and found.evaluated > 0
    names = dict(found.failed)
    assert names and all(n > 0 for n in names.values())
    assert sum(names.values()) >= found.evaluated  # each checked plan failed at least one
    assert [n for _, n in found.failed] == sorted(names.values(), reverse=True)
    assert "DP traffic" in names


@pytest.mark.parametrize("model_id", sorted(models()))
def test_every_preset_is_searched_at_the_recipes_largest_cluster(model_id):
    """The recipe and the planner take the same jobs (issue 18): the planner's bound on its
    candidates admits every preset on the largest cluster the recipe takes, where the
    candidates are most (a fine-grained MoE's every EP that divides its experts)."""
    req = PlanRequest(get_model(model_id), H100, MAX_PLAN_GPUS, 4096, MAX_PLAN_GPUS)
    found = shapes(req)
    assert 0 < len(found) * len(variants(found[0], req)) <= MAX_CANDIDATES
