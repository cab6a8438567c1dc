"""/docs and /redoc work without a network: every script, style sheet and font they name is
served by the app itself (FastAPI's defaults load them from public CDNs)."""

import re

import pytest

REFERENCE = re.compile(r'(?:src|href)="([^"]*)"')


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_docs_pages_reference_no_other_host(client, path):
    response = client.get(path)
    assert response.status_code == 200
    html = response.text
    refs = REFERENCE.findall(html)
    assert refs, "the page loads its viewer from somewhere"
    for ref in refs:
        assert ref.startswith("/") and not ref.startswith("//"), f"{path} names {ref}"
        assert client.get(ref).status_code == 200, ref
    assert "http://" not in html and "https://" not in html
    assert "<script>" not in html, "start-up code lives in static/js/docs.js (no inline script)"


@pytest.mark.parametrize(
    ("path", "bundle"),
    [("/docs", "/static/vendor/swagger-ui-bundle.js"),
     ("/redoc", "/static/vendor/redoc.standalone.js")],
)
def test_viewer_bundle_and_openapi_url_come_from_the_app(client, path, bundle):
    html = client.get(path).text
    assert f'src="{bundle}?v=' in html
    assert 'data-openapi-url="/openapi.json"' in html
    assert client.get("/openapi.json").json()["paths"]


def test_docs_assets_are_gzipped_once_and_cached_by_hash(client):
    html = client.get("/docs").text
    url = re.search(r'src="(/static/vendor/swagger-ui-bundle\.js\?v=[0-9a-f]+)"', html).group(1)
    response = client.get(url, headers={"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    assert "immutable" in response.headers["cache-control"]
    assert b"SwaggerUIBundle" in response.content  # httpx decodes the gzip body


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_content_security_policy_keeps_the_browser_on_this_origin(client, path):
    policy = client.get(path).headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    for name in ("default-src", "script-src", "img-src", "font-src", "connect-src"):
        sources = directives[name].split()
        assert "'self'" in sources, name
        assert not [s for s in sources if "." in s or s in ("*", "https:", "http:")], name
    assert "'unsafe-inline'" not in directives["script-src"]
    if path == "/docs":  # Swagger UI styles through the DOM; Redoc needs inline <style>
        assert directives["style-src"] == "'self'"
