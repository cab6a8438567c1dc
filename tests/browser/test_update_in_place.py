"""A control's answer, in Chromium (static/js/lab.js, "A control's answer updates its section
in place" and "Charts out of sight wait"): the section it leaves is the answer's markup (as
a whole swap would leave it), its live charts kept; a chart whose figure did not change is
not redrawn; a chart out of sight is marked stale and drawn when it scrolls into view."""

import pytest

from tests.browser.helpers import look_at, sized_page, wait_drawn

# Plotly.react calls per chart id, counted from here on.
COUNT_REACTS = """() => {
    window.__reacts = {};
    const react = window.Plotly.react;
    window.Plotly.react = function (el, ...rest) {
        window.__reacts[el.id] = (window.__reacts[el.id] || 0) + 1;
        return react.call(this, el, ...rest);
    };
    for (const chart of document.querySelectorAll('.chart')) chart.__kept = true;
}"""

# The section's markup and the same section as the server answers this URL to htmx, both
# with each chart reduced to its id (a live chart holds its plot) and no style attributes
# (lab.js paints through CSSOM what data attributes say).
MARKUP = """async (id) => {
    const plain = root => {
        const copy = root.cloneNode(true);
        for (const chart of copy.querySelectorAll('[hx-preserve]')) {
            const spot = document.createElement('div');
            spot.id = chart.id;
            chart.replaceWith(spot);
        }
        for (const el of [copy, ...copy.querySelectorAll('[style]')]) el.removeAttribute('style');
        // lab.js masks a step's answer until its guess (39382b5): its text is the page's
        // to swap, so both sides compare without it.
        for (const el of copy.querySelectorAll('.answer-mask')) {
            el.classList.remove('masked');
            el.textContent = '';
        }
        return copy.outerHTML;
    };
    const live = document.getElementById(id);
    const answer = await fetch(location.href, {headers: {'HX-Request': 'true', 'HX-Target': id}});
    const template = document.createElement('template');
    template.innerHTML = await answer.text();
    return [plain(live), plain(template.content.getElementById(id))];
}"""

KEPT = "() => [...document.querySelectorAll('.chart')].every(c => c.__kept)"

# (lesson, section, control, value): a slider; a checkbox that adds a readout line (the
# section's shape changes); EP12's tp=16, which replaces a panel by its error.
MOVES = [
    ("/episodes/zero", "zero-stages", "micro_batch", "2"),
    ("/episodes/zero", "zero-stages", "offload", True),
    ("/episodes/tensor-parallel", "tp-lab", "micro_batch", "2"),
    ("/episodes/playground", "playground-panels", "micro_batch", "2"),
    ("/episodes/playground", "playground-panels", "tp", "16"),
]


def move(page, control: str, value) -> None:
    field = page.locator(f'#drawer [name="{control}"]')
    if value is True:
        field.check()
        page.wait_for_url(f"**{control}=true**")
    else:
        field.fill(value)
        page.wait_for_url(f"**{control}={value}**")
    wait_drawn(page)


@pytest.mark.parametrize("path,section,control,value", MOVES)
def test_an_answer_leaves_the_answers_markup_and_keeps_the_charts(page, path, section,
                                                                   control, value):
    page.goto(path)
    wait_drawn(page)
    if not page.locator(f"#{section}").count():
        pytest.fail(f"{path} has no #{section}")
    page.evaluate(COUNT_REACTS)
    move(page, control, value)
    live, answer = page.evaluate(MARKUP, section)
    assert live == answer
    assert page.evaluate(KEPT), "a live chart was replaced"


def test_a_figure_that_did_not_change_is_not_redrawn(page):
    page.goto("/episodes/zero")
    wait_drawn(page)
    figures = "() => Object.fromEntries([...document.querySelectorAll('script.figure')]" \
              ".map(s => [s.dataset.target, s.textContent]))"
    before = page.evaluate(figures)
    page.evaluate(COUNT_REACTS)
    move(page, "micro_batch", "2")
    after = page.evaluate(figures)
    same = [chart for chart in before if before[chart] == after[chart]]
    changed = [chart for chart in before if before[chart] != after[chart]]
    assert same and changed, (same, changed)
    for chart in changed:
        look_at(page, chart)
    reacts = page.evaluate("window.__reacts")
    assert all(chart not in reacts for chart in same), reacts
    assert all(reacts.get(chart) == 1 for chart in changed), reacts
    state = page.evaluate("document.querySelector('#zero-stages').dataset.state")
    for chart in same:  # it stands for the new state all the same
        assert page.locator(f"#{chart}").get_attribute("data-drawn") == state
    assert page.evaluate(KEPT)


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["laptop", "phone"])
def test_a_chart_out_of_sight_is_drawn_when_scrolled_into_view(browser, live_server, size):
    with sized_page(browser, live_server, *size, touch=True) as page:
        page.goto("/episodes/playground")
        wait_drawn(page)
        assert page.locator("[data-stale]").count() == 0  # a page draws every chart
        page.evaluate(COUNT_REACTS)
        if page.phone:
            page.locator(".drawer-toggle").click()
        move(page, "micro_batch", "2")
        stale = page.evaluate("[...document.querySelectorAll('[data-stale]')].map(c => c.id)")
        assert stale, "every chart was redrawn, those out of sight too"
        state = page.evaluate("document.querySelector('#playground-panels').dataset.state")
        chart = page.locator(f"#{stale[-1]}")
        assert chart.get_attribute("data-stale") == state
        assert chart.get_attribute("data-drawn") != state
        summary = page.evaluate(
            "id => JSON.parse(document.querySelector(`script.figure[data-target='${id}']`)"
            ".textContent).summary", stale[-1])
        assert chart.get_attribute("aria-label") == summary  # told at once, drawn when seen
        reacts = page.evaluate("window.__reacts")
        assert stale[-1] not in reacts
        if page.phone:
            page.locator(".drawer-toggle").click()
        look_at(page, stale[-1])
        assert chart.get_attribute("data-drawn") == state
        assert chart.get_attribute("data-stale") is None
        assert page.evaluate("window.__reacts")[stale[-1]] == 1


# Plotly.react on one chart, its promise held until window.__release(): a slow machine's draw.
HOLD = """(id) => {
    window.__held = [];
    const react = window.Plotly.react;
    window.Plotly.react = function (el, ...rest) {
        const drawing = react.call(this, el, ...rest);
        if (el.id !== id) return drawing;
        return new Promise(done => window.__held.push(() => drawing.then(done)));
    };
    window.__release = () => { window.__held.splice(0).forEach(go => go()); };
}"""

CHART_SHOWS_ITS_STATE = """(id) => {
    window.__release();
    const script = document.querySelector(`script.figure[data-target='${id}']`);
    return document.getElementById(id).dataset.drawn === script.dataset.state;
}"""


def test_a_late_draw_does_not_mark_a_chart_with_an_older_state(page):
    """Two answers close together: the first's Plotly.react on a chart resolves only after the
    second answer, whose figure for that chart is the same (micro_batch=2 changes EP03's
    crossover chart; offload then leaves it as it is). The chart must end marked with the
    second answer's state, the one it shows, not the first's."""
    chart = "zero-crossover"
    page.goto("/episodes/zero")
    wait_drawn(page)
    look_at(page, chart)
    before = page.locator(f"script.figure[data-target='{chart}']").text_content()
    page.evaluate(HOLD, chart)
    move_without_waiting = page.locator('#drawer [name="micro_batch"]')
    move_without_waiting.fill("2")
    page.wait_for_url("**micro_batch=2**")
    page.wait_for_function("() => window.__held.length > 0")  # its draw has started, held
    first = page.locator(f"script.figure[data-target='{chart}']").text_content()
    assert first != before, "micro_batch=2 no longer changes the chart: pick another move"
    page.locator('#drawer [name="offload"]').check()
    page.wait_for_url("**offload=true**")
    page.wait_for_function(
        "(id) => document.querySelector(`script.figure[data-target='${id}']`)"
        ".dataset.state.includes('offload')", arg=chart)
    assert page.locator(f"script.figure[data-target='{chart}']").text_content() == first
    page.wait_for_function(CHART_SHOWS_ITS_STATE, arg=chart, timeout=10_000)
    wait_drawn(page)
    page.evaluate("() => window.__release()")
    state = page.locator(f"script.figure[data-target='{chart}']").get_attribute("data-state")
    assert page.locator(f"#{chart}").get_attribute("data-drawn") == state
