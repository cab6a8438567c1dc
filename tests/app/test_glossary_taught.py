"""The glossary's "Taught in" links (issue 36): each entry links to the step of the first lesson,
in teaching order, whose prose uses the term, at the term's marked first use there; the table
(app/glossary_taught.py, written by tools/glossary_taught.py) is what the rendered lessons give,
and every link resolves to an element id on its page."""

import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.episodes import EPISODES
from app.glossary_taught import TAUGHT_IN
from tools.glossary_taught import step_of, taught


class Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        if dict(attrs).get("id"):
            self.ids.add(dict(attrs)["id"])


def ids_of(html: str) -> set[str]:
    parser = Ids()
    parser.feed(html)
    return parser.ids


@pytest.fixture(scope="module")
def pages(client):
    return {e.path: client.get(e.path).text for e in EPISODES}


def test_the_table_is_what_the_lessons_give(pages):
    assert taught(pages.__getitem__) == TAUGHT_IN, (
        "run python tools/glossary_taught.py --write")


def test_every_link_resolves_to_an_element_id_in_a_step(client, pages):
    glossary = client.get("/glossary").text
    links = re.findall(r'<span class="taught">First used in <a href="([^"]+)">([^<]+)</a>',
                       glossary)
    assert len(links) == len(TAUGHT_IN) >= 70
    for href, text in links:
        path, _, anchor = href.partition("#")
        slug = anchor.removeprefix("term-")
        episode = next(e for e in EPISODES if e.slug == TAUGHT_IN[slug])
        assert urlsplit(path).path.endswith(episode.path) and text.startswith(episode.code)
        html = pages[episode.path]
        assert anchor in ids_of(html), href
        step = step_of(html, slug)  # the step the mark sits in ("" in the lede)
        assert step == "" or step in ids_of(html), (href, step)


def test_the_first_use_carries_one_anchor_a_page(pages):
    for path, html in pages.items():
        anchors = re.findall(r'id="(term-[^"]+)"', html)
        assert len(anchors) == len(set(anchors)), path


def test_a_term_taught_elsewhere_links_to_the_step_that_teaches_it(client, pages):
    """Round-18 cold reading C, item 18: the entry's one link, 'Taught in', was the first
    marked use: goodput in EP07 (taught in EP11), MFU and HFU in EP03 (EP08), the bubble in
    EP03 (EP05), Ulysses in EP04 (EP06), all-to-all in EP05 (EP07). It now reads 'First used
    in', and these entries also link the step that teaches the term, a step whose text uses it.
    """
    from app.glossary_terms import GLOSSARY
    from app.routers.home import TAUGHT_AT

    glossary = client.get("/glossary").text
    assert '<span class="taught">Taught in' not in glossary.split("taught-at-")[0]
    terms = {t.slug: t for t in GLOSSARY}
    for slug, (lesson, step) in TAUGHT_AT.items():
        episode = next(e for e in EPISODES if e.slug == lesson)
        entry = glossary.split(f'data-testid="taught-at-{slug}"')[1].split("</span>")[0]
        assert f'href="{episode.url}#{step}"' in entry and episode.code in entry, slug
        html = pages[episode.path]
        section = html.split(f'id="{step}"')[1].split('<section class="step"')[0]
        text = re.sub(r"<[^>]+>", " ", section)
        assert terms[slug].regex.search(text), (slug, step)
        assert TAUGHT_IN.get(slug) != lesson, slug  # only where the first use is elsewhere
