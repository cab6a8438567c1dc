"""Hosting settings, read once from the environment (docs/settings.md).

- ``BASE_PATH``: the prefix the lab is served under behind a reverse proxy (``/lab``), or empty.
  Every link, asset, htmx call, pushed URL, embed code and the OpenAPI URL carry it. The proxy
  may forward the prefix or strip it: the app routes both (Starlette's ``root_path``).
- ``PUBLIC_URL``: the origin embed codes and the diagram list spell (``https://lab.example.edu``).
  Unset: the request's own origin (fine on a laptop; behind a proxy set it, or a forged Host
  header lands in the snippets a reader copies).
- ``EMBED_ALLOWED_ORIGINS``: space- or comma-separated origins allowed to frame ``/embed/*``
  (CSP ``frame-ancestors``); default ``*`` (any site may embed a diagram). Every other page
  refuses framing.
- ``HIDE_ANSWERS``: ``1`` grades drills without ever revealing the answer.
- ``RENDER_PROCESSES``: child processes that render lab answers (app/render_pool.py), default
  2; ``0`` renders in the serving process's threads. Each child holds a copy of the app
  (about 100 MB).
- ``RENDER_TIMEOUT``: seconds a render may take (default 10) before its request gets a 503
  and the render process is replaced (app/render_pool.py).
- ``CLIENT_TIMEOUT``: seconds a client has to send a request's headers, and then its body
  (default 10), where the app serves HTTP itself (``python -m app``: app/limits.py).
- ``RESPONSE_CACHE_MB``: megabytes (2^20) of answers the serving process keeps as sent
  (app/response_cache.py), default 192, 8 to 4,096; it holds one answer per 6 KiB of it.

- ``DATA_DIR``: the folder of the live class's embedded database (``classes.sqlite3``, SQLite
  in WAL mode), default ``data`` under the working directory; created if missing.
- ``DATABASE_URL``: a PostgreSQL URL (``postgresql://user:password@host:5432/lab``) to keep
  the classes there instead (several replicas share it); empty: SQLite under ``DATA_DIR``.
- ``CLASS_TTL_DAYS``: days a class lives after it starts (default 7, 1 to 365); then its
  answers are deleted with it.

The server's own (``python -m app``, app/__main__.py): ``HOST``, ``PORT``, ``WORKERS``,
``LOG_LEVEL`` (:class:`ServerSettings`). Every value is checked here, at start-up, and a bad
one stops the app with a message naming its variable (numbers in ASCII digits only: Python's
``int()`` also reads other scripts' digits, so ``RENDER_PROCESSES=١`` would pass as 1).
"""

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_ORIGIN = re.compile(r"^(https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\*|'self'|'none')$")
_BASE = re.compile(r"^(/[A-Za-z0-9._~\-]+)*$")
_HOST = re.compile(r"^([A-Za-z0-9.\-]+|\[?[0-9A-Fa-f:.]+\]?)$")  # a name, IPv4 or IPv6
_DIGITS = re.compile(r"^[0-9]+$")  # ASCII only (str.isdigit and int() take any script's)
TRUE = {"1", "true", "yes", "on"}
FALSE = {"", "0", "false", "no", "off"}
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


class SettingsError(ValueError):
    """A setting the app cannot run with: the message names the variable."""


def _base_path(value: str) -> str:
    value = value.strip().rstrip("/")
    if value and not value.startswith("/"):
        value = "/" + value
    if not _BASE.match(value) or any(part in (".", "..") for part in value.split("/")):
        raise SettingsError(f"BASE_PATH must be a path like /lab (letters, digits, ._~-; no "
                            f". or .. segment): {value!r}")
    return value


def _public_url(value: str) -> str:
    value = value.strip().rstrip("/")
    if not value:
        return ""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query \
            or parts.fragment or not _ORIGIN.match(f"{parts.scheme}://{parts.netloc}"):
        raise SettingsError(f"PUBLIC_URL must be an origin like https://lab.example.edu: {value!r}")
    return f"{parts.scheme}://{parts.netloc}"


def _origins(value: str) -> tuple[str, ...]:
    origins = tuple(o.rstrip("/") for o in re.split(r"[\s,]+", value.strip()) if o)
    for origin in origins:
        if not _ORIGIN.match(origin):
            raise SettingsError(
                f"EMBED_ALLOWED_ORIGINS: {origin!r} is not an origin (https://host[:port]), "
                "'self', 'none' or *")
    return origins or ("*",)


def _whole(name: str, value: str, default: int, low: int, high: int, what: str) -> int:
    """A whole number in ASCII digits from ``low`` to ``high``; empty is ``default``."""
    value = value.strip()
    if not value:
        return default
    if not _DIGITS.match(value) or not low <= int(value) <= high:
        raise SettingsError(f"{name} ({what}) must be a whole number from {low} to {high}, "
                            f"in digits 0-9: {value!r}")
    return int(value)


def _flag(name: str, value: str) -> bool:
    value = value.strip().lower()
    if value not in TRUE | FALSE:
        raise SettingsError(f"{name} must be 1 or 0 (or true/false, yes/no, on/off): {value!r}")
    return value in TRUE


DEFAULT_RENDER_PROCESSES = 2
MAX_RENDER_PROCESSES = 32
DEFAULT_RENDER_TIMEOUT = 10  # s: the heaviest, a MoE planner search at scale, takes ~4 s here
DEFAULT_CLIENT_TIMEOUT = 10  # s: for a request's headers, then for its body
# MB: a class of 2,000 asks for ~30,000 distinct answers in 2 minutes (issue 31), ~5 kB each
# gzipped; 192 MB holds 32,768 of them (app/response_cache.py).
DEFAULT_RESPONSE_CACHE_MB = 192


DEFAULT_CLASS_TTL_DAYS = 7
_PG_URL = re.compile(r"^postgres(ql)?(\+psycopg)?://")


def _database_url(value: str) -> str:
    """A PostgreSQL URL, normalised to SQLAlchemy's psycopg 3 driver; empty stays empty."""
    value = value.strip()
    if not value:
        return ""
    found = _PG_URL.match(value)
    if not found:
        raise SettingsError("DATABASE_URL must be a PostgreSQL URL like "
                            "postgresql://user:password@host:5432/lab (or empty for SQLite "
                            "under DATA_DIR)")
    return "postgresql+psycopg://" + value[found.end():]


def _render_processes(value: str) -> int:
    return _whole("RENDER_PROCESSES", value, DEFAULT_RENDER_PROCESSES, 0, MAX_RENDER_PROCESSES,
                  "the render processes per worker")


@dataclass(frozen=True)
class Settings:
    base_path: str = ""
    public_url: str = ""
    embed_allowed_origins: tuple[str, ...] = ("*",)
    hide_answers: bool = False
    render_processes: int = DEFAULT_RENDER_PROCESSES
    render_timeout: int = DEFAULT_RENDER_TIMEOUT
    client_timeout: int = DEFAULT_CLIENT_TIMEOUT
    data_dir: str = "data"
    database_url: str = ""
    class_ttl_days: int = DEFAULT_CLASS_TTL_DAYS
    response_cache_mb: int = DEFAULT_RESPONSE_CACHE_MB

    @classmethod
    def from_env(cls, env=None) -> "Settings":
        env = os.environ if env is None else env
        return cls(
            base_path=_base_path(env.get("BASE_PATH", "")),
            public_url=_public_url(env.get("PUBLIC_URL", "")),
            embed_allowed_origins=_origins(env.get("EMBED_ALLOWED_ORIGINS", "*")),
            hide_answers=_flag("HIDE_ANSWERS", env.get("HIDE_ANSWERS", "")),
            render_processes=_render_processes(env.get("RENDER_PROCESSES", "")),
            render_timeout=_whole("RENDER_TIMEOUT", env.get("RENDER_TIMEOUT", ""),
                                  DEFAULT_RENDER_TIMEOUT, 1, 3600, "seconds a render may take"),
            client_timeout=_whole("CLIENT_TIMEOUT", env.get("CLIENT_TIMEOUT", ""),
                                  DEFAULT_CLIENT_TIMEOUT, 1, 3600,
                                  "seconds a client has to send its headers, then its body"),
            data_dir=env.get("DATA_DIR", "").strip() or "data",
            database_url=_database_url(env.get("DATABASE_URL", "")),
            class_ttl_days=_whole("CLASS_TTL_DAYS", env.get("CLASS_TTL_DAYS", ""),
                                  DEFAULT_CLASS_TTL_DAYS, 1, 365, "days a class lives"),
            response_cache_mb=_whole("RESPONSE_CACHE_MB", env.get("RESPONSE_CACHE_MB", ""),
                                     DEFAULT_RESPONSE_CACHE_MB, 8, 4096,
                                     "megabytes of answers kept as sent"),
        )


@dataclass(frozen=True)
class ServerSettings:
    """What ``python -m app`` hands uvicorn: the address, the workers and the log level."""

    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    log_level: str = "info"

    @classmethod
    def from_env(cls, env=None) -> "ServerSettings":
        env = os.environ if env is None else env
        host = env.get("HOST", "").strip() or cls.host
        if not _HOST.match(host):
            raise SettingsError(f"HOST must be an address to listen on, e.g. 127.0.0.1 or "
                                f"0.0.0.0: {host!r}")
        level = env.get("LOG_LEVEL", "").strip().lower() or cls.log_level
        if level not in LOG_LEVELS:
            raise SettingsError(f"LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}: {level!r}")
        return cls(
            host=host.strip("[]"),
            port=_whole("PORT", env.get("PORT", ""), cls.port, 1, 65535, "the port to serve on"),
            workers=_whole("WORKERS", env.get("WORKERS", ""), cls.workers, 1, 64,
                           "the uvicorn worker processes"),
            log_level=level,
        )


SETTINGS = Settings.from_env()
BASE_PATH = SETTINGS.base_path


def url(path: str) -> str:
    """An app path as the browser must ask for it: under BASE_PATH. ``url('/')`` is the home."""
    if not path.startswith("/"):
        raise ValueError(f"app paths start with '/': {path!r}")
    return (BASE_PATH + path) if BASE_PATH else path
