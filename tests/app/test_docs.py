"""The API is documented: every lab's route and query parameter appears in OpenAPI with a
description, and the query names equal the page's control names."""

import re

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS


@pytest.fixture(scope="module")
def spec(client):
    return client.get("/openapi.json").json()


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_every_query_parameter_is_documented(spec, name):
    operation = spec["paths"][f"/api/{name}"]["get"]
    params = {p["name"]: p for p in operation["parameters"]}
    view = VIEWS[name]
    # The controls, plus ?events= where the answer carries a list of events.
    expected = {*view.query_model.model_fields, *(["events"] if view.events_key else [])}
    assert set(params) == expected
    for param in params.values():
        assert param.get("description"), f"/api/{name}?{param['name']} has no description"
    assert "422" in operation["responses"]
    # The answer is documented by its response model, not "any JSON".
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema.get("$ref", "").endswith(view.response_model.__name__)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_query_names_equal_the_page_control_names(client, name):
    html = client.get(VIEWS[name].episode.url).text
    form = re.search(r'<form class="controls".*?</form>', html, re.S).group(0)
    controls = set(re.findall(r'name="([a-z_0-9]+)"', form))
    assert controls == set(VIEWS[name].query_model.model_fields)


def test_docs_page_is_served(client):
    assert client.get("/docs").status_code == 200
    for path in ("/api/models", "/api/gpus", "/api/drills/{drill_id}"):
        assert path in client.get("/openapi.json").json()["paths"]
