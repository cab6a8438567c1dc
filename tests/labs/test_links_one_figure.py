"""One physical link, one achieved figure (round-19 cold reading X, finding 7; issue 36's first
rule, every quoted number derivable from what the page states).

NVLink 4's ring was told three ways: the nvlink-4 preset's busbw 367 GB/s (EP02, EP04), an
H100's own scale-up link at 450 x 367.6/450 = 367.6 (EP03, EP09), and the presets with "0.82
assumed" at 0.82 x their bandwidth while the engine's constant was 0.8169. Now the nvlink-4
preset carries the measurement it cites (367.6 GB/s), the unmeasured presets carry no busbw and
take ``UNMEASURED_SCALE_UP`` (0.82, that measurement's fraction rounded as the pages state it),
and a GPU's own node (``gpu_cluster``) takes its link preset's figures.
"""

import re

import pytest

from labs.hardware.gpus import GPUSpec, get_gpu, gpus
from labs.hardware.links import (
    UNMEASURED_SCALE_OUT,
    UNMEASURED_SCALE_UP,
    get_link,
    gpu_cluster,
    links,
    peer_links,
)


def test_nvlink_4_carries_the_measurement_it_cites():
    nv = get_link("nvlink-4")
    assert nv.ring_busbw == 367.6e9
    assert "367.6 GB/s" in nv.achieved_source
    # The unmeasured fraction is that measurement's, rounded to the two places pages print.
    assert UNMEASURED_SCALE_UP == round(nv.ring_busbw / nv.bandwidth, 2) == 0.82
    ndr = get_link("ib-ndr")
    assert ndr.ring_busbw / ndr.bandwidth == UNMEASURED_SCALE_OUT


@pytest.mark.parametrize(
    "link_id", [k for k, x in links().items() if re.search(r"\b0\.(82|96) of", x.achieved_source)]
)
def test_an_assumed_link_derives_from_the_one_constant_its_note_states(link_id):
    """'0.82 of 32 GB/s = 26.24 GB/s assumed': the preset keeps no busbw of its own, and the
    engine's figure is the note's arithmetic with the constant the note names."""
    link = get_link(link_id)
    assert link.busbw is None
    share = UNMEASURED_SCALE_UP if link.kind == "scale-up" else UNMEASURED_SCALE_OUT
    stated = re.search(r"\b(0\.\d+) of ([\d.]+) GB/s = ([\d.]+) GB/s", link.achieved_source)
    assert stated, link.achieved_source
    fraction, datasheet, achieved = (float(x) for x in stated.groups())
    assert fraction == share and datasheet * 1e9 == link.bandwidth
    assert link.ring_busbw == pytest.approx(achieved * 1e9, rel=1e-12)
    assert link.ring_busbw == pytest.approx(fraction * datasheet * 1e9, rel=1e-12)


@pytest.mark.parametrize("gpu_id", list(gpus()))
def test_a_gpus_own_scale_up_link_is_the_preset_it_ships_with(gpu_id):
    """EP03, EP09 and EP11 build a GPU's node from its datasheet; its link achieves what the
    preset of that link does in EP02 and EP04 (the H100's 367.6, the A100's 235, not 0.82 x
    300 = 246)."""
    gpu = get_gpu(gpu_id)
    own, preset = gpu_cluster(gpu).intra, get_link(peer_links(gpu)[0])
    assert own.bandwidth == preset.bandwidth
    assert own.ring_busbw == preset.ring_busbw
    assert own.send_bandwidth == preset.send_bandwidth
    assert own.hw == preset.hw
    assert preset.name in own.achieved_note


def test_a_gpu_no_preset_describes_keeps_the_constant():
    h100 = get_gpu("h100-sxm")
    fields = {k: getattr(h100, k) for k in h100.__dataclass_fields__}
    custom = GPUSpec(**{**fields, "id": "custom", "name": "custom", "scale_up_bandwidth": 100e9})
    assert gpu_cluster(custom).intra.ring_busbw == pytest.approx(0.82 * 100e9, rel=1e-12)
