"""Lab answers rendered in child processes, so that simulations use every core and never hold
the serving process's GIL.

Why: a simulation, its figures and its template are pure Python. In worker threads they share
one GIL with the event loop, so while a class's heavier states render, every other answer (a
cached fragment, an asset, /healthz) waits for its turn at the GIL, and the whole process
uses one core at most. Python's own answer for CPU-bound work is a process pool
(``concurrent.futures.ProcessPoolExecutor``, Python docs, "ProcessPoolExecutor"); the event
loop awaits it as any other future (asyncio docs, ``loop.run_in_executor``).

How: each child imports the same app, by its import string as uvicorn does (``APP``: the pool
never imports the app's module, which imports the pool), and renders with the part of the
middleware stack below the response cache (timing, compression, routing, the lab's handler),
on its own event loop.
The parent sends the request's plain scope (path, query, headers) and gets back status,
headers and body, which the response cache stores and sends as if it had rendered them
itself: an answer is the same bytes whichever process drew it (tests/app/test_render_pool.py).

Started by the app's lifespan with ``RENDER_PROCESSES`` children (app/settings.py). Until the
children are ready, if they fail to start, or if one dies, answers render in the serving
process's threads as before: the pool is a speed-up, never a dependency.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor

from uvicorn.importer import import_from_string

log = logging.getLogger("uvicorn.error")

# The parts of an ASGI HTTP scope that describe the request; the rest (the app, the router,
# the server's state) belong to the process that holds them.
SCOPE_KEYS = ("type", "asgi", "http_version", "method", "scheme", "path", "raw_path",
              "root_path", "query_string", "headers", "server", "client")
START_TIMEOUT = 120.0  # s: children import the app (a few s; more on a loaded machine)
PARENT_POLL = 1.0  # s: how often a child checks that its parent is alive
# What each child imports and runs first, as "module:attribute" (uvicorn's import strings):
# the app uvicorn serves (app/__main__.py), and the templates compiled before any request.
APP = "app.main:app"
WARM_UP = "app.templating:compile_templates"


def portable_scope(scope: dict) -> dict:
    return {k: scope[k] for k in SCOPE_KEYS if k in scope}


class RenderPool:
    """A ProcessPoolExecutor of app renderers, with the readiness and fallback the app needs.
    Used from the event loop thread only."""

    def __init__(self, app: str = APP, warm_up: str = WARM_UP) -> None:
        self.app, self.warm_up = app, warm_up
        self.executor: ProcessPoolExecutor | None = None
        self.processes = 0
        self.ready = False
        self.rendered = 0  # answers the children rendered (tests and benchmarks read it)
        self.restarting: asyncio.Task | None = None

    async def start(self, processes: int) -> None:
        """Start the children and wait until each has imported the app; on failure, log why
        and leave the pool off (answers render in threads)."""
        if processes <= 0 or self.executor is not None:
            return
        self.processes = processes
        loop = asyncio.get_running_loop()
        try:
            # "spawn": a fresh interpreter, never a fork of a process whose event loop, sockets
            # and threads are running (Python docs, multiprocessing "Contexts and start
            # methods"). Creating it can fail too (no /dev/shm for its locks in some sandboxes).
            self.executor = ProcessPoolExecutor(
                max_workers=processes, mp_context=multiprocessing.get_context("spawn"),
                initializer=_child_init, initargs=(self.app, self.warm_up))
            # Submitted together, so that each goes to a child of its own (the executor starts
            # a new child while none is idle) and all import the app at once.
            pings = [loop.run_in_executor(self.executor, _ping) for _ in range(processes)]
            await asyncio.wait_for(asyncio.gather(*pings), START_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - whatever it is, the app serves without it
            log.warning("render pool off (answers render in threads): %r", exc)
            self.stop()
            return
        self.ready = True

    def stop(self, wait: bool = False) -> None:
        """Stop the children: queued renders are cancelled; with ``wait``, the ones running
        finish and the children have exited when this returns (the app's shutdown)."""
        if self.executor is not None:
            self.executor.shutdown(wait=wait, cancel_futures=True)
        self.executor, self.ready = None, False

    async def render(self, scope: dict) -> tuple[int, list, bytes] | None:
        """(status, headers, body) of the request, rendered by a child; None when the pool
        cannot (off, starting, broken): the caller renders in-process instead. An exception
        of the app in the child is raised here, as it would be in-process."""
        if not self.ready:
            return None
        loop = asyncio.get_running_loop()
        try:
            answer = await loop.run_in_executor(self.executor, _child_render,
                                                portable_scope(scope))
        except BrokenExecutor as exc:  # a child died (killed, out of memory): start afresh
            log.warning("render pool broken, restarting it: %r", exc)
            processes = self.processes
            self.stop()
            self.restarting = loop.create_task(self.start(processes))  # kept: tasks are weak
            return None
        self.rendered += 1
        return answer


POOL = RenderPool()


# --- in each child ----------------------------------------------------------------------------

_CHILD: dict = {}


def _child_init(target: str, warm_up: str) -> None:
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
    while getattr(layer, "pool", None) is not POOL:
        layer = layer.app
    _CHILD.update(app=app, inner=layer.app, loop=asyncio.new_event_loop())


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL)
    os._exit(0)


def _ping() -> bool:
    return "inner" in _CHILD


def _child_render(scope: dict) -> tuple[int, list, bytes]:
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
