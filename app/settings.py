"""Hosting settings, read once from the environment (README, "Hosting a class").

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
"""

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_ORIGIN = re.compile(r"^(https?://[A-Za-z0-9.\-]+(:\d{1,5})?|\*|'self'|'none')$")
_BASE = re.compile(r"^(/[A-Za-z0-9._~\-]+)*$")
TRUE = {"1", "true", "yes", "on"}


class SettingsError(ValueError):
    """A setting the app cannot run with: the message names the variable."""


def _base_path(value: str) -> str:
    value = value.strip().rstrip("/")
    if value and not value.startswith("/"):
        value = "/" + value
    if not _BASE.match(value):
        raise SettingsError(f"BASE_PATH must be a path like /lab (letters, digits, ._~-): "
                            f"{value!r}")
    return value


def _public_url(value: str) -> str:
    value = value.strip().rstrip("/")
    if not value:
        return ""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
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


DEFAULT_RENDER_PROCESSES = 2
MAX_RENDER_PROCESSES = 32


def _render_processes(value: str) -> int:
    value = value.strip()
    if not value:
        return DEFAULT_RENDER_PROCESSES
    if not value.isdigit() or int(value) > MAX_RENDER_PROCESSES:
        raise SettingsError(f"RENDER_PROCESSES must be a whole number from 0 to "
                            f"{MAX_RENDER_PROCESSES}: {value!r}")
    return int(value)


@dataclass(frozen=True)
class Settings:
    base_path: str = ""
    public_url: str = ""
    embed_allowed_origins: tuple[str, ...] = ("*",)
    hide_answers: bool = False
    render_processes: int = DEFAULT_RENDER_PROCESSES

    @classmethod
    def from_env(cls, env=None) -> "Settings":
        env = os.environ if env is None else env
        return cls(
            base_path=_base_path(env.get("BASE_PATH", "")),
            public_url=_public_url(env.get("PUBLIC_URL", "")),
            embed_allowed_origins=_origins(env.get("EMBED_ALLOWED_ORIGINS", "*")),
            hide_answers=env.get("HIDE_ANSWERS", "").strip().lower() in TRUE,
            render_processes=_render_processes(env.get("RENDER_PROCESSES", "")),
        )


SETTINGS = Settings.from_env()
BASE_PATH = SETTINGS.base_path


def url(path: str) -> str:
    """An app path as the browser must ask for it: under BASE_PATH. ``url('/')`` is the home."""
    if not path.startswith("/"):
        raise ValueError(f"app paths start with '/': {path!r}")
    return (BASE_PATH + path) if BASE_PATH else path
