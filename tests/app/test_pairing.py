"""Issue 36: a GPU is never timed on a vendor fabric it never ships with (EP04 drew H100s on
an NVL72 rack, which holds only Blackwell GPUs). Every lab that takes a GPU and a link
refuses such a pair with a 422 naming both controls, and says so by both on the page."""

import pytest

from labs.hardware.links import clusters, links, ships_with
from tests.app.test_parser import api_messages, slot_messages

# (API name, page, the query pairing an H100 or an A100 with a fabric it never ships with,
#  the link control that names it)
CLASHES = [
    ("tp", "/episodes/tensor-parallel", {"tp": 8, "link": "nvl72"}, "link"),
    ("tp", "/episodes/tensor-parallel", {"tp": 8, "gpu": "b200"}, "intra_link"),
    ("recipe", "/episodes/recipe-3d", {"gpu": "h100-sxm"}, "intra_link"),
    ("zero", "/episodes/zero", {"link": "nvlink-5"}, "link"),
    ("cp", "/episodes/context-parallel", {"cp": 4, "link": "nvl72"}, "link"),
    ("pipeline", "/episodes/pipeline", {"link": "nvlink-3"}, "link"),
]


@pytest.mark.parametrize("name, page, query, link", CLASHES)
def test_a_gpu_on_a_fabric_it_never_ships_with_is_a_422_naming_both(client, name, page,
                                                                     query, link):
    messages = api_messages(client, name, query)
    assert set(messages) == {link, "gpu"}, messages
    assert messages[link] == messages["gpu"] and "GPU and link do not match" in messages[link]
    html = client.get(page, params=query).text
    shown = slot_messages(html)
    assert shown.get(link) == shown.get("gpu") == messages[link], shown


def test_the_lessons_nvl72_state_runs_on_blackwell(client):
    body = client.get("/api/tp", params={"model": "gpt-3-175b", "tp": 32, "link": "nvl72",
                                         "gpu": "b200"}).json()
    assert body["gpu"] == "b200" and body["step_efficiency"] == pytest.approx(0.349, abs=0.01)
    html = client.get("/episodes/tensor-parallel").text
    assert "gpu=b200" in html and "link=nvl72" in html
    for ref in html.split('href="')[1:]:  # no step links an H100 to the rack
        url = ref.split('"', 1)[0]
        assert "link=nvl72" not in url or "gpu=b200" in url, url


def test_every_cluster_preset_pairs_its_gpu_with_its_own_fabric():
    for c in clusters().values():
        assert ships_with(c.gpu, c.intra), c.id
    fabrics = [k for k, x in links().items() if x.gpus]
    assert set(fabrics) == {"nvlink-3", "nvlink-4", "nvlink-4-h800", "nvlink-5", "nvl72",
                            "infinity-fabric-mi300x"}
