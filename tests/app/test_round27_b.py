"""Round-27 cold reading B (EP10, the playground, EP07, the cheat sheet, EP09, EP08): each
finding, pinned on the behaviour it fixes."""

import re
from html import unescape

import pytest

from app.labkit.view import VIEWS


def _step(client, name: str, n: int, params: dict | None = None) -> str:
    html = client.get(VIEWS[name].episode.path, params=params or {}).text
    start = html.index(f'<section class="step" id="step-{n}"')
    body = html[start:html.index("</section>", start)]
    body = re.sub(r'<span class="term-tip".*?</span>', "", body)
    text = unescape(re.sub(r"<[^>]+>", " ", body))
    return re.sub(r"\s+", " ", text)


def test_finding_1_ep10_step_5_keeps_fp8_to_the_linear_gemms(client):
    """DeepSeek-V3 sec 3.3.1 keeps the embedding, the output head, the gating and attention
    in BF16: only the linear layers' GEMMs take E4M3 inputs."""
    text = _step(client, "precision", 5)
    assert "every GEMM's inputs" not in text
    assert "linear layers' GEMM inputs" in text
    assert "output head" in text and "attention stay BF16" in text


def test_finding_2_current_nccl_takes_all_three_changes():
    """Current NCCL: 2 x nodes crossing steps at 14 µs (plus the fabric's), x1.4. An 8-GPU ring
    over 2 nodes: (8.4 + 10 x 3.4 + 4 x 14) x 1.4 = 138 µs; 128 GPUs over 16 nodes 1.70 ms."""
    from labs.hardware.nccl import current_ring_latency

    now = current_ring_latency(8, 2)
    assert (now.intra_steps, now.inter_steps) == (10, 4)
    assert now.micros == pytest.approx((8.4 + 10 * 3.4 + 4 * 14) * 1.4)
    assert current_ring_latency(128, 16).micros == pytest.approx(
        (8.4 + 222 * 3.4 + 32 * 14) * 1.4)


def test_finding_2_the_playground_says_the_lab_errs_fast_against_current_nccl(client):
    text = _step(client, "playground", 5)
    assert "(8.4 + 10 × 3.4 + 4 × 14) µs × 1.4 ≥ 0.138 ms" in text
    assert "× 1.9 = 0.13 ms" in text
    assert "the lab errs ≥ 0.008 ms fast, 0.016 ms (0.2%) of the forward's wait" in text
    assert "errs slow" not in text


def test_finding_2_ep07_step_7_works_current_nccl_with_its_three_changes(client):
    text = _step(client, "moe", 7)
    assert "1.4 × (8.4 + 222 × 3.4 + 32 × (14 + 2 × the fabric's)) µs ≥ 1.70 ms" in text
    assert "1.9 × (8.4 + 224 × 3.4 + 30 × 9.6) µs = 2.01 ms" in text
    assert "errs ≤ 0.31 ms slow" in text


def test_finding_8_playground_step_5_sums_redo_from_the_printed_digits(client):
    """234.9 MB ÷ 48 GB/s = 4.89 ms (235 ÷ 48 is 4.90), and the backward's exposed time at
    3 places, as the sum after it: (5.023 − 0.319) + (5.023 − 1.491) = 8.236."""
    text = _step(client, "playground", 5)
    m = re.search(r"takes ([\d.]+) MB ÷ (\d+) GB/s = ([\d.]+) ms", text)
    assert f"{float(m[1]) / float(m[2]):.2f}" == m[3]
    m = re.search(r"\(([\d.]+) − ([\d.]+)\) \+ \(([\d.]+) − ([\d.]+)\) = ([\d.]+) ms", text)
    a, b, c, d, total = (float(x) for x in m.groups())
    assert f"{a - b + c - d:.3f}" == m[5]


def test_finding_9_playground_step_5_states_the_width_and_the_forward(client):
    text = _step(client, "playground", 5)
    assert "(8,192 tokens × 8,192 wide × 2 B = 134.2 MB)" in text  # round 28, #4
    m = re.search(r"([\d.]+) ms of forward compute \(([\d.]+) ms less the backward's "
                  r"([\d.]+)\)", text)
    assert f"{float(m[2]) - float(m[3]):.2f}" == m[1]


def test_finding_3_ep10_step_9_prints_the_70bs_times_behind_g_r_c_e(client):
    """g, r, c and e of the 70B redo from times the why prints: 5,418 → 3,069 ms of an 8,001
    ms BF16 step, casts and scaling 276 + 92 ms, exposed traffic + 276 ms; and one
    micro-batch's TP collectives to one place, so 109.6 − 99.4 = 10 (110 − 99.4 gave 10.6)."""
    text = _step(client, "precision", 9)
    m = re.search(r"fall from ([\d,]+) to ([\d,]+) ms of the ([\d,]+) ms BF16 step \(g = "
                  r"([\d.]+)% , r = ([\d.]+)\); the casts and scaling add ([\d,]+) \+ ([\d,]+) ms "
                  r"\(c = ([\d.]+)\); .*? grow by ([\d,]+) ms \(e = ([\d.]+)\)", text)
    bf, f8, step, g, r, casts, scale, c, grown, e = (float(x.replace(",", ""))
                                                      for x in m.groups())
    assert f"{100 * bf / step:.1f}" == m[4]
    assert f"{bf / f8:.3f}" == m[5]
    assert f"{(casts + scale) / step:.3f}" == m[8]
    assert f"{grown / step:.3f}" == m[10]
    m = re.search(r"TP collectives from ([\d.]+) to ([\d.]+) ms: e = \(([\d,]+) \+ ([\d,]+)\)",
                  text)
    assert f"{float(m[2]) - float(m[1]):.0f}" == m[4]


def test_finding_4_the_cheat_sheets_r_is_one_figure_at_three_places(client):
    """r is the timed GEMMs' BF16 ÷ FP8 time (1.765, EP10 step 9's); its full-wave bound is
    printed from digits that redo to it (1,979 × 70.9% ÷ (989 × 80.3%) gave 1.767)."""
    html = client.get("/episodes/playground/cheatsheet").text
    html = re.sub(r'<span class="term-tip".*?</span>\s*</span>', "", html, flags=re.S)
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))
    m = re.search(r"r = ([\d.]+) the linear GEMMs' BF16 time ÷ their FP8 time: at full waves "
                  r"([\d,.]+) TFLOP/s × ([\d.]+)% MAMF ÷ \(BF16's ([\d,.]+) × ([\d.]+)%\) = "
                  r"([\d.]+)", text)
    assert m, text[text.find("What FP8 buys"):][:600]
    p8, e8, p16, e16 = (float(x.replace(",", "")) for x in m.group(2, 3, 4, 5))
    assert f"{p8 * e8 / (p16 * e16):.3f}" == m[6]
    assert len(m[1].split(".")[1]) == 3


def test_finding_5_ep09_step_3s_reserve_redoes_from_its_digits(client):
    """0.7 × 84.9 = 59.43, not the printed 59.5: the process's memory and the sums at 2 places."""
    text = _step(client, "placement", 3)
    m = re.search(r"([\d.]+) × ([\d.]+) GB = ([\d.]+) GB\. R1's FP8 release, ([\d.]+) GB a GPU "
                  r"\(slime loads it\), leaves at most ([\d.]+) GB − ([\d.]+) GB = ([\d.]+) GB",
                  text)
    assert m, text
    assert f"{float(m[1]) * float(m[2]):.2f}" == m[3] == m[5]
    assert f"{float(m[5]) - float(m[6]):.2f}" == m[7]
    assert f"(1 − {m[1]}) × {m[2]} GB = {(1 - float(m[1])) * float(m[2]):.2f} GB" in text


def test_finding_7_ep09_step_6_prints_the_training_step_once(client):
    """The training step was 10.20 s, then 10.195 s two lines on: one figure, one rounding."""
    text = _step(client, "placement", 6)
    m = re.search(r"-token sample: ([\d.]+) s,", text)
    assert f"times {m[1]} s" in text and "10.20 s" not in text


def test_finding_8_ep07_step_11s_rates_redo_from_the_printed_bytes_and_times(client):
    """462 MB ÷ 8.58 ms is 53.85, not the printed B = 53.89: the bytes and times now print to
    the places at which they give B, as f* uses it."""
    text = _step(client, "moe", 11)
    found = re.findall(r"receives ([\d.]+) MB in ([\d.]+) ms(?: \(step 3\), so|:) B = ([\d.]+) "
                       r"GB/s", text)
    assert len(found) == 2, text
    for mb, ms, b in found:
        assert f"{float(mb) / float(ms):.2f}" == b


def test_finding_10_ep08_step_5_says_dualpipevs_step_is_read_off_the_chart(client):
    """DualPipeV's 99.5 F step is the simulated schedule's: the note says so and where on
    the chart it is read (task fixR #2 works it too: test_fixR_round29)."""
    text = _step(client, "pipeline", 5)
    assert "come from (simulated)" in text
    assert re.search(r"= [\d.]+ F, the chart's last bar;", text)


def test_finding_6_the_cheat_sheets_glm_4_7_workspace_names_each_mlp_term(client):
    """GLM-4.7's serving line (DP attention, no DeepEP) summed the shared expert on the
    gathered 8,192 tokens and the routed copies without a word for either."""
    lines = client.get("/api/cheatsheet", params={"model": "glm-4.7"}).json()["lines"]
    line = next(x for x in lines if x["key"] == "serving")
    meaning = next(t for t in line["terms"] if t["symbol"] == "workspace")["meaning"]
    assert "the shared expert ÷ 32 GPUs on the engine's gathered 8,192 tokens (no DeepEP)" \
        in meaning
    assert "the routed experts' 4 × 2,048 × 8 ÷ 32 = 2,048 copies" in meaning
    assert "+ 8,192 × 3,072 ÷ 32 + 2,048 × 3,072) × 2 B" in meaning
    assert "the free memory CUDA reports at engine start" in meaning
