"""Per-client rate limits of the class routes, kept in the class's database so that every app
process on it (several workers, or the compose deployment's replicas on one PostgreSQL)
shares one allowance: join-code misses (so codes cannot be guessed by brute force: 10 misses a
minute is 14,400 a day against 887 M codes) and classes started. A class behind one school
NAT shares an address, so only misses count against joining, never successful joins.

Each counted event is a row of ``rate_hits`` (app/classroom/models.py) with the wall clock's
time (replicas' clocks agree to well under a window); recording one deletes its kind's rows
older than the window, so a client keeps at most its allowance of rows (plus the requests it
has in flight) and the table stays bounded. A client at its allowance is refused before
anything is looked up, and no row is added for the refusal."""

from __future__ import annotations

import time

from sqlalchemy import and_, delete, func, insert, select
from sqlalchemy.engine import Connection

from app.classroom import db
from app.classroom.models import rate_hits

CLIENT_LENGTH = 64


class Window:
    """At most ``limit`` events of ``kind`` per ``seconds`` per client (a sliding window)."""

    def __init__(self, kind: str, limit: int, seconds: float) -> None:
        self.kind, self.limit, self.seconds = kind, limit, seconds

    def _key(self, client: str, since: float):
        return and_(rate_hits.c.kind == self.kind,
                    rate_hits.c.client == client[:CLIENT_LENGTH], rate_hits.c.at >= since)

    def count(self, conn: Connection, client: str, upto: int | None = None) -> int:
        """The client's events in the window (``upto``: those recorded up to that one)."""
        where = self._key(client, time.time() - self.seconds)
        if upto is not None:
            where = and_(where, rate_hits.c.id <= upto)
        return conn.execute(select(func.count()).select_from(rate_hits).where(where)
                            ).scalar_one()

    def blocked(self, conn: Connection, client: str) -> bool:
        return self.count(conn, client) >= self.limit

    def record(self, conn: Connection, client: str) -> int:
        """Count one event of the client (and forget its kind's events older than the
        window): the event's id, for ``count(upto=...)``."""
        at = time.time()
        conn.execute(delete(rate_hits).where(and_(rate_hits.c.kind == self.kind,
                                                  rate_hits.c.at < at - self.seconds)))
        return conn.execute(insert(rate_hits).values(
            kind=self.kind, client=client[:CLIENT_LENGTH], at=at)).inserted_primary_key[0]

    def clear(self) -> None:
        with db.begin() as conn:
            conn.execute(delete(rate_hits).where(rate_hits.c.kind == self.kind))


JOIN_MISSES = Window("join-miss", limit=10, seconds=60)
CLASSES_STARTED = Window("class-start", limit=20, seconds=3600)
