"""Session fixtures shared by every test layer.

- ``client``: the app in-process (httpx TestClient), for route tests.
- ``live_server``: the real app under uvicorn on a free port of 127.0.0.1, for browser tests.
- ``browser``: Debian's Chromium driven by Playwright (its own browser downloads are not
  available here), launched with the flags that keep it off the network.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from copy import deepcopy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The live class's SQLite file (app/classroom/db.py) of this run's in-process app and of every
# server the tests start: a fresh folder, never the checkout's data/.
os.environ.setdefault("DATA_DIR", tempfile.mkdtemp(prefix="lab-data-"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
    # Every host but the loopback the live server listens on fails to resolve, so nothing
    # off-site can load (the ``page`` fixture also fails a test that tried).
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
]


@pytest.fixture(scope="session")
def client():
    from fastapi.testclient import TestClient

    from app.main import app

    # In-process route tests render in this process's threads (some of them wrap the renderer
    # here); the render pool's own tests and the live server use child processes.
    app.state.render_processes = 0
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture(autouse=True)
def no_render_pool_outside_its_tests(request):
    """Route tests render in this process's threads: a render process left running by
    tests/app/test_render_pool.py (pytest-xdist's worksteal can run another module's test
    before a module fixture's teardown) would draw their answers under its 10 s deadline, and
    a bad input's 422 became a 503 on a loaded machine. Stopped here when found."""
    render_pool = sys.modules.get("app.render_pool")
    if render_pool is not None and request.module.__name__.rpartition(".")[2] \
            != "test_render_pool" and render_pool.POOL.slots:
        render_pool.POOL.stop(wait=True)
    yield


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def valid_plotly(figure: dict) -> dict:
    """``figure``, checked against plotly's schema (``go.Figure`` raises on an invalid
    property) and left as it was: plotly takes each trace's "type" out of the dict it is given
    and puts it back last (``BaseDataValidator.validate_coerce``), and a lab's figure may be one
    a cached run keeps for later answers (EP12's panels, ``app/routers/playground_keys.py``
    ``figures``). Validated in place, every page drawn after it in the same process wrote each
    trace's "type" last, where a fresh render process writes it first, and
    tests/app/test_render_pool.py's pool test failed under pytest-xdist when
    tests/app/test_contracts.py had run before it in its worker. So it validates a copy."""
    import plotly.graph_objects as go

    go.Figure(deepcopy({"data": figure["data"], "layout": figure["layout"]}))
    return figure


# How long a starting server may take to answer: its render processes import the app first
# (app/render_pool.py waits up to START_TIMEOUT, 120 s, for them on a loaded machine).
READY_S = 150


@contextmanager
def running_app(env: dict[str, str] | None = None, probe: str = "/healthz") -> Iterator[str]:
    """The real app under uvicorn on a free port of 127.0.0.1, once ``probe`` answers 200:
    the browser tests' live server, the hosting tests' (``env``: settings such as BASE_PATH,
    read once at start-up), and the screenshot and benchmark scripts'."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_S
    try:
        while True:
            try:
                with urllib.request.urlopen(url + probe, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"uvicorn exited before serving ({env})") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"uvicorn did not answer {probe} within {READY_S} s"
                                       ) from None
                time.sleep(0.1)  # readiness poll, not a timing assertion
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def live_server() -> Iterator[str]:
    with running_app() as url:
        yield url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """One private PostgreSQL server for the whole run (tests/postgres.py). It fails, never
    skips, when the server cannot start: CI installs PostgreSQL (.ci/install)."""
    from tests.postgres import PostgresUnavailable, postgres_server

    try:
        with postgres_server(free_port()) as url:
            yield url
    except PostgresUnavailable as exc:
        pytest.fail(f"PostgreSQL for the class tests: {exc}")


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def class_db(request, tmp_path_factory) -> Iterator[str]:
    """The live class's database, each test once on SQLite and once on PostgreSQL: the app's
    engine pointed at it and migrated (app/classroom/db.py). Yields its URL."""
    from app.classroom import db

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('class-db') / db.SQLITE_FILE}"
    else:
        url = request.getfixturevalue("postgres_url")
    db.configure(url)
    db.migrate(url)
    yield url
    db.configure()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash .ci/install` (installs Debian's chromium)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Offsite:
    """Every request a page tried to send anywhere but the live server."""

    def __init__(self) -> None:
        self.requests: list[str] = []


def watch_offsite(context, live_server: str) -> Offsite:
    """Record every request ``context``'s pages send anywhere but the live server.

    Recorded, not routed: routing (context.route) turns off Chromium's HTTP cache, so every
    load would fetch and compile the plotly bundle again. CHROMIUM_ARGS' resolver rules keep
    an off-site request from loading; the ``page`` fixture fails the test that sent it. One
    the page's own Content-Security-Policy stopped in the browser (Redoc's logo) never left."""
    offsite = Offsite()

    def onsite(url: str) -> bool:
        return url.startswith(live_server) or url.startswith(("data:", "blob:"))

    def sent(request):
        if not onsite(request.url):
            offsite.requests.append(request.url)

    def failed(request):
        if not onsite(request.url) and request.failure == "csp":
            offsite.requests.remove(request.url)

    context.on("request", sent)
    context.on("requestfailed", failed)
    return offsite


class TabPool:
    """One tab per set of context options, reused test after test on one xdist worker: a new
    context per test starts a renderer and fetches and compiles the plotly bundle again (about
    twice the time of a load in a reused tab, r19-suite's measure). ``get`` hands the tab back
    as a fresh context would have it: on about:blank, with the live server's localStorage,
    IndexedDB, caches and cookies cleared (progress.js keeps a student's guesses in
    localStorage), its viewport and mouse reset, no errors or off-site requests recorded. A
    tab that crashed or that a test closed is replaced. Only for tests that add no listener,
    route, init script or emulation of their own: those keep a context of their own."""

    CLEARED = "cookies,local_storage,indexeddb,cache_storage,service_workers,file_systems"

    def __init__(self, browser, live_server: str) -> None:
        self.browser, self.live_server = browser, live_server
        self.tabs: dict[tuple, object] = {}

    def _open(self, options: dict):
        context = self.browser.new_context(base_url=self.live_server, **options)
        page = context.new_page()
        page.offsite = watch_offsite(context, self.live_server)  # type: ignore[attr-defined]
        page.js_errors = []  # type: ignore[attr-defined]
        page.crashed = False  # type: ignore[attr-defined]
        page.on("pageerror", lambda exc: page.js_errors.append(str(exc)))
        page.on("crash", lambda _: setattr(page, "crashed", True))
        return page

    def _reset(self, page, options: dict) -> bool:
        """Bring ``page`` back to a fresh context's state; False when it cannot be."""
        if page.is_closed() or page.crashed:
            return False
        try:
            page.goto("about:blank")
            page.context.clear_cookies()
            cdp = page.context.new_cdp_session(page)
            try:
                cdp.send("Storage.clearDataForOrigin",
                         {"origin": self.live_server, "storageTypes": self.CLEARED})
            finally:
                cdp.detach()
            page.set_viewport_size(options["viewport"])
            page.mouse.move(0, 0)
        except Exception:  # a tab that cannot be reset is replaced
            return False
        page.js_errors.clear()
        page.offsite.requests.clear()
        return True

    def get(self, **options):
        key = repr(sorted(options.items()))
        page = self.tabs.get(key)
        if page is None or not self._reset(page, options):
            if page is not None:
                with suppress(Exception):  # already gone with its renderer
                    page.context.close()
            page = self.tabs[key] = self._open(options)
        return page

    def close(self) -> None:
        for page in self.tabs.values():
            with suppress(Exception):
                page.context.close()


@pytest.fixture(scope="session")
def tab_pool(browser, live_server) -> Iterator[TabPool]:
    """This worker's reused tabs (TabPool), for the modules marked ``reuse_tab``."""
    pool = TabPool(browser, live_server)
    yield pool
    pool.close()


def check_tab(page) -> None:
    """Fail the test whose page sent a request off the live server or raised in JavaScript."""
    assert not page.offsite.requests, f"requests left 127.0.0.1: {page.offsite.requests}"
    assert not page.js_errors, f"JavaScript errors: {page.js_errors}"


@pytest.fixture()
def page(browser, live_server, request):
    """A page whose requests may only go to the live server; others are recorded. In a module
    marked ``reuse_tab`` it is this worker's reused tab (TabPool), else a fresh context's."""
    viewport = {"width": 1280, "height": 900}
    # The accessibility tests inject axe-core as an inline script, which the lab's
    # Content-Security-Policy refuses: only they bypass it, in a context of their own (the
    # policy itself is checked in Chromium by tests/browser/test_hosting_browser.py).
    bypass_csp = "accessibility" in request.node.name
    if request.node.get_closest_marker("reuse_tab") and not bypass_csp:
        page = request.getfixturevalue("tab_pool").get(viewport=viewport)
        yield page
        check_tab(page)
        return
    context = browser.new_context(viewport=viewport, base_url=live_server,
                                  bypass_csp=bypass_csp)
    offsite = watch_offsite(context, live_server)
    page = context.new_page()
    page.offsite = offsite  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors  # type: ignore[attr-defined]
    yield page
    context.close()
    check_tab(page)
