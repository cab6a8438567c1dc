"""Fix E: four small errors an expert reading found.

1. EP02 step 1 bounded the PCIe busBW's error with a Sapphire Rapids host's socket link, but
   that host is PCIe 5.0, where the H100 PCIe runs at Gen5, not at the Gen4 the preset times.
   The bound is now a PCIe 4.0 host's (AMD Zen 3: NCCL's AMD_ZEN34_BW)."""

import pytest

from app.routers.data_parallel import facts as dp_facts
from app.routers.data_parallel import socket_bound
from labs.hardware.links import get_link
from labs.hardware.nccl_constants import SOCKET_LINK
from tests.app.test_round22_coldP import _step
from tests.app.test_zero_routes import visible_text


def test_ep02_pcie_bound_is_a_pcie_4_hosts_socket_link(client):
    one = visible_text(_step(client.get("/episodes/data-parallel").text, 1))
    busbw, zen = get_link("pcie-4").ring_busbw / 1e9, SOCKET_LINK["zen3-4"] / 1e9
    assert f"prices that link at {zen:g} GB/s on an AMD Zen 3 host, a PCIe 4.0 host" in one, one
    assert f"by at least {busbw:.2f} ÷ {zen:g} = {busbw / zen:.2f}×" in one
    # Sapphire Rapids no longer bounds it: the page says the card runs at Gen5 there.
    srp = SOCKET_LINK["sapphire-rapids"] / 1e9
    assert f"÷ {srp:g} =" not in one
    assert "is PCIe 5.0: the card runs at Gen5 there" in one
    # Step 2's note nets the same host's link.
    assert socket_bound(dp_facts()["pcie8"]["api"])["rate"] == SOCKET_LINK["zen3-4"]
    two = visible_text(_step(client.get("/episodes/data-parallel").text, 2))
    assert f"with a Zen 3 host's socket link, {zen:g} GB/s, alone" in two


def test_ep01_step_6_names_deepseeks_e5m6_output_projection_input_and_bounds_it(client):
    """2. EP01 step 6's note kept all 14 bytes of saved matmul inputs in FP8; DeepSeek-V3
    sec 3.3.3 keeps the output projection's in E5M6 (1.5 B + its 1x128 scale). The note names
    the exception and computes the figure it gives from the same terms."""
    from app.charts.units import fmt_bytes
    from app.routers.memory import facts

    f = facts()
    fa, acts = f["fp8_acts"], f["deepseek_fp8"]["api"]["breakdown"]["activations"]
    assert (fa["out_proj"], fa["e5m6"]) == (2, 1.5 + 4 / 128)
    shape = fa["tokens"] * fa["hidden"] * fa["layers"]
    by_hand = 34 - 12 * (1 - (1 + 4 / 128) / 2) - 2 * (1 - (1.5 + 4 / 128) / 2)
    assert fa["finer"] == pytest.approx(by_hand)
    assert fa["finer_bytes"] == pytest.approx(by_hand * shape)
    assert fmt_bytes(fa["finer_bytes"]) == "49.6 GB" and fmt_bytes(acts) == "48.7 GB"
    note = " ".join(visible_text(_step(client.get("/episodes/memory").text, 6)).split())
    assert ("DeepSeek-V3 keeps the output projection's finer, in "
            "E5M6 (§3.3.3), 1.5 + 4/128 = 1.53 B") in note, note
    assert (f"B: {fa['coefficient']:.1f} + 2× (1.53 − 1.03) ÷ 2 = {by_hand:.1f} bytes, "
            f"{fmt_bytes(by_hand * shape)}: the lab errs low") in note, note
