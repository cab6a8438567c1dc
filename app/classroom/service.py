"""What a class does, over app/classroom/db.py: start, join, answer, move, and the
instructor's reads and controls. Routers call these and never write SQL; every write is one
transaction, committed before the caller answers."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import math
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Integer, and_, cast, delete, func, insert, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from app.classroom import db
from app.classroom.limits import CLASSES_STARTED, JOIN_MISSES
from app.classroom.models import (
    ANSWER_ID_LENGTH,
    ANSWER_LENGTH,
    CODE_LENGTH,
    NICKNAME_LENGTH,
    TABLES,
    answer_ids,
    classes,
    drills,
    responses,
    students,
    tries,
)
from app.episodes import BY_SLUG, EPISODES
from app.labkit import DRILLS, check_drill
from app.labkit.view import Decide
from app.settings import SETTINGS

# Join codes: no 0/O, 1/I/L, so a code read off a projector is typed right; 31^6 = 887 M.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
SECRET_BYTES = 32  # the instructor's secret: 256 bits (the issue asks for at least 128)
MAX_STUDENTS = 1000  # per class
MAX_TRIES = 20  # answers per student per drill and round
MAX_EVENTS = 5000  # steps opened and try-it clicks per student
BINS = 8  # a numeric drill's histogram: at most this many bars
_NICKNAME = re.compile(r"^[\w .'\-]*$")  # letters and digits of any script, space . ' - _
_STEP = re.compile(r"^step-[a-z0-9-]{1,40}$")
_ANSWER_ID = re.compile(rf"^[A-Za-z0-9-]{{8,{ANSWER_ID_LENGTH}}}$")  # a UUID, or random hex


class Refused(Exception):
    """Input the class refuses, naming its field: the router answers ``status`` with it."""

    def __init__(self, field: str, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


def now() -> datetime:
    return datetime.now(UTC)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def csrf_of(token: str) -> str:
    """The CSRF token bound to a session (a student's cookie or the instructor's secret): a
    hash of it, so no server key is needed and no other session's token fits."""
    return hashlib.sha256(b"csrf\0" + token.encode("utf-8")).hexdigest()[:43]


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def _aware(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes (stored as UTC)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# ---- starting, finding and ending a class ---------------------------------------------

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
    if row is None or _aware(row.expires_at) < now():
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


# ---- students ------------------------------------------------------------------------------

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
    if row is None or _aware(row.expires_at) < now():
        return None
    return Student(row.id, row.class_id, row.code, row.nickname, row.pace_episode,
                   row.pace_step)


def _drill(drill_id: str):
    found = DRILLS.get(drill_id)
    if found is None:
        raise Refused("drill", "drill: no such drill")
    return found


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
    _, drill = _drill(drill_id)
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


def check_place(episode: str, step: str) -> None:
    if episode not in BY_SLUG:
        raise Refused("episode", "episode: no such episode")
    if not _STEP.match(step):
        raise Refused("step", "step: a step id like step-3")


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


# ---- the instructor's reads ------------------------------------------------------------

def _num(value: float) -> str:
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return f"{value:.3g}"


@dataclass
class Bar:
    label: str
    count: int
    right: bool = False  # marked only once revealed


@dataclass
class DrillStats:
    id: str
    question: str
    kind: str
    episode: str
    round: int
    revealed: bool
    answered: int = 0
    first_right: int = 0
    bars: list[Bar] = field(default_factory=list)
    answer: str = ""  # the right answer in words, once revealed

    @property
    def first_share(self) -> str:
        return f"{100 * self.first_right / self.answered:.0f}%" if self.answered else "-"

    @property
    def most(self) -> int:
        return max((bar.count for bar in self.bars), default=0)


def _bins(values: list[tuple[float, int, bool]], expected: float | None,
          revealed: bool) -> list[Bar]:
    """A numeric drill's answers as at most BINS bars: one per distinct value when few,
    else equal bins (logarithmic when every answer is positive and they span 20x or more)."""
    distinct = sorted({v for v, _, _ in values})
    if len(distinct) <= BINS:
        counts = {v: 0 for v in distinct}
        rights = {v: False for v in distinct}
        for v, n, right in values:
            counts[v] += n
            rights[v] = rights[v] or right
        return [Bar(_num(v), counts[v], revealed and rights[v]) for v in distinct]
    low, high = distinct[0], distinct[-1]
    log = low > 0 and high / low >= 20
    scale = (lambda x: math.log10(x)) if log else (lambda x: x)
    a, b = scale(low), scale(high)
    width = (b - a) / BINS
    edges = [a + i * width for i in range(BINS + 1)]
    unscale = (lambda x: 10 ** x) if log else (lambda x: x)
    counts = [0] * BINS

    def index(x: float) -> int:
        return min(BINS - 1, int((scale(x) - a) / width))

    for v, n, _ in values:
        counts[index(v)] += n
    mark = index(expected) if revealed and expected is not None and low <= expected <= high \
        else -1
    return [Bar(f"{_num(unscale(edges[i]))} to {_num(unscale(edges[i + 1]))}", counts[i],
                i == mark) for i in range(BINS)]


def _order() -> dict[str, int]:
    rank = {episode.slug: i for i, episode in enumerate(EPISODES)}
    return {drill_id: rank.get(view.episode.slug, 99) * 1000 + i
            for i, (drill_id, (view, _)) in enumerate(DRILLS.items())}


def drill_stats(conn: Connection, class_id: int, only: set[str] | None = None
                ) -> list[DrillStats]:
    """Each drill the class answered (this round), in teaching order: how many answered,
    the share right on the first try, and the histogram (right bars marked once revealed)."""
    rows = conn.execute(select(drills).where(drills.c.class_id == class_id)).all()
    if only is not None:
        rows = [r for r in rows if r.drill_id in only]
    if not rows:
        return []
    groups = conn.execute(
        select(responses.c.drill_id, responses.c.answer, responses.c.value, responses.c.right,
               func.count().label("n"),
               func.sum(cast(responses.c.first_right, Integer)).label("first"))
        .join(drills, and_(drills.c.class_id == responses.c.class_id,
                           drills.c.drill_id == responses.c.drill_id,
                           drills.c.round == responses.c.round))
        .where(responses.c.class_id == class_id)
        .group_by(responses.c.drill_id, responses.c.answer, responses.c.value,
                  responses.c.right)).all()
    by_drill: dict[str, list] = {}
    for g in groups:
        by_drill.setdefault(g.drill_id, []).append(g)
    order = _order()
    out = []
    for row in sorted(rows, key=lambda r: order.get(r.drill_id, 10 ** 9)):
        if row.drill_id not in DRILLS:
            continue
        view, drill = DRILLS[row.drill_id]
        stats = DrillStats(row.drill_id, drill.question, drill.kind, view.episode.code,
                           row.round, row.revealed)
        mine = by_drill.get(row.drill_id, [])
        stats.answered = sum(g.n for g in mine)
        stats.first_right = sum(int(g.first or 0) for g in mine)
        if isinstance(drill, Decide):
            counts = {key: 0 for key, _ in drill.choices}
            for g in mine:
                counts[g.answer] = counts.get(g.answer, 0) + g.n
            best = next((o.key for o in drill.judge() if o.right), None) if row.revealed \
                else None
            stats.bars = [Bar(label, counts.get(key, 0), key == best)
                          for key, label in drill.choices]
            if best is not None:
                stats.answer = dict(drill.choices)[best]
        else:
            expected = drill.answer() if row.revealed else None
            stats.bars = _bins([(g.value, g.n, g.right) for g in mine], expected,
                               row.revealed)
            if expected is not None:
                stats.answer = f"{_num(expected)} {drill.unit}"
        out.append(stats)
    return out


@dataclass
class Place:
    episode: str
    step: str
    students: int
    tries: int
    held: bool


def places(conn: Connection, cls: Row) -> list[Place]:
    """Students per episode and step (where each last opened or tried), with the try-it
    clicks there, in teaching order; the held step marked."""
    counts = conn.execute(
        select(students.c.episode, students.c.step, func.count().label("n"))
        .where(students.c.class_id == cls.id).group_by(students.c.episode, students.c.step)
    ).all()
    clicks = {(r.episode, r.step): r.clicks for r in conn.execute(
        select(tries).where(tries.c.class_id == cls.id))}
    keys = {(r.episode, r.step) for r in counts} | set(clicks)
    n = {(r.episode, r.step): r.n for r in counts}
    rank = {episode.slug: i for i, episode in enumerate(EPISODES)}

    def order(key):
        episode, step = key
        number = step.removeprefix("step-") if step else ""
        return (rank.get(episode, -1) if episode else -1,
                int(number) if number.isdigit() else 10 ** 6, step or "")

    return [Place(episode or "", step or "", n.get((episode, step), 0),
                  clicks.get((episode, step), 0),
                  bool(episode) and (episode, step) == (cls.pace_episode, cls.pace_step))
            for episode, step in sorted(keys, key=order)]


@dataclass
class Dashboard:
    code: str
    students: int
    expires_at: datetime
    pace_episode: str | None
    pace_step: str | None
    drills: list[DrillStats]
    places: list[Place]
    nicknames: list[str]  # the first NAMES_SHOWN given, in the order they joined


NAMES_SHOWN = 60


def dashboard(cls: Row) -> Dashboard:
    with db.begin() as conn:
        joined = conn.execute(select(func.count()).select_from(students)
                              .where(students.c.class_id == cls.id)).scalar_one()
        names = conn.execute(select(students.c.nickname).where(and_(
            students.c.class_id == cls.id, students.c.nickname != "")).order_by(students.c.id)
            .limit(NAMES_SHOWN)).scalars().all()
        return Dashboard(cls.code, joined, _aware(cls.expires_at), cls.pace_episode,
                         cls.pace_step, drill_stats(conn, cls.id), places(conn, cls),
                         list(names))


# ---- the instructor's controls ---------------------------------------------------------

def _known_drill(conn: Connection, class_id: int, drill_id: str) -> None:
    _drill(drill_id)
    if conn.execute(select(drills.c.round).where(and_(
            drills.c.class_id == class_id, drills.c.drill_id == drill_id))).first() is None:
        raise Refused("drill", "drill: the class has not answered this drill", 404)


def reveal(class_id: int, drill_id: str, shown: bool) -> None:
    with db.begin() as conn:
        _known_drill(conn, class_id, drill_id)
        conn.execute(update(drills).where(and_(drills.c.class_id == class_id,
                                               drills.c.drill_id == drill_id))
                     .values(revealed=shown))


def reset(class_id: int, drill_id: str) -> None:
    """Poll again: the next round starts empty and hidden (the last round stays for export)."""
    with db.begin() as conn:
        _known_drill(conn, class_id, drill_id)
        conn.execute(update(drills).where(and_(drills.c.class_id == class_id,
                                               drills.c.drill_id == drill_id))
                     .values(round=drills.c.round + 1, revealed=False))


def pace(class_id: int, episode: str, step: str) -> None:
    """Hold the class at a step (both empty: release it)."""
    if episode or step:
        check_place(episode, step)
    with db.begin() as conn:
        conn.execute(update(classes).where(classes.c.id == class_id).values(
            pace_episode=episode or None, pace_step=step or None))


def export_csv(class_id: int) -> str:
    """Every answer of the class, anonymous: no nickname, no student."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["episode", "drill", "kind", "round", "answer", "right", "first_try_right",
                     "tries"])
    order = _order()
    with db.begin() as conn:
        rows = conn.execute(select(responses.c.drill_id, responses.c.round, responses.c.answer,
                                   responses.c.right, responses.c.first_right,
                                   responses.c.tries)
                            .where(responses.c.class_id == class_id)
                            .order_by(responses.c.drill_id, responses.c.round,
                                      responses.c.answered_at)).all()
    for r in sorted(rows, key=lambda r: (order.get(r.drill_id, 10 ** 9), r.round)):
        view, drill = DRILLS.get(r.drill_id, (None, None))
        writer.writerow([view.episode.code if view else "", r.drill_id,
                         drill.kind if drill else "", r.round, r.answer, int(r.right),
                         int(r.first_right), r.tries])
    return out.getvalue()


# ---- what a student sees of the class --------------------------------------------------

@dataclass
class Mine:
    stats: DrillStats
    answer: str  # the student's own latest answer, as the bars label it


def student_view(student: Student) -> list[Mine]:
    """The revealed drills this student answered: the class's spread beside their answer."""
    with db.begin() as conn:
        mine = {r.drill_id: r for r in conn.execute(
            select(responses.c.drill_id, responses.c.answer, responses.c.value)
            .join(drills, and_(drills.c.class_id == responses.c.class_id,
                               drills.c.drill_id == responses.c.drill_id,
                               drills.c.round == responses.c.round,
                               drills.c.revealed.is_(True)))
            .where(responses.c.student_id == student.id))}
        if not mine:
            return []
        stats = drill_stats(conn, student.class_id, set(mine))
    out = []
    for s in stats:
        own = mine[s.id]
        if own.value is None:
            _, drill = DRILLS[s.id]
            label = dict(drill.choices).get(own.answer, own.answer)
        else:
            label = _num(own.value)
        out.append(Mine(s, label))
    return out
