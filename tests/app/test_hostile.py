"""HTML and script in every parameter of every route of every registered lab (page, fragment,
embed, API, drills): the answer never carries them as markup. Plus forged Host and htmx
headers, and hostile path segments."""

import json

import pytest

from app.labkit import VIEWS
from tests.app.registry_routes import ALL

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


CASES = [(r, name) for r in ALL if r.path not in ("/docs", "/redoc", "/openapi.json")
         for name in names_for(r)]


def assert_inert(response, where):
    assert response.status_code < 500, where
    ctype = response.headers["content-type"]
    text = response.text
    if ctype.startswith("application/json"):
        json.loads(text)  # data, never a page; nosniff keeps browsers from guessing otherwise
        assert response.headers["x-content-type-options"] == "nosniff"
        return
    assert ctype.startswith("text/html"), (where, ctype)
    for mark in MARKUP:
        assert mark not in text, (where, mark)


@pytest.mark.parametrize(("route", "name"), CASES, ids=lambda c: getattr(c, "id", c))
def test_markup_in_a_parameter_stays_text(client, route, name):
    for payload in PAYLOADS:
        response = client.get(route.path, params={name: payload}, headers=route.htmx or {})
        assert_inert(response, (route.id, name, payload))


@pytest.mark.parametrize("route", [r for r in ALL if r.lab and r.kind == "page"],
                         ids=lambda r: r.id)
def test_markup_in_every_parameter_at_once(client, route):
    names = names_for(route)
    for payload in PAYLOADS:
        response = client.get(route.path, params={n: payload for n in names})
        assert_inert(response, (route.id, payload))


@pytest.mark.parametrize("route", [r for r in ALL if r.kind in ("page", "embed")],
                         ids=lambda r: r.id)
def test_forged_host_is_escaped(client, route):
    """Without PUBLIC_URL the embed code spells the request's origin: a forged Host header
    must arrive as text (and PUBLIC_URL removes it altogether: test_hosting.py)."""
    response = client.get(route.path, headers={"Host": 'evil.example"><script>alert(1)</script>'})
    if response.status_code == 400:
        return  # refused outright is fine too
    assert_inert(response, route.id)


@pytest.mark.parametrize("route", [r for r in ALL if r.htmx], ids=lambda r: r.id)
def test_hostile_htmx_headers(client, route):
    headers = {**route.htmx, "HX-Target": PAYLOADS[0], "HX-Current-URL": PAYLOADS[1]}
    assert_inert(client.get(route.path, headers=headers), route.id)


@pytest.mark.parametrize("lab", sorted(VIEWS))
def test_hostile_path_segments(client, lab):
    for payload in PAYLOADS:
        response = client.get(f"/embed/{lab}/{payload}")
        assert response.status_code == 404
        assert_inert(response, payload)
    response = client.get(f"/drills/{PAYLOADS[0]}")
    assert response.status_code == 404
    assert_inert(response, "drill")
