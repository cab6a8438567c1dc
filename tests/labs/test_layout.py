"""ParallelLayout: degrees, expert regrouping, Megatron's rank order, and every broken rule."""

import pytest

from labs.core.errors import LabInputError
from labs.model.presets import get_model
from labs.parallel.layout import ParallelLayout, divisors, problems, world_problems

L70 = get_model("llama-3.1-70b")


def test_world_and_expert_dp():
    # EP09 DeepSeek-R1 recipe: 128 GPUs = TP8 x PP4 x CP4 x DP1, EP32 -> expert-DP 8*4*1/32 = 1.
    r1 = ParallelLayout(tp=8, pp=4, cp=4, dp=1, ep=32)
    assert r1.world_size == 128
    assert r1.expert_dp == 1
    # Mixtral on 16 GPUs: TP2 x DP8, EP8 -> expert-DP = 2*8/8 = 2; with expert-TP 2 -> 1.
    assert ParallelLayout(tp=2, dp=8, ep=8).expert_dp == 2
    assert ParallelLayout(tp=2, dp=8, ep=8, etp=2).expert_dp == 1
    assert ParallelLayout(dp=4, cp=2).dense_shard_group == 8


def test_megatron_rank_order_dense():
    # Megatron's RankGenerator, order tp-cp-ep-dp-pp: TP fastest, PP slowest.
    lay = ParallelLayout(tp=2, pp=2, dp=2)
    assert lay.groups("tp") == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert lay.groups("dp") == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert lay.groups("pp") == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert lay.rank(tp=1, dp=1, pp=1) == 7


def test_context_parallel_sits_between_tp_and_dp():
    lay = ParallelLayout(tp=2, cp=2, dp=2)
    assert lay.groups("cp") == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert lay.groups("dp") == [(0, 4), (1, 5), (2, 6), (3, 7)]
    # The distributed optimizer's group: DP with CP.
    assert lay.groups("dp-cp") == [(0, 2, 4, 6), (1, 3, 5, 7)]


def test_expert_groups_regroup_the_same_ranks():
    # 8 GPUs as TP2 x DP4; experts as EP4 x expert-DP2 (expert-TP 1): EP groups consecutive.
    lay = ParallelLayout(tp=2, dp=4, ep=4)
    assert lay.groups("ep") == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert lay.groups("edp") == [(0, 4), (1, 5), (2, 6), (3, 7)]
    every = sorted(r for g in lay.groups("ep") for r in g)
    assert every == list(range(lay.world_size))


def test_every_group_partitions_the_world():
    lay = ParallelLayout(tp=4, pp=2, cp=2, dp=3)
    for kind in ("tp", "pp", "cp", "dp", "dp-cp"):
        ranks = sorted(r for g in lay.groups(kind) for r in g)
        assert ranks == list(range(lay.world_size)), kind
    with pytest.raises(LabInputError) as err:
        lay.groups("xx")
    assert err.value.field == "group"


def test_problems_lists_every_rule_not_only_the_first():
    found = problems(L70, ParallelLayout(tp=3, pp=3, cp=3), seq_len=4096)
    assert [p.field for p in found] == ["tp", "pp", "cp"]
    assert all(p.message for p in found)


def test_problems_on_moe_layouts():
    mixtral = get_model("mixtral-8x7b")
    found = problems(mixtral, ParallelLayout(tp=2, dp=2, ep=3))
    fields = [p.field for p in found]
    assert fields == ["ep", "ep"]  # 3 does not divide 8 experts, nor TP x CP x DP = 4
    assert "8 experts" in found[0].message
    assert [p.field for p in problems(L70, ParallelLayout(ep=2, dp=2))] == ["ep"]  # dense


def test_kv_heads_rule_training_vs_inference():
    # Llama 3.1 70B: 64 heads, 8 KV heads. Megatron training needs TP | 8; vLLM replicates.
    assert [p.field for p in problems(L70, ParallelLayout(tp=16))] == ["tp"]
    assert problems(L70, ParallelLayout(tp=16), mode="infer") == []


def test_uneven_pipeline_is_an_explicit_option():
    # EP09: DeepSeek-R1 with PP4 (61 layers) and GLM-4.7-Flash with PP2 (47 layers).
    for model_id, lay in (("deepseek-r1", ParallelLayout(tp=8, pp=4, cp=4, ep=32)),
                          ("glm-4.7-flash", ParallelLayout(tp=2, pp=2, cp=2, ep=4))):
        model = get_model(model_id)
        assert [p.field for p in problems(model, lay, seq_len=4096)] == ["pp"]
        assert problems(model, lay, seq_len=4096, uneven_pp=True) == []


def test_world_size_cap_and_bad_degrees():
    assert problems(L70, ParallelLayout(tp=8, pp=80, dp=2000))[0].field == "dp"
    for field in ("tp", "pp", "cp", "dp", "ep", "etp"):
        with pytest.raises(LabInputError) as err:
            ParallelLayout(**{field: 0})
        assert err.value.field == field


def test_divisors():
    assert divisors(80) == [1, 2, 4, 5, 8, 10, 16, 20, 40, 80]
    assert divisors(61) == [1, 61]


def test_world_size_rules_for_a_gpu_count():
    # EP09: 128 GPUs with TP8 PP4 CP4 EP32 is legal, DP = 1; CURRICULUM: N divisible by
    # TP·PP·CP and by EP·PP.
    lay = ParallelLayout.for_world(128, tp=8, pp=4, cp=4, ep=32)
    assert (lay.dp, lay.expert_dp) == (1, 1)
    assert world_problems(96, tp=8, pp=4, cp=4, ep=32) != []
    found = world_problems(100, tp=8, pp=4, ep=16)
    assert [p.field for p in found] == ["gpus", "gpus"]  # neither 32 nor 64 divides 100
    with pytest.raises(LabInputError) as err:
        ParallelLayout.for_world(100, tp=8, pp=4)
    assert err.value.field == "gpus"
