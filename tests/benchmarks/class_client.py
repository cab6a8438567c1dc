"""A student's side of tests/benchmarks/class_load.py: what a lesson page lets a hand do (its
controls form as htmx serialises it, its bench links, its assets), read once per distinct
answer, and a browser-like HTTP/1.1 client on raw asyncio streams (six keep-alive
connections, gzip accepted, a GET sent again on a stale connection as a browser does)."""

from __future__ import annotations

import asyncio
import gzip
import random
from html.parser import HTMLParser
from urllib.parse import urlencode

# --- what a student can do on an episode page ------------------------------------------------

class Form:
    """A lab's controls form as the browser holds it: each named field in document order
    (what htmx serialises), with the options a hand can pick."""

    def __init__(self) -> None:
        self.action = ""
        self.target = ""
        # name -> kind ("range", "select", "radio", "checkbox", "value"), options, disabled
        self.fields: dict[str, dict] = {}
        self.order: list[str] = []

    def add(self, name: str, kind: str, value: str | None, options: list[str],
            disabled: bool) -> None:
        if name not in self.fields:
            self.order.append(name)
            self.fields[name] = {"kind": kind, "value": None, "options": [], "disabled": True}
        field = self.fields[name]
        field["options"] += [o for o in options if o not in field["options"]]
        if not disabled:
            field["disabled"] = False
            if value is not None:
                field["value"] = value

    def query(self) -> str:
        """The query htmx sends: enabled fields with a value, in document order."""
        pairs = [(n, self.fields[n]["value"]) for n in self.order
                 if not self.fields[n]["disabled"] and self.fields[n]["value"] is not None]
        return urlencode(pairs)

    def movable(self) -> list[str]:
        return [n for n in self.order if not self.fields[n]["disabled"]
                and self.fields[n]["kind"] in ("range", "select", "radio")
                and len(self.fields[n]["options"]) > 1]


class PageParser(HTMLParser):
    """The controls form of a page or bench fragment, its bench links and its assets."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.form: Form | None = None
        self.in_form = False
        self.select: dict | None = None
        self.links: list[str] = []
        self.assets: list[str] = []
        # The chart each bench link brings into view (its own data-diagram, else its step's),
        # and the lazy diagrams' places by chart id (templates/partials/_figure.html ``lazy``:
        # the place's id is the chart's and "-lazy"), with the URL each fetches: a link that
        # brings a lazy chart into view makes the browser fetch it at once.
        self.reveals: dict[str, str] = {}
        self.lazy: dict[str, str] = {}
        self.sections: list[str | None] = []

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a.get("data-diagram"))
        if tag == "a" and a.get("hx-target") == "#bench" and a.get("hx-get"):
            self.links.append(a["hx-get"])
            shown = a.get("data-diagram") or next(
                (d for d in reversed(self.sections) if d), None)
            if shown:
                self.reveals[a["hx-get"]] = shown
        if "lazy-diagram" in (a.get("class") or "").split() and a.get("hx-get"):
            self.lazy[a.get("id", "").removesuffix("-lazy")] = a["hx-get"]
        if tag == "script" and a.get("src"):
            self.assets.append(a["src"])
        if tag == "link" and a.get("rel") == "stylesheet" and a.get("href"):
            self.assets.append(a["href"])
        if tag == "form" and "controls" in a.get("class", "").split() and self.form is None:
            self.form, self.in_form = Form(), True
            self.form.action = a.get("hx-get") or a.get("action", "")
            self.form.target = a.get("hx-target", "").lstrip("#")
        if not self.in_form:
            return
        name, disabled = a.get("name"), "disabled" in a
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind == "range":
                lo, hi = int(float(a["min"])), int(float(a["max"]))
                value = a.get("value")
                if value is not None and float(value).is_integer():
                    value = str(int(float(value)))  # the browser's sanitised value ("0.0": 0)
                self.form.add(name, "range", value,
                              [str(v) for v in range(lo, hi + 1)], disabled)
            elif kind in ("radio", "checkbox"):
                chosen = "checked" in a
                self.form.add(name, kind, a.get("value", "on") if chosen else None,
                              [a.get("value", "on")], disabled)
            else:
                self.form.add(name, "value", a.get("value", ""), [], disabled)
        elif tag == "select" and name:
            self.select = {"name": name, "disabled": disabled, "options": [], "chosen": None}
        elif tag == "option" and self.select is not None:
            value = a.get("value", "")
            if "disabled" not in a:
                self.select["options"].append(value)
            if "selected" in a:
                self.select["chosen"] = value

    def handle_endtag(self, tag) -> None:
        if tag == "section" and self.sections:
            self.sections.pop()
        if tag == "form" and self.in_form:
            self.in_form = False
        elif tag == "select" and self.select is not None and self.form is not None:
            s = self.select
            chosen = s["chosen"] if s["chosen"] is not None else (s["options"] or [None])[0]
            self.form.add(s["name"], "select", chosen, s["options"], s["disabled"])
            self.select = None


def lazy_place(page: PageParser, link: str, bench: PageParser) -> str | None:
    """The lazy chart a bench link brings into view, as the bench answer places it: the URL
    its place fetches at once (htmx "intersect"), or None."""
    return bench.lazy.get(page.reveals.get(link, ""))


def parse_page(text: str) -> PageParser:
    parser = PageParser()
    parser.feed(text)
    return parser


class Parsed:
    """Each distinct answer parsed once: the same URL gives the same page, and parsing HTML
    in Python costs more than the server spends answering (the client must not be the
    bottleneck). A student gets its own copy of a form to move."""

    def __init__(self) -> None:
        self.pages: dict[str, PageParser] = {}

    def page(self, url: str, response: Answer) -> PageParser:
        if url not in self.pages:
            self.pages[url] = parse_page(response.text)
        return self.pages[url]

    def form(self, url: str, response: Answer) -> Form | None:
        form = self.page(url, response).form
        if form is None:
            return None
        copy = Form()
        copy.action, copy.target, copy.order = form.action, form.target, form.order
        copy.fields = {n: dict(f) for n, f in form.fields.items()}
        return copy


def moves(form: Form, rng: random.Random) -> list[tuple[str, str]]:
    """One to three moves from a state: (name, value) of each request, in order. A slider is
    dragged one to four stops one way (each stop one request); a choice set once."""
    out = []
    names = form.movable()
    for _ in range(rng.randint(1, 3) if names else 0):
        name = rng.choice(names)
        field = form.fields[name]
        options = field["options"]
        at = options.index(field["value"]) if field["value"] in options else 0
        if field["kind"] == "range":
            step = rng.choice([-1, 1])
            for _ in range(rng.randint(1, 4)):
                if 0 <= at + step < len(options):
                    at += step
                    out.append((name, options[at]))
        else:
            others = [o for o in options if o != field["value"]]
            out.append((name, rng.choice(others)))
    return out


# --- a student's browser: raw HTTP/1.1 keep-alive on asyncio streams ---------------------------

class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status_code, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        gzipped = self.headers.get("content-encoding") == "gzip"
        return (gzip.decompress(self.body) if gzipped else self.body).decode()


class StaleConnection(Exception):
    """A reused keep-alive connection the server had closed: the GET goes out again."""


class Browser:
    """What the server sees of one student's browser: up to six keep-alive connections, gzip
    accepted, bodies read as sent (decompressed only to read a page once). Raw asyncio
    streams: httpx cost about 5 ms of client CPU per request here, as much as the server."""

    def __init__(self, host: str, port: int, local: str | None = None) -> None:
        self.host, self.port = host, port
        self.local = (local, 0) if local else None  # the address it connects from
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.slots = asyncio.Semaphore(6)

    async def get(self, target: str, headers: dict) -> tuple[Answer, bool]:
        """(answer, sent again?) of one GET; raises OSError or TimeoutError."""
        async with self.slots:
            for attempt in (1, 2):
                reused = bool(self.idle)
                conn = self.idle.pop() if reused else await asyncio.open_connection(
                    self.host, self.port, local_addr=self.local)
                try:
                    answer = await asyncio.wait_for(self._exchange(conn, target, headers), 30)
                except (ConnectionError, asyncio.IncompleteReadError) as exc:
                    conn[1].close()
                    if reused and attempt == 1:
                        continue  # as a browser does for an idempotent request
                    raise OSError(f"connection lost: {exc!r}") from exc
                except BaseException:
                    conn[1].close()
                    raise
                if answer.headers.get("connection", "").lower() == "close":
                    conn[1].close()
                else:
                    self.idle.append(conn)
                return answer, attempt == 2
            raise AssertionError("unreachable")

    async def _exchange(self, conn, target: str, headers: dict) -> Answer:
        reader, writer = conn
        fields = {"Host": f"{self.host}:{self.port}", "Accept-Encoding": "gzip", **headers}
        writer.write((f"GET {target} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n").encode("latin-1"))
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        found: dict[str, str] = {}
        for line in head[1:]:
            if line:
                key, _, value = line.partition(":")
                found[key.strip().lower()] = value.strip()
        if "content-length" in found:
            body = await reader.readexactly(int(found["content-length"]))
        elif found.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            await reader.readuntil(b"\r\n")
            body = b"".join(parts)
        else:
            body = b""  # 304, or no body
        return Answer(status, found, body)

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


def live_links(home: str) -> list[str]:
    """The hrefs of the home page's live episodes (<li class="episode live">)."""
    class Live(HTMLParser):
        def __init__(self):
            super().__init__()
            self.inside, self.urls = False, []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "li":
                self.inside = "live" in a.get("class", "").split()
            elif tag == "a" and self.inside and a.get("href"):
                self.urls.append(a["href"])
                self.inside = False

    parser = Live()
    parser.feed(home)
    return parser.urls
