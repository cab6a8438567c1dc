"""Every figure a lesson quotes is what the state its step links to shows.

Each quoted figure is a ``<span class="fig" data-state=… data-field=… data-unit=…>``. The test
follows it: the state must be one of its step's try links, GET /api/<lab> with that query must
give the same number formatted the same way, and the step's diagram must show it when the link
is followed as htmx does (the bench fragment).
"""

import re
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlsplit

import pytest

from app.charts.units import (
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_gb2,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_plain,
    fmt_sci,
)

LESSONS = {  # page -> (API, chart ids a step may name)
    "/episodes/memory": ("/api/memory", {"memory-chart"}),
    "/episodes/pipeline": (
        "/api/pipeline", {"pipeline-gantt", "pipeline-activations", "pipeline-memory"}),
    "/episodes/tensor-parallel": (
        "/api/tp", {"tp-split", "tp-efficiency", "tp-cost", "tp-memory", "tp-crossover"}),
    "/episodes/zero": ("/api/zero", {"zero-memory", "zero-traffic", "zero-overlap",
                                     "zero-crossover",
                                     "zero-recompute", "zero-offload"}),
    "/episodes/data-parallel": ("/api/dp", {"dp-scaling", "dp-time", "dp-ratio", "dp-replica"}),
    "/episodes/context-parallel": ("/api/cp", {"cp-mask", "cp-pairs", "cp-cost",
                                               "cp-crossover"}),
    "/episodes/recipe-3d": ("/api/recipe", {"recipe-step", "recipe-causes", "recipe-memory",
                                            "recipe-timeline", "recipe-layer", "recipe-twod"}),
    "/episodes/rl-placement": (
        "/api/placement", {"placement-cluster", "placement-memory", "placement-timeline"}),
}
FORMATS = {"bytes": fmt_bytes, "count": fmt_count, "pct": fmt_pct, "": fmt_plain}
FORMATS["ms"] = fmt_ms  # EP07 quotes times
LESSONS["/episodes/experts"] = ("/api/moe", {"moe-experts", "moe-gpus", "moe-params",
                                             "moe-ranks", "moe-network", "moe-gemm",
                                             "moe-balance", "moe-crossover"})
FORMATS["g3"] = lambda v: f"{v:.3g}"  # EP10 quotes bytes per parameter
FORMATS["sci"] = fmt_sci  # EP02 quotes FLOPs: 1.72 × 10¹⁴
FORMATS["int"] = lambda v: fmt_num(v, 0)
FORMATS["x2"] = lambda v: fmt_num(v, 2)  # a speed-up, as the charts write it
FORMATS["x1"] = lambda v: fmt_num(v, 1)  # a step's seconds at the places its sum holds
FORMATS["x3"] = lambda v: fmt_num(v, 3)
FORMATS["count4"] = lambda v: fmt_count(v, 4)  # P where the prose multiplies it: 405.9B
FORMATS["gb2"] = fmt_gb2  # EP02 step 1's 26.25 GB, as its drill prints it
LESSONS["/episodes/low-precision"] = ("/api/precision", {
    "precision-ledger", "precision-bytes", "precision-finetune", "precision-offload",
    "precision-speed"})


class Steps(HTMLParser):
    """Collects each ``section.step``: its attributes, try links and quoted figures."""

    def __init__(self):
        super().__init__()
        self.steps: list[dict] = []
        self.depth = 0  # section nesting inside the current step
        self.fig: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            # Lesson steps are step-1, step-2, …; the frame's drill section is not one.
            if "step" in (a.get("class") or "").split() and re.fullmatch(
                    r"step-\d+", a.get("id") or ""):
                self.steps.append({"attrs": a, "links": [], "figs": []})
                self.depth = 1
            elif self.depth:
                self.depth += 1
        elif self.depth and tag == "a" and "try" in (a.get("class") or "").split():
            self.steps[-1]["links"].append(a)
        elif self.depth and tag == "span" and "fig" in (a.get("class") or "").split():
            self.fig = {**a, "text": ""}
            self.steps[-1]["figs"].append(self.fig)

    def handle_endtag(self, tag):
        if tag == "section" and self.depth:
            self.depth -= 1
        elif tag == "span":
            self.fig = None

    def handle_data(self, data):
        if self.fig is not None:
            self.fig["text"] += data


def steps_of(client, page: str) -> list[dict]:
    response = client.get(page)
    assert response.status_code == 200
    parser = Steps()
    parser.feed(response.text)
    assert parser.steps, f"{page} has no steps"
    return parser.steps


def query_of(href: str) -> list[tuple[str, str]]:
    return sorted(parse_qsl(urlsplit(href).query))


def field_value(body, path: str):
    for part in path.split("."):
        body = body[int(part)] if part.isdigit() else body[part]
    return body


@pytest.mark.parametrize("page", LESSONS)
def test_every_step_names_a_diagram_and_has_a_try_link(client, page):
    charts = LESSONS[page][1]
    for n, step in enumerate(steps_of(client, page), start=1):
        assert step["attrs"]["id"] == f"step-{n}"
        assert step["attrs"].get("data-diagram") in charts, step["attrs"]
        assert step["links"], f"step {n} has no try link"


@pytest.mark.parametrize("page", LESSONS)
def test_every_try_link_opens_a_good_state_showing_its_steps_diagram(client, page):
    for step in steps_of(client, page):
        for link in step["links"]:
            assert urlsplit(link["href"]).path == page
            response = client.get(link["href"], headers={
                "HX-Request": "true", "HX-Target": "bench"})
            assert response.status_code == 200, link["href"]
            assert f'id="{step["attrs"]["data-diagram"]}"' in response.text, link["href"]


@pytest.mark.parametrize("page", LESSONS)
def test_every_quoted_figure_is_what_its_links_state_shows(client, page):
    api = LESSONS[page][0]
    quoted = 0
    for step in steps_of(client, page):
        links = {tuple(query_of(link["href"])) for link in step["links"]}
        for fig in step["figs"]:
            state = "?" + fig["data-state"]
            where = f'{step["attrs"]["id"]}: {fig["text"]!r} ({fig["data-field"]} of {state})'
            # The number comes from a state this very step links to.
            assert tuple(query_of(state)) in links, where
            body = client.get(api + state).json()
            expected = FORMATS[fig["data-unit"]](field_value(body, fig["data-field"]))
            assert fig["text"] == expected, where
            # And following that link, the diagram shows the same text.
            shown = client.get(page + state, headers={"HX-Request": "true",
                                                      "HX-Target": "bench"}).text
            assert expected in shown, f"{where}: not shown in the diagram"
            quoted += 1
    assert quoted >= 10, f"{page} quotes only {quoted} checked figures"
LESSONS["/episodes/failures"] = ("/api/failures", {
    "failures-rate", "failures-time", "failures-interval", "failures-scale",
    "failures-checkpoint"})
FORMATS["duration"] = fmt_duration  # the failures lab quotes spans of wall time
LESSONS["/episodes/playground"] = (  # EP12: the playground's prose quotes each lab's panel
    "/api/playground", {"memory-chart", "pipeline-gantt", "recipe-step", "recipe-memory",
                        "zero-memory", "tp-cost", "cp-mask", "moe-params"})


def _printed(answer: float, unit: str) -> list[str]:
    """How the lesson would print a drill's answer, in the lab's formats."""
    forms = {"%": [fmt_pct(answer / 100)], "GB": [fmt_bytes(answer * 1e9)],
             "MB": [fmt_bytes(answer * 1e6)], "ms": [fmt_ms(answer / 1e3)]}
    return forms.get(unit, [])


# Figures of other quantities that happen to print as a drill's answer: (drill, data-field).
COINCIDENT: set[tuple[str, str]] = set()


@pytest.mark.parametrize("name", ["pipeline", "zero", "placement", "moe", "dp"])
def test_no_drill_answer_is_printed_in_its_lessons_steps(client, name):
    """A drill asks what the steps teach the student to work out: the steps above it must not
    print the answer (issue 19: 30.4%, 35.3 GB, 36.3 GB, 462 MB and expert-DP 2 were)."""
    import app.main  # noqa: F401  (registers every lab view)
    from app.labkit import VIEWS, Drill

    view = VIEWS[name]
    html = client.get(view.episode.path).text
    steps = re.sub(r"<script.*?</script>", "", html, flags=re.S)
    steps = " ".join(re.findall(r'<section class="step" id="step-\d+".*?</section>', steps,
                                re.S))
    assert len(steps) > 2000
    for drill in (d for d in view.drills if isinstance(d, Drill)):  # numeric ones
        mine = re.sub(r'<span class="fig"[^>]*data-field="([^"]+)"[^>]*>[^<]*</span>',
                      lambda m, d=drill.id: "" if (d, m.group(1)) in COINCIDENT else m.group(0),
                      steps)
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", mine))
        if drill.kind == "decide":  # a choice: its verdicts come only with the answer
            assert not any(o.why in text for o in drill.judge()), drill.id
            continue
        answer = drill.answer()
        for form in _printed(answer, drill.unit):
            assert f" {form}" not in text, f"{drill.id}: {form} printed in the steps"


def _every_form(value, out: set | None = None) -> set:
    """Every number of a JSON answer as the page would print it (size, time or ratio)."""
    out = set() if out is None else out
    if isinstance(value, dict):
        for v in value.values():
            _every_form(v, out)
    elif isinstance(value, list):
        for v in value[:64]:
            _every_form(v, out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out.update({fmt_bytes(value), fmt_ms(value), f"{value:g}x"})
    return out


@pytest.mark.parametrize("name", ["memory", "zero", "dp", "moe"])
def test_case_texts_quote_their_own_states_figures(client, name):
    """Issue 36, the class: a case button's text quoted figures typed in by hand ('about 7
    GB', '35 GB', 'about 54 ms', '4x'), which drifted from the lab. Every size or time a case
    text quotes is now the lab's answer for the case's own state, formatted as the page
    formats it."""
    import app.main  # noqa: F401  (registers every lab view)
    from app.labkit import VIEWS

    view = VIEWS[name]
    for case in (view.good, view.bad):
        printed = _every_form(client.get(f"/api/{name}?{case.query_string}").json())
        quoted = re.findall(r"[\d.,]+ (?:GB|TB|MB|ms)(?!/)|[\d.]+x\b", case.why)
        for figure in quoted:
            assert figure in printed or figure in ("14 GB", "25 Gb"), (name, case.label, figure)
