"""A bounded cache of whole answers (status, headers, bytes as sent), shared by every client.

Why: a class follows the same "try it" links and slider stops, so most of its requests ask
for an answer the server has already rendered; a lab answer is a pure function of its URL and
of the few request headers that select it, so it can be sent again as bytes, from the event
loop, without parsing, simulating, rendering, compressing or a thread hop.

What is cached: GET answers (HEAD is GET here: app/security.py normalises it first) of the
lab routes (lesson pages and their htmx fragments, embeds, /api/<lab>) and of the static
assets, status 200 or 422 (an inconsistent state is refused the same way every time), at most
MAX_ENTRY_BYTES each. The key holds what can change the answer, and nothing else (a value
that cannot change it would only let junk make new entries):

- the path and the raw query string; for a static asset, only whether its ``v`` is the
  asset's content hash (the answer's Cache-Control says immutable or must-revalidate; its
  bytes are the file's), so ``?v=<junk>`` is one entry, not one per value;
- whether gzip and brotli are accepted (a static asset comes in brotli where it is);
- for pages and embeds, which answer the htmx headers select: the whole page, the bench
  (``HX-Target: bench``) or the diagram fragment (app/labkit/render.py ``is_fragment``); any
  other ``HX-Target`` value is the fragment's. The JSON answers and assets ignore them;
- for pages and embeds, unless PUBLIC_URL fixes it, the scheme and Host that embed codes
  spell (app/labkit/render.py public_origin). JSON answers and assets spell no origin.

A query spelled another way is another entry: it costs one render, never a wrong answer.

Bounded twice: MAX_ENTRIES answers and MAX_BYTES bytes in all, least recently used out first,
in two segments (a segmented LRU: Karedla, Love & Wherry, "Caching strategies to improve disk
system performance", IEEE Computer 27(3), 1994): an answer enters on probation and is
protected once it is asked for again; new answers push out the probation's oldest first, and
the protected segment (at most PROTECTED_SHARE of the bounds) gives its oldest back to
probation. So a flood of one-off variants (junk queries, Host values) only churns the
probation segment, and the answers a class shares stay (issue 20: 105 junk asset requests
had emptied it). Every cached answer carries a strong ETag (a digest of its bytes), and a
request whose If-None-Match names it gets 304 with no body (RFC 9110 sec 13.1.2), as browsers
revalidate ``no-cache`` pages.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from markupsafe import escape  # what Jinja escapes with: one escaping for every page

from app.assets import ASSETS, get_asset
from app.lanes import estimate_off_loop
from app.render_pool import RenderPool
from app.render_queue import Busy
from app.security import route_path
from app.settings import SETTINGS

# Issue 31: a class of 1,000 asks for about 18,000 distinct answers in 90 s and a class of
# 2,000 about 30,000 in 120 s (slider stops from each lesson link's state), about 5 kB each
# gzipped. With 8,192 answers (48 MB) a class of 2,000 re-rendered evicted ones: 70% of its
# requests were hits, 1,532 got a 429 and p99 was 1,227 ms; with 65,536 (400 MB) 73%, 67 and
# 874 ms (class_load.py --students 2000 --duration 120 --burst 0 --ramp 30, idle machine).
# The bound is RESPONSE_CACHE_MB (app/settings.py, default 192 MB), one answer per 6 KiB of it
# (32,768 by default); the cache fills within minutes of a class, so memory stays flat after.
BYTES_PER_ENTRY = 6 * 1024
MAX_BYTES = SETTINGS.response_cache_mb * 1024 * 1024
MAX_ENTRIES = MAX_BYTES // BYTES_PER_ENTRY
MAX_ENTRY_BYTES = 1024 * 1024  # the largest pipeline JSON (MBs) would evict a class's worth
# A key's query string is not counted in the byte bound: a longer one is not stored (the
# longest URL the app writes is about 2 KB; app/limits.py refuses a request line over 16 KiB).
MAX_QUERY_BYTES = 16 * 1024
PROTECTED_SHARE = 0.8  # of the entry and byte bounds, for answers asked for more than once
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
    """A segmented LRU bounded by entry count and total bytes. Used from the event loop
    thread only (the middleware is async and does no blocking work), so it takes no lock."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES,
                 max_entry_bytes: int = MAX_ENTRY_BYTES,
                 protected_share: float = PROTECTED_SHARE) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.max_entry_bytes = min(max_entry_bytes, max_bytes)
        self.protected_share = protected_share
        self.probation: OrderedDict[tuple, Entry] = OrderedDict()  # asked for once
        self.protected: OrderedDict[tuple, Entry] = OrderedDict()  # asked for again
        self.bytes = self.protected_bytes = 0
        self.hits = self.misses = 0

    @property
    def data(self) -> dict[tuple, Entry]:
        """Every entry, probation's (oldest first) then the protected ones."""
        return {**self.probation, **self.protected}

    def get(self, key: tuple) -> Entry | None:
        entry = self.protected.get(key)
        if entry is not None:
            self.protected.move_to_end(key)
        else:
            entry = self.probation.pop(key, None)
            if entry is None:
                self.misses += 1
                return None
            self._protect(key, entry)
        self.hits += 1
        return entry

    def _protect(self, key: tuple, entry: Entry) -> None:
        self.protected[key] = entry
        self.protected_bytes += entry.size
        cap_entries = int(self.max_entries * self.protected_share)
        cap_bytes = self.max_bytes * self.protected_share
        while len(self.protected) > 1 and (len(self.protected) > cap_entries
                                           or self.protected_bytes > cap_bytes):
            old_key, old = self.protected.popitem(last=False)  # back on probation, newest
            self.protected_bytes -= old.size
            self.probation[old_key] = old

    def put(self, key: tuple, entry: Entry) -> bool:
        if entry.size > self.max_entry_bytes:
            return False
        old = self.probation.pop(key, None)
        if old is None and (old := self.protected.pop(key, None)) is not None:
            self.protected_bytes -= old.size
        if old is not None:
            self.bytes -= old.size
        self.probation[key] = entry
        self.bytes += entry.size
        while len(self.probation) + len(self.protected) > self.max_entries \
                or self.bytes > self.max_bytes:
            if self.probation:
                _, dropped = self.probation.popitem(last=False)
            else:
                _, dropped = self.protected.popitem(last=False)
                self.protected_bytes -= dropped.size
            self.bytes -= dropped.size
        return True

    def clear(self) -> None:
        self.probation.clear()
        self.protected.clear()
        self.bytes = self.protected_bytes = self.hits = self.misses = 0


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
        """What can change the answer (the module's docstring says why each part)."""
        gzip = _codings(headers.get(b"accept-encoding", b""))  # (gzip, brotli)
        query = scope.get("query_string", b"")
        if path.startswith("/static/"):
            name = path[len("/static/"):]
            if name in ASSETS:
                given = [v for k, v in parse_qsl(query.decode("latin-1")) if k == "v"]
                query = b"v" if given and given[-1] == get_asset(name).digest else b""
            else:
                query = b""  # a 404 either way
            return (path, scope.get("root_path", ""), query, gzip)
        if path.startswith("/api/"):
            return (path, scope.get("root_path", ""), query, gzip)
        if headers.get(b"hx-request") != b"true" \
                or headers.get(b"hx-history-restore-request") == b"true":
            answer = "page"
        else:
            answer = "bench" if headers.get(b"hx-target") == b"bench" else "fragment"
        origin = None if self.public_url else (scope.get("scheme"), headers.get(b"host"))
        return (path, scope.get("root_path", ""), query, gzip, answer, origin)

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
                try:  # in its lane, by what it will cost (app/lanes.py)
                    answer = await self.pool.render(scope, await estimate_off_loop(
                        path, scope.get("query_string", b""), b"hx-request" not in headers))
                except Busy as busy:
                    await _send_busy(send, path, busy)
                    return
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
        if self._storable(entry) and len(key[2]) <= MAX_QUERY_BYTES:
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


async def _send_busy(send, path: str, busy: Busy) -> None:
    """The pool's refusal (429 or 503) with Retry-After and its message: JSON for the API,
    a line of HTML for a page or fragment. Never stored (app/security.py: no-store)."""
    if path.startswith("/api/"):
        body = json.dumps({"detail": busy.message}).encode()
        ctype = b"application/json"
    else:
        body = f'<p class="busy" role="alert">{escape(busy.message)}</p>\n'.encode()
        ctype = b"text/html; charset=utf-8"
    await send({"type": "http.response.start", "status": busy.status, "headers": [
        (b"content-type", ctype), (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(busy.retry_after).encode())]})
    await send({"type": "http.response.body", "body": body})
