"""What pipelining costs on the wire: boundary bytes, sends to neighbours, the link's send time."""

import pytest

from labs.core.errors import LabInputError
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate
from labs.schedules.wire import boundary_bytes, send_seconds

TOL = 1e-9


def run(schedule="1f1b", **kwargs):
    return simulate(PipelineInput(schedule=schedule, **kwargs))


# ----- bytes at a stage boundary: s·b·h·2 (Narayanan et al. 2021, sec. 4.1) --------------------
def test_boundary_bytes_llama_70b_sized():
    # s = 4096 tokens, b = 1, h = 8192 (Llama 3.1 70B), bf16: 4096 * 8192 * 2 = 67,108,864 B.
    assert boundary_bytes(4096, 1, 8192) == 67_108_864
    # TP = 8 with the scatter/gather optimisation (or SP): each GPU sends an eighth, 8.39 MB.
    assert boundary_bytes(4096, 1, 8192, tp=8) == 8_388_608
    # CP = 2 halves the tokens each rank holds, so its send again.
    assert boundary_bytes(4096, 1, 8192, cp=2, tp=8) == 4_194_304


@pytest.mark.parametrize(("s", "b", "h"), [(2048, 4, 4096), (1, 1, 1), (8192, 2, 12288)])
def test_boundary_bytes_is_s_b_h_2(s, b, h):
    assert boundary_bytes(s, b, h) == s * b * h * 2
    assert boundary_bytes(s, b, h, bytes_per_value=4) == s * b * h * 4


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"seq_len": 0}, "seq_len"), ({"micro_batch": 1025}, "micro_batch"),
     ({"hidden": 2.5}, "hidden"), ({"tp": 0}, "tp"), ({"cp": True}, "cp"),
     ({"bytes_per_value": 9}, "bytes_per_value")],
)
def test_boundary_bytes_bad_input_names_its_field(kwargs, field):
    args = {"seq_len": 4096, "micro_batch": 1, "hidden": 8192} | kwargs
    with pytest.raises(LabInputError) as info:
        boundary_bytes(**args)
    assert info.value.field == field


def test_send_seconds_is_latency_plus_size_over_bandwidth():
    # 8,388,608 B over a 50 GB/s NIC (400 Gb/s) with 5 us latency: 5e-6 + 1.6777e-4 s.
    assert send_seconds(8_388_608, 50e9, 5e-6) == pytest.approx(5e-6 + 8_388_608 / 50e9)
    assert send_seconds(0, 50e9, 5e-6) == 5e-6


# ----- sends: neighbours only, counted from the actions ------------------------------------------
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "zb-h1"])
def test_one_chunk_per_rank_sends_m_each_way_at_each_boundary(schedule):
    # Rank 0 only sends forward, the last rank only back, the others both: 2m.
    result = run(schedule, stages=4, microbatches=8, boundary_bytes=1e6)
    assert result.sends == (8, 16, 16, 8)
    assert result.wire_bytes == (8e6, 16e6, 16e6, 8e6)
    assert sum(result.sends) == 2 * 8 * (4 - 1)  # 2m per boundary, p - 1 boundaries


@pytest.mark.parametrize("schedule", ["interleaved-1f1b", "looped-bfs", "interleaved-zb"])
def test_interleaving_multiplies_the_boundaries(schedule):
    # p*v pieces, every neighbour on another rank: p*v - 1 boundaries, v times 1F1B's bytes
    # less one boundary's worth.
    p, m, v = 4, 8, 3
    result = run(schedule, stages=p, microbatches=m, virtual=v, boundary_bytes=1.0)
    assert sum(result.sends) == 2 * m * (p * v - 1)
    assert result.sends[0] == m * v + m * (v - 1)  # no gradient goes back from piece 0


@pytest.mark.parametrize("schedule", ["zb-v", "dualpipe-v"])
def test_v_shape_keeps_the_turn_on_one_rank(schedule):
    # Pieces p-1 and p both live on the last rank: 2p - 2 boundaries cross the wire.
    p, m = 4, 8
    result = run(schedule, stages=p, microbatches=m, virtual=2, boundary_bytes=1.0)
    assert sum(result.sends) == 2 * m * (2 * p - 2)
    assert result.sends[p - 1] == 2 * m  # down to p-1 is local; one hop each way to p-2


def test_one_stage_sends_nothing():
    assert run("1f1b", stages=1, microbatches=4, boundary_bytes=1e6).sends == (0,)


# ----- the send time on the timeline comes from the link ------------------------------------------
LINK = {"boundary_bytes": 8_388_608.0, "link_bandwidth": 50e9, "link_latency": 5e-6}


def test_link_send_time_is_put_in_fs_units():
    # f = 1 stands for 10 ms: one 8.39 MB send at 50 GB/s + 5 us is 0.1727 ms = 0.01728 f.
    result = run("1f1b", stages=4, microbatches=8, forward_seconds=0.01, **LINK)
    seconds = 5e-6 + 8_388_608 / 50e9
    assert result.send_seconds == pytest.approx(seconds, abs=1e-15)
    assert result.send_time == pytest.approx(seconds / 0.01, abs=TOL)
    typed = run("1f1b", stages=4, microbatches=8, p2p=seconds / 0.01)
    assert result.makespan == pytest.approx(typed.makespan, abs=TOL)
    assert result.makespan > run("1f1b", stages=4, microbatches=8).makespan
    assert result.wire_seconds == pytest.approx(tuple(n * seconds for n in result.sends))


def test_forward_seconds_scale_with_f():
    # f = 2 units standing for 20 ms is the same 10 ms per unit.
    a = run("1f1b", f=2.0, forward_seconds=0.02, **LINK)
    b = run("1f1b", f=1.0, forward_seconds=0.01, **LINK)
    assert a.send_time == pytest.approx(b.send_time, abs=TOL)


def test_manual_p2p_overrides_the_link():
    result = run("1f1b", p2p=0.25, forward_seconds=0.01, **LINK)
    assert result.send_time == 0.25
    assert result.send_seconds == pytest.approx(5e-6 + 8_388_608 / 50e9)  # still shown


def test_no_link_no_override_means_free_sends():
    result = run("1f1b", boundary_bytes=1e6)
    assert result.send_time == 0.0
    assert result.send_seconds is None and result.wire_seconds is None


def test_slower_link_more_bubble():
    slow = run("1f1b", stages=8, microbatches=16, forward_seconds=0.001,
               boundary_bytes=67_108_864.0, link_bandwidth=25e9)
    fast = run("1f1b", stages=8, microbatches=16, forward_seconds=0.001,
               boundary_bytes=67_108_864.0, link_bandwidth=900e9)
    assert slow.bubble_fraction > fast.bubble_fraction
    assert slow.busy == fast.busy


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"boundary_bytes": -1.0}, "boundary_bytes"),
        ({"boundary_bytes": 2e12}, "boundary_bytes"),
        ({"boundary_bytes": float("nan")}, "boundary_bytes"),
        ({"link_bandwidth": 0.0, "forward_seconds": 1.0}, "link_bandwidth"),
        ({"link_bandwidth": 1e15, "forward_seconds": 1.0}, "link_bandwidth"),
        ({"link_latency": 1e-6}, "link_bandwidth"),  # latency without a link
        ({"link_latency": -1e-6, "link_bandwidth": 1e9}, "link_latency"),
        ({"link_latency": 2.0, "link_bandwidth": 1e9, "p2p": 0.0}, "link_latency"),
        ({"link_bandwidth": 1e9}, "forward_seconds"),  # cannot place the link's time
        ({"link_bandwidth": 1e9, "forward_seconds": 0.0}, "forward_seconds"),
        ({"link_bandwidth": 1e9, "forward_seconds": "1"}, "forward_seconds"),
        # 1 TB over 1 MB/s against a 1 ms forward: 1e9 times f, beyond what is drawn
        ({"boundary_bytes": 1e12, "link_bandwidth": 1e6, "forward_seconds": 1e-3},
         "link_bandwidth"),
    ],
)
def test_bad_wire_inputs_name_their_field(kwargs, field):
    with pytest.raises(LabInputError) as info:
        PipelineInput(**kwargs)
    assert info.value.field == field
    assert len(info.value.message) > 20
