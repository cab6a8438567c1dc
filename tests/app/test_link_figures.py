"""One physical link prints one figure on every page (round-19 cold reading X, finding 7).

EP02 printed NVLink 4's ring as "367 of 450 GB/s (81.6%)" (the preset's busbw) while EP03
printed 367.6 (an H100's own link, 450 x 367.6/450), and pages that round a rate to whole GB/s
would print 368. Each page that quotes NVLink 4's ring quotes the preset's figure, the 8 x H200
measurement it cites, from the engine (``labs.hardware.links``), and never another rounding.
"""

import re

import pytest

from labs.hardware.links import get_link
from tests.app.test_zero_routes import visible_text

NVLINK = get_link("nvlink-4").ring_busbw / 1e9  # 367.6
PAGES = (
    "/episodes/data-parallel",
    "/episodes/zero",
    "/episodes/tensor-parallel",
    "/episodes/context-parallel",
    "/episodes/experts",
    "/episodes/recipe-3d",
    "/episodes/rl-placement",
    "/episodes/playground/cheatsheet",
)
# Other tellings of the same ring: the old preset's 367, a whole-GB/s rounding's 368, and
# their shares of the 450 GB/s link.
OTHER = re.compile(r"(?<![\d.,])(367|368)(?: GB/s| of 450)|\(81\.6%\)|\b0\.8169?\b")


@pytest.mark.parametrize("path", PAGES)
def test_nvlink_4s_ring_is_one_figure(client, path):
    text = visible_text(client.get(path).text)
    assert f"{NVLINK:g} GB/s" in text or f"{NVLINK:g} of" in text, path
    others = [text[max(0, m.start() - 60) : m.end() + 20] for m in OTHER.finditer(text)]
    assert not others, others


def test_ep02_says_where_the_assumed_share_comes_from(client):
    """The PCIe line's 0.82 is NVLink 4's measured 81.7%, rounded, stated beside it: the drill
    dp-allreduce-pcie's "82% of the link" is the engine's factor, not a hidden 0.817."""
    text = visible_text(client.get("/episodes/data-parallel").text)
    assert "ring: 367.6 of 450 GB/s (81.7%, measured on 8 H200s)" in text
    assert (
        "PCIe 4.0: 26.24 of 32 GB/s, 0.82 of it (assumed: no published measurement, so "
        "the lab takes NVLink's 81.7%, rounded to 0.82"
    ) in text
