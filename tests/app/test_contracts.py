"""Contract tests over the registry: whatever lab is added, its figures are valid plotly in
its default, good and bad states; page, fragment, embed and API draw one state from one
query; every diagram is embeddable and listed; labels are the page's own."""

import html as html_lib
import json
import re

import pytest
from markupsafe import escape  # what Jinja escapes with

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS, parse
from app.response_cache import CACHE
from tests.conftest import valid_plotly

STATES = [(name, kind) for name in sorted(VIEWS) for kind in ("default", "good", "bad")]


def case_query(name: str, kind: str) -> dict:
    view = VIEWS[name]
    case = {"default": None, "good": view.good, "bad": view.bad}[kind]
    # The defaults' state by a query all three routes read alike: a lesson with an opening
    # (LabView.opening, EP05's GPipe) draws it at its bare URL, where the embed keeps the
    # defaults, so the default case names the opening's controls (an empty dict elsewhere).
    return dict(case.query) if case else {k: str(v) for k, v in view.opening.items()}


def page_figures(html: str) -> dict[str, dict]:
    """{chart element id: figure} from the figure scripts of a page or fragment."""
    return {
        target: json.loads(html_lib.unescape(body))
        for target, body in re.findall(
            r'<script type="application/json" class="figure" data-target="([^"]+)"'
            r'[^>]*>(.*?)</script>', html, re.S)
    }


@pytest.mark.parametrize(("name", "kind"), STATES)
def test_figures_are_valid_plotly(name, kind):
    view = VIEWS[name]
    state, errors, _ = parse(view, list(case_query(name, kind).items()))
    assert state is not None, errors
    figures = view.figures(state.result)
    assert set(figures) <= {d.name for d in view.diagrams}
    assert figures, "a state draws at least one diagram"
    for fig in figures.values():
        valid_plotly(fig)  # raises when invalid
        assert fig["summary"]  # the chart's text alternative


def test_checking_the_figures_leaves_every_page_as_it_was(client):
    """The flaky pool test (issue 36's last stop review): a lab page drawn in a test worker
    after ``test_figures_are_valid_plotly`` differed from a fresh render process's. plotly's
    ``go.Figure`` moves each trace's "type" to the end of the dict it is given, and EP12's
    figures are the ones its cached panel runs keep: the playground's page wrote them so from
    then on. The check validates a copy (``tests.conftest.valid_plotly``)."""

    def drawn() -> list[bytes]:
        CACHE.clear()
        return [client.get(VIEWS[name].episode.path, headers={"Accept-Encoding": "identity"})
                .content for name in sorted(VIEWS)]

    before = drawn()
    for name in sorted(VIEWS):
        test_figures_are_valid_plotly(name, "default")
    assert drawn() == before


@pytest.mark.parametrize(("name", "kind"), STATES)
def test_page_fragment_and_embed_draw_the_figures_of_the_api_state(client, name, kind):
    view = VIEWS[name]
    query = case_query(name, kind)
    state, _, _ = parse(view, list(query.items()))
    expected = {view.element_id(d): fig for d in view.diagrams
                if (fig := view.figures(state.result).get(d.name)) is not None}
    expected = json.loads(json.dumps(expected))  # as JSON gives it back
    page = client.get(view.episode.url, params=query)
    fragment = client.get(view.episode.url, params=query, headers={"HX-Request": "true"})
    embed = client.get(f"/embed/{name}", params=query)
    for response in (page, fragment, embed):
        assert response.status_code == 200
        assert page_figures(response.text) == expected
    api = client.get(f"/api/{name}", params=query)
    assert api.json() == json.loads(json.dumps(view.to_api(state.result)))
    view.response_model.model_validate(api.json())


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_every_diagram_is_embeddable_alone(client, name):
    view = VIEWS[name]
    for diagram in view.diagrams:
        response = client.get(f"/embed/{name}/{diagram.name}")
        assert response.status_code == 200
        text = response.text
        figures = page_figures(text)
        assert set(figures) <= {view.element_id(diagram)}, "one diagram per embed"
        # The title and the link back to the lesson come before the chart.
        head = text.index('class="embed-head"')
        # the link back opens the lesson at the embed's state (a bare href where that is the
        # page's own opening; EP05's names schedule=1f1b, as its bare page opens on GPipe)
        back = re.search(rf'href="{re.escape(view.episode.url)}(\?[^"]*)?"', text)
        assert back and back.start() > head
        assert escape(diagram.title) in text[head:text.index('id="embed-body"')]
        assert "js/embed.js" in text
        if figures:  # a chart's embed says in one line what it shows
            summary = next(iter(figures.values()))["summary"]
            shown = re.search(r'data-testid="embed-summary">(.*?)</p>', text, re.S)
            assert shown and html_lib.unescape(shown.group(1)) == summary


def test_a_diagram_the_state_cannot_draw_says_so(client):
    # 80 layers in 32 stages x 4 chunks: the schedule stands, the memory panel does not.
    response = client.get("/embed/pipeline/memory", params={
        "schedule": "interleaved-1f1b", "stages": 32, "microbatches": 64, "virtual": 4})
    assert response.status_code == 200
    assert page_figures(response.text) == {}
    assert "draws no peak memory per rank" in response.text


def test_unknown_diagram_is_a_404_naming_the_real_ones(client):
    response = client.get("/embed/pipeline/pie")
    assert response.status_code == 404
    assert "gantt" in response.json()["detail"]


def test_api_diagrams_lists_every_diagram_with_working_urls(client):
    listed = client.get("/api/diagrams").json()
    expected = {(name, d.name) for name, view in VIEWS.items() for d in view.diagrams}
    assert {(d["lab"], d["name"]) for d in listed} == expected
    for entry in listed:
        view = VIEWS[entry["lab"]]
        assert entry["title"] == view.diagram(entry["name"]).title
        assert entry["embed_url"] == f"http://testserver/embed/{entry['lab']}/{entry['name']}"
        assert entry["page_url"] == f"http://testserver{view.episode.url}"
        assert client.get(entry["embed_url"]).status_code == 200


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_labels_are_the_page_control_labels(client, name):
    """Error messages name a control as the page labels it."""
    view = VIEWS[name]
    html = client.get(view.episode.url).text
    for control, label in view.labels.items():
        assert control in view.query_model.model_fields
        assert escape(label) in html, f"{name}: no control labelled {label!r}"
    assert set(view.labels) == set(view.query_model.model_fields)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_no_url_ends_with_a_question_mark(client, name):
    for url in (VIEWS[name].episode.url, f"/embed/{name}"):
        text = client.get(url).text
        assert not re.search(r'(?:src|href|hx-get)="[^"]*\?"', text)
        assert not re.search(r'(?:src|href)="[^"]*\?"', html_lib.unescape(text))
