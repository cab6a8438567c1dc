"""What a class's answers add up to: the instructor's dashboard (each drill's histogram,
where the students are) and what a student sees of the class once a drill is revealed."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Integer, and_, cast, func, select
from sqlalchemy.engine import Connection, Row

from app.classroom import db
from app.classroom.common import aware
from app.classroom.models import drills, responses, students, tries
from app.classroom.sessions import Student
from app.episodes import EPISODES
from app.labkit import DRILLS
from app.labkit.view import Decide

BINS = 8  # a numeric drill's histogram: at most this many bars


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


def teaching_order() -> dict[str, int]:
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
    order = teaching_order()
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
        return Dashboard(cls.code, joined, aware(cls.expires_at), cls.pace_episode,
                         cls.pace_step, drill_stats(conn, cls.id), places(conn, cls),
                         list(names))


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
