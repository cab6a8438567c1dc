"""A student's answers (graded on the server, stored once) and their moves through a lesson
(steps opened, try-it links followed); every write one transaction."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import and_, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from app.classroom import db
from app.classroom.common import Refused, check_place, drill_of, now
from app.classroom.models import (
    ANSWER_ID_LENGTH,
    ANSWER_LENGTH,
    answer_ids,
    drills,
    responses,
    students,
    tries,
)
from app.classroom.sessions import Student
from app.labkit import check_drill
from app.labkit.view import Decide

MAX_TRIES = 20  # answers per student per drill and round
MAX_EVENTS = 5000  # steps opened and try-it clicks per student
_ANSWER_ID = re.compile(rf"^[A-Za-z0-9-]{{8,{ANSWER_ID_LENGTH}}}$")  # a UUID, or random hex


def _round(conn: Connection, class_id: int, drill_id: str) -> int:
    row = conn.execute(select(drills.c.round).where(and_(
        drills.c.class_id == class_id, drills.c.drill_id == drill_id))).first()
    if row is not None:
        return row.round
    try:
        with conn.begin_nested():
            conn.execute(insert(drills).values(class_id=class_id, drill_id=drill_id, round=0,
                                               revealed=False))
    except IntegrityError:  # another student's first answer made it
        pass
    return 0


def _acknowledged(conn: Connection, student: Student, answer_id: str) -> dict[str, Any] | None:
    """The acknowledgement an answer with this id already had, or None."""
    row = conn.execute(select(answer_ids).where(and_(
        answer_ids.c.student_id == student.id, answer_ids.c.answer_id == answer_id))).first()
    if row is None:
        return None
    return {"status": "stored", "drill": row.drill_id, "right": row.right, "tries": row.tries,
            "round": row.round, "repeat": True}


def answer(student: Student, drill_id: str, given: str, answer_id: str = "") -> dict[str, Any]:
    """Grade and store one answer (the server's grading, never the browser's): the verdict.

    ``answer_id`` (optional; made once per answer by the browser) makes a resend safe: an
    id this student already gave is acknowledged again with its first verdict, and nothing
    is stored or counted. The id's row is written in the answer's transaction, so two copies
    in flight at once store one answer (the second's insert conflicts and rolls back)."""
    if answer_id and not _ANSWER_ID.match(answer_id):
        raise Refused("answer_id", f"answer_id: 8 to {ANSWER_ID_LENGTH} letters, digits "
                      "or hyphens (a UUID)")
    if answer_id:
        with db.begin() as conn:
            again = _acknowledged(conn, student, answer_id)
        if again is not None:
            return again
    try:
        return _store_answer(student, drill_id, given, answer_id)
    except IntegrityError:
        if not answer_id:
            raise
        with db.begin() as conn:  # a copy in flight beside this one stored it first
            again = _acknowledged(conn, student, answer_id)
        if again is None:
            raise
        return again


def _store_answer(student: Student, drill_id: str, given: str, answer_id: str
                  ) -> dict[str, Any]:
    _, drill = drill_of(drill_id)
    if len(given) > ANSWER_LENGTH:
        raise Refused("answer", f"answer: at most {ANSWER_LENGTH} characters")
    outcome = check_drill(drill, given, 1, hide_answers=True)
    if outcome["status"] == "invalid":
        raise Refused("answer", "answer: " + outcome["message"])
    right = outcome["status"] == "right"
    value = None if isinstance(drill, Decide) else float(outcome["given"])
    stored = outcome["given"] if value is None else repr(value)
    with db.begin() as conn:
        round_ = _round(conn, student.class_id, drill_id)
        key = and_(responses.c.class_id == student.class_id, responses.c.drill_id == drill_id,
                   responses.c.round == round_, responses.c.student_id == student.id)
        row = conn.execute(select(responses.c.id, responses.c.tries).where(key)).first()
        if row is not None and row.tries >= MAX_TRIES:
            raise Refused("answer", f"answer: at most {MAX_TRIES} answers to one drill", 429)
        if row is None:
            conn.execute(insert(responses).values(
                class_id=student.class_id, student_id=student.id, drill_id=drill_id,
                round=round_, tries=1, first_right=right, right=right, answer=stored,
                value=value, answered_at=now()))
            tries_now = 1
        else:
            conn.execute(update(responses).where(responses.c.id == row.id).values(
                tries=responses.c.tries + 1, right=right, answer=stored, value=value,
                answered_at=now()))
            tries_now = row.tries + 1
        if answer_id:
            conn.execute(insert(answer_ids).values(
                student_id=student.id, answer_id=answer_id, class_id=student.class_id,
                drill_id=drill_id, round=round_, tries=tries_now, right=right))
    return {"status": "stored", "drill": drill_id, "right": right, "tries": tries_now,
            "round": round_}


def moved(student: Student, episode: str, step: str, kind: str) -> None:
    """A step opened (``open``) or a try-it link followed there (``try``)."""
    if kind not in ("open", "try"):
        raise Refused("kind", "kind: open or try")
    check_place(episode, step)
    with db.begin() as conn:
        taken = conn.execute(update(students).where(and_(
            students.c.id == student.id, students.c.events < MAX_EVENTS)).values(
            episode=episode, step=step, events=students.c.events + 1)).rowcount
        if not taken:
            raise Refused("kind", f"kind: at most {MAX_EVENTS} steps and tries per student", 429)
        if kind == "try":
            key = and_(tries.c.class_id == student.class_id, tries.c.episode == episode,
                       tries.c.step == step)
            if not conn.execute(update(tries).where(key).values(
                    clicks=tries.c.clicks + 1)).rowcount:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(tries).values(class_id=student.class_id,
                                                          episode=episode, step=step, clicks=1))
                except IntegrityError:
                    conn.execute(update(tries).where(key).values(clicks=tries.c.clicks + 1))
