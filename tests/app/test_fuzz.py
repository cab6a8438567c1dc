"""Fuzz every route of every registered lab and every drill: no 5xx, and every 4xx says why."""

import html as html_lib
import re
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import DRILLS, VIEWS

VALUES = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**6).map(str),
    st.sampled_from(["", "0", "1", "2", "4", "8", "32", "64", "256", "1e9", "7e9", "nan", "inf",
                     "-inf", "1e300", "true", "false", "custom", "train", "infer", "gpipe",
                     "interleaved-1f1b", "dualpipe-v", "zb-h1", "llama-3.1-8b", "mixtral-8x7b",
                     "rtx-4090", "full", "none", "rows", "columns"]),
    st.text(max_size=10),
)


def key_strategy(view):
    return st.sampled_from([*view.query_model.model_fields, "events", "theme", "controls",
                            "colour"])


def route_strategy():
    routes = []
    for name, view in VIEWS.items():
        routes += [(view, view.episode.url, False), (view, view.episode.url, True),
                   (view, f"/api/{name}", False), (view, f"/embed/{name}", False),
                   (view, f"/embed/{name}", True)]
        routes += [(view, f"/embed/{name}/{d.name}", h) for d in view.diagrams
                   for h in (False, True)]
    return st.sampled_from(routes)


@st.composite
def requests(draw):
    view, url, htmx = draw(route_strategy())
    items = draw(st.lists(st.tuples(key_strategy(view), VALUES), max_size=6))
    return view, url, htmx, items


def says_why(view, url: str, text: str) -> bool:
    if url.startswith("/api/"):
        return bool(re.search(r'"msg":"[^"]+"', text))
    slots = re.findall(r'id="error-[a-z_0-9]+"[^>]*>([^<]*)<', text)
    return any(html_lib.unescape(s).strip() for s in slots) or 'class="form-error"' in text


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(requests())
def test_no_route_answers_a_5xx_and_every_4xx_says_why(client, request_case):
    view, url, htmx, items = request_case
    headers = {"HX-Request": "true"} if htmx else {}
    response = client.get(f"{url}?{urlencode(items)}", headers=headers)
    assert response.status_code < 500, (url, items, response.text[:300])
    if response.status_code >= 400:
        assert response.status_code == 422, (url, items)
        assert says_why(view, url, response.text), (url, items)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(DRILLS)), VALUES, st.integers(min_value=-3, max_value=200),
       st.booleans())
def test_no_drill_answer_is_a_5xx(client, drill_id, answer, attempt, api):
    url = f"/api/drills/{drill_id}" if api else f"/drills/{drill_id}"
    response = client.get(url, params={"answer": answer, "attempt": attempt})
    assert response.status_code < 500, (url, answer, response.text[:300])
    if response.status_code >= 400:
        assert response.status_code == 422
        assert response.json()["detail"]


def literal_choices() -> list[tuple[str, str, list[str]]]:
    """Every enumerated control of every lab, with all its choices."""
    from typing import Literal, get_args, get_origin

    out = []
    for name, view in VIEWS.items():
        for field, info in view.query_model.model_fields.items():
            kinds = [info.annotation, *get_args(info.annotation)]
            values = [str(v).lower() if isinstance(v, bool) else str(v)
                      for kind in kinds if get_origin(kind) is Literal for v in get_args(kind)]
            if values:
                out.append((name, field, values))
    return out


@pytest.mark.parametrize(("name", "field", "values"), literal_choices(),
                         ids=[f"{n}-{f}" for n, f, _ in literal_choices()])
def test_every_choice_of_every_control_draws_its_page(client, name, field, values):
    """A page draws every figure of its state, so each choice of each select is asked once:
    EP12's playground with recompute=flash once reached EP03's recompute chart, which knew
    only Korthikanti's three modes (a StopIteration, a 500)."""
    view = VIEWS[name]
    failed = []
    for value in values:
        got = client.get(view.episode.url, params={field: value})
        if got.status_code >= 500:
            failed.append(f"{field}={value}: {got.status_code} {got.text[:200]}")
    assert not failed, f"{name}: " + "\n".join(failed)
