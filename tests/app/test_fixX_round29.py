"""Fix X: round-29 cold reading B's findings on EP05 (pipeline) and EP10 (low precision)."""

import re

import pytest

from app.charts.units import fmt_bytes, fmt_ms, fmt_pct
from tests.app.test_round22_coldP import _step

EP05, EP10 = "/episodes/pipeline", "/episodes/low-precision"


def test_ep10_step_12_sets_the_copy_against_the_layer_ep05_quotes(client):
    """1. EP10 step 12 set a 70B layer's 2.23 ms copy against a 1.42 ms forward, the layer's
    GEMM FLOPs alone, where EP05 steps 4-5 quote the same layer from EP08's step model as
    1.582 ms of kernels + 0.768 ms of TP collectives; the copy engine runs beside both, so
    that forward hides the whole copy. The page now quotes the step model's window for the
    H100 (hidden, with 5% to spare) and asks the B200, whose faster forward over the same
    PCIe 5 hides only part of it."""
    from app.routers.pipeline_lesson import facts as pipeline_facts
    from app.routers.precision_lesson import facts

    f = facts()
    h100, b200 = f["offload70"]["api"]["offload"], f["offload_b200"]["api"]["offload"]
    ((_, kernels, comms),) = pipeline_facts()["v5_forward"].layers
    assert (h100["forward_kernels_s"], h100["forward_comms_s"]) == pytest.approx(
        (kernels, comms), rel=1e-12)
    assert h100["forward_s"] == pytest.approx(kernels + comms, rel=1e-12)
    assert h100["hidden"] and not b200["hidden"]
    assert b200["layer_bytes"] == h100["layer_bytes"]
    html = client.get(EP10).text
    section = html.split('id="step-12"')[1].split("</section>")[0]
    assert re.search(r'data-predict="precision-12" data-right="part"', section)
    twelve = _step(html, 12)
    ask = twelve.split("Predict")[1].split("?")[0]
    assert "on B200s" in ask and "the same PCIe 5" in ask
    assert (f"On the B200: {fmt_ms(b200['forward_kernels_s'])} of kernels + "
            f"{fmt_ms(b200['forward_comms_s'])} of TP collectives = "
            f"{fmt_ms(b200['forward_s'])}, against a {fmt_ms(b200['copy_s'])} copy") in twelve
    assert f"The forward hides {fmt_pct(b200['hidden_share'])}" in twelve
    spare = round(100 * (1 - h100["copy_s"] / h100["forward_s"]))
    assert (f"An H100's forward, {fmt_ms(kernels)} + {fmt_ms(comms)} = "
            f"{fmt_ms(h100['forward_s'])}, hides the whole {fmt_ms(h100['copy_s'])} copy, but "
            f"with only {spare}% to spare") in twelve
    # 21: the share offloaded below the break-even is said to be the largest tenth under it.
    half = f["offload70_half"]["api"]["offload"]
    assert half["share"] == pytest.approx(int(10 * b200["hidden_share"]) / 10)
    assert half["hidden"]
    assert (f"Offload {half['share']:.0%}, the largest tenth under it, and the copy fits: "
            f"{fmt_bytes(half['freed_bytes'])} freed") in twelve
    assert "1.42 ms" not in twelve


def _tips_before_the_guess(html: str, n: int) -> str:
    """The glossary tips step ``n`` shows before its guess: every term-tip of the step (drills
    and tips are never hidden) outside its why, which waits for the guess."""
    from html import unescape

    from tests.app.test_step_beats import why_block

    step = html.split(f'id="step-{n}"')[1].split("</section>")[0]
    step = step.replace(why_block(step), "")
    tips = re.findall(r'<span class="term-tip" role="tooltip">(.*?)</span></span>', step, re.S)
    return " ".join(re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", t))) for t in tips)


def test_ep05_steps_4_and_5_tips_do_not_answer_their_predicts(client):
    """2. Round-29 reading B, #3 and #5: the zero-bubble tip above step 5's predict ("ZB-H1
    idles… about a third of that") gave (p − 1)(F + I − W) against (p − 1)(F + I + W), "a third
    with equal passes"; the interleaved tip on step 4's derive drill, visible before "from 1
    chunk per rank to 2, the idle time… about halves", said "the warm-up is v times shorter"
    with the bubble's form. The zero-bubble entry now names ZB-H1 without its idle time, and
    step 4's why (after the guess) is the interleaved entry's first use, so the drill carries
    no tip."""
    html = client.get(EP05).text
    four, five = _tips_before_the_guess(html, 4), _tips_before_the_guess(html, 5)
    assert "Interleaved 1F1B" not in four
    for said in ("times shorter", "(p − 1)/(v·m + p − 1)", "halve"):
        assert said not in four, said
    assert "Zero bubble (ZB-H1)" in five
    for said in ("a third", "(F + I − W)", "(F + I + W)"):
        assert said not in five, said
    # The entry is whole on the glossary and in step 4's why.
    step4 = html.split('id="step-4"')[1].split("</section>")[0]
    assert 'id="term-interleaved"' in step4.split('<details class="why"')[1]
    assert "drill-pipeline-bubble" in step4.split('id="term-interleaved"')[1]
