"""Limits on every request (app/limits.py), against a real uvicorn on a free port: heads, lines,
headers and bodies bounded, stalled heads and bodies timed out, disconnects quiet, and the
connection still serving after what it refused on another."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.limits import (
    MAX_BODY_BYTES,
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    MAX_REQUEST_LINE,
    LimitedHttpToolsProtocol,
    QuietDisconnects,
)
from tests.conftest import free_port

TIMEOUT = 0.5  # s: this server's CLIENT_TIMEOUT
SLACK = 10.0  # s: bound on waiting for what must come much sooner (a loaded machine)


class Quick(LimitedHttpToolsProtocol):
    client_timeout = TIMEOUT


async def echo(request: Request) -> PlainTextResponse:
    body = await request.body()
    return PlainTextResponse(f"{request.method} {len(body)}")


APP = Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST"])],
                middleware=[Middleware(QuietDisconnects)])


@pytest.fixture(scope="module")
def port():
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(APP, host="127.0.0.1", port=port, http=Quick,
                                           lifespan="off", log_level="info"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)  # readiness poll
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=SLACK)
    return sock


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or SLACK passes)."""
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def status_of(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0


def ask(port: int, request: bytes) -> bytes:
    with connect(port) as sock:
        # Refused before all of it went: the answer is still there to read.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)
        return answer(sock)


def get(path: str = "/", headers: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n{headers}Connection: close\r\n\r\n".encode()


def test_a_plain_request_and_a_body_within_bounds(port):
    assert ask(port, get()).endswith(b"GET 0")
    body = b"x" * (MAX_BODY_BYTES - 10)
    raw = ask(port, b"POST / HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    assert status_of(raw) == 200 and raw.endswith(f"POST {len(body)}".encode())


def test_a_large_head_is_refused_unread(port):
    raw = ask(port, get(headers="X-Big: " + "a" * (4 * MAX_HEAD_BYTES) + "\r\n"))
    assert status_of(raw) == 431 and b"connection: close" in raw
    assert ask(port, get()).endswith(b"GET 0")  # and the server goes on


def test_a_head_just_within_the_bound_is_read(port):
    raw = ask(port, get(headers="X-Big: " + "a" * (MAX_HEAD_BYTES - 200) + "\r\n"))
    assert status_of(raw) == 200


def test_too_many_headers(port):
    many = "".join(f"X-{i}: 1\r\n" for i in range(MAX_HEADERS + 1))
    assert status_of(ask(port, get(headers=many))) == 431
    assert status_of(ask(port, get(headers="".join(f"X-{i}: 1\r\n" for i in range(50))))) == 200


def test_a_long_request_line(port):
    assert status_of(ask(port, get("/?q=" + "a" * MAX_REQUEST_LINE))) == 414
    assert status_of(ask(port, get("/?q=" + "a" * 8000))) == 200


def test_a_large_body_declared_or_sent(port):
    declared = (b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                str(100 * MAX_BODY_BYTES).encode() + b"\r\n\r\n")
    assert status_of(ask(port, declared)) == 413
    chunk = b"x" * 65536
    chunked = (b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
               (b"10000\r\n" + chunk + b"\r\n") * (MAX_BODY_BYTES // len(chunk) + 2) +
               b"0\r\n\r\n")
    assert status_of(ask(port, chunked)) == 413


@pytest.mark.parametrize("sent", [b"", b"GET / HTTP/1.1\r\nHost: t\r\n", b"GE"],
                         ids=["nothing", "half-a-head", "two-bytes"])
def test_a_stalled_head_is_closed(port, sent):
    with connect(port) as sock:
        sock.sendall(sent)
        start = time.monotonic()
        raw = answer(sock)
        assert time.monotonic() - start < SLACK
    assert raw == b"" or status_of(raw) == 408


def test_a_trickled_head_is_closed_however_active(port):
    """Slowloris: a byte every 50 ms keeps the connection busy but never ends the head."""
    with connect(port) as sock:
        sock.settimeout(0.05)
        start, raw = time.monotonic(), b""
        request = get(headers="X-Slow: " + "a" * 10_000 + "\r\n")
        for byte in request:
            assert time.monotonic() - start < SLACK, "never closed"
            try:
                sock.send(bytes([byte]))
                raw += sock.recv(65536)
                break  # the server spoke (408) or closed
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
    assert raw == b"" or status_of(raw) == 408


def test_a_body_that_never_comes_is_closed_quietly(port, caplog):
    with caplog.at_level(logging.INFO):
        with connect(port) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\nabc")
            raw = answer(sock)
        assert status_of(raw) == 408
        deadline = time.monotonic() + SLACK
        while not any("went away" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, "the disconnect was never logged"
            time.sleep(0.02)  # poll for the app's log line
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_keep_alive_and_pipelining_still_work(port):
    one = b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n"
    with connect(port) as sock:
        sock.sendall(one + one + get("/b"))
        raw = answer(sock)
    assert raw.count(b"HTTP/1.1 200") == 3 and raw.endswith(b"GET 0")


def test_python_m_app_serves_with_these_limits():
    """The entry `make run` and the container use: uvicorn with this protocol, CLIENT_TIMEOUT
    read from the environment."""
    import os
    import subprocess
    import sys
    import urllib.request

    from tests.conftest import ROOT

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "app"], cwd=ROOT, env={
            **os.environ, "HOST": "127.0.0.1", "PORT": str(port), "RENDER_PROCESSES": "0",
            "CLIENT_TIMEOUT": "1", "LOG_LEVEL": "warning"})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "not serving"
                time.sleep(0.1)  # readiness poll
        assert status_of(ask(port, get("/healthz", "X-Big: " + "a" * 100_000 + "\r\n"))) == 431
        assert status_of(ask(port, get("/healthz?" + "a" * 20_000))) == 414
        with connect(port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            start = time.monotonic()
            assert status_of(answer(sock)) == 408 and time.monotonic() - start < SLACK
        assert status_of(ask(port, get("/healthz"))) == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
