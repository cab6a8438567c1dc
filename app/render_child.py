"""The render pool's child side (app/render_pool.py starts these processes): each imports the
app by its import string, finds the stack below the layer that hands its misses to the pool,
and draws the requests it is sent, one at a time, on the event loop of the request's lane.

Full garbage collections run when the pool asks (``collect``, between answers: app/
render_pool.py), not when the collector's counts say: a full pass walks every object the
engine's caches keep, tens of ms, and it paused the render it fell in. What survives a
collection is then frozen (``gc.freeze``, Python docs: moved to the permanent generation, which
collections skip; reference counting still frees it), so the next pass walks only what the
answers since made (issue 31: a pass walked 71,000 objects, 47 ms, after 1,300 answers; over
the class requests of every lab, collections cost 0.25 ms of CPU per answer, 0.08-0.10 ms so).
Every FULL_EVERY-th collection unfreezes first and walks everything,
so a cycle that became garbage after it was frozen (an evicted cached error's traceback) is
reclaimed within that many collections. That walk took 212 ms (of a replay's 2,000 class
answers' 7 s) where the others took 8-18 ms, and a render leaves little cyclic garbage since
issue 31 (app/templating.py): every fiftieth, not every tenth (0.09 ms of CPU an answer less).

Two lanes, two threads, each running its own event loop for as long as the child lives: a
light answer is drawn at the child's niceness, a heavy one at ``heavy_nice`` (Linux keeps a
niceness per thread: setpriority(2) on a thread id, which the threads it starts inherit), so
a child that draws either gives the CPU to light work, the serving process's included, first
while a heavy answer is drawn, and never draws a light one at a lowered priority. Each loop
runs one long task (``_serve``) for answers asked from this process (a replay, a test), and
a sync handler runs on the lane's own thread, not on a worker thread of anyio's (``_inline``).

Requests come down a pipe of their own (``answers``: one end of a ``multiprocessing.Pipe`` the
pool hands each child), read on the light lane's loop, where a light answer is drawn at once
and a heavy one handed to its lane; each answer goes back up it, which the serving process
reads on its event loop; the process pool's executor carries only the start, ``ping`` and
``collect`` (issue 31: its queues, feeder and manager threads cost the serving process
0.22-0.25 ms of CPU per answer and the child 0.07, a pipe 0.03 and 0.02). A light answer
crosses no thread in the child: before, a pipe thread handed it to the lane's loop, which
handed the handler to a worker thread, and back twice, four wake-ups each waiting for a core
while a class kept both busy.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import os
import pickle
import signal
import sys
import threading
import time
from concurrent.futures.process import _ExceptionWithTraceback

import fastapi.routing
from fastapi import HTTPException, Request
from starlette._utils import get_route_path
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.middleware.gzip import GZipResponder
from uvicorn.importer import import_from_string

from app.labkit.routes import HANDLERS

PARENT_POLL = 1.0  # s: how often a child checks that its parent is alive
# The oldest generation's threshold (gen1 collections before a full one): never reached, so
# only ``collect`` runs a full collection; the young generations are collected as usual.
NO_AUTOMATIC_FULL = 1 << 30
# The young generation's threshold (allocations less deallocations between its collections;
# Python's default 700). A render makes and frees thousands of objects: at 700 a collection
# fell every few hundred of an answer's allocations and walked the live ones each time.
# Since a render leaves almost no cyclic garbage (app/templating.py), fewer, larger young
# collections walk less in all (issue 31, over 2,000 class control answers: 216 -> 104 ms of
# young and middle collections at 10,000, 131 ms at 3,000).
YOUNG = 10_000
FULL_EVERY = 50  # collections: every fiftieth walks the frozen objects too

_CHILD: dict = {}


def init(target: str, warm_up: str, heavy_nice: int = 0, answers=None) -> None:
    # Ctrl-C in a terminal reaches the whole process group: the parent stops the children
    # (lifespan shutdown), so they ignore it instead of printing a traceback each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A parent killed outright (SIGKILL, out of memory) never stops its children, and a child
    # never reads end-of-file on its task queue (its siblings hold that pipe open too): each
    # child watches its parent and exits when it is gone.
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    app = import_from_string(target)
    import_from_string(warm_up)()
    _CHILD.update(app=app, inner=below_cache(app))
    _, middle, _ = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, NO_AUTOMATIC_FULL)
    for lane, nice in (("light", 0), ("heavy", heavy_nice)):
        ready = threading.Event()
        threading.Thread(target=_lane, args=(lane, nice, ready), daemon=True,
                         name=f"render-{lane}").start()
        ready.wait()
    # A lane draws one answer at a time on its own loop, so a sync handler runs on it, not on
    # a worker thread of anyio's: a thread's wake-up and two hand-overs of the GIL less per
    # answer (issue 31), each a wait for a core while a class keeps both busy.
    fastapi.routing.run_in_threadpool = _inline
    # Starlette's GZip hands a body of 128 KiB or more to an anyio worker thread, to keep it
    # off the server's event loop; here the loop is the lane's own, so it compresses in place
    # (the playground's page passed 128 KiB in this stop and woke a worker thread per answer).
    GZipResponder.apply_compression = _compress_here
    if answers is not None:  # read on the light lane's loop, where light answers are drawn
        light, _ = _CHILD["light"]
        light.call_soon_threadsafe(light.add_reader, answers.fileno(), _request, answers)


def below_cache(app):
    """What a child draws with: the app's stack below the layer that hands its misses to this
    pool (the response cache, app/response_cache.py; every layer keeps the next one as .app),
    a lab view's own routes answered directly under its timing and compression (``Direct``)."""
    layer = app.build_middleware_stack()
    while not hasattr(layer, "pool"):
        layer = layer.app
    inner = layer.app
    while not isinstance(layer.app, ExceptionMiddleware):
        layer = layer.app
    layer.app = Direct(layer.app, HANDLERS)
    return inner


class Direct:
    """A lab view's own routes answered by their handler, called directly: FastAPI's routing
    (a walk over every route of every router, about 4% of a miss), its exception and
    dependency layers (2-3%) are skipped, and the handler's response is sent through the
    same timing and compression as before, the same bytes and headers. Every other request,
    and one whose handler raises an HTTPException, goes down the whole stack (``app``)."""

    def __init__(self, app, handlers: dict) -> None:
        self.app, self.handlers = app, handlers

    async def __call__(self, scope, receive, send) -> None:
        handler = self.handlers.get(get_route_path(scope)) if scope["method"] == "GET" else None
        if handler is None:
            await self.app(scope, receive, send)
            return
        try:
            response = handler(Request(scope, receive, send))
        except HTTPException:  # answered by the app's exception handlers, as routed
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)


async def _compress_here(self, body: bytes, *, more_body: bool) -> bytes:
    """Starlette's ``GZipResponder.apply_compression`` in a render child: on the lane's own
    thread, whatever the body's size."""
    return self._compress_body(body, more_body)


async def _inline(func, *args, **kwargs):
    """FastAPI's ``run_in_threadpool`` in a render child: the call, on the lane's own thread."""
    return func(*args, **kwargs)


def _request(answers) -> None:
    """The pool's next request on its pipe (the pool sends one at a time and waits for its
    answer): (scope, lane), drawn on its lane, (True, answer) or (False, the app's exception,
    its traceback kept as the process pool keeps it) sent back. Until the pool closes its end
    (stopped, or replacing this child)."""
    loop = asyncio.get_running_loop()
    try:
        scope, lane = answers.recv()
    except (EOFError, OSError):
        loop.remove_reader(answers.fileno())
        return
    loop.create_task(_reply(answers, scope, lane))


async def _reply(answers, scope: dict, lane: str) -> None:
    try:
        if lane == "light":  # drawn here: no thread between the pipe and the handler
            answer = await _call(scope)
        else:
            answer = await asyncio.wrap_future(_submit(scope, lane))
        reply = pickle.dumps((True, answer))
    except BaseException as exc:  # noqa: BLE001 - the app's error goes back to the parent
        try:
            reply = pickle.dumps((False, _ExceptionWithTraceback(exc, exc.__traceback__)))
        except Exception:  # noqa: BLE001 - an exception that cannot be pickled: its text
            reply = pickle.dumps((False, RuntimeError(repr(exc))))
    try:
        answers.send_bytes(reply)
    except OSError:
        asyncio.get_running_loop().remove_reader(answers.fileno())


def _lane(lane: str, nice: int, ready: threading.Event) -> None:
    """A lane's thread: its niceness, then its event loop, serving until the process ends."""
    if nice and sys.platform.startswith("linux"):  # elsewhere a thread id is no process id
        with contextlib.suppress(OSError):  # a priority it may not set: the lane runs as is
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    jobs: asyncio.Queue = asyncio.Queue()
    _CHILD[lane] = (loop, jobs)
    loop.call_soon(ready.set)
    loop.run_until_complete(_serve(jobs))


async def _serve(jobs: asyncio.Queue) -> None:
    while True:
        scope, answer = await jobs.get()
        try:
            answer.set_result(await _call(scope))
        except BaseException as exc:  # noqa: BLE001 - the app's error goes back to the parent
            answer.set_exception(exc)


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL)
    os._exit(0)


def ping() -> bool:
    return "inner" in _CHILD


def collect() -> int:
    """A full garbage collection, between answers (the pool asks when the child is idle),
    then what survived frozen; every FULL_EVERY-th walks the frozen objects too."""
    _CHILD["collections"] = _CHILD.get("collections", 0) + 1
    if _CHILD["collections"] % FULL_EVERY == 0:
        gc.unfreeze()
    found = gc.collect()
    gc.freeze()
    return found


def _submit(scope: dict, lane: str) -> concurrent.futures.Future:
    """The answer to ``scope``, drawn on ``lane``'s loop, from any thread."""
    loop, jobs = _CHILD[lane]
    answer: concurrent.futures.Future = concurrent.futures.Future()
    loop.call_soon_threadsafe(jobs.put_nowait, (scope, answer))
    return answer


def render(scope: dict, lane: str = "light") -> tuple[int, list, bytes]:
    return _submit(scope, lane).result()


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
