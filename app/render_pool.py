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
middleware stack below the response cache (timing, compression, routing, the lab's handler;
a lab view's own routes go straight to their handler: app/render_child.py's ``Direct``), on
its own event loop.
The parent sends the request's plain scope (path, query, headers) and gets back status,
headers and body, which the response cache stores and sends as if it had rendered them
itself: an answer is the same bytes whichever process drew it (tests/app/test_render_pool.py).

Started by the app's lifespan with ``RENDER_PROCESSES`` children (app/settings.py). Until the
children are ready, if they fail to start, or if one dies, answers render in the serving
process's threads as before: the pool is a speed-up, never a dependency.

Fair and bounded (issue 20: sixteen clients looping EP08's heaviest planner search made an
uncached EP01 answer wait 7.3 s; a stopped child held its request for as long as it was
stopped):

- each child is its own single-process executor (a slot), so one can be replaced alone;
- a miss comes with its expected cost (app/lanes.py) and waits in the light or the heavy lane.
  Heavy answers are drawn only by the "general" children: with two or more, the first
  (a quarter of them) draws light answers only, so a light miss never waits behind heavy
  ones. Light answers go to any free child, the light-only ones first. A child draws a
  heavy answer at nice HEAVY_NICE and a light one at its own (app/render_child.py: a thread
  per lane), so the OS gives the serving process and light work the CPU first when the
  machine is full, and a general child drawing a light answer is not slowed for it;
- bounded and fair: a client may have only so many answers queued or drawn per lane, its
  k-th waiting behind every other client's first k, and a lane only so many per child
  (app/render_queue.py: past either, a 429 with Retry-After);
- a deadline (RENDER_TIMEOUT) on every render, and on every wait for one: past it the request
  gets a 503 saying so, and a child that held it is killed and replaced (its siblings serve
  on). A child that dies costs its request nothing: it is drawn in a thread instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import struct
import time
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.connection import Connection

from app import render_child
from app.lanes import HEAVY, LIGHT, Cost
from app.render_queue import Busy, FairLanes, Job

log = logging.getLogger("uvicorn.error")

# The parts of an ASGI HTTP scope that describe the request; the rest (the app, the router,
# the server's state) belong to the process that holds them.
SCOPE_KEYS = ("type", "asgi", "http_version", "method", "scheme", "path", "raw_path",
              "root_path", "query_string", "headers", "server", "client")
START_TIMEOUT = 120.0  # s: children import the app (a few s; more on a loaded machine)
# What each child imports and runs first, as "module:attribute" (uvicorn's import strings):
# the app uvicorn serves (app/__main__.py), and the templates compiled before any request.
APP = "app.main:app"
WARM_UP = "app.templating:compile_templates"
HEAVY_NICE = 10  # a heavy answer's thread's niceness in its child: light work gets the CPU first
# A child's full garbage collections (app/render_child.py turns off the automatic ones): after
# COLLECT_IDLE renders, when no answer is waiting for it; after COLLECT_BUSY, before its next.
COLLECT_IDLE, COLLECT_BUSY = 200, 2000


def portable_scope(scope: dict) -> dict:
    return {k: scope[k] for k in SCOPE_KEYS if k in scope}


@dataclass(eq=False)
class Slot:
    """One render process: its own executor, what it is drawing, and how often it was
    replaced (``generation``: a late answer of a replaced child is recognised and dropped)."""

    index: int
    heavy: bool  # may draw heavy answers
    executor: ProcessPoolExecutor | None = None
    ready: bool = False
    job: Job | None = None
    generation: int = 0
    renders: int = 0  # since its last full garbage collection
    collecting: bool = False
    # The pipe its requests go down and its answers come up (app/render_child.py), read on
    # the event loop (``loop``) into ``inbox`` until an answer is whole.
    conn: Connection | None = None
    loop: asyncio.AbstractEventLoop | None = None
    inbox: bytearray = field(default_factory=bytearray)

    @property
    def pid(self) -> int | None:
        processes = getattr(self.executor, "_processes", None) or {}
        return next(iter(processes), None)


class RenderPool(FairLanes):
    """Render processes (slots) drawing from the lanes (FairLanes), with deadlines, readiness
    and the fallback the app needs. Used from the event loop thread only."""

    def __init__(self, app: str = APP, warm_up: str = WARM_UP) -> None:
        super().__init__()
        self.app, self.warm_up = app, warm_up
        self.slots: list[Slot] = []
        self.processes = 0
        self.rendered = 0  # answers the children rendered (tests and benchmarks read it)
        self.collections = 0  # full garbage collections the children ran between answers
        self.replaced = 0  # children killed past their deadline or found dead
        self.tasks: set[asyncio.Task] = set()  # slots starting (tasks are weakly held)

    @property
    def ready(self) -> bool:
        return any(slot.ready for slot in self.slots)

    def pids(self) -> list[int]:
        return [slot.pid for slot in self.slots if slot.pid is not None]

    # --- starting and stopping ---------------------------------------------------------------

    async def start(self, processes: int) -> None:
        """Start the children and wait until each has imported the app; if none can, log why
        and leave the pool off (answers render in threads)."""
        if processes <= 0 or self.slots:
            return
        self.processes = processes
        light_only = 0 if processes == 1 else max(1, processes // 4)
        self.slots = [Slot(i, heavy=i >= light_only) for i in range(processes)]
        # Together, so that all import the app at once.
        await asyncio.gather(*(self._start_slot(slot) for slot in self.slots))
        if not self.ready:
            self.stop()

    async def _start_slot(self, slot: Slot) -> None:
        loop = asyncio.get_running_loop()
        generation = slot.generation
        ours = theirs = None
        try:
            # "spawn": a fresh interpreter, never a fork of a process whose event loop,
            # sockets and threads are running (Python docs, multiprocessing "Contexts and start
            # methods"). Creating it can fail too (no /dev/shm for its locks in some sandboxes).
            context = multiprocessing.get_context("spawn")
            ours, theirs = context.Pipe()  # its requests and answers (app/render_child.py)
            slot.executor = ProcessPoolExecutor(
                max_workers=1, mp_context=context,
                initializer=render_child.init,
                # With one child, light answers wait behind its heavy one anyway: not slowed.
                initargs=(self.app, self.warm_up,
                          HEAVY_NICE if slot.heavy and self.processes > 1 else 0, theirs))
            await asyncio.wait_for(loop.run_in_executor(slot.executor, render_child.ping),
                                   START_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - whatever it is, the app serves without it
            log.warning("render process %d off (its answers render elsewhere): %r",
                        slot.index, exc)
            if slot.executor is not None:
                slot.executor.shutdown(wait=False, cancel_futures=True)
            slot.executor = None
            for end in (ours, theirs):
                if end is not None:
                    end.close()
            return
        theirs.close()  # the child holds its end: when it dies, ours reads end-of-file
        if slot.generation != generation or slot not in self.slots:  # stopped meanwhile
            slot.executor.shutdown(wait=False, cancel_futures=True)
            ours.close()
            return
        os.set_blocking(ours.fileno(), False)
        slot.conn, slot.loop, slot.inbox = ours, loop, bytearray()
        loop.add_reader(ours.fileno(), self._readable, slot, generation)
        slot.ready = True
        self._dispatch()

    @staticmethod
    def _unhook(slot: Slot) -> None:
        """Stop reading the slot's pipe and close it, on the loop that reads it (``stop`` may
        be called from another thread: a test's)."""
        conn, loop, slot.conn = slot.conn, slot.loop, None
        if conn is None:
            return
        fd = conn.fileno()

        def close() -> None:
            with contextlib.suppress(Exception):  # a loop closed meanwhile: nothing to remove
                loop.remove_reader(fd)
            conn.close()

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or loop.is_closed():
            close()
        else:
            try:
                loop.call_soon_threadsafe(close)
            except RuntimeError:  # closed meanwhile
                close()

    def stop(self, wait: bool = False) -> None:
        """Stop the children: waiting renders are drawn in threads instead; with ``wait``, the
        ones running finish and the children have exited when this returns (the app's
        shutdown)."""
        slots, self.slots = self.slots, []
        for slot in slots:
            slot.ready = False
            slot.generation += 1
            self._unhook(slot)
            if slot.executor is not None:
                slot.executor.shutdown(wait=wait, cancel_futures=True)
                slot.executor = None
        for lane in self.lanes.values():
            for *_, job in lane.waiting:
                self._settle(job, None)
            lane.waiting.clear()

    # --- a render ----------------------------------------------------------------------------

    async def render(self, scope: dict, cost: Cost | None = None) -> tuple[int, list, bytes] | None:
        """(status, headers, body) of the request, rendered by a child; None when the pool
        cannot (off, starting, broken): the caller renders in-process instead. An exception
        of the app in the child is raised here, as it would be in-process; :class:`Busy` when
        the pool will not draw it now."""
        cost = cost or Cost(0.0, "an answer")
        lane = cost.lane
        takers = [s for s in self.slots if s.executor is not None and (lane == LIGHT or s.heavy)]
        if not self.ready or not takers:
            return None
        client = (scope.get("client") or (None,))[0]
        self._admit(client, lane, len(takers), cost)
        job = Job(portable_scope(scope), cost, client,
                  asyncio.get_running_loop().create_future())
        self._enqueue(job)
        try:
            self._dispatch()
            return await job.future
        finally:
            self._release(job)

    def _dispatch(self) -> None:
        """Give each free child the next answer it may draw: light ones first (the light-only
        children are first in the list), heavy ones to the general children."""
        for slot in self.slots:
            if not slot.ready or slot.job is not None or slot.collecting:
                continue
            if slot.renders >= COLLECT_BUSY:
                self._collect(slot)
                continue
            job = self._next(LIGHT) or (self._next(HEAVY) if slot.heavy else None)
            if job is not None:
                self._run(slot, job)
            elif slot.renders >= COLLECT_IDLE:
                self._collect(slot)

    def _collect(self, slot: Slot) -> None:
        """The child's full garbage collection, while it has nothing to draw: a full pass
        walks every object its caches keep (tens of ms), and the automatic one paused
        whatever render it fell in, and every answer queued behind it (issue 31)."""
        try:
            done = asyncio.wrap_future(slot.executor.submit(render_child.collect))
        except (BrokenExecutor, RuntimeError) as exc:  # died since its last answer
            self._replace(slot, slot.generation, f"found broken: {exc!r}")
            return
        slot.collecting, slot.renders = True, 0
        done.add_done_callback(partial(self._collected, slot, slot.generation))

    def _collected(self, slot: Slot, generation: int, done: asyncio.Future) -> None:
        if slot.generation != generation:
            return  # replaced meanwhile
        slot.collecting = False
        error = done.exception() if not done.cancelled() else BrokenExecutor("cancelled")
        if error is not None:
            self._replace(slot, generation, f"died: {error!r}")
            return
        self.collections += 1
        self._dispatch()

    def _run(self, slot: Slot, job: Job) -> None:
        loop = asyncio.get_running_loop()
        try:
            slot.conn.send((job.scope, job.cost.lane))
        except (OSError, ValueError) as exc:  # died since its last answer (its pipe closed)
            self._settle(job, None)
            self._replace(slot, slot.generation, f"found broken: {exc!r}")
            return
        slot.job, job.started = job, time.monotonic()
        job.timer = loop.call_later(self.timeout, self._overdue, slot, slot.generation, job)

    def _readable(self, slot: Slot, generation: int) -> None:
        """The slot's pipe has bytes: an answer (4-byte length, then its pickle, as
        ``Connection.send_bytes`` frames it) once whole, or end-of-file when the child died."""
        if slot.generation != generation or slot.conn is None:
            return
        try:
            chunk = os.read(slot.conn.fileno(), 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:  # killed (out of memory) or stopped: its request is drawn in a thread
            job, slot.job = slot.job, None
            if job is not None:
                self._settle(job, None)
            self._replace(slot, generation, "died: its pipe closed")
            self._dispatch()
            return
        slot.inbox += chunk
        while len(slot.inbox) >= 4:
            (size,) = struct.unpack("!i", slot.inbox[:4])
            if len(slot.inbox) < 4 + size:
                return
            reply = pickle.loads(slot.inbox[4:4 + size])
            del slot.inbox[:4 + size]
            self._done(slot, reply)

    def _done(self, slot: Slot, reply: tuple[bool, object]) -> None:
        job, slot.job = slot.job, None
        if job is None:
            return
        job.timer.cancel()
        slot.renders += 1
        ok, value = reply
        if ok:
            self.rendered += 1
            self._measured(job.cost.lane, time.monotonic() - job.started)
            self._settle(job, value)
        else:
            self._settle(job, error=value)
        self._dispatch()

    def _overdue(self, slot: Slot, generation: int, job: Job) -> None:
        """Past the deadline: the request gets a 503 and the child is replaced."""
        self.refused[503] += 1
        self._settle(job, error=Busy(
            503, 1, f"Drawing {job.cost.what} took longer than {self.timeout:g} s, so it was "
                    "stopped; try a smaller one, or again in a moment."))
        self._replace(slot, generation, f"no answer within {self.timeout:g} s")

    def _replace(self, slot: Slot, generation: int, why: str) -> None:
        """Kill the child (SIGKILL: even a stopped process dies) and start another."""
        if slot.generation != generation or slot not in self.slots:
            return  # replaced already
        log.warning("render process %d %s: replacing it", slot.index, why)
        slot.generation += 1
        slot.ready, slot.job, slot.collecting, slot.renders = False, None, False, 0
        self._unhook(slot)
        pid, executor = slot.pid, slot.executor
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):  # gone already
                os.kill(pid, signal.SIGKILL)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        slot.executor = None
        self.replaced += 1
        task = asyncio.get_running_loop().create_task(self._start_slot(slot))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


POOL = RenderPool()
