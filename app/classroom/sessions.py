"""Starting, finding and ending a class, and its students joining (over app/classroom/db.py;
every write one transaction, committed before the caller answers)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from app.classroom import db
from app.classroom.common import SECRET_BYTES, Refused, aware, digest, now, same
from app.classroom.limits import CLASSES_STARTED, JOIN_MISSES
from app.classroom.models import CODE_LENGTH, NICKNAME_LENGTH, TABLES, classes, students
from app.settings import SETTINGS

# Join codes: no 0/O, 1/I/L, so a code read off a projector is typed right; 31^6 = 887 M.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
MAX_STUDENTS = 1000  # per class
_NICKNAME = re.compile(r"^[\w .'\-]*$")  # letters and digits of any script, space . ' - _


@dataclass(frozen=True)
class Started:
    code: str
    secret: str


def purge_expired(conn: Connection) -> int:
    """Delete every expired class with its rows; the number of classes deleted."""
    gone = [row.id for row in conn.execute(select(classes.c.id)
                                           .where(classes.c.expires_at < now()))]
    for class_id in gone:
        _delete_class(conn, class_id)
    return len(gone)


def start_class(client: str) -> Started:
    """A new class, counted against the client's allowance of classes started."""
    secret = secrets.token_urlsafe(SECRET_BYTES)
    with db.begin() as conn:
        if CLASSES_STARTED.blocked(conn, client):
            raise Refused("csrf", "Too many classes started from this address: try later.",
                          429)
        CLASSES_STARTED.record(conn, client)
        purge_expired(conn)
    for _ in range(10):  # a code already in use (1 in 887 k per live class) draws again
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        try:
            with db.begin() as conn:
                conn.execute(insert(classes).values(
                    code=code, key_hash=digest(secret), created_at=now(),
                    expires_at=now() + timedelta(days=SETTINGS.class_ttl_days), students=0))
            return Started(code, secret)
        except IntegrityError:
            continue
    raise RuntimeError("no free join code after 10 draws")


def normal_code(code: str) -> str:
    return code.strip().upper().replace(" ", "").replace("-", "")


def live_class(conn: Connection, code: str) -> Row | None:
    code = normal_code(code)
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        return None
    row = conn.execute(select(classes).where(classes.c.code == code)).first()
    if row is None or aware(row.expires_at) < now():
        return None
    return row


def instructor_class(conn: Connection, code: str, secret: str) -> Row | None:
    """The class whose instructor link this is: its code and its secret, whose hash is
    compared in constant time."""
    row = live_class(conn, code)
    if row is None or len(secret) > 100 or not same(row.key_hash, digest(secret)):
        return None
    return row


def _delete_class(conn: Connection, class_id: int) -> None:
    for table in TABLES:
        key = table.c.id if table is classes else table.c.class_id
        conn.execute(delete(table).where(key == class_id))


def end_class(class_id: int) -> None:
    with db.begin() as conn:
        _delete_class(conn, class_id)


def class_rows(class_id: int) -> dict[str, int]:
    """How many rows each table holds for a class (the tests' check that End deletes all)."""
    with db.begin() as conn:
        return {table.name: conn.execute(
            select(func.count()).select_from(table).where(
                (table.c.id if table is classes else table.c.class_id) == class_id)).scalar_one()
            for table in TABLES}


def check_nickname(nickname: str) -> str:
    nickname = " ".join(nickname.split())
    if len(nickname) > NICKNAME_LENGTH:
        raise Refused("nickname", f"nickname: at most {NICKNAME_LENGTH} characters")
    if not _NICKNAME.match(nickname):
        raise Refused("nickname", "nickname: letters, digits, spaces and . ' - _ only")
    return nickname


TOO_MANY_MISSES = Refused("code", "code: too many wrong codes from this address; wait a "
                          "minute", 429)


def join(code: str, nickname: str, client: str) -> str:
    """A new student of the class with this code: their session token (the cookie).

    A client at its allowance of misses (JOIN_MISSES, shared by every app process on the
    database) is refused before the code is looked up, right or wrong. A miss is committed
    before it is answered, then counted with the misses recorded before it: past the
    allowance it answers 429 like a refusal, so a burst of concurrent guesses learns
    nothing from the guesses past the allowance either."""
    nickname = check_nickname(nickname)
    with db.begin() as conn:
        if JOIN_MISSES.blocked(conn, client):
            raise TOO_MANY_MISSES
        row = live_class(conn, code)
        if row is None:
            miss = JOIN_MISSES.record(conn, client)
        else:
            # One statement both counts and bounds, so concurrent joins cannot pass the limit.
            taken = conn.execute(update(classes).where(and_(
                classes.c.id == row.id, classes.c.students < MAX_STUDENTS)).values(
                students=classes.c.students + 1)).rowcount
            if not taken:
                raise Refused("code", f"code: this class is full ({MAX_STUDENTS} students)",
                              409)
            token = secrets.token_urlsafe(SECRET_BYTES)
            conn.execute(insert(students).values(class_id=row.id, token_hash=digest(token),
                                                 nickname=nickname, joined_at=now(), events=0))
            return token
    with db.begin() as conn:
        if JOIN_MISSES.count(conn, client, upto=miss) > JOIN_MISSES.limit:
            raise TOO_MANY_MISSES
    raise Refused("code", "code: no class has this code (or it has ended)", 404)


@dataclass(frozen=True)
class Student:
    id: int
    class_id: int
    code: str
    nickname: str
    pace_episode: str | None
    pace_step: str | None


def student_of(token: str) -> Student | None:
    if not token or len(token) > 100:
        return None
    with db.begin() as conn:
        row = conn.execute(
            select(students.c.id, students.c.class_id, students.c.nickname, classes.c.code,
                   classes.c.expires_at, classes.c.pace_episode, classes.c.pace_step)
            .join(classes, classes.c.id == students.c.class_id)
            .where(students.c.token_hash == digest(token))).first()
    if row is None or aware(row.expires_at) < now():
        return None
    return Student(row.id, row.class_id, row.code, row.nickname, row.pace_episode,
                   row.pace_step)
