"""Embeds that fit a host page, and API answers that stay bounded."""

import gzip
import html as html_lib
import json
import re

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS


def embed_codes(html: str) -> list[str]:
    # The embed codes' read-only boxes (id="embed-code-..."), not the model paste box.
    return [html_lib.unescape(t) for t in re.findall(
        r'<textarea id="embed-code-[^>]*>(.*?)</textarea>', html, re.S)]


def test_embed_codes_cover_each_diagram_and_resize_by_post_message(client):
    html = client.get("/episodes/pipeline", params={"stages": 8}).text
    codes = embed_codes(html)
    view = VIEWS["pipeline"]
    srcs = [re.search(r'<iframe src="([^"]+)"', code).group(1) for code in codes]
    assert srcs == [f"http://testserver/embed/pipeline/{d.name}?stages=8"
                    for d in view.diagrams] + ["http://testserver/embed/pipeline?stages=8"]
    for code in codes:
        # The host page resizes the iframe to the height the embed reports, and trusts only
        # messages from this site.
        assert '"parallelism-lab:height"' in code
        assert 'e.origin!=="http://testserver"' in code
        height = int(re.search(r'height="(\d+)"', code).group(1))
        assert height >= 400


def test_embed_code_of_the_default_state_has_no_dangling_question_mark(client):
    for code in embed_codes(client.get("/episodes/memory").text):
        assert 'src="http://testserver/embed/memory/ledger"' in code \
            or 'src="http://testserver/embed/memory"' in code


def test_embed_js_reports_the_height_it_is_given(client):
    html = client.get("/embed/memory/ledger").text
    url = re.search(r'src="(/static/js/embed\.js\?v=[0-9a-f]+)"', html).group(1)
    script = client.get(url).text
    assert "parallelism-lab:height" in script and "postMessage" in script


@pytest.mark.parametrize(("theme", "body_class"), [("dark", "theme-dark"), ("light", "theme-light"),
                                                   ("neon", "theme-light"), (None, "theme-light")])
def test_embed_theme(client, theme, body_class):
    params = {"theme": theme} if theme else {}
    html = client.get("/embed/pipeline/gantt", params=params).text
    assert re.search(rf'<body class="embed {body_class}">', html)


def test_embed_controls_option_shows_the_lab_form(client):
    assert 'id="pipeline-form"' not in client.get("/embed/pipeline/gantt").text
    html = client.get("/embed/pipeline/gantt", params={"controls": 1, "stages": 8}).text
    assert 'id="pipeline-form"' in html
    assert 'id="embed-body"' in html


def test_embed_fragment_swaps_the_embed_body_only(client):
    response = client.get("/embed/pipeline/gantt", params={"stages": 6},
                          headers={"HX-Request": "true"})
    assert response.status_code == 200
    text = response.text.lstrip()
    assert text.startswith('<section class="diagram embed-diagram"')
    assert 'data-target="pipeline-gantt"' in text and "pipeline-activations" not in text
    assert "<html" not in text


def test_embed_shows_plain_messages_for_bad_values(client):
    response = client.get("/embed/pipeline/gantt", params={"stages": "abc"})
    assert response.status_code == 422
    assert "Stages p must be a whole number" in response.text
    assert 'data-target="pipeline-gantt"' in response.text  # the nearest valid state drawn


def test_pages_vary_on_htmx_headers_and_a_history_restore_is_a_full_page(client):
    for url in ("/episodes/pipeline", "/embed/pipeline/gantt"):
        response = client.get(url, headers={"HX-Request": "true",
                                            "HX-History-Restore-Request": "true"})
        assert {v.strip() for v in response.headers["vary"].split(",")} >= {"HX-Request",
                                                                             "HX-Target"}
        assert "<html" in response.text


BIG = {"schedule": "interleaved-1f1b", "stages": 8, "microbatches": 32, "virtual": 2}


def test_events_rows_columns_and_none_carry_the_same_schedule(client):
    rows = client.get("/api/pipeline", params={**BIG, "events": "rows"}).json()
    columns = client.get("/api/pipeline", params={**BIG, "events": "columns"}).json()
    none = client.get("/api/pipeline", params={**BIG, "events": "none"}).json()
    assert rows == client.get("/api/pipeline", params=BIG).json()  # rows by default
    assert none["events"] is None
    assert {k: v for k, v in columns.items() if k != "events"} == \
        {k: v for k, v in rows.items() if k != "events"}
    cols = columns["events"]
    assert [dict(zip(cols, values, strict=True)) for values in zip(*cols.values(), strict=True)] \
        == rows["events"]
    assert len(json.dumps(columns)) < 0.6 * len(json.dumps(rows))


def test_bad_events_shape_is_a_422(client):
    response = client.get("/api/pipeline", params={"events": "csv"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "events"]


def test_large_answers_are_compressed_by_the_worker(client):
    response = client.get("/api/pipeline", params=BIG, headers={"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    raw = client.get("/api/pipeline", params=BIG, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in raw.headers
    assert len(gzip.compress(raw.content)) < len(raw.content) / 4
    assert response.json() == raw.json()


# Diagrams drawn without a plotly legend (the lesson names their colours beside them): their
# embed carries the key, one swatch per colour.
KEYED = {("pipeline", "gantt"): "Forward", ("cp", "mask"): "rank 0",
         ("memory", "ledger"): "Weights", ("precision", "ledger"): "16-bit weights",
         ("precision", "finetune"): "Base weights", ("placement", "cluster"): "Training + rollout"}


@pytest.mark.parametrize(("name", "diagram"), [(n, d.name) for n, v in sorted(VIEWS.items())
                                               for d in v.diagrams])
def test_each_single_diagram_embed_shows_its_summary_and_colour_key(client, name, diagram):
    from app.labkit.render import embed_path

    view = VIEWS[name]
    html = client.get(embed_path(view, view.diagram(diagram))).text
    if view.diagram(diagram).template:  # an HTML diagram: its own key (EP04's GPU list)
        assert 'class="swatch"' in html
        return
    if "This state draws no" in html:  # the playground's default draws only some labs
        return
    summary = re.search(r'data-testid="embed-summary">([^<]+)</p>', html)
    assert summary and len(summary.group(1)) > 20, f"{name}/{diagram}: no one-line summary"
    if (name, diagram) in KEYED:
        key = re.search(r'<p class="embed-key" data-testid="embed-key">(.*?)</p>', html, re.S)
        assert key, f"{name}/{diagram}: no colour key"
        assert KEYED[name, diagram] in key.group(1)
        assert 'class="swatch" data-colour="#' in key.group(1)
