"""HTML and script in every parameter of every route of every registered lab (page, fragment,
embed, API, drills): the answer never carries them as markup. Plus forged Host and htmx
headers, and hostile path segments."""

import json

import pytest

from app.labkit import VIEWS
from tests.app.registry_routes import ALL, sweep

PAYLOADS = ('"><script>alert(1)</script>', "'><svg onload=alert(1)>",
            "</textarea><img src=x onerror=alert(1)>")
MARKUP = ("<script>alert", "<svg onload", "<img src=x", "onerror=alert(1)>")


def names_for(route) -> list[str]:
    extra = ["theme", "controls", "events", "nonsense<b>"]
    if route.kind.startswith("drill"):
        return ["answer", "attempt", *extra]
    if route.lab:
        return [*VIEWS[route.lab].query_model.model_fields, *extra]
    return extra


MARKUP_ROUTES = [r for r in ALL if r.path not in ("/docs", "/redoc", "/openapi.json")]


def problem(response) -> str | None:
    """Why an answer is not inert (None when it is): a 5xx, JSON that is not data or lacks
    nosniff, or HTML that carries a payload as markup."""
    if response.status_code >= 500:
        return f"status {response.status_code}"
    ctype = response.headers["content-type"]
    text = response.text
    if ctype.startswith("application/json"):
        json.loads(text)  # data, never a page; nosniff keeps browsers from guessing otherwise
        if response.headers.get("x-content-type-options") != "nosniff":
            return "JSON without nosniff"
        return None
    if not ctype.startswith("text/html"):
        return f"content-type {ctype}"
    marks = [mark for mark in MARKUP if mark in text]
    return f"markup {marks} in the answer" if marks else None


def assert_inert(response, where):
    found = problem(response)
    assert found is None, (where, found)


@pytest.mark.parametrize("route", MARKUP_ROUTES, ids=lambda r: r.id)
def test_markup_in_any_parameter_stays_text(client, route):
    """Each payload in each parameter the route reads (and a few it does not), one at a time:
    every answer inert. A whole page or embed (a full lesson rendered around the refusal, a
    quarter of a second each) takes one payload a parameter, the three in turn: the fragment
    it wraps takes every payload in every parameter here, and the page every payload in all
    its parameters at once (test_markup_in_every_parameter_at_once)."""
    failures, asked = [], 0
    names = names_for(route)
    whole = route.kind in ("page", "embed")
    for i, name in enumerate(names):
        for payload in [PAYLOADS[i % len(PAYLOADS)]] if whole else PAYLOADS:
            asked += 1
            response = client.get(route.path, params={name: payload}, headers=route.htmx or {})
            if (found := problem(response)) is not None:
                failures.append(f"{name}={payload!r}: {found}")
    assert not failures, (f"{route.id}: {len(failures)} of {asked} answers carry the "
                          "payload:\n" + "\n".join(failures))


@pytest.mark.parametrize("route", [r for r in ALL if r.lab and r.kind == "page"],
                         ids=lambda r: r.id)
def test_markup_in_every_parameter_at_once(client, route):
    names = names_for(route)
    for payload in PAYLOADS:
        response = client.get(route.path, params={n: payload for n in names})
        assert_inert(response, (route.id, payload))


# Starlette takes the Host header only when it is a valid authority (RFC 3986 reg-name:
# letters, digits and -._~!$&'()*+,;=), else the server's own name: a Host with <, > or " never
# reaches the page. This one passes and carries what HTML and JS must escape (' and &).
FORGED_HOST = "evil.example'&lt;b&gt;x"


def test_forged_host_is_written_escaped(client):
    """Without PUBLIC_URL the embed codes spell the request's origin: a forged Host arrives
    there as text, escaped in the HTML (and PUBLIC_URL removes it altogether:
    test_hosting.py). Every lab page and fragment writes it; no answer writes it raw."""
    from markupsafe import escape

    def check(route):
        response = client.get(route.path, headers={"Host": FORGED_HOST, **(route.htmx or {})})
        assert response.status_code == 200, response.status_code
        assert FORGED_HOST not in response.text, "written unescaped"
        if route.kind in ("page", "fragment"):
            assert f"http://{escape(FORGED_HOST)}/embed/" in response.text, "no embed code"

    sweep([r for r in ALL if r.kind in ("page", "fragment", "embed", "drill")], check)
    # A Host with markup is not taken: the page spells the server's name, inert.
    for route in (r for r in ALL if r.kind == "page"):
        response = client.get(route.path, headers={"Host": f'evil.example"{PAYLOADS[0]}'})
        assert_inert(response, route.id)
        assert "evil.example" not in response.text


def test_hostile_htmx_headers(client):
    def check(route):
        headers = {**route.htmx, "HX-Target": PAYLOADS[0], "HX-Current-URL": PAYLOADS[1]}
        assert_inert(client.get(route.path, headers=headers), route.id)

    sweep([r for r in ALL if r.htmx], check)


@pytest.mark.parametrize("lab", sorted(VIEWS))
def test_hostile_path_segments(client, lab):
    for payload in PAYLOADS:
        response = client.get(f"/embed/{lab}/{payload}")
        assert response.status_code == 404
        assert_inert(response, payload)
    response = client.get(f"/drills/{PAYLOADS[0]}")
    assert response.status_code == 404
    assert_inert(response, "drill")


# --- the rest of the hostile run of issue 20: methods, sizes, repeats -------------------------

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE")


def every_path() -> list[str]:
    """Every route the app has (path parameters filled with a name nothing has), and every
    concrete route of the registry."""
    import re

    from app.main import app as lab_app

    paths = {re.sub(r"\{[^}]+\}", "no-such-thing", r.path) for r in lab_app.routes
             if getattr(r, "path", None)}
    return sorted(paths | {r.path for r in ALL})


def test_every_method_on_every_route(client):
    def check(path):
        for method in METHODS:
            body = b'{"a": 1}' if method != "GET" else None
            response = client.request(method, path, content=body)
            assert response.status_code < 500, (method, response.text[:200])

    sweep(every_path(), check, name=str)


@pytest.mark.parametrize("route", [r for r in ALL if r.lab and r.kind in ("api", "page")],
                         ids=lambda r: r.id)
def test_ten_thousand_parameters_and_repeats(client, route):
    names = [*VIEWS[route.lab].query_model.model_fields][:3]
    query = "&".join([f"{i:x}=" for i in range(10_000)] +
                     [f"{n}=1&{n}=2" for n in names] + [f"{n}=" for n in names])
    response = client.get(f"{route.path}?{query}")
    assert response.status_code in (200, 422), response.text[:200]
    assert_inert(response, route.id)


def asgi_get(client, path: str, query: bytes) -> tuple[int, bytes]:
    """A GET straight into the app (a query longer than an HTTP client would send)."""
    from app.main import app as lab_app

    sent = []

    async def call():
        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        await lab_app({"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                       "method": "GET", "scheme": "http", "path": path,
                       "raw_path": path.encode(), "root_path": "", "query_string": query,
                       "headers": [(b"host", b"testserver")], "server": ("testserver", 80),
                       "client": ("127.0.0.1", 1)}, receive, send)

    client.portal.call(call)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize("value", [b"x" * 10_000_000, b"%00" * 1000, b"%ff%fe" * 500,
                                   b"1" * 5000, b"../../../etc/passwd", "\u202e".encode() * 100])
def test_large_and_odd_values(client, value):
    for path in ("/api/memory", "/episodes/pipeline", "/api/plan", "/api/cheatsheet"):
        status, body = asgi_get(client, path, b"seq_len=" + value + b"&model=" + value)
        assert status in (200, 422), (path, body[:200])
        assert b"<script>alert" not in body


@pytest.mark.parametrize("headers", [
    {"X-Forwarded-For": "1.2.3.4, <script>", "X-Forwarded-Proto": "javascript",
     "X-Forwarded-Host": "evil.example"},
    {"Host": "evil.example:99999"}, {"Host": "[::1]"}, {"Accept-Encoding": "gzip;q=nan, *;q=x"},
    {"If-None-Match": "*" * 10_000}, {"HX-Request": "true", "HX-Target": "bench" * 1000}])
def test_forged_and_odd_headers(client, headers):
    for path in ("/episodes/memory", "/embed/memory", "/api/memory", "/"):
        assert_inert(client.get(path, headers=headers), (path, headers))
