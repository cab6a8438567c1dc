"""Limits on every request where the app serves HTTP itself (``python -m app``: ``make run``,
the container), so that no client can hold the server with a request it never finishes or
one it makes too large to read.

Why here: uvicorn, as configured by default, bounds none of it. With httptools (the parser
``uvicorn[standard]`` brings) a request head has no size limit and is accumulated by
concatenation, so its cost grows faster than its size (one 100 MB header: 10.7 CPU-s on the
event loop, and /healthz waited 3 s meanwhile); and a connection is timed out only while idle
between requests (``timeout_keep_alive``), never while it sends its head or its body (300 half
sent heads and 50 POST bodies that never came were all still open after 30 s). uvicorn stays:
this protocol is its own httptools protocol with the checks below, counted before a byte goes
to the parser (the limits of Apache's LimitRequestLine/LimitRequestFields, nginx's
client_header_timeout and client_body_timeout, in the same spirit).

- the request line at most MAX_REQUEST_LINE bytes (414), the head (request line and headers)
  at most MAX_HEAD_BYTES (431) in at most MAX_HEADERS headers (431);
- a body at most MAX_BODY_BYTES, declared or sent (413): the largest the app reads is the
  model form's (app/routers/models.py, which refuses a config over its own bound with a 413
  naming the field);
- CLIENT_TIMEOUT seconds (app/settings.py) for a request's head, from the connection or its
  first byte, and as many again for its body once the head is in: past them, 408 and the
  connection is closed (a connection that sends nothing at all is closed too);
- a client gone before its body came (``ClientDisconnect``) is one line in the log, not a
  traceback (:class:`QuietDisconnects`).

A refused request is answered in plain text with ``Connection: close`` and the connection is
closed: nothing of it reaches the app. tests/app/test_limits.py holds each limit;
tests/benchmarks/hostile_load.py measures them against a live server.
"""

from __future__ import annotations

import asyncio
import logging

import httptools
from starlette.requests import ClientDisconnect
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.settings import SETTINGS

log = logging.getLogger("uvicorn.error")

MAX_REQUEST_LINE = 16 * 1024  # the longest URL the app writes (EP12's compare) is ~2 KB
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
MAX_BODY_BYTES = 256 * 1024  # the model form: a 64 KiB config, %-encoded (x3), and its fields
KEEP_ALIVE = 5  # s: uvicorn's default, idle between two requests of a connection
HEAD_ENDS = (b"\r\n\r\n", b"\n\n")


class Refused(Exception):
    """Raised inside a parser callback: the request breaks a limit."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with bounded heads and bodies and timed-out clients.
    Limits are class attributes (a test subclasses it with shorter ones)."""

    max_request_line = MAX_REQUEST_LINE
    max_head_bytes = MAX_HEAD_BYTES
    max_headers = MAX_HEADERS
    max_body_bytes = MAX_BODY_BYTES
    client_timeout = float(SETTINGS.client_timeout)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._reset_counts()
        self._deadline: asyncio.TimerHandle | None = None

    def _reset_counts(self) -> None:
        self._in_head = True  # between requests, or reading one's head
        self._head_bytes = self._url_bytes = self._header_count = self._body_bytes = 0
        self._tail = b""  # the head's last bytes read, for an end split across two reads

    # --- timers ------------------------------------------------------------------------------

    def _arm(self, handler) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.client_timeout, handler)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_timeout(self) -> None:
        self._deadline = None
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm(self._head_timeout)  # a pipelined head while the app answers: later
            return
        self._refuse(408, f"Request headers not received within {self.client_timeout:g} s")

    def _body_timeout(self) -> None:
        self._deadline = None
        self._refuse(408, f"Request body not received within {self.client_timeout:g} s")

    # --- uvicorn's protocol ------------------------------------------------------------------

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self._head_timeout)  # a connection that never sends is closed too

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self._in_head:
            if self._deadline is None:
                self._arm(self._head_timeout)
            room = self.max_head_bytes - self._head_bytes
            if len(data) > room:
                window = self._tail + data[:max(room, 0)]
                if not any(end in window for end in HEAD_ENDS):
                    self._refuse(431, f"Request head over {self.max_head_bytes:,} bytes")
                    return
            self._head_bytes += len(data)
            self._tail = (self._tail + data[-3:])[-3:]
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, Refused):
                self._refuse(exc.__context__.status, exc.__context__.message)
            else:  # as uvicorn's own protocol answers any parser error
                self.logger.warning("Invalid HTTP request received.", exc_info=exc.__context__)
                self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserError:
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()

    def on_url(self, url: bytes) -> None:
        self._url_bytes += len(url)
        if self._url_bytes > self.max_request_line:
            raise Refused(414, f"Request line over {self.max_request_line:,} bytes")
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.max_headers:
            raise Refused(431, f"More than {self.max_headers} request headers")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        declared = next((v for k, v in self.headers if k == b"content-length"), b"")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise Refused(413, f"Request body over {self.max_body_bytes:,} bytes")
        self._arm(self._body_timeout)  # disarmed at once when the request has no body
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self.max_body_bytes:
            raise Refused(413, f"Request body over {self.max_body_bytes:,} bytes")
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._disarm()
        self._reset_counts()
        super().on_message_complete()

    # --- refusing ----------------------------------------------------------------------------

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` in plain text (unless a response has begun) and close."""
        self._disarm()
        if self.transport.is_closing():
            return
        client = "{}:{}".format(*self.client) if self.client else "a client"
        log.warning("%s from %s: %s", status, client, message)
        cycle = self.cycle
        started = cycle is not None and not cycle.response_complete and cycle.response_started
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's receive() says http.disconnect
            cycle.message_event.set()
        if not started:
            body = (message + "\n").encode("ascii", "replace")
            self.transport.write(b"".join([
                STATUS_LINE[status],
                *(name + b": " + value + b"\r\n" for name, value in
                  self.server_state.default_headers),
                b"content-type: text/plain; charset=utf-8\r\n",
                b"content-length: " + str(len(body)).encode() + b"\r\n",
                b"connection: close\r\n\r\n", body]))
        self.transport.close()


def uvicorn_options() -> dict:
    """What ``python -m app`` adds to uvicorn.run: this protocol and the keep-alive timeout."""
    return {"http": f"{__name__}:LimitedHttpToolsProtocol", "timeout_keep_alive": KEEP_ALIVE}


class QuietDisconnects:
    """Pure ASGI: a client that went away before the app read its request body is logged in
    one line (Starlette raises ``ClientDisconnect``, which uvicorn would print as an
    'Exception in ASGI application' traceback); there is nobody to answer."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            client = scope.get("client") or ("?", 0)
            log.info("%s:%s - %s %s: the client went away before sending its body",
                     client[0], client[1], scope.get("method"), scope.get("path"))
