"""Every move visible, for a page opened at a try link's URL (the address a followed link
pushes, then shared, bookmarked or reloaded): the diagram that link's step names is the one in
view, on a laptop (1280×800) and a phone (390×844), as after the link is followed
(test_changed_in_view), and the page opens at that step. EP08 step 13's first link opened its
page at step 1 on the step bar, the layer view below the fold (2,622 px down at 1280×800);
static/js/lab.js (showOpened) now opens it at the step of the first link in page order whose
href is the page's address, with that link's diagram in view, as a followed link leaves it.
Checked here for every try link of EP08 (a URL that several steps' links share opens at its
first step)."""

from tests.browser.helpers import wait_drawn
from tests.browser.test_bench_view import SHOWN
from tests.browser.test_bench_view import sized as sized  # the laptop and phone page fixture

LESSON = "/episodes/recipe-3d"

# Each try link's href and the diagram it shows: its own data-diagram, else its step's.
LINKS = """() => [...document.querySelectorAll('section.step[id^=step-]')].flatMap(s =>
    [...s.querySelectorAll('a.try')].map((a, i) => [s.id, i, a.getAttribute('href'),
        a.dataset.diagram || s.dataset.diagram]))"""


# Whether a step's heading is on screen and not under anything (a phone's pinned diagram).
HEADING_SHOWN = """(id) => {
    const h = document.querySelector('#' + id + ' h2');
    const r = h.getBoundingClientRect();
    const x = r.left + Math.min(r.width, 40) / 2, y = r.top + r.height / 2;
    if (y < 0 || y >= innerHeight) return false;
    const hit = document.elementFromPoint(x, y);
    return !!hit && h.contains(hit);
}"""


def opened_shows(page, href: str, step_id: str, diagram: str, where: str) -> None:
    page.goto(href)
    wait_drawn(page)
    share = page.evaluate(SHOWN, diagram)
    assert share >= page.need, f"{where} opened at its URL: #{diagram} {share:.0%} in view"
    assert page.evaluate(HEADING_SHOWN, step_id), f"{where} opened at its URL: not at {step_id}"


def test_step_13s_first_link_opened_shows_the_layer_view(sized):
    page = sized
    page.goto(LESSON)
    wait_drawn(page)
    href = page.locator("#step-13 a.try").first.get_attribute("href")
    assert page.evaluate("() => document.getElementById('step-13').dataset.diagram") == \
        "recipe-layer"
    opened_shows(page, href, "step-13", "recipe-layer", "step-13 link 0")


def test_each_ep08_link_opened_shows_its_diagram(sized):
    page = sized
    page.goto(LESSON)
    wait_drawn(page)
    links = page.evaluate(LINKS)
    assert len(links) >= 30, links
    seen: set[str] = set()
    for step_id, index, href, diagram in links:
        if href in seen:  # a URL an earlier step's link has: that step's diagram shows
            continue
        seen.add(href)
        opened_shows(page, href, step_id, diagram, f"{step_id} link {index}")
