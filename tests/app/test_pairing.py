"""Issue 36: a GPU is never timed on a vendor fabric it never ships with (EP04 drew H100s on
an NVL72 rack, which holds only Blackwell GPUs). Every lab that takes a GPU and a link
refuses such a pair with a 422 naming both controls, and says so by both on the page. A link
control left out follows the GPU instead (app.cluster_controls.LinkFollowsGpu): choosing only
a GPU is never an error."""

import html as html_lib
import re

import pytest

from app.charts.units import fmt_pct
from labs.hardware.links import clusters, links, ships_with
from tests.app.test_parser import api_messages, slot_messages

# (API name, page, the query pairing an H100 or an A100 with a fabric it never ships with,
#  the link control that names it)
CLASHES = [
    ("tp", "/episodes/tensor-parallel", {"tp": 8, "link": "nvl72"}, "link"),
    ("tp", "/episodes/tensor-parallel", {"tp": 8, "gpu": "b200", "intra_link": "nvlink-3"},
     "intra_link"),
    ("recipe", "/episodes/recipe-3d", {"gpu": "h100-sxm", "intra_link": "nvlink-5"},
     "intra_link"),
    ("plan", "/episodes/recipe-3d/plan", {"gpu": "b200", "intra_link": "nvlink-4"},
     "intra_link"),
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
    if name == "plan":  # the planner's fragment says a refusal in its place (plan_fragment)
        assert messages[link] in html_lib.unescape(html)
        return
    shown = slot_messages(html)
    assert shown.get(link) == shown.get("gpu") == messages[link], shown


def test_the_lessons_nvl72_state_runs_on_blackwell(client):
    body = client.get("/api/tp", params={"model": "gpt-3-175b", "tp": 32, "link": "nvl72",
                                         "gpu": "b200"}).json()
    assert body["gpu"] == "b200" and body["step_efficiency"] == pytest.approx(0.349, abs=0.01)
    html = client.get("/episodes/tensor-parallel").text
    # Step 4's note quotes the rack's efficiency at t = 32 from this state (B200), not an
    # H100's (39ebc5a moved its try links into the note's prose).
    note = re.sub(r"\s+", " ", html[html.index('id="step-4"'):html.index('id="step-5"')])
    assert "Blackwell" in note and f"at t = 32 at {fmt_pct(body['step_efficiency'])}" in note
    for ref in html.split('href="')[1:]:  # no step links an H100 to the rack
        url = ref.split('"', 1)[0]
        assert "link=nvl72" not in url or "gpu=b200" in url, url


def test_every_cluster_preset_pairs_its_gpu_with_its_own_fabric():
    for c in clusters().values():
        assert ships_with(c.gpu, c.intra), c.id
    fabrics = [k for k, x in links().items() if x.gpus]
    assert set(fabrics) == {"nvlink-3", "nvlink-4", "nvlink-4-h800", "nvlink-5", "nvl72",
                            "infinity-fabric-mi300x"}


# (API name, the query choosing only a GPU, the link field, the GPU's own fabric): each
# query's default link (NVLink 3 for the recipe and planner's A100, NVLink 4 for the TP lab's
# and the playground's H100) gives way to the chosen GPU's.
FOLLOWS = [
    ("recipe", {"gpu": "h100-sxm"}, "intra_link", "nvlink-4"),
    ("recipe", {"model": "mixtral-8x7b", "gpu": "h100-sxm", "nodes": 2, "tp": 2, "pp": 1,
                "dp": 8, "ep": 8, "tp_overlap": "all"}, "intra_link", "nvlink-4"),
    ("plan", {"gpu": "b200"}, "intra_link", "nvlink-5"),
    ("tp", {"gpu": "b200"}, "intra_link", "nvlink-5"),
    ("tp", {"gpu": "mi300x"}, "intra_link", "infinity-fabric-mi300x"),
    ("tp", {"gpu": "rtx-4090"}, "intra_link", "pcie-4"),
    ("playground", {"gpu": "a100-80gb"}, "intra_link", "nvlink-3"),
]


@pytest.mark.parametrize("name, query, field, fabric", FOLLOWS)
def test_choosing_only_a_gpu_runs_it_on_its_own_fabric(client, name, query, field, fabric):
    from app.cluster_controls import LinkFollowsGpu
    from app.routers import plan, playground_panels, recipe, tensor_parallel

    model = {"recipe": recipe.RecipeQuery, "plan": plan.PlanQuery,
             "tp": tensor_parallel.TPQuery, "playground": playground_panels.SharedControls}[name]
    assert issubclass(model, LinkFollowsGpu)
    assert getattr(model(**query), field) == fabric
    path = {"recipe": "/api/recipe", "plan": "/api/plan", "tp": "/api/tp",
            "playground": "/api/playground"}[name]
    response = client.get(path, params=query)
    assert response.status_code == 200, response.text[:300]


def test_the_link_select_offers_only_the_fabrics_the_gpu_ships_with(client):
    """The page's select marks each vendor fabric with its GPUs (lab.js hides the others and
    moves a selection that no longer fits), and renders the followed link as selected."""
    html = client.get("/episodes/recipe-3d", params={"gpu": "h100-sxm"}).text
    select = html.split('<select name="intra_link"', 1)[1].split("</select>", 1)[0]
    assert 'data-filter-by="gpu"' in select
    for key, link in links().items():
        if link.kind != "scale-up":
            continue
        option = select.split(f'<option value="{key}"', 1)[1].split(">", 1)[0]
        assert (f'data-when="{" ".join(link.gpus)}"' in option) == bool(link.gpus), option
    assert '<option value="nvlink-4" selected' in select
