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
