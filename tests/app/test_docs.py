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


# --- the document is complete and every route takes the same rules (issue 20) ----------------

def get_operations() -> list[tuple[str, list[dict], dict]]:
    """(path, documented query parameters, the params a request needs) of every GET route of
    the OpenAPI document: a drill by its first id and a number answer."""
    from app.main import app as lab_app

    out = []
    for path, item in lab_app.openapi()["paths"].items():
        operation = item.get("get")
        if operation is None:
            continue
        needs = {}
        if "{drill_id}" in path:
            from app.labkit import DRILLS
            path, needs = path.replace("{drill_id}", sorted(DRILLS)[0]), {"answer": "1"}
        out.append((path, [p for p in operation.get("parameters", []) if p["in"] == "query"],
                    needs))
    return out


OPERATIONS = get_operations()


def kinds(schema: dict) -> set[str]:
    return {schema.get("type")} | {k for s in schema.get("anyOf", []) for k in kinds(s)}


def test_export_documents_every_recipe_control(spec):
    names = {p["name"] for p in spec["paths"]["/api/export"]["get"]["parameters"]}
    assert names == {"format", *VIEWS["recipe"].query_model.model_fields}


def numeric(param: dict) -> bool:
    return bool(kinds(param["schema"]) & {"integer", "number"})


def operations(having) -> list:
    """The operations with at least one parameter ``having`` holds for, each with those
    parameters alone: a case with nothing to check is not a case."""
    out = []
    for path, params, needs in OPERATIONS:
        chosen = [p for p in params if p["name"] not in needs and having(p)]
        if chosen:
            out.append(pytest.param(path, chosen, needs, id=path))
    return out


WITH_EXAMPLES = operations(lambda p: p["schema"].get("examples"))
WITH_PARAMETERS = operations(lambda p: True)
WITH_NUMBERS = operations(numeric)


def test_the_sweeps_below_cover_the_document():
    """Every documented query parameter is in the empty-value sweep, and the examples and
    numbers sweeps have routes to check."""
    documented = sum(len([p for p in params if p["name"] not in needs])
                     for _, params, needs in OPERATIONS)
    assert sum(len(c.values[1]) for c in WITH_PARAMETERS) == documented > 0
    assert WITH_EXAMPLES and WITH_NUMBERS


@pytest.mark.parametrize(("path", "params", "needs"), WITH_EXAMPLES)
def test_every_documented_example_answers(client, path, params, needs):
    for param in params:
        for example in param["schema"]["examples"]:
            answer = client.get(path, params={**needs, param["name"]: example})
            assert answer.status_code == 200, (path, param["name"], example, answer.text[:300])


@pytest.mark.parametrize(("path", "params", "needs"), WITH_PARAMETERS)
def test_an_empty_value_is_not_given_on_every_route(client, path, params, needs):
    plain = client.get(path, params=needs)
    for param in params:
        empty = client.get(path, params={**needs, param["name"]: ""})
        assert (empty.status_code, empty.content) == (plain.status_code, plain.content), \
            (path, param["name"], empty.text[:300])


@pytest.mark.parametrize(("path", "params", "needs"), WITH_NUMBERS)
def test_numbers_are_plain_digits_on_every_route(client, path, params, needs):
    """pydantic alone reads '+4', ' 8 ' and '1_0' as numbers."""
    for param in params:
        good = str(param["schema"].get("default") or param["schema"].get("minimum") or 1)
        for loose in (f"+{good}", f" {good} ", f"{good[0]}_{good[1:] or '0'}", "\u0661"):
            answer = client.get(path, params={**needs, param["name"]: loose})
            assert answer.status_code == 422, (path, param["name"], loose)
            assert answer.json()["detail"][0]["loc"] == ["query", param["name"]], answer.text
