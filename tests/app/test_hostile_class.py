"""Hostile requests to the live class, on SQLite and PostgreSQL: wrong and guessed codes,
forged instructor links, oversized and malformed bodies, CSRF attempts, scripts in nicknames
and answers. Each gets a 4xx naming its field, and no table gains or changes a row."""

import urllib.request
from contextlib import ExitStack
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.classroom import db
from app.classroom.limits import CLASSES_STARTED, JOIN_MISSES
from app.classroom.models import TABLES, rate_hits, students
from app.classroom.router import MAX_BODY
from app.classroom.sessions import CODE_ALPHABET
from tests.app.class_helpers import drill_of, form_post, join, new_client, start_class
from tests.conftest import running_app

pytestmark = pytest.mark.usefixtures("client")
SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def fresh_limits():
    JOIN_MISSES.clear()
    CLASSES_STARTED.clear()


def snapshot() -> dict:
    """Every row of every class table (so a change, not only a new row, shows)."""
    with db.begin() as conn:
        return {t.name: sorted(map(tuple, conn.execute(select(t)).all())) for t in TABLES}


def field_of(response) -> str:
    if response.headers["content-type"].startswith("application/json"):
        return response.json()["detail"][0]["loc"][-1]
    return response.text.split('data-field="')[1].split('"')[0]


def refused(response, status: int, field: str) -> None:
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert field_of(response) == field
    assert SCRIPT not in response.text and "<script>alert" not in response.text


def join_form(web, **fields):
    token = web.get("/join").cookies.get("lab-csrf") or web.cookies.get("lab-csrf")
    return web.post("/join", data={"csrf": token, **fields})


def test_hostile_joins_store_nothing(class_db):
    teacher = start_class()
    web = new_client()
    before = snapshot()
    refused(join_form(web, code="ZZZZZZ"), 404, "code")
    refused(join_form(web, code=SCRIPT), 404, "code")
    refused(join_form(web, code=teacher.code, nickname=SCRIPT), 422, "nickname")
    refused(join_form(web, code=teacher.code, nickname="x" * 25), 422, "nickname")
    refused(join_form(web, code=teacher.code, nickname="a\x00b"), 422, "nickname")
    # CSRF: no token, another browser's token, a token without its cookie.
    refused(web.post("/join", data={"code": teacher.code}), 403, "csrf")
    refused(web.post("/join", data={"code": teacher.code, "csrf": "x" * 43}), 403, "csrf")
    stranger = new_client()
    refused(stranger.post("/join", data={"code": teacher.code,
                                         "csrf": web.cookies["lab-csrf"]}), 403, "csrf")
    # Bodies: too big (declared and streamed), not a form, not UTF-8, a field twice.
    token = web.cookies["lab-csrf"]
    big = f"csrf={token}&code={teacher.code}&nickname=" + "a" * MAX_BODY
    refused(web.post("/join", content=big, headers={
        "content-type": "application/x-www-form-urlencoded"}), 413, "body")

    def stream():
        yield big.encode()

    refused(web.post("/join", content=stream(), headers={
        "content-type": "application/x-www-form-urlencoded"}), 413, "body")
    refused(web.post("/join", json={"code": teacher.code, "csrf": token}), 415, "body")
    refused(web.post("/join", content=b"code=\xff\xfe&csrf=" + token.encode(), headers={
        "content-type": "application/x-www-form-urlencoded"}), 422, "body")
    refused(web.post("/join", content=f"code=A&code=B&csrf={token}", headers={
        "content-type": "application/x-www-form-urlencoded"}), 422, "code")
    assert snapshot() == before


def test_guessing_codes_is_rate_limited(class_db):
    teacher = start_class()
    web = new_client()
    for i in range(JOIN_MISSES.limit):
        refused(join_form(web, code=f"ZZZZZ{CODE_ALPHABET[i]}"), 404, "code")
    before = snapshot()
    refused(join_form(web, code=teacher.code), 429, "code")  # even the right one, for now
    assert snapshot() == before


def _join_status(opener, origin: str, code: str) -> int:
    """POST /join to a real server (the form's token first): the status it answers."""
    return form_post(opener, origin, "/join", code=code).status


def test_app_processes_on_one_database_share_the_allowance(class_db):
    """Two app processes (uvicorn) on the same database, as the compose deployment's replicas:
    a guesser who spreads its misses over both gets one allowance, not two; the table keeps
    no more rows than the allowance."""
    teacher = start_class()
    env = {"DATABASE_URL": class_db, "RENDER_PROCESSES": "0"}
    if class_db.startswith("sqlite:///"):  # the same file: its folder as their DATA_DIR
        env.update(DATABASE_URL="", DATA_DIR=str(Path(class_db.removeprefix("sqlite:///")).parent))
    with ExitStack() as stack:
        origins = [stack.enter_context(running_app(env)) for _ in range(2)]
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        for i in range(JOIN_MISSES.limit):  # alternately to each process
            code = f"ZZZZZ{CODE_ALPHABET[i]}"
            assert _join_status(opener, origins[i % 2], code) == 404, i
        before = snapshot()
        for origin in origins:  # the allowance is spent on both, even for the right code
            assert _join_status(opener, origin, "ZZZZZZ") == 429
            assert _join_status(opener, origin, teacher.code) == 429
    assert snapshot() == before
    with db.begin() as conn:
        assert conn.execute(select(func.count()).select_from(rate_hits).where(
            rate_hits.c.kind == JOIN_MISSES.kind)).scalar_one() == JOIN_MISSES.limit


def test_forged_instructor_links_and_forged_controls_store_nothing(class_db):
    teacher, other = start_class(), start_class()
    ann = join(teacher.code, "Ann")
    drill, right, _ = drill_of("decide")
    ann.answer(drill, right)
    secret = teacher.base.rsplit("/", 1)[1]
    other_secret = other.base.rsplit("/", 1)[1]
    web = new_client()
    forged = [f"/class/{teacher.code}/teach/{other_secret}",
              f"/class/{teacher.code}/teach/{secret[:-1]}{'B' if secret.endswith('A') else 'A'}",
              f"/class/{teacher.code}/teach/{secret}x",
              f"/class/{teacher.code}/teach/" + "a" * 500,
              f"/class/{other.code}/teach/{secret}"]
    for base in forged:
        for path in ("", "/live", "/export.csv"):
            refused(web.get(base + path), 404, "link")
    before = snapshot()
    for base in forged:
        refused(web.post(base + "/end", headers={"X-CSRF-Token": teacher.csrf}), 404, "link")
    # The right link without the instructor's CSRF token, or with a student's.
    refused(web.post(teacher.base + "/end"), 403, "csrf")
    refused(web.post(teacher.base + "/reveal", data={"drill": drill, "csrf": ann.csrf}), 403,
            "csrf")
    refused(teacher.control("reveal", drill=drill, shown="yes"), 422, "shown")
    refused(teacher.control("reveal", drill="no-such-drill"), 422, "drill")
    refused(teacher.control("pace", episode=SCRIPT, step="step-1"), 422, "episode")
    refused(teacher.control("pace", episode="memory", step=SCRIPT), 422, "step")
    refused(teacher.control("nuke"), 404, "control")
    assert snapshot() == before
    assert SCRIPT not in teacher.live()


def test_hostile_answers_and_progress_store_nothing(class_db):
    teacher = start_class()
    ann = join(teacher.code, "Ann")
    decide, _, _ = drill_of("decide")
    number, _, _ = drill_of("derive")
    before = snapshot()
    refused(new_client().post("/class/answer", data={"drill": decide, "answer": "a"}), 401,
            "session")
    refused(ann.web.post("/class/answer", data={"drill": decide, "answer": "a"}), 403, "csrf")
    refused(ann.web.post("/class/answer", data={"drill": decide, "answer": "a"},
                         headers={"X-CSRF-Token": teacher.csrf}), 403, "csrf")
    refused(ann.answer("no-such-drill", "1"), 422, "drill")
    refused(ann.answer(decide, SCRIPT), 422, "answer")
    for bad in ("nan", "inf", "abc", SCRIPT, "1" * 41):
        refused(ann.answer(number, bad), 422, "answer")
    refused(ann.post("/class/progress", episode="memory", step="step-1", kind=SCRIPT), 422,
            "kind")
    refused(ann.post("/class/progress", episode=SCRIPT, step="step-1", kind="open"), 422,
            "episode")
    refused(ann.post("/class/progress", episode="memory", step="../x", kind="open"), 422,
            "step")
    refused(ann.web.post("/class/answer", content="drill=" + "x" * 5000, headers={
        "X-CSRF-Token": ann.csrf, "content-type": "application/x-www-form-urlencoded"}), 413,
        "body")
    assert snapshot() == before


def test_a_nickname_is_text_everywhere(class_db):
    """Nicknames pass only letters, digits, spaces and . ' - _; what passes is escaped."""
    teacher = start_class()
    ann = join(teacher.code, "O'Brien-Ünal")
    page = ann.web.get("/class/me").text
    assert "O&#39;Brien-Ünal" in page and "O'Brien" not in page
    assert "O&#39;Brien-Ünal" in teacher.live()  # the dashboard names who joined
    with db.begin() as conn:
        names = conn.execute(select(func.count()).select_from(students)
                             .where(students.c.nickname.contains("<"))).scalar_one()
    assert names == 0
