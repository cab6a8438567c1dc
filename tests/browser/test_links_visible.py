"""Every "try it" link visibly changes the diagram its step names (issue 19), in Chromium at
1280×800: the lesson walked as a student walks it, step by step, each link clicked in order;
for each one that sets another state of that diagram, the chart is rendered before and after
(``Plotly.toImage``, laid on white) and at least MIN_CHANGED of its pixels must differ. A link
that only moves an outline or a small circle changes well under that; a chosen option lit
and the others dimmed, an axis ranged to what the step compares or the quoted number drawn
changes more. An HTML diagram (EP04's split) must change its markup. The lessons
test_changed_in_view walks at 1280×800 are checked in its walk, not walked twice."""

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from tests.browser.helpers import release, wait_drawn

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


class LinkPixels:
    """The rule over one lesson's walk, link by link: ``before(diagram)`` ahead of a link's
    click, ``after(diagram, where)`` once its answer is drawn, ``check()`` at the walk's end.
    A link counts where it sets another state of its diagram; one that draws a diagram absent
    before counts without a pixel check."""

    def __init__(self, page, name: str):
        self.page, self.name = page, name
        self.state: str | None = None
        self.checked, self.unchanged = 0, []

    def before(self, diagram: str) -> None:
        self.state = self.page.evaluate(STATE, diagram)
        if self.state is not None:
            self.page.evaluate(SNAP, [diagram, "__before"])

    def after(self, diagram: str, where: str) -> None:
        after = self.page.evaluate(STATE, diagram)
        assert after is not None, f"{self.name} {where}: no #{diagram} after it"
        if after == self.state:
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
            rule.before(diagram)
            query = href.split("?", 1)[1]
            link.click()
            page.wait_for_url(lambda url, q=query: url.endswith(q))
            wait_drawn(page)
            rule.after(diagram, f"{step_id} {label!r}")
    rule.check()
