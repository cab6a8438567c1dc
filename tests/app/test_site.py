"""The home page, assets (offline, compressed, cacheable) and the charts' validity."""

import gzip
import re

import plotly.graph_objects as go
import pytest

from app.charts.memory import memory_figure
from app.episodes import EPISODES
from app.routers.memory import MemoryQuery, run
from app.templating import spelled


def test_home_lists_every_episode_with_ep01_live(client):
    html = client.get("/").text
    assert html.count('class="episode ') == len(EPISODES)
    assert f"{spelled(len(EPISODES)).capitalize()} short episodes" in html
    assert (spelled(10), spelled(11), spelled(21)) == ("ten", "eleven", "21")
    assert re.search(r'<a href="/episodes/memory"><strong>The memory ledger', html)
    assert html.count("coming</span>") <= len(EPISODES) - 1


def test_pages_load_nothing_from_another_host(client):
    for url in ("/", "/episodes/memory", "/embed/memory"):
        html = re.sub(r"<textarea.*?</textarea>", "", client.get(url).text, flags=re.S)
        for ref in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert not re.match(r"(https?:)?//", ref), f"{url} loads {ref}"


@pytest.mark.parametrize("name", ["vendor/htmx.min.js", "vendor/plotly.min.js", "js/lab.js",
                                  "css/lab.css"])
def test_assets_are_served_compressed_and_cacheable(client, name):
    html = client.get("/episodes/memory").text
    url = re.search(rf'"(/static/{re.escape(name)}\?v=[0-9a-f]+)"', html).group(1)
    response = client.get(url, headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert "immutable" in response.headers["cache-control"]
    again = client.get(url, headers={"If-None-Match": response.headers["etag"]})
    assert again.status_code == 304


def test_plotly_bundle_is_the_cartesian_one(client):
    raw = client.get("/static/vendor/plotly.min.js", headers={"Accept-Encoding": "identity"})
    assert 1_000_000 < len(raw.content) < 2_000_000  # the full bundle is 4.8 MB
    assert len(gzip.compress(raw.content)) < 700_000


def test_unknown_asset_is_404(client):
    assert client.get("/static/../pyproject.toml").status_code == 404
    assert client.get("/static/vendor/nothing.js").status_code == 404


@pytest.mark.parametrize("query", [
    {}, {"mode": "infer"}, {"model": "deepseek-v3", "ep": 8, "dp": 8, "zero": 3},
    {"offload": True, "zero": 1, "dp": 8},
])
def test_memory_figure_is_valid_plotly(query):
    fig = memory_figure(run(MemoryQuery(**query)))
    go.Figure({"data": fig["data"], "layout": fig["layout"]})  # raises on an invalid property
