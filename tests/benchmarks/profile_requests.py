"""Where a class's requests spend server CPU, per episode fragment, measured in-process.

Run: ``python tests/benchmarks/profile_requests.py [--repeat 3]``. For every live lab it
collects the requests a class sends (each "try it" link and case button of the lesson, and
every slider's stops one step either side of its default), then times each stage of an
answer in CPU time of the calling thread (``time.thread_time``, far less sensitive to the
machine's load than wall latency):

- parse: validating the query (pydantic) and the error messages;
- engine: the lab's simulation (``view.run``), its result cache cleared first;
- figure: the plotly figure dicts (``view.figures``);
- json: encoding those figures (what ``tojson`` does inside the template);
- jinja: rendering the fragment template, JSON included (so jinja - json is the markup);
- gzip: compressing the answer at the app's level;
- full: the whole ASGI app (middleware, routing, thread hop, headers), response cache and
  result cache cleared, process CPU (the handler runs in a worker thread);
- hit: the same request again, answered from the response cache (when there is one).

Then the render cost of every answer a lab serves, at its defaults (``answer_costs``): each
lab's page, bench, control fragment, embed, embed fragment, JSON and lazy diagrams (EP08's
2-D against 3-D sweep, GET /episodes/recipe-3d/twod), and the routes beside
them (EP08's planner and its controls, the cheat sheet, the A/B compare, the validation
page), each through the whole ASGI app with the response cache cleared: "first" with every
cache of the engine cleared too (what a render process pays for the first state of a model
and cluster), "again" with only the lab's result cache cleared (a new state of a model and
cluster already drawn). Beside them, app/lanes.py's estimate and its lane: an answer that
takes HEAVY_MS or more belongs in the heavy lane. ``--answers`` prints this table alone.

Timings live here, not in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

LOOP = asyncio.new_event_loop()  # one loop, as a server has: no loop set-up in the timings
STAGES = ("parse", "engine", "figure", "json", "jinja", "gzip", "full", "hit")


def class_requests(app, view) -> list[tuple[str, dict]]:
    """(query string, headers) of the moves a class makes on one lesson page: each bench
    link, and each slider one stop either side of the state that link set (and of the
    page's own state)."""
    from tests.benchmarks.class_client import parse_page

    plain = {"accept-encoding": "identity"}
    _, _, body = call(app, view.episode.path, "", plain)
    page = parse_page(body.decode())
    bench = {"hx-request": "true", "hx-target": "bench"}
    out, forms = [], [page.form]
    for link in page.links:
        query = urlsplit(link).query
        out.append((query, bench))
        _, _, bench_body = call(app, view.episode.path, query, {**bench, **plain})
        forms.append(parse_page(bench_body.decode()).form)
    for form in forms:
        if form is None:
            continue
        control = {"hx-request": "true", "hx-target": form.target}
        for name in form.movable():
            field = form.fields[name]
            if field["kind"] != "range":
                continue
            if field["value"] not in field["options"]:
                continue
            at = field["options"].index(field["value"])
            for step in (-1, 1):
                if 0 <= at + step < len(field["options"]):
                    saved = field["value"]
                    field["value"] = field["options"][at + step]
                    out.append((form.query(), control))
                    field["value"] = saved
    return list({(q, tuple(h.items())): (q, h) for q, h in out}.values())


def call(app, path: str, query: str, headers: dict) -> tuple[int, dict, bytes]:
    """One request through the ASGI app, no network: (status, headers, body)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": query.encode(), "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 5000),
        "headers": [(k.encode(), v.encode()) for k, v in
                    {"host": "127.0.0.1:8000", "accept-encoding": "gzip", **headers}.items()],
    }
    out = {"status": 0, "headers": {}, "body": []}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
            out["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            out["body"].append(message.get("body", b""))

    LOOP.run_until_complete(app(scope, receive, send))
    return out["status"], out["headers"], b"".join(out["body"])


def cpu(fn):
    start = time.thread_time()
    value = fn()
    return (time.thread_time() - start) * 1e3, value


def stage_times(app, view, query: str, headers: dict) -> dict[str, float] | None:
    from app.labkit import parsing
    from app.labkit.render import context
    from app.labkit.routes import GZIP_LEVEL
    from app.templating import templates

    items = parse_qsl(query, keep_blank_values=True)
    t = {}
    t["parse"], (q, errors, _) = cpu(lambda: parsing.validate(view, items))
    if q is None:
        return None
    parsing.CACHES.clear()
    from labs.core.errors import LabInputError
    try:
        t["engine"], result = cpu(lambda: view.run(q))
    except LabInputError:
        return None  # a 422: the lab refuses the state (its cost is the parse)
    t["figure"], figures = cpu(lambda: view.figures(result))
    t["json"], _ = cpu(lambda: [json.dumps(f) for f in figures.values()])

    class Req:  # what context() reads of a request
        url = type("U", (), {"scheme": "http", "netloc": "127.0.0.1:8000"})()

    state = parsing.State(q, result)
    template = ("partials/_bench.html" if headers.get("hx-target") == "bench"
                else "partials/_fragment.html")

    def render():
        ctx = context(Req, view, state, {}, {})
        return templates.get_template(template).render(ctx)

    t["jinja"], html = cpu(render)
    t["jinja"] = max(0.0, t["jinja"] - t["figure"])  # context() builds the figures again
    t["gzip"], _ = cpu(lambda: gzip.compress(html.encode(), compresslevel=GZIP_LEVEL))
    clear_response_cache()
    parsing.CACHES.clear()
    start = time.process_time()
    status, answer_headers, body = call(app, view.episode.path, query, headers)
    t["full"] = (time.process_time() - start) * 1e3
    start = time.process_time()
    call(app, view.episode.path, query, headers)
    t["hit"] = (time.process_time() - start) * 1e3
    t["bytes"] = len(body)
    return t


def clear_response_cache() -> None:
    try:
        from app.response_cache import CACHE
    except ImportError:  # before the response cache existed
        return
    CACHE.clear()


def engine_caches() -> list:
    """Every memoised function of the engine (labs.*): cleared for a "first" render."""
    import functools
    import gc

    return [f for f in gc.get_objects() if isinstance(f, functools._lru_cache_wrapper)
            and getattr(f, "__module__", "").startswith("labs.")]


def answers(app) -> list[tuple[str, str, str, dict]]:
    """(name, path, query, headers) of every answer a lab serves, at its defaults."""
    from app.labkit import VIEWS
    from app.routers import cheatsheet, compare, plan, validation
    from tests.benchmarks.class_client import parse_page

    out = []
    for view in VIEWS.values():
        page = view.episode.path
        _, _, body = call(app, page, "", {"accept-encoding": "identity"})
        form = parse_page(body.decode()).form
        target = form.target if form is not None and form.target else "x"
        first = view.diagrams[0].name
        out += [(f"{view.name} page", page, "", {}),
                (f"{view.name} bench", page, "", {"hx-request": "true", "hx-target": "bench"}),
                (f"{view.name} fragment #{target}", page, "",
                 {"hx-request": "true", "hx-target": target}),
                (f"{view.name} embed", f"/embed/{view.name}", "", {}),
                (f"{view.name} embed {first}", f"/embed/{view.name}/{first}", "", {}),
                (f"{view.name} embed fragment", f"/embed/{view.name}", "",
                 {"hx-request": "true"}),
                (f"{view.name} api", f"/api/{view.name}", "", {})]
        # A diagram drawn on its own request (EP08 step 14's sweep), as its place fetches it.
        out += [(f"{view.name} {d.name} (lazy)", view.lazy_path(d), "", {"hx-request": "true"})
                for d in view.diagrams if d.lazy_template]
    sides = "a=dp%3D8%26tp%3D2&b=dp%3D4%26tp%3D4"  # 32 GPUs each, as the cluster has
    out += [("planner fragment", plan.FRAGMENT_PATH, "", {"hx-request": "true"}),
            ("planner controls", plan.CONTROLS_PATH, "", {"hx-request": "true"}),
            ("planner api", plan.API_PATH, "", {}),
            ("cheat sheet page", cheatsheet.PATH, "", {}),
            ("cheat sheet api", cheatsheet.API_PATH, "", {}),
            ("compare page", compare.PATH, sides, {}),
            ("compare api", compare.API_PATH, sides, {}),
            ("validation page", validation.PATH, "", {}),
            ("validation api", validation.API_PATH, "", {})]
    return out


def answer_costs(app, repeat: int) -> None:
    """The table the module's docstring describes."""
    from app.labkit import parsing
    from app.lanes import HEAVY_MS, estimate

    caches = engine_caches()
    print(f"\nRender cost of every answer at its defaults, CPU ms through the whole app, the "
          f"median of {repeat} (first: every engine cache cleared; again: the lab's result "
          f"cache only), beside app/lanes.py's estimate (heavy from {HEAVY_MS:.0f} ms)")
    print(f"{'answer':40} {'status':>6} {'first':>8} {'again':>8} {'kB':>6} "
          f"{'estimate':>9} {'lane':>6}")
    for name, path, query, headers in answers(app):
        first, again = [], []
        for _ in range(repeat):
            for cache in caches:
                cache.cache_clear()
            for times in (first, again):
                clear_response_cache()
                parsing.CACHES.clear()
                start = time.process_time()
                status, _, body = call(app, path, query, headers)
                times.append((time.process_time() - start) * 1e3)
        cost = estimate(path, query.encode())
        print(f"{name[:40]:40} {status:6} {statistics.median(first):8.1f} "
              f"{statistics.median(again):8.1f} {len(body) / 1e3:6.1f} {cost.ms:9.1f} "
              f"{cost.lane:>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per request; median kept")
    parser.add_argument("--answers", action="store_true",
                        help="only the render cost of every answer at its defaults")
    args = parser.parse_args()
    from app.labkit import VIEWS
    from app.main import app

    if args.answers:
        answer_costs(app, args.repeat)
        return

    print(f"CPU ms per request (median over the class's requests of each lab; each request "
          f"the median of {args.repeat} runs); jinja excludes the figure build")
    print(f"{'lab':10} {'n':>4} " + " ".join(f"{s:>7}" for s in STAGES) + f" {'kB':>6}"
          f" {'worst full':>11}")
    totals = {s: [] for s in STAGES}
    for view in VIEWS.values():
        rows = []
        for query, headers in class_requests(app, view):
            runs = [stage_times(app, view, query, headers) for _ in range(args.repeat)]
            if runs[0] is None:
                continue
            rows.append({k: statistics.median(r[k] for r in runs) for k in runs[0]})
        if not rows:
            continue
        med = {s: statistics.median(r[s] for r in rows) for s in STAGES}
        worst = max(rows, key=lambda r: r["full"])
        for s in STAGES:
            totals[s].extend(r[s] for r in rows)
        kb = statistics.median(r["bytes"] for r in rows) / 1e3
        print(f"{view.name:10} {len(rows):4} " + " ".join(f"{med[s]:7.2f}" for s in STAGES)
              + f" {kb:6.1f} {worst['full']:11.1f}")
    print(f"{'all':10} {len(totals['full']):4} "
          + " ".join(f"{statistics.mean(totals[s]):7.2f}" for s in STAGES) + "  (means)")
    answer_costs(app, args.repeat)


if __name__ == "__main__":
    main()
