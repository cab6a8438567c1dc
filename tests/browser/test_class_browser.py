"""A live class in Chromium against the real server: one instructor and three students.
They join with the code, answer a drill on its lesson, and the instructor's dashboard shows
each answer as it comes (polling, no reload); then reveal (the students see the class's
spread), pace (they see where they are held), reset, export, end, after which none of the
class's rows is left in the database. No script error and no CSP violation on any page.
And the class's pages fit a laptop's and a phone's screen: nothing scrolls sideways."""

import csv
import io
import os
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect
from sqlalchemy import create_engine, func, select

from app.classroom import db
from app.classroom.models import TABLES, classes
from app.labkit import DRILLS
from tests.app.class_helpers import drill_of, form_post, session_post
from tests.browser.helpers import sized_page

WATCH_CSP = """() => { window.__csp = [];
  document.addEventListener('securitypolicyviolation',
    e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI)); }"""
LIVE_S = 2_000  # ms: the "live within 2 s" (the dashboard polls every second)
RESEND_MS = 2_000  # classroom.js's first wait before it resends an unacknowledged answer


@pytest.fixture()
def people(browser, live_server):
    """Four browser contexts of their own (cookies), each watched for errors."""
    made = []

    def person():
        context = browser.new_context(viewport={"width": 1280, "height": 900},
                                      base_url=live_server, accept_downloads=True)
        context.add_init_script(f"({WATCH_CSP})()")
        page = context.new_page()
        page.problems = []
        page.on("pageerror", lambda exc: page.problems.append(f"pageerror {exc}"))
        page.on("console", lambda m: m.type == "error" and page.problems.append(m.text))
        made.append((context, page))
        return page

    yield person
    for context, page in made:
        assert not page.evaluate("window.__csp || []"), page.evaluate("window.__csp")
        assert not page.problems, page.problems
        context.close()


def database():
    """The live server's class database: its SQLite file under DATA_DIR (tests/conftest.py)."""
    return create_engine(f"sqlite:///{Path(os.environ['DATA_DIR']) / db.SQLITE_FILE}")


def class_id_of(code: str) -> int | None:
    engine = database()
    try:
        with engine.connect() as conn:
            return conn.execute(select(classes.c.id).where(classes.c.code == code)).scalar()
    finally:
        engine.dispose()


def rows_of(class_id: int) -> dict[str, int]:
    """How many rows each class table holds for the class."""
    engine = database()
    try:
        with engine.connect() as conn:
            return {t.name: conn.execute(select(func.count()).select_from(t).where(
                (t.c.id if t is classes else t.c.class_id) == class_id)).scalar_one()
                for t in TABLES}
    finally:
        engine.dispose()


def test_one_instructor_three_students(people):
    drill, right, wrong = drill_of("decide")
    lesson = DRILLS[drill][0].episode.path
    teacher = people()
    teacher.goto("/class/new")
    teacher.get_by_test_id("start-class").click()
    code = teacher.get_by_test_id("class-code").first.inner_text()
    expect(teacher.locator("svg.qr")).to_be_visible()
    card = teacher.get_by_test_id(f"drill-{drill}")

    lost = []

    def lose_first(route):
        if lost:
            return route.continue_()
        lost.append(route.request.post_data)
        return route.abort()

    students = []
    for i, (name, choice) in enumerate((("Ann", right), ("Bob", right), ("Cy", wrong))):
        page = people()
        page.goto(f"/join?code={code}")
        page.get_by_test_id("join-nickname").fill(name)
        page.get_by_test_id("join").click()
        expect(page.get_by_test_id("joined")).to_contain_text(code)
        page.goto(lesson)
        expect(page.locator("#class-bar")).to_contain_text(code)
        if name == "Cy":  # Cy's first POST of the answer is lost in transit: it is resent
            page.route("**/class/answer", lose_first)
        form = page.locator(f"#drill-{drill}")
        form.locator(f"input[value='{choice}']").check()
        form.get_by_role("button", name="Check").click()
        expect(page.locator(f"#drill-{drill} .drill-feedback")).to_be_visible()
        # The instructor sees each answer come in, without a reload.
        expect(teacher.get_by_test_id("students")).to_have_text(str(i + 1), timeout=LIVE_S)
        expect(card.get_by_test_id("answered")).to_have_text(
            str(i + 1), timeout=LIVE_S + (RESEND_MS if name == "Cy" else 0))
        students.append(page)
    # The lost POST shows as a failed request in Cy's console, nothing else.
    assert len(lost) == 1 and "answer_id=" in lost[0]
    assert all("ERR_FAILED" in problem for problem in page.problems), page.problems
    page.problems.clear()
    expect(card.get_by_test_id("first-right")).to_have_text("67%")
    expect(card.locator("tr.right")).to_have_count(0)  # not marked before the reveal

    card.get_by_test_id("reveal").click()
    expect(card.locator("tr.right")).to_have_count(1)
    expect(card.get_by_test_id("right-answer")).to_be_visible()
    for page in students:  # the class bar polls every 10 s
        expect(page.get_by_test_id("class-spread")).to_contain_text("(3)", timeout=15_000)

    hold = teacher.locator("[data-testid^='hold-']").first
    held_at = hold.get_attribute("data-testid").split("-step-")[1]
    hold.click()
    expect(teacher.get_by_test_id("held")).to_contain_text(f"step {held_at}")
    for page in students:
        expect(page.get_by_test_id("class-pace")).to_contain_text(f"step {held_at}",
                                                                 timeout=15_000)

    with teacher.expect_download() as download:
        teacher.get_by_test_id("export").click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    assert sorted((r["drill"], r["right"]) for r in rows) == [(drill, "0"), (drill, "1"),
                                                              (drill, "1")]
    assert "Ann" not in Path(download.value.path()).read_text()

    card.get_by_test_id("reset").click()
    expect(card.get_by_test_id("answered")).to_have_text("0")
    expect(card).to_contain_text("poll 2")

    class_id = class_id_of(code)
    counts = rows_of(class_id)
    assert counts["classes"] == 1 and counts["students"] == 3 and counts["responses"] == 3
    teacher.once("dialog", lambda dialog: dialog.accept())
    teacher.get_by_test_id("end").click()
    expect(teacher.get_by_test_id("class-ended")).to_be_visible()
    assert class_id_of(code) is None and set(rows_of(class_id).values()) == {0}
    for page in students:  # their next poll says the class ended
        expect(page.get_by_test_id("class-gone")).to_be_visible(timeout=15_000)


SIZES = {"laptop-1280x800": (1280, 800), "phone-390x844": (390, 844)}
# How wide the page is, and every box inside <main> that scrolls sideways (its content wider
# than itself); a visually hidden header (1 px, overflow hidden) does not scroll.
SIDEWAYS = """() => ({page: document.documentElement.scrollWidth,
    boxes: [...document.querySelectorAll('main *')].filter(e => {
        const x = getComputedStyle(e).overflowX;
        return (x === 'auto' || x === 'scroll') && e.scrollWidth > e.clientWidth + 1;
    }).map(e => `${e.tagName}.${e.className} ${e.scrollWidth} > ${e.clientWidth}`)})"""


@pytest.mark.parametrize("size", list(SIZES))
def test_class_pages_fit_the_screen(browser, live_server, size):
    """A class with students at seven places and answers to a drill of each kind, long
    nicknames: its dashboard, the join and start pages and a student's class page fit."""
    width, height = SIZES[size]
    teacher = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    dashboard = form_post(teacher, live_server, "/class/new").url
    code = dashboard.split("/class/")[1].split("/")[0]
    student = None
    for i in range(7):
        student = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        form_post(student, live_server, "/join", code=code, nickname=f"Student number {i:02}")
        session_post(student, live_server, "/class/progress", kind="try",
                     episode=("memory", "pipeline", "tensor-parallel", "zero")[i % 4],
                     step=f"step-{i % 3 + 1}")
        for kind in ("decide", "predict", "derive"):
            drill, right, wrong = drill_of(kind)
            session_post(student, live_server, "/class/answer", drill=drill,
                         answer=right if i % 2 else wrong)
    jar = next(h.cookiejar for h in student.handlers
               if isinstance(h, urllib.request.HTTPCookieProcessor))
    with sized_page(browser, live_server, width, height, touch=True) as page:
        page.context.add_cookies([{"name": c.name, "value": c.value, "url": live_server}
                                  for c in jar])
        for path in (dashboard, "/class/me", f"/join?code={code}", "/class/new"):
            page.goto(path)
            expect(page.locator("main h1")).to_be_visible()
            assert page.evaluate(SIDEWAYS) == {"page": width, "boxes": []}, path
