"""EP09: RL placement pinned to the curriculum's recipe table and the ledger's own figures."""

import pytest

from labs.core.errors import LabInputError
from labs.core.limits import KV_DTYPES
from labs.hardware.gpus import get_gpu
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.presets import get_model
from labs.rl.inputs import RLPlacementInput
from labs.rl.lab import TRANSITION_OVERHEAD, compute_rl_placement
from labs.rl.recipes import experiment, get_recipe, memory_bandwidth, recipes
from labs.rl.serving import KV_DTYPE_BYTES, engine_memory, kv_bytes_per_token
from labs.rl.serving_time import HBM_EFFICIENCY

# The curriculum's table: training GPUs, TP/PP/CP/EP, GPUs per serving engine.
TABLE = {
    "glm-4-9b": (8, 2, 1, 2, 1, 2),
    "glm-4.7-flash": (8, 2, 2, 2, 4, 8),
    "glm-4.7": (64, 8, 4, 2, 16, 32),
    "glm-5.3": (256, 4, 8, 8, 32, 64),
    "deepseek-r1": (128, 8, 4, 4, 32, 64),
    "qwen3.8-27b": (32, 4, 2, 4, 1, 2),
}
PLACEMENTS = ("colocated", "separate", "separate-pd")


def recipe_input(recipe_id: str, **over) -> RLPlacementInput:
    r = get_recipe(recipe_id)
    args = dict(model=r.spec, gpu=get_gpu("h100-sxm"), train_gpus=r.train_gpus, tp=r.tp,
                pp=r.pp, cp=r.cp, ep=r.ep, engine_gpus=r.engine_gpus, cpu_adam=r.cpu_adam,
                recompute=r.recompute, serving=r.serving)
    args.update(over)
    return RLPlacementInput(**args)


def test_six_recipes_match_the_table():
    assert list(recipes()) == list(TABLE)
    for rid, row in TABLE.items():
        r = get_recipe(rid)
        assert (r.train_gpus, r.tp, r.pp, r.cp, r.ep, r.engine_gpus) == row
        assert r.source


def test_experiment_is_the_curriculums():
    e = experiment()
    assert (e.response_len, e.prompts, e.responses_per_prompt, e.gpus_per_node) == (4096, 8, 8, 8)


def test_moe_and_qwen_profiles_use_cpu_adam_and_recomputation():
    for rid in ("glm-4.7-flash", "glm-4.7", "glm-5.3", "deepseek-r1", "qwen3.8-27b"):
        r = get_recipe(rid)
        assert r.cpu_adam and r.recompute != "none"


@pytest.mark.parametrize("rid", list(TABLE))
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_every_check_passes_and_roles_sum_to_the_cluster(rid, placement):
    res = compute_rl_placement(recipe_input(rid, placement=placement))
    failed = [(c.name, c.detail) for c in res.checks if not c.ok]
    assert failed == []
    n, tp, pp, cp, ep, e = TABLE[rid]
    assert res.dp == n // (tp * pp * cp)
    roles = [g["role"] for g in res.gpus]
    assert len(roles) % 8 == 0  # whole nodes
    train = roles.count("colocated" if placement == "colocated" else "training")
    assert train == n
    rollout = sum(roles.count(r) for r in ("rollout", "prefill", "decode"))
    assert rollout == (0 if placement == "colocated" else res.input.engine_count * e)
    assert train + rollout + roles.count("idle") == len(roles)
    names = {c.name for c in res.checks}
    assert {"world size", "expert grouping", "more GPUs add replicas"} <= names


@pytest.mark.parametrize("rid", list(TABLE))
def test_colocated_is_the_larger_phase_plus_the_stated_overhead(rid):
    res = compute_rl_placement(recipe_input(rid))
    assert TRANSITION_OVERHEAD == 1.0e9
    expected = max(res.train_memory_bytes, res.rollout_memory_bytes) + TRANSITION_OVERHEAD
    assert res.colocated_bytes == pytest.approx(expected, rel=1e-12)
    (pool,) = res.pools
    assert pool.role == "colocated" and pool.memory_per_gpu_bytes == res.colocated_bytes


def test_training_pool_is_the_ledger_with_the_recipes_degrees():
    # GLM-4.7 on 64 GPUs, DP 1: the same bill the EP01 ledger gives for those degrees.
    inp = recipe_input("glm-4.7", placement="separate")
    res = compute_rl_placement(inp)
    ledger = compute_memory(MemoryInput(
        model=get_model("glm-4.7"), gpu=get_gpu("h100-sxm"), recipe="adam18", seq_len=5120,
        recompute="full", tp=8, pp=4, cp=2, dp=1, ep=16, zero=1, offload=True,
        microbatches=64))
    assert res.train_memory_bytes == pytest.approx(ledger.total_bytes, rel=1e-12)
    # CPU Adam puts master weights and moments in host RAM, none on the GPU.
    train = res.pools[0]
    assert train.breakdown["optimizer_moments"] == 0 and train.host_bytes_per_gpu > 0


def test_uneven_pipeline_stages_where_layers_do_not_divide():
    assert compute_rl_placement(recipe_input("deepseek-r1")).stage_layers == (16, 15, 15, 15)
    assert compute_rl_placement(recipe_input("glm-4.7-flash")).stage_layers == (24, 23)
    assert sum(compute_rl_placement(recipe_input("glm-5.3")).stage_layers) == 78


def test_serving_memory_is_weights_plus_kv_plus_workspace():
    glm9 = get_model("glm-4-9b")
    mem = engine_memory(glm9, 2, 16, 5120)
    assert mem.weights == pytest.approx(2 * glm9.params / 2)
    # GQA: 2 KV heads split over TP 2, 40 layers, K and V of 128 each, bf16.
    assert mem.kv_cache == pytest.approx(40 * 2 * 1 * 128 * 2 * 16 * 5120)
    assert mem.total == pytest.approx(mem.weights + mem.kv_cache + mem.workspace)
    # KV grows with concurrency x context; fp8 halves it; MLA stores one latent (512 + 64).
    assert engine_memory(glm9, 2, 32, 5120).kv_cache == pytest.approx(2 * mem.kv_cache)
    assert engine_memory(glm9, 2, 16, 5120, "fp8").kv_cache == pytest.approx(mem.kv_cache / 2)
    assert kv_bytes_per_token(get_model("deepseek-r1"), "bf16") == 61 * (512 + 64) * 2


def test_more_gpus_add_replicas_not_headroom():
    # GLM-4.7 on 128 instead of 64 GPUs at the same degrees: DP 1 -> 2, and with CPU Adam not
    # a byte less per GPU.
    res = compute_rl_placement(recipe_input("glm-4.7"))
    rep = res.replicas
    assert rep["gpus"] == 128 and rep["dp"] == 2 and rep["model_state_unchanged"]
    assert rep["freed_bytes"] == pytest.approx(0, abs=1)
    # The good move: more model parallelism (PP 4 -> 8) does cut what each GPU holds.
    deeper = compute_rl_placement(recipe_input("glm-4.7", train_gpus=128, pp=8,
                                               placement="separate"))
    assert deeper.train_memory_bytes < 0.7 * res.train_memory_bytes


def test_broken_recipe_is_marked_where_it_fails():
    res = compute_rl_placement(recipe_input("glm-4.7", train_gpus=60, placement="separate"))
    bad = {c.name for c in res.checks if not c.ok}
    assert {"world size", "expert grouping"} <= bad
    roles = [g["role"] for g in res.gpus]
    assert roles.count("unplaced") == 60 and not res.pools[0].fits
    # 10 GPUs with TP 2 x PP 1 x CP 2 = 4 per replica: 2 replicas, 2 GPUs left over.
    res = compute_rl_placement(recipe_input("glm-4-9b", train_gpus=10))
    assert [g["role"] for g in res.gpus].count("unplaced") == 2


def test_a_pool_that_does_not_fit_is_marked():
    res = compute_rl_placement(recipe_input("glm-4.7", tp=1, ep=1, cp=1, pp=4, train_gpus=64,
                                            cpu_adam=False, placement="separate"))
    assert not res.pools[0].fits
    assert all(not g["fits"] for g in res.gpus if g["role"] == "training")


def test_timeline_colocated_in_turn_separate_overlapped():
    col = compute_rl_placement(recipe_input("glm-4-9b"))
    sep = compute_rl_placement(recipe_input("glm-4-9b", placement="separate"))
    r, t, s = col.rollout_seconds, col.train_seconds, col.sync_seconds
    assert col.step_seconds == pytest.approx(r + t + s)
    assert sep.step_seconds == pytest.approx(max(sep.rollout_seconds, sep.train_seconds)
                                             + sep.sync_seconds)
    first = [p for p in col.timeline if p.step == 0]
    assert [p.phase for p in first] == ["rollout", "train", "weight_sync"]
    assert all(a.end == pytest.approx(b.start) for a, b in zip(first, first[1:], strict=False))
    # Separate: training of step 0 runs while rollout 1 generates (one step off-policy).
    train0 = next(p for p in sep.timeline if p.phase == "train" and p.step == 0)
    roll1 = next(p for p in sep.timeline if p.phase == "rollout" and p.step == 1)
    assert roll1.start < train0.end and roll1.end > train0.start
    for res in (col, sep):
        assert res.samples_per_second == pytest.approx(64 / res.step_seconds)
    # Separate pools sync over the network: 2 B x params to each rollout GPU.
    assert sep.sync_bytes_per_gpu == pytest.approx(2 * get_model("glm-4-9b").params)


def test_stand_in_presets_are_flagged_and_sized():
    glm5, qwen = get_model("glm-5.3"), get_model("qwen3.8-27b")
    assert glm5.stand_in and qwen.stand_in and not get_model("glm-4.7").stand_in
    assert glm5.params == pytest.approx(744e9, rel=0.01)
    assert qwen.params == pytest.approx(27e9, rel=0.01)
    res = compute_rl_placement(recipe_input("glm-5.3"))
    assert any(n.startswith("stand-in shape") for n in res.notes)


@pytest.mark.parametrize(("field", "over"), [
    ("train_gpus", {"train_gpus": 0}), ("placement", {"placement": "mixed"}),
    ("engine_gpus", {"engine_gpus": 0}), ("response_len", {"response_len": 0}),
    ("kv_dtype", {"kv_dtype": "int3"}), ("recompute", {"recompute": "some"}),
    ("tp", {"tp": 0}), ("cpu_adam", {"cpu_adam": "yes"}),
])
def test_bad_input_names_its_field(field, over):
    with pytest.raises(LabInputError) as err:
        recipe_input("glm-4-9b", **over)
    assert err.value.field == field


def test_kv_dtypes_are_the_limits_ones():
    assert tuple(KV_DTYPE_BYTES) == KV_DTYPES


def test_weight_sync_moves_at_nccl_bus_bandwidth_not_the_datasheet():
    """Round-2 cold reading of EP09, item 1: the separate pools' broadcast was timed at the
    NIC's datasheet 50 GB/s, where EP02 teaches that busBW is the achieved figure (InfiniBand
    NDR: 48 GB/s; for a broadcast busBW equals algBW). DeepSeek-R1's 2 B x 671B to every
    rollout GPU: 1,342 GB / 48 GB/s = 27.96 s, not 26.8 s. Colocated, the stage's gather runs
    at NVLink's busBW (367.6 of 450 GB/s on an H100) and a step's two switches over PCIe 5
    (64 GB/s) add the trainer's weights and gradients down after training and up before the
    next (round-21 cold reading R, finding 4: the engine's weights are refilled by the sync,
    slime's train.py, not copied up from host)."""
    r1 = get_model("deepseek-r1")
    sep = compute_rl_placement(recipe_input("deepseek-r1", placement="separate"))
    assert sep.sync_rate == 48e9
    assert sep.sync_seconds == pytest.approx(2 * r1.params / 48e9, rel=1e-12)
    assert sep.sync_seconds == pytest.approx(27.96, abs=0.01)
    col = compute_rl_placement(recipe_input("deepseek-r1"))
    assert col.sync_rate == pytest.approx(367.6e9)
    resident = col.train_breakdown["weights"] + col.train_breakdown["gradients"]
    switch = 2 * resident / 64e9
    assert col.sync_switch_seconds == pytest.approx(switch, rel=1e-12)
    assert col.sync_seconds == pytest.approx(2 * r1.params / 4 / 367.6e9 + switch, rel=1e-12)


def test_train_parts_add_up_to_the_training():
    """EP09 steps 2 and 6 derive the training time from its parts (round-16 cold reading,
    finding 2): EP08's step on the layout (its segments summing to it) x the log-probability
    forward's factor, + CPU Adam's PCIe trip; a layout EP08 refuses is an estimate with no
    segments."""
    for preset in ("glm-4-9b", "deepseek-r1"):
        res = compute_rl_placement(recipe_input(preset))
        p = res.train_parts
        assert not p["estimated"] and p["step_s"] == pytest.approx(sum(p["segments"].values()))
        assert res.train_seconds == pytest.approx(p["step_s"] * p["log_prob"] + p["offload_s"])
        assert p["microbatches"] * res.dp == res.input.samples  # one sample a micro-batch
        assert 1 < p["log_prob"] < 1.5  # 2N on top of 6N-8N a token
        cpu = res.input.cpu_adam
        w, g = res.train_breakdown["weights"], res.train_breakdown["gradients"]
        # fp32 gradients down (as the bill keeps them), bf16 weights up (round-18 finding 10)
        assert p["offload_s"] == (pytest.approx((g + w) / p["offload_rate"]) if cpu else 0)
    broken = compute_rl_placement(recipe_input("glm-4.7", train_gpus=96))
    assert broken.train_parts["estimated"] and not broken.train_parts["segments"]
    assert broken.train_seconds == broken.train_parts["seconds"] > 0


def test_rollout_parts_add_up_to_the_rollout():
    """EP09 step 6 splits GLM-4-9B's colocated rollout into prefill, the weights' reads and the
    cache's reads, so step 6's drill (twice the responses) can be derived: the weights are read
    once per decode step for the whole batch, the rest doubles with the requests."""
    res = compute_rl_placement(recipe_input("glm-4-9b"))
    p = res.rollout_parts
    assert p["decode_weights_s"] + p["decode_kv_s"] > p["decode_compute_s"]  # memory-bound
    assert res.rollout_seconds == pytest.approx(
        p["prefill_s"] + p["decode_weights_s"] + p["decode_kv_s"], rel=1e-12)
    double = compute_rl_placement(recipe_input("glm-4-9b", responses_per_prompt=16))
    assert double.rollout_seconds == pytest.approx(
        p["decode_weights_s"] + 2 * (p["prefill_s"] + p["decode_kv_s"]), rel=1e-12)


def test_a_moe_engine_keeps_whole_requests_per_attention_group():
    """Round-6 cold reading of EP09, item 4, with the layout slime's run-deepseek-r1.sh
    passes SGLang (--sglang-dp-size 8 on engines of 64): each attention group of 8 GPUs keeps
    the cache of whole requests, and MLA's latent, shared by every head, is whole on each of
    its GPUs, so the busiest GPU holds ceil(requests / 8) requests' latent: 32 requests leave
    it 4, 4 x 5,120 x 70.3 KB = 1.44 GB. Without a layout (the cheat sheet's even split) each
    GPU is its own group: one request on 64 GPUs. Its decode reads that cache at one GPU's
    bandwidth (the engine's step waits for it)."""
    r1 = get_model("deepseek-r1")
    kv = kv_bytes_per_token(r1, "bf16")
    layout = get_recipe("deepseek-r1").serving
    assert layout.groups(64) == (8, 8)
    assert engine_memory(r1, 64, 32, 5120, layout=layout).kv_cache == pytest.approx(
        4 * 5120 * kv)
    assert engine_memory(r1, 64, 64, 5120, layout=layout).kv_cache == pytest.approx(
        8 * 5120 * kv)
    assert engine_memory(r1, 64, 65, 5120, layout=layout).kv_cache == pytest.approx(
        9 * 5120 * kv)
    assert engine_memory(r1, 64, 0, 5120, layout=layout).kv_cache == 0
    assert engine_memory(r1, 64, 32, 5120).kv_cache == pytest.approx(5120 * kv)
    assert engine_memory(r1, 64, 65, 5120).kv_cache == pytest.approx(2 * 5120 * kv)
    res = compute_rl_placement(recipe_input("deepseek-r1", placement="separate"))
    parts = res.rollout_parts
    assert parts["decode_requests"] == 32
    bandwidth = memory_bandwidth(get_gpu("h100-sxm")) * HBM_EFFICIENCY
    exp = experiment()
    mean_context = exp.prompt_len + exp.response_len / 2
    assert parts["decode_kv_s"] == pytest.approx(
        exp.response_len * 4 * mean_context * kv / bandwidth, rel=1e-12)


def test_r1_serving_weights_per_gpu_as_sglang_places_them():
    """EP09's serving weights for DeepSeek-R1 as slime's scripts/run-deepseek-r1.sh runs SGLang
    (engines of 64 GPUs = tp_size 64; --sglang-enable-dp-attention --sglang-dp-size 8
    --sglang-moe-dense-tp-size 1 --sglang-enable-dp-lm-head --sglang-enable-deepep-moe), by
    hand from R1's config.json (hidden 7168, 61 layers of which 3 dense with
    intermediate_size 18432, 256 routed + 1 shared expert of 2048, q_lora_rank 1536,
    kv_lora_rank 512, qk_nope 128 + qk_rope 64, v_head 128, 128 heads, vocab 129280) and
    SGLang's python/sglang/srt/models/deepseek_v2.py: attention TP = 64 / 8 = 8
    (dp_attention.py: attn_tp_size = tp_size // dp_size); q_b_proj, kv_b_proj and o_proj split
    over it, fused_qkv_a_proj_with_mqa and the latent norms ReplicatedLinear; embed_tokens
    VocabParallelEmbedding(enable_tp=not enable_dp_attention), whole; lm_head
    use_attn_tp_group, / 8; dense MLPs tp_size 1 (moe_dense_tp_size 1); shared experts tp_size 1
    (DeepEP); MoEGate a plain parameter; routed experts n_routed_experts // tp_size = 4 a GPU.
    34.69 GB per GPU, where the even split 2 x 671.0B / 64 gave 20.97 GB."""
    h, layers, dense, moe = 7168, 61, 3, 58
    whole_attn = h * (1536 + 512 + 64) + 1536 + 512
    split_attn = 1536 * 128 * 192 + 512 * 128 * (128 + 128) + 128 * 128 * h
    expert = 3 * h * 2048
    params = (layers * (whole_attn + split_attn / 8)  # attention
              + dense * 3 * h * 18432  # dense layers' MLPs, whole
              + moe * expert  # shared experts, whole
              + moe * (256 * h + 256)  # routers (with the aux-loss-free bias), whole
              + moe * 256 * expert / 64  # routed experts over the engine
              + 129280 * h  # embedding, whole
              + 129280 * h / 8  # output head over the attention group
              + (2 * layers + 1) * h)  # RMSNorm gains
    res = compute_rl_placement(recipe_input("deepseek-r1", placement="separate"))
    weights = res.rollout_breakdown["weights"]
    # 0.1%: the hand count and the engine's are the same sum; the tolerance only absorbs
    # rounding, and is far below the 13.7 GB the even split left out.
    assert weights == pytest.approx(2 * params, rel=1e-3)
    assert weights / 1e9 == pytest.approx(34.69, abs=0.01)
    assert res.serving_weights["attention_groups"] == 8
    assert res.serving_weights["group_gpus"] == 8
    r1 = get_model("deepseek-r1")
    assert 2 * r1.params / 64 / 1e9 == pytest.approx(20.97, abs=0.01)  # what it replaces


def test_a_prefill_decode_split_adds_up_from_its_parts():
    """EP09 step 5 derives the split's rollout from its parts: the prefill engines and the
    decode engines run as a pipeline, so max(prefill, weights + cache) + the KV move; three
    decode engines hold ceil(64 / 3) = 22 requests each, whose steps visit 1 - (1 - 8/256)^22
    of the routed experts, against 16 requests' share on four engines."""
    four = compute_rl_placement(recipe_input("deepseek-r1", placement="separate", engines=4))
    split = compute_rl_placement(recipe_input("deepseek-r1", placement="separate-pd",
                                              engines=4, prefill_engines=1))
    f, p = four.rollout_parts, split.rollout_parts
    assert four.rollout_seconds == pytest.approx(
        f["prefill_s"] + f["decode_weights_s"] + f["decode_kv_s"], rel=1e-12)
    assert split.rollout_seconds == pytest.approx(
        max(p["prefill_s"], p["decode_weights_s"] + p["decode_kv_s"]) + p["kv_move_s"],
        rel=1e-12)
    assert (f["decode_requests"], p["decode_requests"]) == (16, 22)
    assert f["experts_touched"] == pytest.approx(1 - (1 - 8 / 256) ** 16)
    assert p["experts_touched"] == pytest.approx(1 - (1 - 8 / 256) ** 22)
    # Each step reads the busiest GPU's weights at one GPU's rate: what the memory chart says
    # it holds, less the embedding and the routed experts the busiest GPU's tokens do not visit.
    rate = memory_bandwidth(get_gpu("h100-sxm")) * HBM_EFFICIENCY
    for result, parts in ((four, f), (split, p)):
        held = result.rollout_breakdown["weights"]
        w = result.serving_weights["params"]
        routed = 2 * w["routed_experts"]
        unread = 1 - parts["busiest_experts"] / parts["experts_per_gpu"]
        read = held - 2 * w["embedding"] - unread * routed
        assert parts["decode_weight_bytes"] == pytest.approx(read, rel=1e-12)
        assert parts["decode_weights_s"] == pytest.approx(
            experiment().response_len * read / rate, rel=1e-12)
    assert split.rollout_seconds > four.rollout_seconds


def test_the_decode_reads_the_weights_each_gpu_holds():
    """The decode timed its weight reads as the engine's model spread evenly over its GPUs,
    while DP attention keeps attention, dense layers and shared experts whole or split over a
    group on every GPU (issue 36, s45): R1 on 4 engines read 2 x (17.1B + 39.8% of 653.9B) /
    64 GPUs a step, 0.53 GB of its dense part where each GPU holds 14.3 GB. A step now reads
    one GPU's own weights (the memory chart's, ``serving_weight_parts``) at one GPU's rate;
    an engine without a layout (a dense model, or the even split) reads as before. The
    embedding is not read whole (a step gathers its tokens' rows), and of the routed experts
    the busiest GPU's share (round 11, finding 2)."""
    four = compute_rl_placement(recipe_input("deepseek-r1", placement="separate", engines=4))
    r1, parts = get_model("deepseek-r1"), four.rollout_parts
    even = 2 * (r1.dense_params + parts["experts_touched"] * r1.expert_params) / 64
    assert parts["decode_weight_bytes"] > 2 * even
    w = four.serving_weights["params"]
    share = parts["busiest_experts"] / parts["experts_per_gpu"]
    assert parts["decode_weight_bytes"] == pytest.approx(
        2 * (sum(w.values()) - w["routed_experts"] - w["embedding"])
        + 2 * share * w["routed_experts"], rel=1e-12)
    glm = compute_rl_placement(recipe_input("glm-4-9b"))
    g = glm.rollout_parts
    assert g["decode_weight_bytes"] == pytest.approx(
        2 * get_model("glm-4-9b").params / glm.input.engine_gpus, rel=1e-12)


def test_a_decode_step_waits_for_the_busiest_gpus_experts():
    """Round-11 cold reading of EP09, finding 2: a step waits for the slowest GPU but was
    charged the average GPU's routed experts, 39.8% of the 4 each of R1's 64 engine GPUs
    holds at 16 requests. Each GPU's visits are Binomial(4, q); the busiest of 64 visits
    E[max] = sum_j (1 - F(j)^64) of them, 3.80 at 16 requests and 3.99 at 22, checked here
    against the binomial by brute force and against a simulation of uniform routing."""
    import random
    from math import comb

    from labs.rl.serving_time import busiest_experts, busiest_terms, experts_per_gpu

    r1 = get_model("deepseek-r1")
    assert experts_per_gpu(r1, 64) == (4, 64)
    for batch, want in ((16, 3.80), (22, 3.99)):
        q = 1 - (1 - 8 / 256) ** batch
        pmf = [comb(4, j) * q ** j * (1 - q) ** (4 - j) for j in range(5)]
        cdf = [sum(pmf[:j + 1]) for j in range(5)]
        # E[max] = sum over the maximum's values of value x P(max = value)
        exact = sum(v * (cdf[v] ** 64 - (cdf[v - 1] ** 64 if v else 0)) for v in range(5))
        assert busiest_experts(r1, 64, batch) == pytest.approx(exact, rel=1e-12)
        assert sum(busiest_terms(r1, 64, batch)) == pytest.approx(exact, rel=1e-12)
        assert exact == pytest.approx(want, abs=0.005)
    # Uniform routing simulated: each token picks 8 of 256, the busiest of 64 GPUs (4 experts
    # each) per layer; the binomial treats the experts as independent, within 1%.
    rng, layers, total = random.Random(0), 400, 0
    for _ in range(layers):
        hit = set()
        for _ in range(16):
            hit.update(rng.sample(range(256), 8))
        total += max(sum(4 * g + i in hit for i in range(4)) for g in range(64))
    assert total / layers == pytest.approx(busiest_experts(r1, 64, 16), rel=0.01)
    # One GPU holding every expert: the busiest is the average, 256 q; and at the limits'
    # 1,024 experts, where C(n, j) overflows a float, the sum still stands.
    from dataclasses import replace

    assert busiest_experts(r1, 1, 16) == pytest.approx(256 * (1 - (1 - 8 / 256) ** 16))
    wide = replace(r1, experts=1024)
    assert busiest_experts(wide, 1, 16) == pytest.approx(1024 * (1 - (1 - 8 / 1024) ** 16))
    assert 0 < busiest_experts(wide, 2, 16) < 512
    # R1 on 4 engines: the busiest GPU reads 3.80 / 4 of its 20.4 GB of routed experts.
    four = compute_rl_placement(recipe_input("deepseek-r1", placement="separate", engines=4))
    parts = four.rollout_parts
    routed = 2 * four.serving_weights["params"]["routed_experts"]
    assert parts["busiest_experts"] * routed / 4 / 1e9 == pytest.approx(19.4, abs=0.05)
    assert parts["decode_weight_bytes"] / 1e9 == pytest.approx(31.8, abs=0.05)


def test_a_kl_loss_runs_the_reference_models_forward_and_swaps_its_weights():
    """Round-22 cold reading R, finding 1: slime keeps a reference model whenever
    --use-kl-loss is set (train.py: with_ref=args.kl_coef != 0 or args.use_kl_loss), and its
    train_actor swaps the reference's weights in from host, runs its forward, and swaps the
    actor's back. The recipes say which scripts pass it; with it, the training runs two
    forwards over the batch and two copies of the rank's bf16 weights over PCIe."""
    from labs.hardware.links import get_link

    assert {rid: r.kl_loss for rid, r in recipes().items()} == {
        "glm-4-9b": True, "glm-4.7-flash": True, "glm-4.7": False, "glm-5.3": False,
        "deepseek-r1": True, "qwen3.8-27b": False}
    pcie = get_link("pcie-5").bandwidth
    for preset in ("glm-4-9b", "deepseek-r1"):
        one = compute_rl_placement(recipe_input(preset))
        two = compute_rl_placement(recipe_input(preset, ref_model=True))
        p, q = one.train_parts, two.train_parts
        h, f = p["flops_per_param"], p["forward_per_param"]
        assert (p["forwards"], q["forwards"]) == (1, 2)
        assert q["log_prob"] == pytest.approx((h + 2 * f) / h)
        assert p["ref_swap_s"] == 0
        w = two.train_breakdown["weights"]
        assert q["ref_swap_s"] == pytest.approx(2 * w / pcie)
        assert two.train_seconds == pytest.approx(
            q["step_s"] * q["log_prob"] + q["offload_s"] + q["ref_swap_s"])
        assert two.step_seconds > one.step_seconds
