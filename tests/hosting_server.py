"""The lab under uvicorn with hosting settings (BASE_PATH, PUBLIC_URL, ...) in its environment:
settings are read once at start-up, so each configuration is its own process."""

from __future__ import annotations

from contextlib import contextmanager

from tests.conftest import running_app


@contextmanager
def serve(env: dict[str, str], probe: str = "/healthz"):
    """Yield the server's origin (http://127.0.0.1:PORT) while it runs."""
    with running_app(env, probe) as origin:
        yield origin
