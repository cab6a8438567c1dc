"""Fix E: four small errors an expert reading found.

1. EP02 step 1 bounded the PCIe busBW's error with a Sapphire Rapids host's socket link, but
   that host is PCIe 5.0, where the H100 PCIe runs at Gen5, not at the Gen4 the preset times.
   The bound is now a PCIe 4.0 host's (AMD Zen 3: NCCL's AMD_ZEN34_BW)."""

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
