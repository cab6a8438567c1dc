"""What every part of a live class shares: the refusal a router answers with, the session
tokens and their hashes, the clock, and the checks of a drill and a step named in a request."""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import UTC, datetime

from app.episodes import BY_SLUG
from app.labkit import DRILLS

SECRET_BYTES = 32  # the instructor's secret: 256 bits (the issue asks for at least 128)
_STEP = re.compile(r"^step-[a-z0-9-]{1,40}$")


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


def aware(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes (stored as UTC)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def drill_of(drill_id: str):
    found = DRILLS.get(drill_id)
    if found is None:
        raise Refused("drill", "drill: no such drill")
    return found


def check_place(episode: str, step: str) -> None:
    if episode not in BY_SLUG:
        raise Refused("episode", "episode: no such episode")
    if not _STEP.match(step):
        raise Refused("step", "step: a step id like step-3")
