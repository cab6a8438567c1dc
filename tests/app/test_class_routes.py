"""The live class over its routes, each test on SQLite and on a real PostgreSQL server
(the ``class_db`` fixture): start, join, answer, the dashboard's counts, histogram and share
right first, reveal, reset, pace, export, end, expiry and the bounds."""

import csv
import io
import os
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, select, update

from app.classroom import db, sessions
from app.classroom.answers import MAX_TRIES
from app.classroom.common import now
from app.classroom.limits import CLASSES_STARTED, JOIN_MISSES
from app.classroom.models import TABLES, answer_ids, classes, metadata, responses
from tests.app.class_helpers import (
    drill_of,
    form_post,
    join,
    new_client,
    session_post,
    start_class,
)
from tests.conftest import READY_S, ROOT, free_port

pytestmark = pytest.mark.usefixtures("client")


@pytest.fixture(autouse=True)
def fresh_limits():
    JOIN_MISSES.clear()
    CLASSES_STARTED.clear()


def class_id(code: str) -> int:
    with db.begin() as conn:
        return conn.execute(select(classes.c.id).where(classes.c.code == code)).scalar_one()


def test_answers_reach_the_dashboard_and_reveal_shows_them(class_db):
    teacher = start_class()
    decide, right, wrong = drill_of("decide")
    ann, bob, cy = join(teacher.code, "Ann"), join(teacher.code.lower()), join(teacher.code)
    assert ann.answer(decide, right).json()["right"] is True
    assert bob.answer(decide, wrong).json()["right"] is False
    assert bob.answer(decide, right).json() == {"status": "stored", "drill": decide,
                                                "right": True, "tries": 2, "round": 0}
    assert cy.answer(decide, wrong).status_code == 200
    live = teacher.live()
    assert '<strong data-testid="students">3</strong>' in live
    assert '<span data-testid="nicknames">Ann</span> and 2 more' in live  # Bob, Cy gave none
    assert '<strong data-testid="answered">3</strong>' in live
    assert '<strong data-testid="first-right">33%</strong>' in live  # Ann alone
    assert "✓ right" not in live and "right-answer" not in live  # hidden until revealed
    # Students see nothing of the class before the reveal, their spread after it.
    assert "class-spread" not in ann.web.get("/class/me", headers={"HX-Request": "true"}).text
    assert teacher.control("reveal", drill=decide, shown="1").status_code == 200
    live = teacher.live()
    assert "✓ right" in live and 'data-testid="right-answer"' in live
    mine = ann.web.get("/class/me", headers={"HX-Request": "true"}).text
    assert 'data-testid="class-spread"' in mine and "(3)" in mine
    # The latest answers: two right (Ann, Bob), one wrong (Cy), the right bar marked.
    assert '<tr class="right">' in live and '<td class="n">2</td>' in live


def test_numbers_bin_and_reset_polls_again(class_db):
    teacher = start_class()
    drill, right, wrong = drill_of("predict")
    students = [join(teacher.code) for _ in range(3)]
    for student, given in zip(students, (right, wrong, "1,000"), strict=True):
        assert student.answer(drill, given).status_code == 200
    live = teacher.live()
    assert '<strong data-testid="answered">3</strong>' in live
    assert '<td class="n">1</td>' in live  # three distinct numbers: a bar each
    assert teacher.control("reset", drill=drill).status_code == 200
    live = teacher.live()
    assert '<strong data-testid="answered">0</strong>' in live and "poll 2" in live
    assert students[0].answer(drill, right).json()["round"] == 1
    assert '<strong data-testid="answered">1</strong>' in teacher.live()
    # The export keeps both rounds, with no nickname and no student.
    text = teacher.web.get(teacher.base + "/export.csv").text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["round"] for r in rows].count("0") == 3 and [r["round"] for r in rows].count("1") == 1
    assert set(rows[0]) == {"episode", "drill", "kind", "round", "answer", "right",
                            "first_try_right", "tries"}


def test_pace_progress_and_end_deletes_every_row(class_db):
    teacher = start_class()
    ann = join(teacher.code, "Ann")
    assert ann.post("/class/progress", episode="memory", step="step-2",
                    kind="open").status_code == 204
    assert ann.post("/class/progress", episode="memory", step="step-2",
                    kind="try").status_code == 204
    live = teacher.live()
    assert "<td>EP01</td><td>step 2</td>" in live
    assert '<td data-label="students">1</td><td data-label="try-it clicks">1</td>' in live
    assert teacher.control("pace", episode="memory", step="step-2").status_code == 200
    bar = ann.web.get("/class/me", headers={"HX-Request": "true"}).text
    assert 'data-pace-step="step-2"' in bar and "/episodes/memory#step-2" in bar
    drill, right, _ = drill_of("decide")
    ann.post("/class/answer", drill=drill, answer=right, answer_id="5e0c1f2a-answer-id")
    cid = class_id(teacher.code)
    assert all(sessions.class_rows(cid).values())  # a row in every table
    response = teacher.control("end")
    assert response.status_code == 204 and response.headers["HX-Redirect"].endswith("ended=1")
    assert sessions.class_rows(cid) == {t.name: 0 for t in TABLES}
    assert teacher.web.get(teacher.base).status_code == 404
    # The student's next poll says so and drops the cookies: the lessons stop sending.
    gone = ann.web.get("/class/me", headers={"HX-Request": "true"})
    assert 'data-testid="class-gone"' in gone.text and not ann.web.cookies.get("lab-class")
    assert ann.answer(drill, right).status_code == 401


def test_expired_classes_are_refused_then_deleted(class_db):
    teacher = start_class()
    ann = join(teacher.code)
    cid = class_id(teacher.code)
    with db.begin() as conn:
        conn.execute(update(classes).where(classes.c.id == cid)
                     .values(expires_at=now() - timedelta(seconds=1)))
    drill, right, _ = drill_of("decide")
    assert ann.answer(drill, right).status_code == 401
    assert teacher.web.get(teacher.base + "/live").status_code == 404
    # The dashboard's own poll (htmx) is told to stop, not answered 404 at every poll.
    poll = teacher.web.get(teacher.base + "/live", headers={"HX-Request": "true"})
    assert poll.status_code == 286 and "it has ended" in poll.text
    with db.begin() as conn:  # what starting a class does first
        assert sessions.purge_expired(conn) == 1
    assert sessions.class_rows(cid) == {t.name: 0 for t in TABLES}


def test_bounds_students_and_answers(class_db):
    teacher = start_class()
    ann = join(teacher.code)
    with db.begin() as conn:
        conn.execute(update(classes).where(classes.c.code == teacher.code)
                     .values(students=sessions.MAX_STUDENTS))
    web = new_client()
    token = web.get("/join").cookies["lab-csrf"]
    full = web.post("/join", data={"csrf": token, "code": teacher.code})
    assert full.status_code == 409 and "full" in full.text
    drill, _, wrong = drill_of("derive")
    for _ in range(MAX_TRIES):
        assert ann.answer(drill, wrong).status_code == 200
    over = ann.answer(drill, wrong)
    assert over.status_code == 429 and over.json()["detail"][0]["loc"] == ["body", "answer"]
    with db.begin() as conn:
        assert conn.execute(select(responses.c.tries)).all()[-1].tries == MAX_TRIES


def test_a_resent_answer_is_stored_once(class_db):
    """classroom.js resends an answer not acknowledged under its id: a repeat of a
    student's id is acknowledged again with its first verdict, stores nothing, counts no
    try, even when it arrives after the student's next answer; a malformed id is refused."""
    teacher = start_class()
    ann, bob = join(teacher.code), join(teacher.code)
    drill, right, wrong = drill_of("decide")
    first, second = "0f8e4c1a-9d2b-4e6f-8a3c-5b7d9e1f2a4c", "a1b2c3d4e5f60718293a4b5c6d7e8f90"

    def send(student, answer, answer_id):
        return student.post("/class/answer", drill=drill, answer=answer, answer_id=answer_id)

    cid = class_id(teacher.code)

    def stored():
        with db.begin() as conn:
            return (conn.execute(select(responses.c.tries, responses.c.answer)
                                 .where(responses.c.class_id == cid)
                                 .order_by(responses.c.id)).all(),
                    conn.execute(select(answer_ids.c.answer_id)
                                 .where(answer_ids.c.class_id == cid)
                                 .order_by(answer_ids.c.answer_id)).scalars().all())

    ack = send(ann, wrong, first).json()
    assert ack["right"] is False and ack["tries"] == 1
    assert send(ann, wrong, first).json() == {**ack, "repeat": True}
    assert stored() == ([(1, wrong)], [first])
    assert send(ann, right, second).json()["tries"] == 2
    # The first answer's copy arriving late changes nothing: the latest answer stays right.
    assert send(ann, wrong, first).json()["tries"] == 1
    assert stored() == ([(2, right)], [first, second])
    assert send(bob, right, first).json()["tries"] == 1  # ids are per student
    assert '<strong data-testid="answered">2</strong>' in teacher.live()
    assert ann.answer(drill, right).json()["tries"] == 3  # no id: stored as before
    before = stored()
    for bad in ("short", "x" * 65, "0f8e4c1a 9d2b", "../../etc/passwd", "ü" * 10):
        refused = send(ann, right, bad)
        assert refused.status_code == 422, bad
        assert refused.json()["detail"][0]["loc"] == ["body", "answer_id"]
    assert stored() == before


def test_migrations_match_the_models(class_db):
    """The schema Alembic built is the models' (autogenerate finds nothing to add)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with db.engine().connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []


def _wait_ready(proc, origin: str) -> None:
    deadline = time.monotonic() + READY_S
    while True:
        try:
            urllib.request.urlopen(origin + "/healthz", timeout=2)
            return
        except OSError:
            assert proc.poll() is None, "uvicorn exited before serving"
            assert time.monotonic() < deadline, f"uvicorn did not answer within {READY_S} s"
            time.sleep(0.1)  # readiness poll, not a timing assertion


def test_an_acknowledged_answer_survives_kill_9(tmp_path):
    """A real server (uvicorn, SQLite under its DATA_DIR) answers 200 to an answer, is killed
    with SIGKILL at once, and the answer is in the file. (PostgreSQL's commits are its own
    durability; the app commits before it answers on both.)"""
    env = {**os.environ, "RENDER_PROCESSES": "0", "DATA_DIR": str(tmp_path), "DATABASE_URL": ""}
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:app", "--port",
                             str(port), "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        _wait_ready(proc, origin)
        web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        teach = form_post(web, origin, "/class/new").url  # the dashboard, after the redirect
        code = teach.split("/class/")[1].split("/")[0]
        form_post(web, origin, "/join", code=code)
        drill, right, _ = drill_of("decide")
        assert session_post(web, origin, "/class/answer", drill=drill,
                            answer=right).status == 200
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    engine = create_engine(f"sqlite:///{tmp_path / db.SQLITE_FILE}")
    try:
        with engine.connect() as conn:
            stored = conn.execute(select(responses.c.drill_id, responses.c.right)).all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in stored] == [(drill, True)]
