"""A coroutine run to completion on an event loop of its own, in a thread of its own.

Under pytest-xdist one worker runs browser tests and app tests in one process, and
Playwright's sync API keeps an event loop running on the main thread while its browser is
open: ``asyncio.run`` there refuses ("cannot be called from a running event loop")."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    result: dict[str, Any] = {}

    def main() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=main, name="run_async")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]
