"""Every pair of every lab page's own controls, as its form offers them: no 5xx (issues 31, 36).

tests/app/test_pairwise.py crosses each /api/ route's controls as its OpenAPI schema enumerates
them. A control the schema leaves a free string (EP04's ``link``, ``intra_link``, ``model``) is
never crossed there, and a page draws what the API does not (labels, captions, the steps' own
figures): EP04's cost label answered 500 at every ``link=`` state while /api/tp answered 200
(fixed in c8fb221, found only by a class benchmark). Here each episode's control form is read
from the served page, as a student's browser sees it: each select's options, each radio's
values, each checkbox on and off, each range or number input at its ``min`` and ``max``. Then:

1. one covering array over those values (test_pairwise.covering_rows: every pair of values
   meets in some row), each row asked of the page's htmx fragment with the form's own
   ``HX-Target``; a row the lab refuses (4xx) covers nothing, so its pairs are covered again in
   smaller rows (``ROUNDS``), and the rows the lab takes are spread over the lab's embeds;
2. every link the page carries to a lab state (its try links, cases and "see" states) asked as
   a whole page, as a student opening it in a new tab does;
3. each control given hostile values (not a number, far out of range, 400 characters, two
   different values at once): each answer a 4xx whose message names the control (its label or
   its name) or stands in the control's own error slot (``id="error-<name>"``, which the page
   shows under it), never a 5xx, and a select never takes a value it does not offer.

One test per episode, all its failures in one message.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from itertools import combinations
from urllib.parse import urlencode

import pytest

from app.episodes import EPISODES
from app.labkit import VIEWS
from labs.hardware.gpus import gpus
from tests.app.test_pairwise import covering_rows, pair_key

ROUNDS = 2  # covering rounds over the pairs a refused row left uncovered
HOSTILE = ("not-a-number", "-7", "1e99", "9" * 400)
VIEWS_BY_SLUG = {view.episode.slug: view for view in VIEWS.values()}


class ControlForm(HTMLParser):
    """The page's control form (``form.controls``): its fields and where htmx swaps it."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.select: str | None = None
        self.target = ""
        self.fields: dict[str, dict] = {}

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "form" and "controls" in (a.get("class") or "").split():
            self.inside, self.target = True, (a.get("hx-target") or "").lstrip("#")
        elif not self.inside:
            return
        elif tag == "select" and a.get("name"):
            self.select = a["name"]
            self.fields.setdefault(self.select, {"kind": "select", "values": []})
        elif tag == "option" and self.select and a.get("value") is not None:
            self.fields[self.select]["values"].append(a["value"])
        elif tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            field = self.fields.setdefault(a["name"], {"kind": kind, "values": []})
            if kind == "radio":
                field["values"].append(a.get("value"))
            elif kind == "checkbox":
                field["values"] = [a.get("value") or "true", "false"]
            elif kind in ("range", "number"):
                field["values"] = [v for v in (a.get("min"), a.get("max")) if v not in (None, "")]
            elif kind == "hidden" and a["name"] == "gpu":
                # EP02's GPU, kept through every move (EP12's panel opens the lesson with
                # its plan's): each preset, so that each meets each link the select offers
                # (round-22 cold reading P, finding 2).
                field["values"] = list(gpus())

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self.select = None
        elif tag == "form":
            self.inside = False


class Page:
    """One episode page as served: its form's values, its links to lab states, its embeds."""

    def __init__(self, client, episode) -> None:
        self.client, self.path = client, episode.path
        self.view = VIEWS_BY_SLUG[episode.slug]
        html = client.get(self.path).text
        form = ControlForm()
        form.feed(html)
        self.target = form.target
        self.fields = form.fields
        self.values = {
            name: list(dict.fromkeys(f["values"])) for name, f in form.fields.items() if f["values"]
        }
        here = re.escape(self.path)
        self.links = sorted(
            {m.replace("&amp;", "&") for m in re.findall(rf'href="({here}\?[^"#]+)', html)}
        )
        self.embeds = [
            f"/embed/{self.view.name}{d}"
            for d in ["", *(f"/{diagram.name}" for diagram in self.view.diagrams)]
        ]
        self.failures: list[str] = []
        self.asked = 0

    def get(self, url: str, htmx: bool = False):
        self.asked += 1
        headers = {"HX-Request": "true", "HX-Target": self.target} if htmx else {}
        try:
            got = self.client.get(url, headers=headers)
        except Exception as exc:  # an in-process 500 raises here
            self.failures.append(
                f"{url}{' (htmx)' if htmx else ''}: {type(exc).__name__}: {exc}"[:300]
            )
            return None
        if got.status_code >= 500:
            self.failures.append(
                f"{url}{' (htmx)' if htmx else ''}: {got.status_code} {got.text[:200]}"
            )
            return None
        return got

    def url(self, query: dict, base: str | None = None) -> str:
        return f"{base or self.path}?{urlencode(query)}"

    def label(self, name: str) -> str:
        return self.view.labels.get(name, name)


def cross(page: Page) -> None:
    values = page.values
    pairs = {
        pair_key((p, a), (q, b))
        for p, q in combinations(values, 2)
        for a in values[p]
        for b in values[q]
    }
    taken = 0
    for _ in range(ROUNDS):
        if not pairs:
            break
        for row in covering_rows(values, pairs):
            got = page.get(page.url(row), htmx=True)
            if got is None or got.status_code >= 400:
                continue
            for x, y in combinations(row.items(), 2):
                pairs.discard(pair_key(x, y))
            page.get(page.url(row, page.embeds[taken % len(page.embeds)]))
            taken += 1
    assert taken, f"{page.path}: the lab refused every row of its own controls"


def hostile(page: Page) -> None:
    for name, field in page.fields.items():
        if field["kind"] in ("hidden", "text"):
            continue  # a custom model code (text) is parsed, its refusals tested in test_models
        first, second = (field["values"] + ["1", "2"])[:2]
        for query in [*({name: v} for v in HOSTILE), [(name, first), (name, second)]]:
            url = page.url(query)
            got = page.get(url, htmx=True)
            if got is None:
                continue
            if got.status_code < 400:
                if isinstance(query, dict) and field["kind"] == "select":
                    page.failures.append(f"{url}: took a value its select does not offer")
                continue
            said = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", got.text))
            words = {name, page.label(name), re.sub(r"[_-]", " ", name)}
            beside = re.search(rf'id="error-{re.escape(name)}"[^>]*>\s*[^<\s]', got.text)
            if not beside and not any(w.lower() in said.lower() for w in words):
                page.failures.append(
                    f"{url}: refused without naming {name!r} ({page.label(name)!r}): {said[:160]}"
                )


PAGES = [episode for episode in EPISODES if episode.slug in VIEWS_BY_SLUG]


@pytest.mark.parametrize("episode", PAGES, ids=[e.slug for e in PAGES])
def test_no_pair_of_a_pages_own_controls_nor_its_links_answers_a_5xx(client, episode):
    page = Page(client, episode)
    assert page.target and len(page.values) >= 3, f"{page.path}: no control form read"
    cross(page)
    for link in page.links:
        page.get(link)
    for embed in page.embeds:
        page.get(embed)
    hostile(page)
    assert not page.failures, f"{len(page.failures)} of {page.asked} requests:\n" + "\n".join(
        page.failures[:40]
    )
