"""Byte-for-byte snapshots of the app's answers, to prove a refactor changes no behaviour.

Run from the root of the tree being checked (its ``app`` and ``labs`` are the ones imported)::

    python tools/snapshot.py --write DIR     # record every request of tools/snapshot_urls.txt
    python tools/snapshot.py --check DIR     # ask again, compare, exit 1 on any difference
    python tools/snapshot.py --check DIR --allow /api/pipeline?schedule=zb-v   # repeatable
    python tools/snapshot.py --generate      # print a fresh request list (how the file began)

The app runs in-process (FastAPI's TestClient, lifespan included) with
``app.state.render_processes = 0``, as the ``client`` fixture of tests/conftest.py does. Only
``app.main:app`` is imported, never ``labs`` directly: the tool must survive ``labs`` being
reorganised. Requests go out with ``Accept-Encoding: identity`` (no gzip, so bodies compare as
sent) and ``follow_redirects=False`` (a redirect is recorded as itself, Location included).

Request list (tools/snapshot_urls.txt): one request per line, ``#`` starts a comment. A line is
a URL path with its query, optionally preceded by one htmx marker:

    /episodes/pipeline?stages=8                     plain GET (the whole page)
    hx:bench /episodes/pipeline?stages=8            HX-Request: true, HX-Target: bench
    hx:pipeline-schedule /episodes/pipeline         HX-Request: true, HX-Target: pipeline-schedule
    hx: /drills/pipeline-bubble?answer=1            HX-Request: true, no HX-Target
    hx-restore:bench /episodes/pipeline             ... and HX-History-Restore-Request: true

The line, spaces normalised, is the request's key in DIR/index.json and what --allow matches
(as a substring). ``/openapi.json`` is always fetched, listed or not.

Snapshot layout: DIR/index.json maps each key to its file; DIR/<sha256(key)[:16]>.resp holds
``status: N``, ``content-type: ...``, ``location: ...`` (redirects only), ``content-encoding:
...`` (if any), a blank line, then the body bytes exactly as received. Nothing in DIR depends
on the tree's path, the time or the run, so two snapshots of equal behaviour are equal files
(``diff -r`` works on them too).

Determinism (two --write runs of one tree, under different PYTHONHASHSEED values, give identical
directories): what the app puts in bodies depends on the request and on these settings only,
which are therefore fixed here before the app is imported: BASE_PATH, PUBLIC_URL,
EMBED_ALLOWED_ORIGINS and HIDE_ANSWERS are removed from the environment (defaults: no prefix,
the request's origin ``http://testserver``, any framer, answers revealed). Headers that vary per
run (``server-timing``: measured durations) or repeat the body (``etag``: a digest of it;
``content-length``) are not recorded; no body needed normalising.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import html
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path.cwd()
URLS_FILE = Path(__file__).resolve().parent / "snapshot_urls.txt"
INDEX = "index.json"
SUFFIX = ".resp"
ALWAYS = ("/openapi.json",)
# Settings read from the environment by app/settings.py; cleared so a snapshot does not depend
# on the shell it was taken from.
SETTINGS_ENV = ("BASE_PATH", "PUBLIC_URL", "EMBED_ALLOWED_ORIGINS", "HIDE_ANSWERS",
                "RENDER_PROCESSES")
KEPT_HEADERS = ("content-type", "location", "content-encoding")
DIFF_LINES = 24  # lines of unified diff shown per differing request
CLIP = 160  # characters of a long line shown around its first difference


@dataclass(frozen=True)
class Req:
    url: str
    hx: str | None = None  # None: no HX-Request; "" : HX-Request without HX-Target
    restore: bool = False

    @property
    def key(self) -> str:
        if self.hx is None:
            return self.url
        return f"{'hx-restore' if self.restore else 'hx'}:{self.hx} {self.url}"

    @property
    def headers(self) -> dict[str, str]:
        headers = {"Accept-Encoding": "identity"}
        if self.hx is not None:
            headers["HX-Request"] = "true"
            if self.hx:
                headers["HX-Target"] = self.hx
        if self.restore:
            headers["HX-History-Restore-Request"] = "true"
        return headers


def parse_line(line: str) -> Req | None:
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    parts = line.split()
    if len(parts) == 1:
        return Req(parts[0])
    if len(parts) != 2:
        raise ValueError(f"a request line is a URL, or a marker and a URL: {line!r}")
    marker, url = parts
    kind, sep, target = marker.partition(":")
    if not sep or kind not in ("hx", "hx-restore"):
        raise ValueError(f"unknown marker {marker!r} (hx:TARGET or hx-restore:TARGET)")
    return Req(url, target, restore=kind == "hx-restore")


def read_requests(path: Path) -> list[Req]:
    reqs = [r for r in map(parse_line, path.read_text().splitlines()) if r is not None]
    keys = [r.key for r in reqs]
    for url in ALWAYS:
        if url not in keys:
            reqs.append(Req(url))
    seen: set[str] = set()
    out = []
    for r in reqs:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


# ---- The app, in-process ----

def load_app():
    """app.main:app of the tree in the working directory, and a check that it is that tree's."""
    if not (ROOT / "app" / "main.py").is_file():
        sys.exit(f"snapshot: run from a tree's root: {ROOT}/app/main.py is missing")
    for name in SETTINGS_ENV:
        os.environ.pop(name, None)
    sys.path[0] = str(ROOT)  # the tree, not tools/ (where Python put this script's folder)
    try:
        from app.main import app
    except Exception as exc:  # an ImportError mid-restructure, say: report it plainly
        import traceback

        traceback.print_exc()
        print(f"snapshot: importing app.main from {ROOT} failed: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        sys.exit(2)
    app.state.render_processes = 0
    return app


def check_origin() -> None:
    """Every module of the app and labs packages must come from ROOT (no installed copy)."""
    strays = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in ("app", "labs"):
            continue
        file = getattr(module, "__file__", None)
        if file and not Path(file).resolve().is_relative_to(ROOT.resolve()):
            strays.append(f"{name} ({file})")
    if strays:
        sys.exit("snapshot: modules imported from outside " + str(ROOT) + ": " + ", ".join(strays))


def client_for(app):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # starlette's httpx deprecation notice
        from fastapi.testclient import TestClient
    # A server error is recorded as the 500 a browser would get, not raised here.
    return TestClient(app, raise_server_exceptions=False, follow_redirects=False)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def serialise(self) -> bytes:
        head = [f"status: {self.status}", *(f"{k}: {v}" for k, v in self.headers)]
        return ("\n".join(head) + "\n\n").encode() + self.body

    @classmethod
    def parse(cls, data: bytes) -> Answer:
        head, _, body = data.partition(b"\n\n")
        lines = head.decode().split("\n")
        status = int(lines[0].removeprefix("status: "))
        headers = tuple(tuple(line.split(": ", 1)) for line in lines[1:])
        return cls(status, headers, body)  # type: ignore[arg-type]

    @property
    def content_type(self) -> str:
        return dict(self.headers).get("content-type", "")


def fetch(client, req: Req) -> Answer:
    response = client.get(req.url, headers=req.headers)
    kept = tuple((k, response.headers[k]) for k in KEPT_HEADERS if k in response.headers)
    # With Accept-Encoding: identity nothing comes compressed; were it, .content is decoded
    # and the content-encoding header, recorded, still tells.
    return Answer(response.status_code, kept, response.content)


def file_name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16] + SUFFIX


def run_all(client, reqs: list[Req]) -> tuple[list[tuple[Req, Answer, float]], float]:
    out = []
    start = time.perf_counter()
    for req in reqs:
        t = time.perf_counter()
        answer = fetch(client, req)
        out.append((req, answer, time.perf_counter() - t))
    return out, time.perf_counter() - start


def slowest(results, n: int = 5) -> str:
    worst = sorted(results, key=lambda r: -r[2])[:n]
    return ", ".join(f"{req.key} {secs:.2f}s" for req, _, secs in worst)


# ---- --write ----

def write(directory: Path, reqs: list[Req]) -> int:
    if directory.exists():
        ours = {INDEX} | {p.name for p in directory.glob("*" + SUFFIX)}
        others = [p.name for p in directory.iterdir() if p.name not in ours]
        if others:
            sys.exit(f"snapshot: {directory} holds files that are no snapshot's: {others[:5]}")
        for name in ours:
            (directory / name).unlink(missing_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    app = load_app()
    with client_for(app) as client:
        check_origin()
        results, elapsed = run_all(client, reqs)
    entries = []
    for req, answer, _ in results:
        name = file_name(req.key)
        (directory / name).write_bytes(answer.serialise())
        entries.append({"request": req.key, "file": name, "status": answer.status,
                        "content_type": answer.content_type, "bytes": len(answer.body),
                        "sha256": hashlib.sha256(answer.body).hexdigest()})
    index = {"format": 1, "count": len(entries), "entries": entries}
    (directory / INDEX).write_text(json.dumps(index, indent=1) + "\n")
    errors = [e["request"] for e in entries if e["status"] >= 500]
    statuses: dict[int, int] = {}
    for e in entries:
        statuses[e["status"]] = statuses.get(e["status"], 0) + 1
    print(f"wrote {len(entries)} answers to {directory} in {elapsed:.1f} s "
          f"(statuses {dict(sorted(statuses.items()))})")
    print(f"slowest: {slowest(results)}")
    for key in errors:
        print(f"warning: server error recorded for {key}", file=sys.stderr)
    return 0


# ---- --check ----

def is_text(content_type: str) -> bool:
    return content_type.startswith(("text/", "application/json")) or "javascript" in content_type


def text_lines(body: bytes, content_type: str) -> list[str]:
    text = body.decode("utf-8", "replace")
    if content_type.startswith("application/json"):
        try:  # compact JSON is one line: one value per line makes a readable diff
            return json.dumps(json.loads(text), indent=1, ensure_ascii=False).split("\n")
        except ValueError:
            pass
    return text.split("\n")


HUNK = re.compile(r"([-+])(\d+)")


def _shift(match: re.Match, offset: int) -> str:
    """A hunk header's line number, counted from the top of the body, not of the excerpt."""
    return f"{match.group(1)}{int(match.group(2)) + offset}"


def first_difference(a: list[str], b: list[str]) -> str:
    """A short unified diff around the first differing line (long lines clipped there)."""
    i = next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    tail = 0
    while tail < min(len(a), len(b)) - i and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    lo = max(0, i - 3)
    a_part, b_part = a[lo:min(len(a) - tail, i + 12) + 3], b[lo:min(len(b) - tail, i + 12) + 3]
    x, y = (a[i] if i < len(a) else ""), (b[i] if i < len(b) else "")
    col = next((n for n, (p, q) in enumerate(zip(x, y, strict=False)) if p != q),
               min(len(x), len(y)))
    start = max(0, col - CLIP // 3)

    def clip(line: str) -> str:
        if len(line) <= CLIP:
            return line
        cut = line[start:start + CLIP]
        return ("…" if start else "") + cut + ("…" if start + CLIP < len(line) else "")

    diff = difflib.unified_diff([clip(s) for s in a_part], [clip(s) for s in b_part],
                                "snapshot", "now", n=3, lineterm="")
    lines = [HUNK.sub(lambda m: _shift(m, lo), line) if line.startswith("@@") else line
             for line in diff]
    more = len(lines) > DIFF_LINES
    shown = lines[:DIFF_LINES] + (["    …"] if more else [])
    return "\n".join(f"    {line}" for line in shown) + f"\n    (first difference: line {i + 1}" \
        + (f", column {col + 1})" if max(len(x), len(y)) > CLIP else ")")


def describe(old: Answer, new: Answer) -> str:
    parts = []
    if old.status != new.status:
        parts.append(f"status {old.status} -> {new.status}")
    if old.headers != new.headers:
        parts.append(f"headers {dict(old.headers)} -> {dict(new.headers)}")
    if old.body != new.body:
        parts.append(f"body differs ({len(old.body):,} -> {len(new.body):,} bytes)")
    summary = "; ".join(parts)
    if old.body != new.body and is_text(old.content_type) and is_text(new.content_type):
        summary += "\n" + first_difference(text_lines(old.body, old.content_type),
                                           text_lines(new.body, new.content_type))
    return summary


def check(directory: Path, allow: list[str], listed: list[Req]) -> int:
    index_path = directory / INDEX
    if not index_path.is_file():
        sys.exit(f"snapshot: {index_path} is missing: take one with --write first")
    index = json.loads(index_path.read_text())
    entries = index["entries"]
    reqs = [parse_line(e["request"]) for e in entries]
    recorded = {e["request"] for e in entries}
    unrecorded = [r.key for r in listed if r.key not in recorded]
    app = load_app()
    with client_for(app) as client:
        check_origin()
        results, elapsed = run_all(client, reqs)
    differ, allowed = [], []
    for entry, (req, answer, _) in zip(entries, results, strict=True):
        old = Answer.parse((directory / entry["file"]).read_bytes())
        if old == answer:
            continue
        note = describe(old, answer)
        if any(a in req.key for a in allow):
            allowed.append(req.key)
            print(f"allowed difference: {req.key}: {note.splitlines()[0]}")
        else:
            differ.append(req.key)
            print(f"DIFFERS: {req.key}: {note}")
    for key in unrecorded:
        print(f"not in the snapshot (listed since it was taken): {key}")
    unused = [a for a in allow if not any(a in key for key in recorded)]
    for a in unused:
        print(f"note: --allow {a!r} matches no request of the snapshot")
    same = len(results) - len(differ) - len(allowed)
    print(f"checked {len(results)} requests in {elapsed:.1f} s: {same} same, "
          f"{len(differ)} differ, {len(allowed)} allowed difference")
    print(f"slowest: {slowest(results)}")
    return 1 if differ else 0


# ---- --generate: how tools/snapshot_urls.txt was made (once; the list is fixed since) ----

HREF = re.compile(r'<a class="(try|case [a-z]+|apply)"[^>]*?href="([^"]*)"')
FORM_TARGET = r'hx-get="{url}" hx-target="#([\w-]+)"'
ASSET = re.compile(r'(?:src|href)="(/static/(?:js|css)/[\w./-]+\?v=\w+)"')


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def bad_value(param: dict) -> str | None:
    """A value of a query parameter that its schema refuses (422), or None."""
    schema = param.get("schema", {})
    if schema.get("type") == "integer" and "maximum" in schema:
        return str(schema["maximum"] + 1)
    if "enum" in schema and schema.get("type") == "string":
        return "no-such-choice"
    return None


CHOICE = re.compile(r'<input type="radio" name="answer" value="([^"]*)"')


def right_answer(get, drill: str) -> str:
    """A drill's right answer, as its reveal (a second wrong try) gives it. A decide drill
    refuses 0, no choice of its (422): its first choice, read off its page, is tried instead
    (its reveal, or its right answer, names the right one either way)."""
    revealed = get(f"/api/drills/{drill}?answer=0&attempt=2")
    if revealed.status_code == 422:
        first = CHOICE.search(get(f"/drills/{drill}").text)
        assert first is not None, f"/drills/{drill}: no choice to try"
        revealed = get(f"/api/drills/{drill}?answer={first.group(1)}&attempt=2")
    return str(revealed.json()["answer"])


def generate() -> int:
    """Print a request list from the running app, reading only what it serves (HTML, JSON)."""
    app = load_app()
    out: list[str] = []

    def add(line: str, comment: str = "") -> None:
        if comment:
            out.append(f"# {comment}")
        if line not in out:
            out.append(line)

    with client_for(app) as client:
        check_origin()

        def get(url: str, **headers):
            return client.get(url, headers={"Accept-Encoding": "identity", **headers})

        diagrams = get("/api/diagrams").json()
        labs: dict[str, dict] = {}
        for d in diagrams:
            lab = labs.setdefault(d["lab"], {"page": path_of(d["page_url"]), "diagrams": []})
            lab["diagrams"].append(d["name"])
        openapi = get("/openapi.json").json()

        add("/", "Site pages")
        for path in ("/healthz", "/docs", "/redoc", "/api/diagrams", "/openapi.json",
                     "/api/models", "/api/gpus", "/api/links", "/api/presets/recipes"):
            add(path)
        home = get("/").text
        for asset in dict.fromkeys(ASSET.findall(home)):
            if asset.startswith(("/static/js/lab.js", "/static/css/lab.css")):
                add(asset)  # the app's own two (vendor bundles are npm's, not the app's)

        pages: dict[str, dict] = {}
        for name, lab in labs.items():
            page = lab["page"]
            body = get(page).text
            found = [(kind, path_of(html.unescape(h))) for kind, h in HREF.findall(body)]
            links = [u for u in dict.fromkeys(u for _, u in found) if urlsplit(u).path == page]
            good = next((u for kind, u in found if kind == "case good"), "")
            # The form's own target (a control change); some labs also have one of #bench.
            targets = re.findall(FORM_TARGET.format(url=re.escape(page)), body)
            pages[name] = {"links": links, "good": good,
                           "target": next((t for t in targets if t != "bench"), "bench")}
            add(page, f"EP lesson {page}: default, its case buttons and try links")
            for url in links:
                add(url)
        add("/episodes/pipeline/", "Trailing slashes: redirects")
        add("/embed/pipeline/")

        for name, lab in labs.items():
            add(f"/embed/{name}", f"Embeds of {name}: the whole lab and each diagram")
            for diagram in lab["diagrams"]:
                add(f"/embed/{name}/{diagram}")
        add("/embed/pipeline?theme=dark&controls=1", "Embed options, a state, a refused state")
        add("/embed/memory/ledger?theme=dark")
        add("/embed/pipeline/gantt?stages=0")
        add("/episodes/pipeline?stages=0")
        add("/embed/pipeline?stages=8&microbatches=16")
        add("/embed/pipeline/gantt?stages=8&microbatches=16")

        for name in labs:
            path = f"/api/{name}"
            params = openapi["paths"][path]["get"].get("parameters", [])
            bad = next(((p["name"], v) for p in params if (v := bad_value(p)) is not None), None)
            add(path, f"JSON of {name}: default, the good case, a refused control")
            good = pages[name]["good"]
            if good:
                add(f"{path}?{urlsplit(good).query}")
            if bad is not None:
                url = f"{path}?{urlencode([bad])}"
                assert get(url).status_code == 422, url
                add(url)
        out.append("# Pipeline: event shapes, every schedule")
        for shape in ("columns", "none", "sideways"):
            add(f"/api/pipeline?events={shape}")
        schedules = next(p for p in openapi["paths"]["/api/pipeline"]["get"]["parameters"]
                         if p["name"] == "schedule")["schema"]["enum"]
        for schedule in schedules:
            url = f"/api/pipeline?schedule={schedule}&virtual=2"
            add(url)
        out.append("# Schedules the charts have no paper name for")
        for schedule in ("looped-bfs", "interleaved-zb", "zb-v"):
            q = f"schedule={schedule}&virtual=2"
            add(f"/episodes/pipeline?{q}")
            add(f"/embed/pipeline?{q}")
            add(f"/embed/pipeline/gantt?{q}")
            add(f"/embed/pipeline/activations?{q}")

        ids = next(p for p in openapi["paths"]["/api/drills/{drill_id}"]["get"]["parameters"]
                   if p["name"] == "drill_id")["schema"]["enum"]
        for drill in ids:
            add(f"/api/drills/{drill}?answer={right_answer(get, drill)}",
                "Drills: each right answer, then a hint, a reveal, a non-number, no such drill"
                if drill == ids[0] else "")
        first = ids[0]
        for q in ("answer=0", "answer=0&attempt=2", "answer=abc", "attempt=0&answer=1"):
            add(f"/api/drills/{first}?{q}")
        add("/api/drills/no-such-drill?answer=1")
        add(f"/drills/{first}?answer=0")

        out.append("# Exports, the planner, cheat sheet and compare")
        for fmt in next(p for p in openapi["paths"]["/api/export"]["get"]["parameters"]
                        if p["name"] == "format")["schema"]["enum"]:
            add(f"/api/export?format={fmt}")
        add("/api/export?format=no-such-format")
        add("/api/export?tp=1&pp=1&dp=64")
        add("/api/plan")
        add("/api/plan?gpus=0")
        add("/episodes/recipe-3d/plan")
        add("/api/cheatsheet")
        add("/api/cheatsheet?model=mixtral-8x7b&gpu=a100-80gb&tp=4&pp=2")
        add("/api/cheatsheet?tp=0")
        add("/episodes/playground/cheatsheet")
        add("/episodes/playground/cheatsheet?tp=0")
        add("/api/playground/compare")
        ab = urlencode({"a": "microbatches=2", "b": "tp=1&pp=1&dp=32&microbatches=1&zero=3"})
        wrong = urlencode({"a": "tp=8&pp=4&dp=2", "b": "tp=4&pp=8&dp=2"})  # 64 GPUs of 32
        add(f"/api/playground/compare?{ab}")
        add(f"/api/playground/compare?{wrong}")
        add("/api/playground/compare?a=tp%3D0")
        add("/episodes/playground/compare")
        add(f"/episodes/playground/compare?{ab}")
        add(f"/episodes/playground/compare?{wrong}")

        example = openapi["paths"]["/api/models/parse"]["post"]["requestBody"]["content"][
            "application/json"]["example"]
        code = client.post("/api/models/parse", json=example).json()["code"]
        add(f"/api/memory?{urlencode({'model': code})}", "A pasted model (POST /api/models/parse)")
        add(f"/episodes/memory?{urlencode({'model': code})}")

        for path in ("/no-such-page", "/episodes/no-such-episode", "/embed/no-such-lab",
                     "/embed/pipeline/no-such-diagram", "/api/no-such-route",
                     "/drills/no-such-drill", "/static/js/no-such-file.js"):
            add(path, "Not found" if path == "/no-such-page" else "")

        out.append("# htmx: a control change (the form's target), a case button (#bench), a "
                   "refused control (errors out of band)")
        for name, lab in labs.items():
            page, target = lab["page"], pages[name]["target"]
            links = pages[name]["links"]
            add(f"hx:{target} {page}")
            if links:
                add(f"hx:bench {links[0]}")
            api_bad = next((line for line in out if line.startswith(f"/api/{name}?")
                            and get(line).status_code == 422), None)
            if api_bad and name in ("pipeline", "memory", "recipe"):
                add(f"hx:{target} {page}?{urlsplit(api_bad).query}")
        add("hx-restore:bench /episodes/pipeline?stages=8&microbatches=16")
        add("hx:pipeline-schedule /episodes/pipeline?stages=8&microbatches=16")
        add("hx:embed-body /embed/pipeline?stages=8&microbatches=16")
        add("hx:embed-body /embed/pipeline/gantt?schedule=zb-v&virtual=2")
        add("hx:cheatsheet-lines /episodes/playground/cheatsheet?tp=4")
        add("hx:cheatsheet-lines /episodes/playground/cheatsheet?tp=0")
        add(f"hx: /drills/{first}?answer=0")

    print("# Requests of tools/snapshot.py (see its docstring for the line format).")
    print("# Generated once by `python tools/snapshot.py --generate`; kept fixed since.")
    print("\n".join(out))
    count = sum(1 for line in out if not line.startswith("#"))
    print(f"generated {count} requests", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="DIR", type=Path, help="record a snapshot in DIR")
    mode.add_argument("--check", metavar="DIR", type=Path, help="compare with the one in DIR")
    mode.add_argument("--generate", action="store_true", help="print a fresh request list")
    parser.add_argument("--allow", metavar="URL_SUBSTRING", action="append", default=[],
                        help="with --check: a request containing it may differ (repeatable)")
    parser.add_argument("--urls", type=Path, default=URLS_FILE,
                        help="request list (default: snapshot_urls.txt beside this script)")
    args = parser.parse_args(argv)
    if args.generate:
        return generate()
    if args.allow and not args.check:
        parser.error("--allow goes with --check")
    reqs = read_requests(args.urls)
    if args.write:
        return write(args.write, reqs)
    return check(args.check, args.allow, reqs)


if __name__ == "__main__":
    sys.exit(main())
