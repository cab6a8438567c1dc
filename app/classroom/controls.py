"""The instructor's controls over a class (reveal, poll again, hold at a step) and its
anonymous CSV export."""

from __future__ import annotations

import csv
import io

from sqlalchemy import and_, select, update
from sqlalchemy.engine import Connection

from app.classroom import db
from app.classroom.aggregates import teaching_order
from app.classroom.common import Refused, check_place, drill_of
from app.classroom.models import classes, drills, responses
from app.labkit import DRILLS


def _known_drill(conn: Connection, class_id: int, drill_id: str) -> None:
    drill_of(drill_id)
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
    order = teaching_order()
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
