"""The render pool's child side (app/render_pool.py starts these processes): each imports the
app by its import string, finds the stack below the layer that hands its misses to the pool,
and draws the requests it is sent, one at a time, on its own event loop."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

from uvicorn.importer import import_from_string

PARENT_POLL = 1.0  # s: how often a child checks that its parent is alive

_CHILD: dict = {}


def init(target: str, warm_up: str) -> None:
    # Ctrl-C in a terminal reaches the whole process group: the parent stops the children
    # (lifespan shutdown), so they ignore it instead of printing a traceback each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A parent killed outright (SIGKILL, out of memory) never stops its children, and a child
    # never reads end-of-file on its task queue (its siblings hold that pipe open too): each
    # child watches its parent and exits when it is gone.
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    app = import_from_string(target)
    import_from_string(warm_up)()
    # The child runs the stack below the layer that hands its misses to this pool (the
    # response cache, app/response_cache.py): every layer keeps the next one as .app.
    layer = app.build_middleware_stack()
    while not hasattr(layer, "pool"):
        layer = layer.app
    _CHILD.update(app=app, inner=layer.app, loop=asyncio.new_event_loop())


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL)
    os._exit(0)


def ping() -> bool:
    return "inner" in _CHILD


def render(scope: dict) -> tuple[int, list, bytes]:
    return _CHILD["loop"].run_until_complete(_call(scope))


async def _call(scope: dict) -> tuple[int, list, bytes]:
    started: dict = {}
    body: list[bytes] = []
    requested = False

    async def receive():
        nonlocal requested
        if requested:
            await asyncio.Event().wait()  # no more body; a GET handler never asks twice
        requested = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            started.update(message)
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    await _CHILD["inner"]({**scope, "app": _CHILD["app"]}, receive, send)
    return started["status"], list(started.get("headers", ())), b"".join(body)
