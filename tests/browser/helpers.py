"""Browser-test helpers: wait for lab.js to draw, read a state's JSON twin, answer a drill,
release a step's try links (or commit its guess), open a page at a given size."""

import html
import json
import re
import urllib.request
from contextlib import contextmanager

# The chart a control moves: the first drawn one its group title names, as lab.js picks it.
MOVED_BY = """(input) => {
    const first = () => document.querySelector(
        '#bench-view .chart, #bench-view figure.tp-split').id;
    for (let level = input; level && level !== input.form; level = level.parentElement) {
        for (let item = level.previousElementSibling; item; item = item.previousElementSibling) {
            if (!item.matches('.group-title[data-diagrams]')) continue;
            for (const id of item.dataset.diagrams.split(/\\s+/)) {
                const el = document.getElementById(id);
                if (el && el.getBoundingClientRect().height > 0) return id;
            }
            return first();
        }
    }
    return first();
}"""

# Whether a chart shows on screen at all: inside the window and its scrolling bench view.
IN_SIGHT = """(chart) => {
    const r = chart.getBoundingClientRect();
    const view = chart.closest('.bench-view');
    const v = view ? view.getBoundingClientRect() : {top: 0, bottom: innerHeight};
    return r.height > 0 && r.bottom > Math.max(0, v.top) && r.top < Math.min(innerHeight, v.bottom);
}"""

# Every chart shows its figure's state, or (after a control's answer, static/js/lab.js) is out
# of sight and marked stale with that state: lab.js draws it when it scrolls into view. A lazy
# diagram's place (templates/partials/_figure.html ``lazy``) has no figure until it is fetched,
# as it comes into view: one in sight must show its place's state (fetched and drawn), or wait
# for its lesson step's guess (lab.js: awaiting-guess); one out of sight is not fetched yet.
# UNDRAWN names each chart that does not yet, with what it holds (data-drawn, data-stale, its
# figure's data-state, its box), so a wait that times out says which one and why.
UNDRAWN = """() => {
    const inSight = IN_SIGHT;
    const box = el => {
        const r = el.getBoundingClientRect();
        return `top ${Math.round(r.top)} bottom ${Math.round(r.bottom)} of ${innerHeight}`;
    };
    const scripts = [...document.querySelectorAll('script.figure[data-target]')];
    if (!scripts.length) return ['no figure script (script.figure[data-target]) in the page'];
    const out = [];
    scripts.forEach(s => {
        const chart = document.getElementById(s.dataset.target);
        if (chart && chart.data && (chart.dataset.drawn === s.dataset.state
            || (chart.dataset.stale === s.dataset.state && !inSight(chart)))) return;
        out.push(!chart ? `#${s.dataset.target}: no such element`
            : `#${chart.id}: state ${s.dataset.state}, drawn ${chart.dataset.drawn}, `
              + `stale ${chart.dataset.stale}, plotted ${!!chart.data}, `
              + `${inSight(chart) ? 'in' : 'out of'} sight (${box(chart)})`);
    });
    document.querySelectorAll('.lazy-diagram[data-state]').forEach(place => {
        const chart = place.querySelector('.chart');
        if (!inSight(place) || place.classList.contains('awaiting-guess')
            || (chart && chart.data && chart.dataset.drawn === place.dataset.state)) return;
        out.push(`#${place.id} (lazy, in sight, ${box(place)}): state ${place.dataset.state}, `
            + `drawn ${chart && chart.dataset.drawn}, plotted ${!!(chart && chart.data)}`);
    });
    return out;
}""".replace("IN_SIGHT", IN_SIGHT)
DRAWN = f"() => ({UNDRAWN})().length === 0"

# Every answer htmx asked for is swapped in: htmx keeps its request class on the asking element
# from the request until its answer is swapped (htmx 2: xhr.onload swaps, then removes it). A
# test that saw the response arrive must wait for this before it reads the page: under a slow
# CPU the swap comes well after the response.
ANSWERED = "() => !document.querySelector('.htmx-request')"


def assert_painted(page, where: str) -> None:
    """Every colour and size a template computes reached the page through CSSOM
    (static/js/lab.js): a swatch left transparent or a bar not at its width means that path,
    the one the Content-Security-Policy leaves, did not run."""
    unpainted = page.evaluate("""() => [...document.querySelectorAll('[data-colour]')]
        .filter(el => getComputedStyle(el).backgroundColor === 'rgba(0, 0, 0, 0)')
        .map(el => el.outerHTML.slice(0, 100))""")
    assert not unpainted, (where, unpainted)
    unsized = page.evaluate("""() => [...document.querySelectorAll('[data-width-px]')]
        .filter(el => Math.abs(el.getBoundingClientRect().width - el.dataset.widthPx) > 1)
        .map(el => el.outerHTML.slice(0, 100))""")
    assert not unsized, (where, unsized)


def wait_drawn(page) -> None:
    """Wait until htmx's answers are swapped in (ANSWERED) and every chart shows its state
    (DRAWN); on timeout, fail naming the charts that do not."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.wait_for_function(ANSWERED)
    try:
        page.wait_for_function(DRAWN)
    except PlaywrightTimeout as exc:
        undrawn = page.evaluate(UNDRAWN) or ["none now: drawn just after the timeout"]
        raise AssertionError("not drawn at " + page.url + ":\n  " + "\n  ".join(undrawn)
                             ) from exc


def look_at(page, chart_id: str) -> None:
    """Scroll a chart into view and wait until it is drawn: after a control's answer, a chart
    out of sight is drawn only then."""
    page.locator(f"#{chart_id}").scroll_into_view_if_needed()
    wait_drawn(page)


def api_json(live_server: str, name: str, query: str = "") -> dict:
    """The lab's JSON twin of a state, from the live server."""
    with urllib.request.urlopen(f"{live_server}/api/{name}?{query}") as response:
        return json.load(response)


def try_href(client, lesson: str, step: int, text: str) -> str:
    """The href of lesson step ``step``'s one try link whose label holds ``text``, read off
    the server's HTML (the in-process app, ``client``): a test that opens the step's state by
    its URL needs no page load in the browser to find it."""
    from tests.app.test_answers_hidden import page as lesson_html
    from tests.app.test_step_beats import steps

    step_html = dict(steps(lesson_html(client, lesson)))[f"step-{step}"]
    found = [html.unescape(href) for href, label in re.findall(
        r'<a class="try" href="([^"]+)"[^>]*>(.*?)</a>', step_html, re.S)
        if text in html.unescape(re.sub(r"<[^>]+>", "", label))]
    assert len(found) == 1, f"{lesson} step {step}: try links labelled {text!r}: {found}"
    return found[0]


def release_case(button) -> None:
    """Release a case button lab.js holds until a step's guess (data-held-until: EP05's bad
    case, whose whole state is step 1's answer), as a student does: open that step's why."""
    from playwright.sync_api import expect

    step = button.get_attribute("data-held-until")
    if step and button.get_attribute("aria-disabled") == "true":
        button.page.locator(f"#{step} .predict-beat > details.why > summary").click()
        expect(button).not_to_have_attribute("aria-disabled", "true")


def click_cases(page, view, before_click=None):
    """Click the lesson's good then bad case button, yielding each kind once it is drawn;
    ``before_click(kind)``, where given, runs once the button is released, just before it."""
    for kind, case in (("good", view.good), ("bad", view.bad)):
        if not case:
            continue
        release_case(page.locator(f"#case-{kind}"))
        if before_click:
            before_click(kind)
        page.locator(f"#case-{kind}").click()
        page.wait_for_url(lambda url, q=case.query_string: url.endswith(q))
        wait_drawn(page)
        yield kind


def answer_drill(page, value: str, feedback: str, index: int = 0) -> None:
    """Answer the page's ``index``-th drill with ``value`` and expect ``feedback`` back
    (the drill's form is swapped by htmx, so it is found again each time)."""
    from playwright.sync_api import expect

    drill = page.locator("form.drill").nth(index)
    drill.locator("input[name=answer]").fill(value)
    drill.locator("button").click()
    expect(page.locator(".drill-feedback").nth(index)).to_contain_text(feedback)


# The prediction whose try links lab.js still holds (before its guess or "show me") and that
# holds the given link: its id, or null for a link that is not held.
HELD_BY = """(link) => {
    const moves = link.closest('.predict-beat > .moves.before-guess');
    return moves ? moves.parentElement.id : null;
}"""


def show_me(page, why: str) -> None:
    """Open a prediction's why ("show me") by its summary, as a student does, and wait until
    lab.js has unmasked the step's answers: the details' toggle event runs after the click,
    so a figure read straight after it may still be masked. ``why`` is the details' id."""
    page.locator(f"#{why} > summary").click()
    page.wait_for_function(
        "(id) => document.getElementById(id).closest('.step').hasAttribute('data-guessed')",
        arg=why)


def release(link) -> None:
    """Release the step a try link (a locator) sits in, as a student does before following it:
    open the why ("show me") of the prediction it is under. lab.js holds such a link until its
    step's guess or why (static/js/lab.js holdMove: a click follows nothing, the note says
    why); a link that is not held is left as it is. A test about the guess itself commits
    one instead (its form's input, then Enter)."""
    from playwright.sync_api import expect

    beat = link.evaluate(HELD_BY)
    if beat:
        link.page.locator(f"#{beat} > details.why > summary").click()
        expect(link).not_to_have_attribute("aria-disabled", "true")
        # Opening it unmasks the step's answer on its chart and fetches a diagram held for it.
        if link.page.locator("script.figure[data-target]").count():
            wait_drawn(link.page)


# The steps a drawn diagram's parts still wait for (lab.js data-veiled: the steps' ids where
# it is partly veiled, "" where whole, absent where drawn).
VEILED_BY = """id => { const el = document.getElementById(id);
    return el && el.hasAttribute('data-veiled') ? el.getAttribute('data-veiled') : null; }"""


def release_earlier(page, diagram: str, step_id: str) -> None:
    """Where a link drew ``diagram`` with parts still waiting for steps before ``step_id``
    (EP07's crossover across nodes holds its all-to-alls for step 3), open those steps' whys,
    as a student who walked the lesson in order has guessed them: a walk that lost them (a
    page opened afresh, test_links_visible.arrive_from_first) checks the link on the diagram
    drawn, not on two states veiled alike."""
    veiled = page.evaluate(VEILED_BY, diagram)
    if not veiled:
        return
    order = page.evaluate("() => [...document.querySelectorAll('section.step')].map(s => s.id)")
    earlier = [s for s in veiled.split() if s in order and order.index(s) < order.index(step_id)]
    for step in earlier:
        page.locator(f"#{step} .predict-beat > details.why > summary").first.click()
        page.wait_for_function(f"() => document.querySelector('#{step}[data-guessed]')")
    if earlier:
        wait_drawn(page)


def commit_guess(page, step: int, value: str = "1") -> None:
    """Commit a guess in lesson step ``step``'s prediction, as a student does: its first
    choice, or ``value`` typed where it asks for a number, then its commit button; wait until
    lab.js releases the step's try links (holdMove drops ``.moves.before-guess``), which also
    unmasks the step's answer on its chart."""
    form = page.locator(f"#step-{step} form.predict-form")
    if form.locator("input[type=radio]").count():
        form.locator("input[type=radio]").first.check()
    else:
        form.locator("input[name=guess]").fill(value)
    form.locator(".predict-commit").click()
    page.wait_for_function(f"() => !document.querySelector('#step-{step} .moves.before-guess')")


# A guess committed whatever covers its form (a phone's bench drawer takes a pointer click
# aimed through it): its first choice, or 1, then its commit button, as lab.js takes a click.
GUESS = """(n) => {
    const form = document.querySelector(`#step-${n} form.predict-form`);
    const choice = form.querySelector('input[type=radio]');
    if (choice) choice.click(); else form.querySelector('input[name=guess]').value = '1';
    form.querySelector('.predict-commit').click();
}"""


def commit_guess_by_script(page, step: int) -> None:
    """``commit_guess`` where the bench covers the form (a phone): the same clicks, dispatched
    to the form's own elements; wait until the step's try links are released."""
    page.evaluate(GUESS, step)
    page.wait_for_function(f"() => !document.querySelector('#step-{step} .moves.before-guess')")


def follow(target, url_part: str) -> None:
    """Click ``target`` (a locator: a try link, a case button), wait until the URL carries
    ``url_part`` and lab.js has drawn the new state (a held case button released first)."""
    if target.get_attribute("data-held-until"):
        release_case(target)
    target.click()
    target.page.wait_for_url(f"**{url_part}**")
    wait_drawn(target.page)


@contextmanager
def sized_page(browser, base_url: str, width: int, height: int, *, touch: bool = False):
    """A page of its own context at width x height; with ``touch``, a phone's (mobile
    viewport, touch events) below 500 px. ``page.phone`` says which; JavaScript errors the
    page raised fail the test when it closes."""
    phone = touch and width < 500
    context = browser.new_context(viewport={"width": width, "height": height},
                                  is_mobile=phone, has_touch=phone, base_url=base_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.phone = phone  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"JavaScript errors: {errors}"


# A bench's plotted data and its visible text (the charts' meta left out: lab.js keeps a
# veiled chart's real figure only in its script, test_answers_hidden_browser's model).
SHOWN = """(section) => ({text: document.querySelector(section).innerText,
    charts: Object.fromEntries(
        [...document.querySelectorAll(section + ' .js-plotly-plot')].map(gd => [
            gd.id, JSON.stringify({data: gd.data,
                                   notes: (gd.layout.annotations || []).map(a => a.text)})]))})"""


def bench_shown(page, section: str) -> dict:
    """What the bench `section` (a selector) shows: its text and each chart as plotted."""
    return page.evaluate(SHOWN, section)
