"""One parser for page, fragment, embed and API: the same query gives the same state or the
same 422 with the same plain message everywhere; nothing a reader types is ever a 500."""

import html as html_lib
import re
from dataclasses import replace

import pytest
from pydantic import BaseModel, Field

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import DRILLS, FORM, VIEWS, Diagram, LabView, parse
from app.labkit.parsing import run_cached
from app.labkit.render import context
from app.labkit.view import add_view
from labs.core.errors import LabInputError
from labs.core.limits import MAX_DEGREE, MAX_MICRO_BATCH
from labs.schedules.catalogue import SCHEDULES

PIPELINE = VIEWS["pipeline"]


def api_messages(client, name, params) -> dict[str, str]:
    response = client.get(f"/api/{name}", params=params)
    assert response.status_code == 422, response.text
    return {d["loc"][-1]: d["msg"] for d in response.json()["detail"]}


def slot_messages(text: str) -> dict[str, str]:
    slots = re.findall(r'id="error-([a-z_0-9]+)"[^>]*>([^<]*)<', text)
    return {name: html_lib.unescape(msg) for name, msg in slots if msg.strip()}


BAD = [
    ("pipeline", [("stages", "abc")], {"stages": "Stages p must be a whole number from 1 to 64"}),
    ("pipeline", [("stages", "99")], {"stages": "Stages p must be a whole number from 1 to 64"}),
    ("pipeline", [("micro_batch", "abc")],
     {"micro_batch": f"Micro-batch size must be a whole number from 1 to {MAX_MICRO_BATCH:,}"}),
    ("pipeline", [("f", "nan")], {"f": "Forward f must be a number above 0 up to 1,000"}),
    ("pipeline", [("w", "inf")], {"w": "Weight-grad w must be a number from 0 to 1,000"}),
    ("pipeline", [("schedule", "pipedream")],
     {"schedule": "Schedule must be one of: " + ", ".join(SCHEDULES)}),
    ("pipeline", [("stages", "4"), ("stages", "8")],
     {"stages": "Stages p was given 2 different values (4, 8): give it once"}),
    ("memory", [("tp", "abc")],
     {"tp": f"TP (tensor) must be a whole number from 1 to {MAX_DEGREE:,}"}),
    ("memory", [("offload", "maybe")], {"offload": "Optimizer offload must be true or false"}),
]


@pytest.mark.parametrize(("name", "items", "messages"), BAD)
def test_a_bad_value_has_one_plain_message_on_every_route(client, name, items, messages):
    view = VIEWS[name]
    query = "&".join(f"{k}={v}" for k, v in items)
    assert api_messages(client, name, items) == messages
    fragment = client.get(f"{view.episode.url}?{query}", headers={"HX-Request": "true"})
    assert fragment.status_code == 422
    assert slot_messages(fragment.text) == messages
    page = client.get(f"{view.episode.url}?{query}")
    assert page.status_code == 422  # a full page, never a 500
    assert slot_messages(page.text) == messages
    assert "Input should be" not in page.text  # no raw pydantic wording


def test_interleaved_needs_whole_rounds_of_micro_batches_on_every_route(client):
    # PyTorch's ScheduleInterleaved1F1B runs max(1, m // p) equal rounds: 4 stages, m = 11 don't.
    params = {"schedule": "interleaved-1f1b", "microbatches": 11, "stages": 4, "virtual": 2}
    api = api_messages(client, "pipeline", params)
    assert list(api) == ["microbatches"] and "2 rounds of equal size" in api["microbatches"]
    page = client.get("/episodes/pipeline", params=params)
    assert page.status_code == 422
    assert slot_messages(page.text) == api


def test_page_gives_templates_typed_values_and_the_raw_strings_apart():
    from starlette.requests import Request

    from app.labkit import parse_with_fallback

    request = Request({"type": "http", "method": "GET", "path": "/episodes/pipeline",
                       "query_string": b"stages=abc&microbatches=16", "headers": [],
                       "scheme": "http", "server": ("testserver", 80), "root_path": ""})
    items = request.query_params.multi_items()
    state, errors, raw = parse_with_fallback(PIPELINE, items)
    ctx = context(request, PIPELINE, state, errors, raw)
    assert ctx["raw"] == {"stages": "abc"}
    assert ctx["query"]["stages"] == 4  # the default: the state drawn, an int
    assert ctx["query"]["microbatches"] == 16  # the good value is kept
    assert set(ctx["errors"]) == {"stages"}


@pytest.mark.parametrize("params", [{"params": ""}, {"model": "llama-3.1-8b", "params": ""}])
def test_an_empty_value_means_not_given_everywhere(client, params):
    assert client.get("/api/memory", params=params).status_code == 200
    assert client.get("/episodes/memory", params=params).status_code == 200
    assert client.get("/episodes/memory", params=params,
                      headers={"HX-Request": "true"}).status_code == 200


def test_a_repeated_equal_value_counts_once(client):
    for url in ("/api/pipeline", "/episodes/pipeline", "/embed/pipeline/gantt"):
        assert client.get(f"{url}?stages=8&stages=8").status_code == 200, url


def test_unknown_keys_are_ignored_everywhere(client):
    for url in ("/api/memory", "/episodes/memory", "/embed/memory"):
        assert client.get(f"{url}?colour=blue").status_code == 200, url


@pytest.mark.parametrize("answer", ["nan", "inf", "-inf", "NaN", "1e999", "abc", ""])
def test_drill_api_refuses_what_is_not_a_number_with_a_422(client, answer):
    """Not a number (or, for a decide drill, not one of its choices): a 422 that says so."""
    for drill_id, (_, drill) in DRILLS.items():
        said = "Pick one of the choices" if drill.kind == "decide" else "Enter a number"
        response = client.get(f"/api/drills/{drill_id}", params={"answer": answer})
        assert response.status_code == 422
        assert response.json()["detail"][0]["msg"].startswith(said)
        page = client.get(f"/drills/{drill_id}", params={"answer": answer})
        assert page.status_code == 200 and said in page.text


class _Query(BaseModel):
    stages: int = Field(4, ge=1, le=8, description="Stages.")


def _view(name: str, error_field: str) -> LabView:
    """A one-control view whose engine always refuses, naming ``error_field``."""
    def run(query):
        raise LabInputError(error_field, f"{error_field} is wrong")

    return LabView(
        name=name, episode=PIPELINE.episode, query_model=_Query, run=run, to_api=dict,
        figures=lambda result: {}, diagrams=(Diagram("d", "D"),), page_template="",
        controls_template="", diagram_template="", summary="", aliases={"pp": "stages"},
    )


def test_engine_errors_are_mapped_to_the_view_controls():
    _, errors, _ = parse(_view("t-alias", "pp"), [])
    assert errors == {"stages": "pp is wrong"}


def test_an_engine_error_naming_no_control_is_the_form_message():
    query = _Query()
    assert run_cached(_view("t-form", "layers"), query) == (None, {FORM: "layers is wrong"})


def test_duplicate_view_names_and_drill_ids_are_refused():
    with pytest.raises(ValueError, match="already registered"):
        add_view(PIPELINE)
    drill = PIPELINE.drills[0]
    with pytest.raises(ValueError, match="drill id"):
        add_view(replace(PIPELINE, name="pipeline-copy", drills=(drill,)))
    assert "pipeline-copy" not in VIEWS


def test_duplicate_diagram_names_and_aliases_to_no_control_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        replace(PIPELINE, diagrams=(Diagram("a", "A"), Diagram("a", "B")))
    with pytest.raises(ValueError, match="no control"):
        replace(PIPELINE, aliases={"pp": "pipeline_stages"})


class _Multi(BaseModel):
    ranks: list[int] = Field(default_factory=list, description="Ranks to highlight.")


def test_a_multi_valued_control_keeps_every_value():
    view = LabView(
        name="t-multi", episode=PIPELINE.episode, query_model=_Multi, run=lambda q: q.ranks,
        to_api=dict, figures=lambda result: {}, diagrams=(Diagram("d", "D"),),
        page_template="", controls_template="", diagram_template="", summary="",
    )
    state, errors, _ = parse(view, [("ranks", "3"), ("ranks", "1"), ("ranks", "3")])
    assert errors == {} and state.result == [3, 1, 3]
