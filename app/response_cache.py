"""A bounded cache of whole answers (status, headers, bytes as sent), shared by every client.

Why: a class follows the same "try it" links and slider stops, so most of its requests ask
for an answer the server has already rendered; a lab answer is a pure function of its URL and
of the few request headers that select it, so it can be sent again as bytes, from the event
loop, without parsing, simulating, rendering, compressing or a thread hop.

What is cached: GET answers (HEAD is GET here: app/security.py normalises it first) of the
lab routes (lesson pages and their htmx fragments, embeds, /api/<lab>) and of the static
assets (their URL carries their content hash), status 200 or 422
(an inconsistent state is refused the same way every time), at most MAX_ENTRY_BYTES each.
The key is the path, the raw query string and every request header that changes the
answer: the ones ``Vary`` names (HX-Request, HX-Target, HX-History-Restore-Request, whether
gzip and brotli are accepted) and, unless PUBLIC_URL fixes it, the scheme and Host that embed
codes spell (app/labkit/render.py public_origin). A query spelled another way is another entry: it
costs one render, never a wrong answer.

Bounded twice: MAX_ENTRIES answers and MAX_BYTES bytes in all, least recently used out
first. Every cached answer carries a strong ETag (a digest of its bytes), and a request whose
If-None-Match names it gets 304 with no body (RFC 9110 sec 13.1.2), as browsers revalidate
``no-cache`` pages.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from app.render_pool import RenderPool
from app.security import route_path

MAX_ENTRIES = 2048
MAX_BYTES = 48 * 1024 * 1024
MAX_ENTRY_BYTES = 1024 * 1024  # the largest pipeline JSON (MBs) would evict a class's worth
CACHED_STATUS = (200, 422)
# Headers of a stored answer that a 304 must not carry (it has no body).
BODY_HEADERS = (b"content-length",)


@dataclass(frozen=True)
class Entry:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    etag: bytes

    @property
    def size(self) -> int:
        return len(self.body) + sum(len(k) + len(v) for k, v in self.headers) + 64


class ResponseCache:
    """An LRU bounded by entry count and total bytes. Used from the event loop thread only
    (the middleware is async and does no blocking work), so it takes no lock."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES,
                 max_entry_bytes: int = MAX_ENTRY_BYTES) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.max_entry_bytes = min(max_entry_bytes, max_bytes)
        self.data: OrderedDict[tuple, Entry] = OrderedDict()
        self.bytes = 0
        self.hits = self.misses = 0

    def get(self, key: tuple) -> Entry | None:
        entry = self.data.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self.data.move_to_end(key)
        return entry

    def put(self, key: tuple, entry: Entry) -> bool:
        if entry.size > self.max_entry_bytes:
            return False
        old = self.data.pop(key, None)
        if old is not None:
            self.bytes -= old.size
        self.data[key] = entry
        self.bytes += entry.size
        while len(self.data) > self.max_entries or self.bytes > self.max_bytes:
            _, dropped = self.data.popitem(last=False)
            self.bytes -= dropped.size
        return True

    def clear(self) -> None:
        self.data.clear()
        self.bytes = self.hits = self.misses = 0


CACHE = ResponseCache()


def etag_of(body: bytes) -> bytes:
    return b'"' + hashlib.blake2b(body, digest_size=12).hexdigest().encode() + b'"'


def _matches(if_none_match: bytes | None, etag: bytes) -> bool:
    if not if_none_match:
        return False
    tags = [t.strip() for t in if_none_match.split(b",")]
    return b"*" in tags or etag in tags or b"W/" + etag in tags  # weak comparison (RFC 9110)


def _codings(accept_encoding: bytes) -> tuple[bool, bool]:
    """Whether gzip and brotli are accepted: what selects an answer's coding (pages and
    fragments: gzip; static assets: brotli, else gzip; app/assets.py)."""
    codings = {c.strip() for c in accept_encoding.split(b",")}
    return b"gzip" in codings, b"br" in codings


class ResponseCacheMiddleware:
    """Pure ASGI. ``cacheable(path)`` says which routes are pure functions of the request
    (read when the first request comes, after every router registered)."""

    def __init__(self, app, cacheable: Callable[[str], bool], public_url: str = "",
                 cache: ResponseCache = CACHE, pool: RenderPool | None = None) -> None:
        self.app, self.cacheable, self.cache = app, cacheable, cache
        self.public_url = public_url
        self.pool = pool  # renders misses in child processes when it is ready
        # Misses being rendered, by key: a second request for one waits for it instead of
        # rendering it again (a class clicking the same link at once; a cold page).
        self.inflight: dict[tuple, asyncio.Event] = {}

    def key(self, scope, path: str, headers: dict) -> tuple:
        origin = None if self.public_url else (scope.get("scheme"), headers.get(b"host"))
        return (path, scope.get("root_path", ""), scope.get("query_string", b""),
                headers.get(b"hx-request"), headers.get(b"hx-target"),
                headers.get(b"hx-history-restore-request"),
                _codings(headers.get(b"accept-encoding", b"")), origin)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        path = route_path(scope)
        if not self.cacheable(path):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        headers = dict(scope["headers"])
        key = self.key(scope, path, headers)
        entry = self.cache.get(key)
        if entry is None and key in self.inflight:
            await self.inflight[key].wait()
            entry = self.cache.get(key)
        if entry is not None:
            await self._send(send, entry, headers.get(b"if-none-match"), start)
            return
        leader = key not in self.inflight
        if leader:
            self.inflight[key] = asyncio.Event()
        try:
            # Assets are bytes in memory already: only lab answers are worth a child's time.
            if self.pool is not None and not path.startswith("/static/"):
                answer = await self.pool.render(scope)
                if answer is not None:
                    await self._finish(send, key, headers, *answer)
                    return
            await self._render(scope, receive, send, key, headers)
        finally:
            if leader:
                self.inflight.pop(key).set()

    async def _render(self, scope, receive, send, key: tuple, headers: dict) -> None:
        """The app's answer, stored when it may be, and sent (or 304)."""
        started: dict = {}
        chunks: list[bytes] = []
        streamed = False  # too big, or streamed in parts we chose not to hold: pass through

        async def capture(message) -> None:
            nonlocal streamed
            if message["type"] == "http.response.start":
                started.update(message)
                return
            if message["type"] != "http.response.body" or streamed:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body") and sum(map(len, chunks)) > self.cache.max_entry_bytes:
                streamed = True  # give up holding it: send what we have and the rest as it comes
                await send(started)
                await send({"type": "http.response.body", "body": b"".join(chunks),
                            "more_body": True})
                return
            if not message.get("more_body"):
                await self._finish(send, key, headers, started["status"],
                                   started.get("headers", ()), b"".join(chunks))

        await self.app(scope, receive, capture)

    async def _finish(self, send, key: tuple, headers: dict, status: int, raw, body: bytes):
        """A whole answer: stored when it may be, and sent (or 304)."""
        if len(body) > self.cache.max_entry_bytes:  # never stored: no digest either
            await send({"type": "http.response.start", "status": status, "headers": list(raw)})
            await send({"type": "http.response.body", "body": body})
            return
        raw = tuple(raw)
        own = next((v for k, v in raw if k.lower() == b"etag"), None)
        entry = Entry(status, tuple((k, v) for k, v in raw if k.lower() != b"etag"),
                      body, own or etag_of(body))  # an answer's own ETag is kept
        if self._storable(entry):
            self.cache.put(key, entry)
        await self._send(send, entry, headers.get(b"if-none-match"))

    @staticmethod
    def _storable(entry: Entry) -> bool:
        names = {k.lower(): v for k, v in entry.headers}
        return (entry.status in CACHED_STATUS and b"set-cookie" not in names
                and b"no-store" not in names.get(b"cache-control", b""))

    @staticmethod
    async def _send(send, entry: Entry, if_none_match: bytes | None,
                    hit_start: float | None = None) -> None:
        """The answer, or 304. A miss keeps the app's Server-Timing; a hit says its own."""
        headers = list(entry.headers)
        if hit_start is not None:
            elapsed = (time.perf_counter() - hit_start) * 1e3
            headers = [(k, v) for k, v in headers if k.lower() != b"server-timing"]
            headers.append((b"server-timing", f'app;dur={elapsed:.3f};desc="cache hit"'.encode()))
        headers.append((b"etag", entry.etag))
        if entry.status == 200 and _matches(if_none_match, entry.etag):
            headers = [(k, v) for k, v in headers if k.lower() not in BODY_HEADERS]
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": entry.status, "headers": headers})
        await send({"type": "http.response.body", "body": entry.body})
