"""A live class in Chromium against the real server: one instructor and three students.
They join with the code, answer a drill on its lesson, and the instructor's dashboard shows
each answer as it comes (polling, no reload); then reveal (the students see the class's
spread), pace (they see where they are held), reset, export, end, after which none of the
class's rows is left in the database. No script error and no CSP violation on any page."""

import csv
import io
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect
from sqlalchemy import create_engine, func, select

from app.classroom import db
from app.classroom.models import TABLES, classes
from app.labkit import DRILLS
from tests.app.class_helpers import drill_of

WATCH_CSP = """() => { window.__csp = [];
  document.addEventListener('securitypolicyviolation',
    e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI)); }"""
LIVE_S = 2_000  # ms: the "live within 2 s" (the dashboard polls every second)


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

    students = []
    for i, (name, choice) in enumerate((("Ann", right), ("Bob", right), ("Cy", wrong))):
        page = people()
        page.goto(f"/join?code={code}")
        page.get_by_test_id("join-nickname").fill(name)
        page.get_by_test_id("join").click()
        expect(page.get_by_test_id("joined")).to_contain_text(code)
        page.goto(lesson)
        expect(page.locator("#class-bar")).to_contain_text(code)
        form = page.locator(f"#drill-{drill}")
        form.locator(f"input[value='{choice}']").check()
        form.get_by_role("button", name="Check").click()
        expect(page.locator(f"#drill-{drill} .drill-feedback")).to_be_visible()
        # The instructor sees each answer come in, without a reload.
        expect(teacher.get_by_test_id("students")).to_have_text(str(i + 1), timeout=LIVE_S)
        expect(card.get_by_test_id("answered")).to_have_text(str(i + 1), timeout=LIVE_S)
        students.append(page)
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
