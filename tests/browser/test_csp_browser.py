"""The Content-Security-Policy holds in Chromium with no 'unsafe-inline' for styles: on every
lesson page (loaded, each "try it" link and case button swapped in, a slider moved, dark mode
on) not one violation is reported (every embed, light, dark and with controls:
test_hosting_browser's walk under BASE_PATH, with the same checks), the colours
and sizes that templates compute still reach the page (through CSSOM, static/js/lab.js), and
static/css/plotly.css holds exactly the rules the pinned plotly.js would insert itself."""

import json
from pathlib import Path

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from tests.browser.helpers import ANSWERED, assert_painted, release, wait_drawn
from tests.browser.plotly_css import OUT, css_text, plotly_rules

BUNDLE = json.loads((Path(__file__).resolve().parents[2] / "static/vendor/plotly-bundle.json")
                    .read_text())
WATCH = """window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  [e.violatedDirective, e.blockedURI, (e.target && e.target.outerHTML || '').slice(0, 120)]
    .join(' ')));"""


@pytest.fixture()
def tab(browser, live_server):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(WATCH)
    page = context.new_page()
    page.reports = []
    page.on("console", lambda m: "Content Security Policy" in m.text
            and page.reports.append(m.text[:200]))
    page.on("pageerror", lambda exc: page.reports.append(f"pageerror {exc}"))
    yield page
    context.close()


def settle(page) -> None:
    """The page loaded, the answer just received swapped in, and its charts drawn. Counted only
    once swapped: an answer may carry no figure at all (EP08's broken plan: "the chart keeps
    the last plan that could run"), and one counted before its swap would wait forever for the
    figures it removes (a CI run: EP08's nodes slider at 1, TP 8 x PP 8 = 64 GPUs on 8)."""
    page.wait_for_load_state("networkidle")
    page.wait_for_function(ANSWERED)
    if page.locator("script.figure[data-target]").count():
        wait_drawn(page)


def check(page, where: str) -> None:
    violations = page.evaluate("window.__csp")
    assert not violations and not page.reports, (where, violations, page.reports)
    assert_painted(page, where)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_a_lesson_walked_through_reports_no_violation(tab, live_server, name):
    view = VIEWS[name]
    tab.goto(live_server + view.episode.path)
    settle(tab)
    check(tab, "load")
    links = tab.locator("a.try, a.case")
    for i in range(links.count()):
        link = links.nth(i)
        release(link)  # a step's link, held until its guess or why, as a student opens it
        if not link.is_visible():
            link.scroll_into_view_if_needed()
        with tab.expect_response(lambda r: view.episode.path in r.url):
            link.click()
        settle(tab)
        check(tab, link.get_attribute("href"))
    slider = tab.locator("form.controls input[type=range]:not([disabled])").first
    if slider.count():
        low = slider.get_attribute("min")
        with tab.expect_response(lambda r: view.episode.path in r.url):
            slider.fill(low)
        settle(tab)
        check(tab, f"slider at {low}")
    tab.locator("#theme-toggle").click()
    settle(tab)
    check(tab, "dark")


def test_the_policy_allows_no_inline_style(tab, live_server):
    response = tab.goto(live_server + "/episodes/pipeline")
    policy = response.headers["content-security-policy"]
    assert "style-src 'self';" in policy and "unsafe-inline" not in policy


def test_swagger_ui_used_reports_no_violation(tab, live_server):
    """/docs without 'unsafe-inline': loaded, an operation opened, tried and executed, a
    schema unfolded, and not one violation (Redoc's /redoc keeps 'unsafe-inline' for its
    styled-components <style> elements, app/docs.py)."""
    response = tab.goto(live_server + "/docs")
    policy = response.headers["content-security-policy"]
    assert "style-src 'self';" in policy and "unsafe-inline" not in policy
    tab.locator(".opblock-summary-path[data-path='/api/memory']").click()
    tab.locator(".try-out__btn").click()
    tab.locator(".execute").click()
    tab.locator(".responses-wrapper .live-responses-table").wait_for()
    schema = tab.locator("section.models article").first  # the list is open by default
    schema.locator(".json-schema-2020-12-expand-deep-button").click()  # one schema unfolded
    schema.locator(".json-schema-2020-12-body:not(.json-schema-2020-12-body--collapsed)"
                   ).first.wait_for()
    check(tab, "/docs")


def test_plotly_css_matches_the_pinned_bundle(browser):
    page = browser.new_page()
    try:
        rules = plotly_rules(page)
    finally:
        page.close()
    assert len(rules) > 10
    assert OUT.read_text() == css_text(rules), "stale: run python tests/browser/plotly_css.py"


def test_the_bundle_registers_exactly_the_listed_traces(tab, live_server):
    """static/vendor/build.mjs built the bundle from plotly-bundle.json: its trace types, and
    every lesson's charts drawn with them (test_a_lesson_walked_through... draws them all)."""
    tab.goto(live_server + "/episodes/memory")
    settle(tab)
    registered = tab.evaluate("Object.keys(Plotly.PlotSchema.get().traces).sort()")
    assert registered == sorted(BUNDLE["traces"])
