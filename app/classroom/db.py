"""The live class's database: SQLite under DATA_DIR by default, PostgreSQL when DATABASE_URL
says so, reached through one SQLAlchemy engine, its schema kept by Alembic migrations
(app/classroom/migrations), run at start-up or by ``python -m app migrate``.

SQLite: WAL, so the dashboard's reads never wait for a student's write, and
``synchronous=FULL``: in WAL mode NORMAL may lose the last commits on power loss (SQLite,
"Write-Ahead Logging", sec. 2.1, and "PRAGMA synchronous"), and an answer the server
acknowledged must survive. ``busy_timeout`` queues writers of the thread pool (and of other
worker processes) instead of failing them. PostgreSQL commits durably by default
(``synchronous_commit = on``). Each request commits before it answers."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection

from app.settings import SETTINGS

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
SQLITE_FILE = "classes.sqlite3"
BUSY_TIMEOUT_MS = 10_000

_lock = threading.Lock()
_engine: Engine | None = None
_url: str | None = None


def default_url() -> str:
    if SETTINGS.database_url:
        return SETTINGS.database_url
    return f"sqlite:///{Path(SETTINGS.data_dir).resolve() / SQLITE_FILE}"


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON",
                   f"busy_timeout={BUSY_TIMEOUT_MS}"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # Python's sqlite3 opens transactions itself, lazily (BEGIN DEFERRED at the first
        # write); the pool keeps one connection per thread that asked.
        engine = create_engine(url, pool_size=8, max_overflow=8,
                               connect_args={"timeout": BUSY_TIMEOUT_MS / 1000,
                                             "check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_size=8, max_overflow=8, pool_pre_ping=True)


def configure(url: str | None = None) -> Engine:
    """Point the class at a database (the settings' by default; tests pass their own)."""
    global _engine, _url
    with _lock:
        if _engine is not None:
            _engine.dispose()
        _url = url or default_url()
        _engine = make_engine(_url)
        return _engine


def engine() -> Engine:
    if _engine is None:
        return configure()
    return _engine


@contextmanager
def begin() -> Iterator[Connection]:
    """One transaction, committed when the block ends (before the request answers)."""
    with engine().begin() as conn:
        yield conn


def _alembic_config(url: str):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["url"] = url
    return config


def migrate(url: str | None = None) -> None:
    """Bring the schema to the newest migration. Several processes starting at once take
    turns: a file lock beside the SQLite file, an advisory lock on PostgreSQL (env.py)."""
    from alembic import command

    url = url or _url or default_url()
    config = _alembic_config(url)
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".migrate-lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            command.upgrade(config, "head")
    else:
        command.upgrade(config, "head")


def describe(url: str | None = None) -> str:
    """The database in words, for the start-up log line (no password)."""
    from sqlalchemy.engine import make_url

    return make_url(url or _url or default_url()).render_as_string(hide_password=True)


def data_dir_writable() -> bool:
    return os.access(Path(SETTINGS.data_dir).resolve().parent, os.W_OK)
