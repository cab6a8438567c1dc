"""The lab served under BASE_PATH=/lab, walked in Chromium: every page of every registered lab
and every embed (light, dark with its controls, each diagram dark) loads all its assets from
/lab with no CSP violation, no script error and every computed colour and size painted; an
htmx swap fetches and pushes /lab URLs; progress is kept in the browser and survives an
export and an import."""

import json

import pytest
from playwright.sync_api import expect

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import DRILLS, VIEWS
from tests.browser.helpers import ANSWERED, HELD_BY, assert_painted, release, wait_drawn
from tests.conftest import running_app

ENV = {"BASE_PATH": "/lab", "PUBLIC_URL": "http://127.0.0.1"}
WATCH_CSP = """() => { window.__csp = [];
  document.addEventListener('securitypolicyviolation',
    e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI)); }"""


@pytest.fixture(scope="module")
def lab():
    with running_app(ENV, probe="/lab/healthz") as origin:
        yield origin


def watched_context(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    context.add_init_script(f"({WATCH_CSP})()")
    return context


@pytest.fixture(scope="module")
def walk(browser, lab):
    """One tab for the page walk, each page loaded into it in turn (its seen requests and
    problems emptied first): a tab per page (a context and renderer started, the plotly
    bundle fetched and compiled again) took 2.4 s a load on a loaded machine, one tab 0.9 s.
    A URL served from its cache was seen, and checked, when first asked for."""
    context = watched_context(browser)
    yield watched_page(context)
    context.close()


def watched_page(context):
    page = context.new_page()
    page.seen, page.problems = [], []
    page.on("request", lambda r: page.seen.append(r.url))
    page.on("response", lambda r: r.status >= 400 and page.problems.append(f"{r.status} {r.url}"))
    page.on("pageerror", lambda exc: page.problems.append(f"pageerror {exc}"))
    # A failed load is caught above with its URL; the console's copy of it is left out (the
    # /docs pages' browser-made /favicon.ico request sits outside BASE_PATH, and no page
    # event reports it).
    page.on("console", lambda m: m.type == "error" and "Failed to load resource" not in m.text
            and page.problems.append(f"console {m.text}"))
    return page


@pytest.fixture()
def tab(browser, lab):
    context = watched_context(browser)
    yield watched_page(context)
    context.close()


@pytest.fixture()
def walked(walk):
    walk.seen.clear()
    walk.problems.clear()
    return walk


def check_clean(page, lab):
    assert not page.evaluate("window.__csp || []"), page.evaluate("window.__csp")
    assert not page.problems, page.problems
    assert_painted(page, page.url)
    for url in page.seen:
        if not url.startswith(("data:", "blob:")):
            assert url.startswith(lab + "/lab/"), url


def pages():
    out = ["/lab/", "/lab/docs"]
    for name, view in VIEWS.items():
        # Every embed, light, dark with its controls, and each diagram dark: the
        # Content-Security-Policy's embed walk too (test_csp_browser), one load each.
        out += [f"/lab{view.episode.path}", f"/lab/embed/{name}",
                f"/lab/embed/{name}?theme=dark&controls=1"]
        out += [f"/lab/embed/{name}/{d.name}?theme=dark" for d in view.diagrams]
    return out


@pytest.mark.parametrize("path", pages())
def test_every_page_loads_clean_under_the_base_path(walked, lab, path):
    walked.goto(lab + path)
    walked.wait_for_load_state("networkidle")
    # Plotly charts must be drawn; an HTML diagram (EP04's split) has none to wait for.
    if walked.locator("script.figure[data-target]").count():
        wait_drawn(walked)
    check_clean(walked, lab)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_htmx_swaps_fetch_and_push_base_path_urls(tab, lab, name):
    view = VIEWS[name]
    tab.goto(lab + f"/lab{view.episode.path}")
    wait_drawn(tab)
    select = tab.locator("form.controls select").first
    values = select.locator("option").evaluate_all("os => os.map(o => o.value)")
    current = select.input_value()
    other = next(v for v in values if v != current)
    with tab.expect_response(lambda r: "/lab/episodes/" in r.url):
        select.select_option(other)
    tab.wait_for_function("v => location.search.includes(v)", arg=other.split("/")[0])
    assert tab.url.startswith(lab + f"/lab{view.episode.path}?")
    try_link = tab.locator("a.try").first
    if try_link.count():
        release(try_link)
        with tab.expect_response(lambda r: "/lab/episodes/" in r.url):
            try_link.click()
        wait_drawn(tab)
        assert tab.url.startswith(lab + "/lab/episodes/")
    tab.go_back()
    wait_drawn(tab)
    check_clean(tab, lab)


def test_progress_is_kept_exported_and_imported(browser, tab, lab, tmp_path):
    view = next(v for v in VIEWS.values() if v.drills) if DRILLS else next(iter(VIEWS.values()))
    tab.goto(lab + f"/lab{view.episode.path}")
    wait_drawn(tab)
    step = tab.locator("section.step[id] a.try").first
    step_id = step.evaluate("a => a.closest('section.step').id")
    tried = ("s => (JSON.parse(localStorage.getItem('lab-progress:/lab') || '{}').episodes"
             " || {})[s]?.steps || []")
    if step.evaluate(HELD_BY):
        # Before the guess the link is held (lab.js): clicked, it follows nothing and ticks
        # nothing (round-5b and round-6 cold readings). Its why opened, it does both.
        url = tab.url
        step.click(force=True)  # aria-disabled: Playwright clicks it only when forced
        expect(step.locator("xpath=..").locator(".guess-first")).to_contain_text(
            "shows this step's answer")
        assert tab.url == url
        assert step_id not in tab.evaluate(tried, view.episode.slug)
        release(step)
    with tab.expect_response(lambda r: "/lab/episodes/" in r.url):
        step.click()
    wait_drawn(tab)
    assert step_id in tab.evaluate(tried, view.episode.slug)
    if view.drills:
        drill = view.drills[0]
        form = tab.locator(f"#drill-{drill.id}")
        form.locator("input[name=answer]").fill("not a number")
        with tab.expect_response(lambda r: "/lab/drills/" in r.url):
            form.locator("button[type=submit]").click()
        tab.wait_for_function(ANSWERED)  # swapped in before it is read or typed into again
        # A wrong-format answer used no try.
        assert tab.locator(f"#drill-{drill.id} input[name=attempt]").input_value() == "1"
        tab.locator(f"#drill-{drill.id} input[name=answer]").fill(f"{drill.answer():.6g}")
        with tab.expect_response(lambda r: "/lab/drills/" in r.url):
            tab.locator(f"#drill-{drill.id} button[type=submit]").click()
        tab.wait_for_selector(f"#drill-{drill.id} .drill-feedback.right")
    tab.goto(lab + "/lab/")
    slot = tab.locator(f'[data-progress-for="{view.episode.slug}"]')
    assert "1 of" in slot.inner_text() and "steps tried" in slot.inner_text()
    if view.drills:
        assert "1 of" in slot.inner_text().split(",")[1]
    with tab.expect_download() as download:
        tab.locator("#progress-export").click()
    saved = tmp_path / "progress.json"
    download.value.save_as(saved)
    data = json.loads(saved.read_text())
    assert data["format"] == "parallelism-lab-progress"
    assert step_id in data["episodes"][view.episode.slug]["steps"]
    check_clean(tab, lab)

    fresh = browser.new_context().new_page()
    fresh.goto(lab + "/lab/")
    assert fresh.locator(f'[data-progress-for="{view.episode.slug}"]').inner_text() == ""
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "other"}')
    fresh.locator("#progress-import").set_input_files(bad)
    fresh.wait_for_function("document.getElementById('progress-status').textContent.length")
    assert "nothing changed" in fresh.locator("#progress-status").inner_text()
    fresh.locator("#progress-import").set_input_files(saved)
    fresh.wait_for_function(
        "s => document.querySelector(`[data-progress-for=\"${s}\"]`).textContent.length",
        arg=view.episode.slug)
    assert "steps tried" in fresh.locator(f'[data-progress-for="{view.episode.slug}"]').inner_text()
    fresh.context.close()
