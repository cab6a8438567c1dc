"""On a phone the diagram is pinned under the top edge (static/css/lab.css, max-width 900px):
a step's question, scrolled to, must stop below it, not under it (round-5 cold reading,
EP01 item 6: at 390x844 the bench covered y = 0-388 and the first lines of each step's
prediction on EP01, EP02, EP03 and EP05)."""

import pytest

from tests.browser.helpers import sized_page, wait_drawn

LESSONS = ["/episodes/memory", "/episodes/data-parallel", "/episodes/zero",
           "/episodes/pipeline"]

BELOW_BENCH = """(sid) => {
    const bench = document.getElementById('bench-view').getBoundingClientRect();
    const step = document.getElementById(sid);
    const form = step.querySelector('form.predict-form') || step;
    const top = form.getBoundingClientRect().top;
    const hit = document.elementFromPoint(innerWidth / 2, top + 12);
    return {top, bench: bench.bottom, uncovered: !!hit && form.contains(hit)};
}"""


@pytest.fixture
def phone(browser, live_server):
    with sized_page(browser, live_server, 390, 844, touch=True) as page:
        yield page


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_steps_prediction_scrolled_to_stops_below_the_pinned_diagram(phone, lesson):
    phone.goto(lesson)
    wait_drawn(phone)
    ids = phone.eval_on_selector_all("section.step form.predict-form",
                                     "forms => forms.map(f => f.closest('section.step').id)")
    assert ids
    for sid in ids:
        phone.locator(f"#{sid} form.predict-form").scroll_into_view_if_needed()
        seen = phone.evaluate(BELOW_BENCH, sid)
        assert seen["top"] >= seen["bench"] and seen["uncovered"], (sid, seen)
