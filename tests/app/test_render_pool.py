"""The render pool (app/render_pool.py): lab answers drawn in child processes are the same
answers, byte for byte; a dead child costs no request; children never outlive the server."""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from app.labkit import VIEWS
from app.render_pool import POOL
from app.response_cache import CACHE
from tests.conftest import ROOT, free_port

PLAIN = {"Accept-Encoding": "identity"}  # gzip stamps the time: compare the bytes under it
VOLATILE = {"date", "server-timing"}
WAIT = 120  # s: bound on polls for a child to start or exit (a loaded machine)


def requests_of_every_lab() -> list[tuple[str, dict, dict]]:
    out = []
    for view in VIEWS.values():
        first = view.diagrams[0].name
        out += [
            (view.episode.path, {}, {}),
            (view.episode.path, {}, {"HX-Request": "true", "HX-Target": "bench"}),
            (f"/embed/{view.name}", {}, {}),
            (f"/embed/{view.name}/{first}", {"theme": "dark", "controls": "1"}, {}),
            (f"/api/{view.name}", {}, {}),
            (f"/api/{view.name}", {"model": "no-such-model"}, {}),  # 422
            (view.episode.path, {"model": "no-such-model"}, {}),  # the page, with its message
            (f"/embed/{view.name}/no-such-diagram", {}, {}),  # 404
        ]
    out += [
        ("/api/plan", {"gpus": 16}, {}),
        ("/episodes/recipe-3d/plan", {"gpus": 16}, {"HX-Request": "true"}),
        ("/api/plan", {"gpus": 0}, {}),  # 422
        ("/api/cheatsheet", {}, {}),
        ("/episodes/playground/cheatsheet", {}, {}),
        ("/api/playground/compare", {"a": "dp=16&tp=2", "b": "dp=8&tp=4"}, {}),
        ("/episodes/playground/compare", {"a": "dp=16&tp=2", "b": "dp=8&tp=4"}, {}),
    ]
    return out


REQUESTS = requests_of_every_lab()


def answer(client, path, params, headers):
    CACHE.clear()
    response = client.get(path, params=params, headers={**PLAIN, **headers})
    kept = {k: v for k, v in response.headers.items() if k not in VOLATILE}
    return response.status_code, kept, response.content


@pytest.fixture(scope="module")
def in_threads(client):
    """Every sample request's answer rendered in this process (the pool off)."""
    assert not POOL.ready
    return [answer(client, *request) for request in REQUESTS]


@pytest.fixture(scope="module")
def pool(client, in_threads):
    client.portal.call(POOL.start, 1)
    assert POOL.ready
    yield POOL
    POOL.stop(wait=True)
    CACHE.clear()


def test_the_pool_draws_the_same_answers(client, in_threads, pool):
    before = pool.rendered
    for request, expected in zip(REQUESTS, in_threads, strict=True):
        assert answer(client, *request) == expected, request
    assert pool.rendered - before == len(REQUESTS)  # every one of them drawn by the child


def test_head_and_conditional_get_through_the_pool(client, pool):
    CACHE.clear()
    got = client.get("/episodes/memory", params={"gpus": 8})
    assert got.status_code == 200
    again = client.get("/episodes/memory", params={"gpus": 8},
                       headers={"If-None-Match": got.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    head = client.head("/episodes/memory", params={"gpus": 16})
    assert head.status_code == 200 and head.content == b""


def child_pids(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found.update(int(c) for c in task.read_text().split())
    return found


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has exited; its parent has not reaped it


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT} s: {what}")
        time.sleep(0.05)  # polling for a state, not a timing assertion


def test_a_dead_child_costs_no_request(client, pool):
    children = child_pids(os.getpid()) & set(pool.executor._processes)
    assert children, "the pool has a child process"
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not any(alive(p) for p in children), "the child is gone")
    CACHE.clear()
    response = client.get("/episodes/pipeline", params={"microbatches": 12})
    assert response.status_code == 200 and "Pipeline" in response.text  # drawn in a thread
    wait_until(lambda: client.portal.call(lambda: POOL.ready), "the pool started afresh")
    before = POOL.rendered
    CACHE.clear()
    assert client.get("/api/memory").status_code == 200
    assert POOL.rendered == before + 1


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_children_never_outlive_the_server(stop):
    """Stopped (SIGTERM: the app's shutdown stops them) or killed outright (SIGKILL: each
    child sees its parent gone), the server leaves no render process behind."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app.main:app", "--port", str(port),
         "--log-level", "warning"],
        cwd=ROOT, env={**os.environ, "RENDER_PROCESSES": "2"})
    try:
        wait_until(lambda: len(child_pids(server.pid)) >= 2 and healthy(port),
                   "the server and its two render processes are up")
        children = child_pids(server.pid)
        server.send_signal(stop)
        server.wait(timeout=WAIT)
        wait_until(lambda: not any(alive(p) for p in children), "every child exited")
    finally:
        server.kill()


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def test_a_pool_that_cannot_start_leaves_the_app_in_threads(client, monkeypatch):
    """No process support (no /dev/shm for its locks, say): the pool stays off, answers are
    drawn in threads."""
    from app import render_pool

    def refuse(*args, **kwargs):
        raise OSError("no semaphores here")

    monkeypatch.setattr(render_pool.multiprocessing, "get_context", refuse)
    pool = render_pool.RenderPool()
    client.portal.call(pool.start, 2)
    assert not pool.ready and pool.executor is None
    assert client.portal.call(pool.render, {"type": "http"}) is None
    CACHE.clear()
    assert client.get("/api/memory").status_code == 200
