"""Headers on every route of every registered lab (tests/app/registry_routes.py): CSP with no
third-party origin and no inline script or style, framing refused except embeds, nosniff,
Referrer-Policy, Vary, Cache-Control, HEAD wherever GET, and gzip;q=0 honoured."""

import re

import pytest

from app.labkit import DRILLS
from app.security import accepted_codings
from tests.app.registry_routes import ALL, HTML, sweep

DRILL_QUERY = {"drill": {"answer": "1"}, "drill-fragment": {"answer": "1"},
               "drill-api": {"answer": "1"}}


def drill_query(route) -> dict | None:
    """A drill's try: the number 1, or a decide drill's first choice."""
    query = DRILL_QUERY.get(route.kind)
    drill = DRILLS.get(route.path.rsplit("/", 1)[-1]) if query else None
    if drill and drill[1].kind == "decide":
        return {"answer": drill[1].choices[0][0]}
    return query


def get(client, route, method="GET", headers=None):
    return client.request(method, route.path, params=drill_query(route),
                          headers={**(route.htmx or {}), **(headers or {})})


def directives(csp: str) -> dict[str, list[str]]:
    out = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def test_html_has_a_strict_policy(client):
    def check(route):
        response = get(client, route)
        assert response.status_code == 200, response.text[:200]
        assert response.headers["content-type"].startswith("text/html")
        policy = directives(response.headers["content-security-policy"])
        scripts = policy.get("script-src", policy.get("default-src"))
        assert scripts == ["'self'"], scripts
        for name, sources in policy.items():
            for source in sources:
                assert not re.match(r"^(https?:)?//|^https?:", source), (name, source)
                assert source != "*" or name == "frame-ancestors", (name, source)
        framing = policy["frame-ancestors"]
        if route.path.startswith("/embed/"):
            assert framing == ["*"]  # EMBED_ALLOWED_ORIGINS default
            assert "x-frame-options" not in response.headers
        else:
            assert framing == ["'none'"]
            assert response.headers["x-frame-options"] == "DENY"

    sweep(HTML, check)


OWN_MARKUP = [r for r in HTML if r.path not in ("/docs", "/redoc")]


def test_no_inline_script_runs(client):
    """Every <script> loads a file of this site or carries data (type application/json)."""
    def check(route):
        text = get(client, route).text
        # Embed codes inside <textarea> are text for the reader to copy, not this page's
        # script.
        text = re.sub(r"<textarea[^>]*>.*?</textarea>", "", text, flags=re.S)
        for tag, body in re.findall(r"(<script\b[^>]*>)(.*?)</script>", text, flags=re.S):
            if 'type="application/json"' in tag:
                continue
            assert re.search(r'\ssrc="/', tag) and not body.strip(), tag
        assert not re.search(r"\son[a-z]+=", text), "inline event handler"

    sweep(OWN_MARKUP, check)


def test_no_inline_style_is_needed(client):
    """style-src is 'self' alone: no style attribute or <style> element in the markup (a
    computed colour or size rides in a data attribute that lab.js sets through CSSOM)."""
    def check(route):
        response = get(client, route)
        policy = directives(response.headers["content-security-policy"])
        assert policy["style-src"] == ["'self'"], policy["style-src"]
        text = re.sub(r"<textarea[^>]*>.*?</textarea>", "", response.text, flags=re.S)
        assert not re.search(r"<[a-z][^>]*\sstyle=", text), re.search(
            r"<[^>]*\sstyle=[^>]*>", text)
        assert "<style" not in text

    sweep(OWN_MARKUP, check)


def test_every_answer_has_the_safe_headers(client):
    def check(route):
        response = get(client, route)
        assert response.status_code < 400, response.text[:200]
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "strict-origin-when-cross-origin"
        assert response.headers["cache-control"]
        vary = {v.strip().lower() for v in response.headers["vary"].split(",")}
        assert "accept-encoding" in vary
        if route.kind in ("page", "fragment", "bench", "embed", "embed-fragment", "lazy",
                          "lazy-page", "drill", "drill-fragment"):
            assert {"hx-request", "hx-target", "hx-history-restore-request"} <= vary

    sweep(ALL, check)


def test_head_wherever_get(client):
    def check(route):
        got, head = get(client, route), get(client, route, "HEAD")
        assert head.status_code == got.status_code
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]

    sweep(ALL, check)


def test_gzip_refused_gets_identity(client):
    def check(route):
        plain = get(client, route, headers={"Accept-Encoding": "gzip;q=0, identity"})
        assert "content-encoding" not in plain.headers
        assert plain.content[:2] != b"\x1f\x8b"
        zipped = get(client, route, headers={"Accept-Encoding": "gzip"})
        if len(zipped.content) >= 1024:
            assert zipped.headers.get("content-encoding") == "gzip"

    sweep([r for r in ALL if r.kind in ("page", "api", "embed")]
          + [r for r in ALL if r.path in ("/openapi.json", "/")], check)


def test_static_assets_honour_gzip_q0(client):
    html = client.get("/").text
    src = re.search(r'src="(/static/js/lab\.js\?v=[0-9a-f]+)"', html).group(1)
    refused = client.get(src, headers={"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in refused.headers
    accepted = client.get(src, headers={"Accept-Encoding": "gzip"})
    assert accepted.headers["content-encoding"] == "gzip"


@pytest.mark.parametrize(("header", "codings"), [
    ("gzip;q=0", ""), ("gzip;q=0, identity", "identity"), ("br, gzip;q=0.5", "br, gzip"),
    ("GZIP;Q=0.000", ""), ("*", "*, gzip"), ("gzip;q=0, *", "*"), ("gzip; q=junk", ""),
])
def test_accepted_codings(header, codings):
    assert accepted_codings(header) == codings


def test_api_answers_are_cacheable_and_errors_are_not(client):
    assert client.get("/api/models").headers["cache-control"] == "public, max-age=300"
    assert client.get("/api/memory?dp=-1").headers["cache-control"] == "no-store"
    assert client.get("/").headers["cache-control"] == "no-cache"
