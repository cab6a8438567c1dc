"""The home page, assets (offline, compressed, cacheable) and the charts' validity."""

import json
import re
from pathlib import Path

import brotli
import pytest

from app import assets
from app.assets import get_asset
from app.charts.memory import memory_figure
from app.episodes import EPISODES
from app.routers.memory import MemoryQuery, run
from app.templating import spelled
from tests.conftest import valid_plotly

ROOT = Path(__file__).resolve().parents[2]


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


def test_plotly_bundle_is_the_partial_one(client):
    raw = client.get("/static/vendor/plotly.min.js", headers={"Accept-Encoding": "identity"})
    traces = json.loads((ROOT / "static/vendor/plotly-bundle.json").read_text())["traces"]
    assert raw.content.startswith(b"/*! plotly.js v")
    assert f"partial bundle: {', '.join(traces)}.".encode() in raw.content[:300]
    assert 500_000 < len(raw.content) < 1_100_000  # the cartesian bundle is 1.5 MB
    br = client.get("/static/vendor/plotly.min.js", headers={"Accept-Encoding": "br"})
    assert br.headers["content-encoding"] == "br"
    assert br.content == raw.content  # httpx decodes brotli (the brotli package)


@pytest.mark.parametrize("name", ["vendor/plotly.min.js", "vendor/htmx.min.js", "js/lab.js",
                                  "css/lab.css", "vendor/swagger-ui-bundle.js"])
def test_brotli_beside_gzip_for_static_assets(client, name):
    url = f"/static/{name}?v={get_asset(name).digest}"
    plain = client.get(url, headers={"Accept-Encoding": "identity"})
    with client.stream("GET", url, headers={"Accept-Encoding": "gzip, deflate, br, zstd"}) as r:
        assert r.headers["content-encoding"] == "br"
        assert "accept-encoding" in r.headers["vary"].lower()
        packed = b"".join(r.iter_raw())
    assert brotli.decompress(packed) == plain.content
    assert len(packed) < len(get_asset(name).gzipped)
    gz = client.get(url, headers={"Accept-Encoding": "gzip, br;q=0"})
    assert gz.headers["content-encoding"] == "gzip"


def test_a_stale_brotli_file_beside_an_asset_is_not_served(tmp_path):
    path = tmp_path / "a.js"
    path.write_bytes(b"var a = 1;" * 100)
    (tmp_path / "a.js.br").write_bytes(brotli.compress(b"var a = 2;"))
    assert brotli.decompress(assets._brotli(path, path.read_bytes())) == path.read_bytes()
    (tmp_path / "a.js.br").write_bytes(b"not brotli")
    assert brotli.decompress(assets._brotli(path, path.read_bytes())) == path.read_bytes()


def test_the_build_serves_its_own_brotli_file():
    path = assets.ASSETS["vendor/plotly.min.js"]
    beside = path.with_name(path.name + ".br")
    assert beside.is_file(), "static/vendor/build.mjs writes it: run make assets"
    assert get_asset("vendor/plotly.min.js").brotli == beside.read_bytes()


def test_unknown_asset_is_404(client):
    assert client.get("/static/../pyproject.toml").status_code == 404
    assert client.get("/static/vendor/nothing.js").status_code == 404


@pytest.mark.parametrize("query", [
    {}, {"mode": "infer"}, {"model": "deepseek-v3", "ep": 8, "dp": 8, "zero": 3},
    {"offload": True, "zero": 1, "dp": 8},
])
def test_memory_figure_is_valid_plotly(query):
    fig = memory_figure(run(MemoryQuery(**query)))
    valid_plotly(fig)  # raises on an invalid property
