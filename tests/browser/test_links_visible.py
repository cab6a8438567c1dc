"""Every "try it" link visibly changes the diagram its step names (issue 19), in Chromium at
1280×800: the lesson walked as a student walks it, step by step, each link clicked in order;
for each one that sets another state of that diagram, the chart is rendered before and after
(``Plotly.toImage``, laid on white) and at least MIN_CHANGED of its pixels must differ. A link
that only moves an outline or a small circle changes well under that; a chosen option lit
and the others dimmed, an axis ranged to what the step compares or the quoted number drawn
changes more. An HTML diagram (EP04's split) must change its markup. Where the walk reaches
a step's first link with nothing drawn in its diagram (a lazy chart fetched at a state it
cannot draw), the link is checked from the state the step before's first link set instead
(``arrive_from_first``), where setting the state already shown fails. The lessons
test_changed_in_view walks at 1280×800 are checked in its walk, not walked twice."""

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from tests.browser.helpers import look_at, release, wait_drawn

MIN_CHANGED = 0.01

SNAP = """async ([id, slot]) => {
    const el = document.getElementById(id);
    if (!el.classList.contains('js-plotly-plot')) { window[slot] = {html: el.innerHTML}; return; }
    const url = await Plotly.toImage(el, {format: 'png', width: el.clientWidth,
                                          height: el.clientHeight});
    const img = new Image();
    img.src = url;
    await img.decode();
    const canvas = document.createElement('canvas');
    canvas.width = img.width;
    canvas.height = img.height;
    const ctx = canvas.getContext('2d');
    ctx.fillStyle = '#fff';  // as on the page: a dimmed bar differs in colour, not only alpha
    ctx.fillRect(0, 0, img.width, img.height);
    ctx.drawImage(img, 0, 0);
    window[slot] = {w: img.width, h: img.height,
                    px: ctx.getImageData(0, 0, img.width, img.height).data};
}"""

CHANGED = """() => {
    const a = window.__before, b = window.__after;
    if (a.html !== undefined) return a.html === b.html ? 0 : 1;
    if (a.w !== b.w || a.h !== b.h) return 1;
    let n = 0;
    for (let i = 0; i < a.px.length; i += 4) {
        const d = Math.abs(a.px[i] - b.px[i]) + Math.abs(a.px[i + 1] - b.px[i + 1])
            + Math.abs(a.px[i + 2] - b.px[i + 2]);
        if (d > 30) n++;
    }
    return n / (a.px.length / 4);
}"""

STATE = """id => {
    const s = document.querySelector('script.figure[data-target="' + id + '"]');
    const el = document.getElementById(id);
    if (!s && !el) return null;  // not on the page in this state (a panel that says why)
    return s ? s.dataset.state : (el.closest('[data-state]') || el).dataset.state || el.innerHTML;
}"""


# A chart's place with nothing drawn in it: a lazy diagram fetched at a state it cannot draw
# (EP08 step 14's 2-D against 3-D chart after step 13's last link, a mixture-of-experts plan),
# or one not fetched at all.
UNDRAWN = """id => {
    const el = document.getElementById(id);
    return !!el && el.classList.contains('chart') && !el.classList.contains('js-plotly-plot');
}"""


def arrive_from_first(page, step_id: str, diagram: str, previous_first: str | None) -> bool:
    """Before a step's first link, where the walk's state draws nothing in the step's diagram
    (so the pixel rule would count any chart as a change): open the page at the state the
    step before's first link set, as a student who followed only that link arrives, release
    the step and bring its diagram into view, drawn. True where it did: there a first link
    that sets the state already shown changes nothing, and fails the rule (round-6 reading,
    EP08 item 11: step 14's first link set step 13's first link's plan again)."""
    if previous_first is None or not page.evaluate(UNDRAWN, diagram):
        return False
    page.goto(previous_first)
    wait_drawn(page)
    release(page.locator(f"#{step_id} a.try").first)
    look_at(page, diagram)
    return True


class LinkPixels:
    """The rule over one lesson's walk, link by link: ``before(diagram, step_id, index, href)``
    ahead of a link's click, ``after(diagram, where)`` once its answer is drawn, ``check()`` at
    the walk's end. A link counts where it sets another state of its diagram; one that draws a
    diagram absent before counts without a pixel check. A step's first link met with nothing
    drawn in its diagram is checked from the step before's first link (``arrive_from_first``)."""

    def __init__(self, page, name: str):
        self.page, self.name = page, name
        self.state: str | None = None
        self.checked, self.unchanged = 0, []
        self.first: str | None = None  # the href of the last step's first link
        self.arrived = False

    def before(self, diagram: str, step_id: str, index: int, href: str) -> None:
        self.arrived = False
        if index == 0:
            self.arrived = arrive_from_first(self.page, step_id, diagram, self.first)
            self.first = href
        self.state = self.page.evaluate(STATE, diagram)
        if self.state is not None:
            self.page.evaluate(SNAP, [diagram, "__before"])

    def after(self, diagram: str, where: str) -> None:
        after = self.page.evaluate(STATE, diagram)
        assert after is not None, f"{self.name} {where}: no #{diagram} after it"
        if after == self.state:
            if self.arrived:
                self.unchanged.append(f"{where} #{diagram}: the state the step before's "
                                      "first link set, shown already")
            return  # the state it shows already: nothing to change
        self.checked += 1
        if self.state is None:  # drawn now, where the state before had no such chart
            return
        self.page.evaluate(SNAP, [diagram, "__after"])
        share = self.page.evaluate(CHANGED)
        if share < MIN_CHANGED:
            self.unchanged.append(f"{where} #{diagram}: {share:.1%} of pixels")

    def check(self) -> None:
        assert self.checked >= 3, f"{self.name}: only {self.checked} links change a state"
        assert not self.unchanged, (
            f"{self.name}: links that barely change their diagram: {self.unchanged}")


# The lessons test_changed_in_view walks link by link check this rule in that walk.
WALKED_THERE = {"pipeline", "cp", "moe", "recipe", "placement", "precision", "failures",
                "playground"}


@pytest.mark.parametrize("name", sorted(set(VIEWS) - WALKED_THERE))
def test_each_link_changes_the_diagram_its_step_names(page, name):
    view = VIEWS[name]
    page.goto(view.episode.path)
    wait_drawn(page)
    steps = page.evaluate("""() => [...document.querySelectorAll('section.step[id^=step-]')]
        .map(s => [s.id, s.dataset.diagram, [...s.querySelectorAll('a.try')]
            .map(a => [a.textContent.trim(), a.getAttribute('href'), a.dataset.diagram || ''])])""")
    rule = LinkPixels(page, name)
    for step_id, step_diagram, links in steps:
        for index, (label, href, own) in enumerate(links):
            diagram = own or step_diagram
            link = page.locator(f"#{step_id} a.try").nth(index)
            release(link)
            rule.before(diagram, step_id, index, href)
            query = href.split("?", 1)[1]
            link.click()
            page.wait_for_url(lambda url, q=query: url.endswith(q))
            wait_drawn(page)
            rule.after(diagram, f"{step_id} {label!r}")
    rule.check()
