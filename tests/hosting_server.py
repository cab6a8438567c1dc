"""The lab under uvicorn with hosting settings (BASE_PATH, PUBLIC_URL, ...) in its environment:
settings are read once at start-up, so each configuration is its own process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def serve(env: dict[str, str], probe: str = "/healthz"):
    """Yield the server's origin (http://127.0.0.1:PORT) while it runs."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env={**os.environ, **env},
    )
    origin = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                with urllib.request.urlopen(origin + probe, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"uvicorn exited before serving ({env})") from None
                if time.monotonic() > deadline:
                    raise RuntimeError("uvicorn did not answer within 60 s") from None
                time.sleep(0.1)  # readiness poll, not a timing assertion
        yield origin
    finally:
        proc.terminate()
        proc.wait(timeout=10)
