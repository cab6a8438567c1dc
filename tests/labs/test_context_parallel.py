"""Context parallelism pinned to CURRICULUM EP06's figures, the frameworks' own splits and the
cost formulas (labs/context_parallel/lab.py)."""

import math

import pytest

from labs.context_parallel.inputs import CPInput
from labs.context_parallel.lab import BYTES, mask_layout, pairs_of_ranges, simulate_cp
from labs.core.errors import LabInputError
from labs.core.limits import CP_LAYOUTS, MAX_CP_TOKENS
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link
from labs.model.presets import get_model

L70 = get_model("llama-3.1-70b")  # 64 query heads, 8 KV heads, head_dim 128
H100 = get_gpu("h100-sxm")
NDR = get_link("ib-ndr")


def plan(**kw) -> CPInput:
    base = {"tokens": 8, "cp": 2, "layout": "zigzag", "model": L70, "seq_len": 131072,
            "link": NDR, "gpu": H100}
    return CPInput(**{**base, **kw})


def tokens_of(result, rank):
    return list(result.ranks[rank].tokens)


def pairs(result):
    return [r.causal_pairs for r in result.ranks]


# --- the seed figures (CURRICULUM EP06) --------------------------------------------------------

def test_zigzag_8_tokens_cp2_holds_0_1_6_7_and_2_3_4_5():
    result = mask_layout(8, 2, "zigzag")
    assert tokens_of(result, 0) == [0, 1, 6, 7]
    assert tokens_of(result, 1) == [2, 3, 4, 5]


def test_causal_pairs_8_tokens_cp2_contiguous_10_26_zigzag_18_18():
    assert pairs(mask_layout(8, 2, "contiguous")) == [10, 26]
    assert pairs(mask_layout(8, 2, "zigzag")) == [18, 18]
    assert mask_layout(8, 2, "contiguous").imbalance == pytest.approx(26 / 18, abs=1e-12)
    assert mask_layout(8, 2, "zigzag").imbalance == 1.0


def test_allgather_gives_contiguous_slices_rank0_tokens_0_to_3():
    result = mask_layout(8, 2, "allgather")
    assert tokens_of(result, 0) == [0, 1, 2, 3]
    assert tokens_of(result, 1) == [4, 5, 6, 7]


def test_ulysses_each_rank_does_the_whole_mask_for_its_heads():
    result = mask_layout(8, 2, "ulysses", heads=64, kv_heads=8)
    assert [r.heads for r in result.ranks] == [(0, 31), (32, 63)]
    assert pairs(result) == [18, 18]  # 36 cells x half of the heads
    assert result.imbalance == 1.0


# --- invariants over every size the picture draws ----------------------------------------------

def sizes():
    for s in range(1, MAX_CP_TOKENS + 1):
        for c in (1, 2, 3, 4, 5, 8, 16, 32):
            if c <= s:
                yield s, c


@pytest.mark.parametrize("layout", CP_LAYOUTS)
def test_pairs_sum_to_s_s_plus_1_over_2_and_every_token_has_one_owner(layout):
    checked = 0
    for s, c in sizes():
        heads = 64 if layout == "ulysses" else 1
        if layout == "zigzag" and s % (2 * c) or layout == "ulysses" and heads % c:
            continue
        result = mask_layout(s, c, layout, heads=heads)
        assert sum(pairs(result)) == s * (s + 1) // 2, (s, c)
        held = sorted(t for r in result.ranks for t in r.tokens)
        assert held == list(range(s)), (s, c)
        assert all(result.owner[t] == r.rank for r in result.ranks for t in r.tokens)
        checked += 1
    assert checked > 50


def test_zigzag_is_exactly_balanced_whenever_2c_divides_s():
    for s, c in sizes():
        if s % (2 * c) == 0:
            result = mask_layout(s, c, "zigzag")
            assert len(set(pairs(result))) == 1, (s, c)
            assert result.imbalance == 1.0
    # And at real lengths, from the closed form.
    for s, c in ((131072, 8), (1_048_576, 64), (4096, 16)):
        assert mask_layout(s, c, "zigzag").imbalance == 1.0


def test_contiguous_imbalance_tends_to_2_minus_1_over_c():
    # Rank r's rows sum to b²(r + 1/2) + b/2 with b = s/c; the last, b²(c − 1/2), over the mean
    # b²c/2 tends to 2 − 1/c: the last rank does nearly twice the average.
    for c in (2, 4, 8):
        result = mask_layout(1_048_576, c, "contiguous")
        assert result.imbalance == pytest.approx(2 - 1 / c, rel=1e-4)


def test_pairs_of_ranges_is_the_row_sum():
    assert pairs_of_ranges([(0, 4)]) == 1 + 2 + 3 + 4
    assert pairs_of_ranges([(2, 4), (6, 8)]) == 3 + 4 + 7 + 8


# --- the frameworks' own zigzag splits ---------------------------------------------------------

def megatron_split(s: int, c: int, rank: int) -> list[int]:
    """Megatron-LM get_batch_on_this_cp_rank (megatron/training/utils.py): view the sequence as
    2·cp_size chunks of s/(2·cp_size) (the view fails unless they are equal), then
    index_select([cp_rank, 2·cp_size − cp_rank − 1]) and flatten."""
    assert s % (2 * c) == 0, "Megatron's view needs s divisible by 2·CP"
    size = s // (2 * c)
    chunks = [list(range(i * size, (i + 1) * size)) for i in range(2 * c)]
    return chunks[rank] + chunks[2 * c - rank - 1]


def torch_chunk(seq: list[int], parts: int) -> list[list[int]]:
    """torch.chunk: pieces of ceil(n/parts), the last smaller, possibly fewer than parts."""
    size = math.ceil(len(seq) / parts)
    return [seq[i:i + size] for i in range(0, len(seq), size)]


def ring_flash_attention_split(s: int, c: int, rank: int) -> list[int]:
    """zhuzilin/ring-flash-attention extract_local: value.chunk(2·world_size), then
    cat([chunks[rank], chunks[2·world_size − rank − 1]])."""
    chunks = torch_chunk(list(range(s)), 2 * c)
    return chunks[rank] + chunks[2 * c - rank - 1]


def test_zigzag_equals_megatron_and_ring_flash_attention_for_every_divisible_size():
    compared = 0
    for c in range(1, 33):
        for s in range(2 * c, MAX_CP_TOKENS + 1, 2 * c):
            result = mask_layout(s, c, "zigzag")
            for rank in range(c):
                assert tokens_of(result, rank) == megatron_split(s, c, rank), (s, c, rank)
                assert tokens_of(result, rank) == ring_flash_attention_split(s, c, rank)
                compared += 1
    assert compared > 200


def test_frameworks_disagree_off_the_grid_so_the_lab_refuses_it():
    # 10 tokens, CP = 2: Megatron's view cannot cut 4 equal chunks; torch.chunk makes chunks of
    # 3, 3, 3, 1 and the two ranks would hold 4 and 6 tokens. The lab asks for a multiple of 4.
    with pytest.raises(AssertionError):
        megatron_split(10, 2, 0)
    assert [len(ring_flash_attention_split(10, 2, r)) for r in range(2)] == [4, 6]
    with pytest.raises(LabInputError) as err:
        mask_layout(10, 2, "zigzag")
    assert err.value.field == "tokens" and "divide by 4" in err.value.message


# --- refusals name the field and say why -------------------------------------------------------

def test_ulysses_needs_heads_divisible_by_cp():
    with pytest.raises(LabInputError) as err:
        mask_layout(48, 3, "ulysses", heads=64, kv_heads=8)
    assert err.value.field == "cp" and "64 heads" in err.value.message
    # 12 KV heads over 8 ranks: neither divides the other.
    with pytest.raises(LabInputError) as err:
        mask_layout(48, 8, "ulysses", heads=96, kv_heads=12)
    assert "KV heads" in err.value.message


def test_more_ranks_than_tokens_and_unknown_layouts_are_refused():
    with pytest.raises(LabInputError) as err:
        mask_layout(4, 8, "contiguous")
    assert err.value.field == "tokens"
    with pytest.raises(LabInputError) as err:
        mask_layout(8, 2, "striped")
    assert err.value.field == "layout"
    with pytest.raises(LabInputError) as err:
        plan(tokens=65)
    assert err.value.field == "tokens"


def test_cp_beyond_an_nvlink_domain_must_use_a_scale_out_link():
    with pytest.raises(LabInputError) as err:
        plan(tokens=64, cp=16, link=get_link("nvlink-4"))
    assert err.value.field == "link"
    plan(tokens=64, cp=16, link=NDR)  # fine across nodes


def test_zigzag_seq_len_must_divide_by_2cp():
    with pytest.raises(LabInputError) as err:
        plan(tokens=8, cp=2, seq_len=4098)
    assert err.value.field == "seq_len"


# --- cost ---------------------------------------------------------------------------------------

def test_gqa_kv_bytes_per_token_llama_70b():
    # 8 KV heads x (128 + 128) dims x 2 bytes = 4,096 bytes per token per layer.
    assert simulate_cp(plan()).cost.kv_bytes_per_token == 8 * 256 * BYTES == 4096


@pytest.mark.parametrize("c", [2, 4, 8, 16])
def test_ring_passes_c_minus_1_blocks_and_allgather_moves_the_same_bytes(c):
    s = 131072
    ring_cost = simulate_cp(plan(tokens=64, cp=c, seq_len=s)).cost
    block = s / c * 4096
    assert ring_cost.steps == c - 1
    assert ring_cost.comm_bytes_per_gpu == pytest.approx((c - 1) * block, rel=1e-12)
    # Each step one NCCL send (Simple: 8.4 + 9.6 µs across nodes) at the port's measured
    # 48 GB/s (NVIDIA/nccl-tests#267).
    assert ring_cost.comm_s == pytest.approx((c - 1) * (18e-6 + block / 48e9))
    gathered = simulate_cp(plan(tokens=64, cp=c, seq_len=s, layout="allgather")).cost
    assert gathered.comm_bytes_per_gpu == pytest.approx(ring_cost.comm_bytes_per_gpu)
    assert gathered.comm_s == pytest.approx((c - 1) / c * s * 4096 / 48e9, rel=0.02)
    assert gathered.kv_held_bytes == s * 4096  # the whole sequence's K/V at once


def test_ulysses_traffic_per_gpu_falls_with_c_while_the_rings_grows():
    s = 131072
    ulysses = [simulate_cp(plan(tokens=64, cp=c, seq_len=s, layout="ulysses")).cost
               for c in (2, 4, 8)]
    rings = [simulate_cp(plan(tokens=64, cp=c, seq_len=s)).cost for c in (2, 4, 8)]
    u = [x.comm_bytes_per_gpu for x in ulysses]
    r = [x.comm_bytes_per_gpu for x in rings]
    assert u[0] > u[1] > u[2]
    assert r[0] < r[1] < r[2]
    # (c−1)/c · (s/c) · (2·64·128 + 2·8·128) · 2 bytes at c = 8 (DeepSpeed-Ulysses sec 3.2).
    assert u[2] == pytest.approx(7 / 8 * s / 8 * (2 * 64 * 128 + 2 * 8 * 128) * 2, rel=1e-12)


def test_ulysses_replicates_kv_heads_when_cp_exceeds_them():
    # 8 KV heads over 16 ranks: each is sent twice, as 16 heads.
    cost = simulate_cp(plan(tokens=64, cp=16, seq_len=131072, layout="ulysses")).cost
    expected = 15 / 16 * 131072 / 16 * (2 * 64 * 128 + 2 * 16 * 128) * 2
    assert cost.comm_bytes_per_gpu == pytest.approx(expected, rel=1e-12)


def test_local_activations_divide_by_c_weights_do_not_enter():
    for c in (2, 8, 32):
        cost = simulate_cp(plan(tokens=64, cp=c)).cost
        assert cost.activation_bytes_per_gpu == pytest.approx(cost.activation_bytes_no_cp / c)


def test_ring_hides_behind_attention_at_long_context_on_nvlink():
    # Llama 70B, 128k tokens, CP 8 on NVLink 4: ~7 x 8.4 MB... per step far below the attention.
    cost = simulate_cp(plan(tokens=64, cp=8, link=get_link("nvlink-4"))).cost
    assert cost.exposed_s == 0.0 and cost.comm_s < cost.attention_s
    # A short sequence on slow Ethernet cannot hide it.
    slow = simulate_cp(plan(tokens=64, cp=8, seq_len=4096, link=get_link("eth-25g"))).cost
    assert slow.exposed_s > 0


def test_cp1_moves_nothing():
    cost = simulate_cp(plan(tokens=8, cp=1)).cost
    assert cost.comm_bytes_per_gpu == 0 and cost.comm_s == 0 and cost.exposed_s == 0


def test_pairs_equal_a_cell_by_cell_count_of_the_mask():
    # Independent of the closed form: walk every (query, key) cell with key <= query.
    for layout in ("contiguous", "zigzag", "allgather"):
        for s, c in ((8, 2), (24, 3), (64, 8), (17, 4)):
            if layout == "zigzag" and s % (2 * c):
                continue
            result = mask_layout(s, c, layout)
            counted = [0] * c
            for q in range(s):
                for _k in range(q + 1):
                    counted[result.owner[q]] += 1
            assert pairs(result) == counted, (layout, s, c)


def test_allgather_slices_follow_slimes_rank_times_local_rule():
    # slime's all-gather CP: rank r owns global positions [r·local, (r+1)·local).
    for s, c in ((8, 2), (64, 8), (48, 3)):
        result = mask_layout(s, c, "allgather")
        local = s // c
        for r in range(c):
            assert tokens_of(result, r) == list(range(r * local, (r + 1) * local))
