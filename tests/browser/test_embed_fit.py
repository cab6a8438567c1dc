"""Every single-diagram embed fits a 360-px frame (issue 19), in Chromium: at 360 px and at
344 px (the frame less a classic scroll bar) nothing runs past the frame's right edge, nothing
is cut by a box that scrolls or clips it (EP04's split once clipped its right badge), and its
chart's text labels neither overlap nor leave the chart (tests/browser/test_text_fits.py)."""

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from app.labkit.render import embed_path
from tests.browser.test_text_fits import CROWDING, SELECTORS

EMBEDS = [(n, d.name) for n, v in sorted(VIEWS.items()) if n != "playground"
          for d in v.diagrams]  # the playground's embeds are these labs' diagrams again

CUT = """() => {
    const out = [];
    const clipper = el => {
        for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
            if (getComputedStyle(e).overflowX !== 'visible') return e;
        }
        return null;
    };
    for (const el of document.querySelectorAll('main *')) {
        if (el.closest('svg')) continue;  // plotly's own drawing: measured by its labels
        const r = el.getBoundingClientRect();
        if (!r.width || !r.height) continue;
        if (r.right > innerWidth + 0.5) out.push(`${el.className || el.tagName} runs past the`
            + ` frame (${Math.round(r.right)} > ${innerWidth})`);
        const c = clipper(el);
        if (!c) continue;
        const b = c.getBoundingClientRect();
        if (r.right > b.right + 0.5 || r.left < b.left - 0.5) {
            out.push(`${el.className || el.tagName} cut by ${c.className} by`
                + ` ${Math.round(Math.max(r.right - b.right, b.left - r.left))} px`);
        }
    }
    return out;
}"""


@pytest.fixture(scope="module")
def narrow(browser, live_server):
    pages = {}
    for width in (360, 344):
        context = browser.new_context(viewport={"width": width, "height": 640},
                                      base_url=live_server)
        pages[width] = context.new_page()
    yield pages
    for page in pages.values():
        page.context.close()


@pytest.mark.parametrize(("name", "diagram"), EMBEDS)
def test_each_embed_fits_a_360_px_frame(narrow, name, diagram):
    view = VIEWS[name]
    problems = []
    for width, page in narrow.items():
        page.goto(embed_path(view, view.diagram(diagram)))
        page.wait_for_function("""() => [...document.querySelectorAll('script.figure')]
            .every(s => { const c = document.getElementById(s.dataset.target);
                          return c && c.dataset.drawn === s.dataset.state; })""")
        problems += [f"{width} px: {p}" for p in page.evaluate(CUT)]
        problems += [f"{width} px: {p}" for p in page.evaluate(CROWDING, SELECTORS)]
    assert not problems, f"{name}/{diagram}: " + "\n".join(problems[:12])
