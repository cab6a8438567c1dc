"""A class's misses replayed in one process: what a render process spends on a class.

Run: ``python tests/benchmarks/class_replay.py [--students 1000] [--requests 45] [--skip N]
[--limit N]``.
It builds the request stream tests/benchmarks/class_load.py's students send (each opens an
episode, follows each "try it" link and case button, fetches the lazy chart a link brings into
view (EP08 step 14's, apart in the report), and moves the controls as
tests/benchmarks/class_client.py's ``moves`` does, one request every 1.5-2.5 s, the class
arriving over 10 s), ordered in time, with no server: pages and benches are drawn in this
process to read their forms. It prints the share of requests that are a first ask of their
answer (what no response cache can spare), then draws each distinct answer once, in the order
the class first asks it, through app/render_child.py's own machinery (its lanes, the app below
the response cache, the engine's and the labs' caches kept as a child keeps them, a full
collection every 200 answers as app/render_pool.py asks), and reports the CPU per miss, per lab
and in all. ``--digest FILE`` writes each answer's digest (its status, its headers but the
measured ``Server-Timing``, its body as sent) a line, in the same order: two trees' files
compare equal (``cmp``) when a change leaves every answer of the class byte for byte the same.

Process CPU time, far less sensitive to the machine's load than a class run's latency; it
leaves out the serving process (HTTP, the response cache, the hand-over to a child), which
``class_load.py`` reports beside. Issue 31 compared commits with it. Timings live here, not in
tests.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import random
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

COLLECT_EVERY = 200  # answers, as app/render_pool.py's COLLECT_IDLE
RAMP = 10.0  # s over which the class arrives


def headers_of(target: str) -> dict:
    """A request's htmx headers by what it asks: a page, a lazy chart, or a target's swap."""
    return {"page": {}, "lazy": {"hx-request": "true"}}.get(
        target, {"hx-request": "true", "hx-target": target})


def digest(status: int, headers: list, body: bytes) -> str:
    """An answer's digest: its status, headers (but the measured Server-Timing) and body."""
    kept = [(k, v) for k, v in headers if k.lower() != b"server-timing"]
    return hashlib.sha256(repr((status, kept)).encode() + body).hexdigest()[:32]


def stream(app, students: int, requests: int) -> list[tuple[str, str, str]]:
    """(path, query, HX-Target or "page") of every request, in the order the class sends
    them."""
    from tests.benchmarks.class_client import Answer, Parsed, live_links
    from tests.benchmarks.profile_requests import call

    drawn: dict = {}

    def fetch(path: str, query: str, headers: dict) -> Answer:
        key = (path, query, tuple(sorted(headers.items())))
        if key not in drawn:
            drawn[key] = Answer(*call(app, path, query, {**headers,
                                                         "accept-encoding": "identity"}))
        return drawn[key]

    home = call(app, "/", "", {"accept-encoding": "identity"})[2].decode()
    urls = list(dict.fromkeys(live_links(home)))
    parsed, timed, rng = Parsed(), [], random.Random(12)
    for _ in range(students):
        timed += itertools.islice(lesson(urls, fetch, parsed, random.Random(rng.random())),
                                  requests)
    timed.sort(key=lambda t: t[0])
    return [t[1:] for t in timed]


def lesson(urls: list[str], fetch, parsed, rng: random.Random):
    """One student's requests, (time, path, query, target), as class_load.py's ``lesson``
    sends them, for as long as they are read."""
    from tests.benchmarks.class_client import lazy_place, moves

    clock = rng.uniform(0, RAMP)
    for url in itertools.islice(itertools.cycle(urls), rng.randrange(len(urls)), None):
        page_url = urlsplit(url)
        yield clock, page_url.path, page_url.query, "page"
        page = parsed.page(url, fetch(page_url.path, page_url.query, {}))
        for link in page.links:
            clock += rng.uniform(1.5, 2.5)
            bench = urlsplit(link)
            yield clock, bench.path, bench.query, "bench"
            answer = fetch(bench.path, bench.query, {"hx-request": "true", "hx-target": "bench"})
            lazy = lazy_place(page, link, parsed.page(link, answer))
            if lazy is not None:  # a lazy chart the link brings into view: fetched at once
                place = urlsplit(lazy)
                yield clock, place.path, place.query, "lazy"
            form = parsed.form(link, answer)
            if form is None or not form.action:
                continue
            for name, value in moves(form, rng):
                clock += rng.uniform(1.5, 2.5)
                form.fields[name]["value"] = value
                yield clock, form.action, form.query(), form.target
        clock += rng.uniform(1.5, 2.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=45, help="requests per student")
    parser.add_argument("--limit", type=int, default=0,
                        help="draw only the first N distinct answers (0: all)")
    parser.add_argument("--skip", type=int, default=0,
                        help="draw the first N distinct answers unmeasured, as a class running "
                             "for a while has warmed its caches, then measure the next")
    parser.add_argument("--digest", type=Path, default=None,
                        help="write each measured answer's digest to this file, a line each")
    args = parser.parse_args()
    from app import render_child
    from app.labkit import VIEWS
    from app.render_pool import APP, WARM_UP
    from tests.benchmarks.render_cpu import scope

    render_child.init(APP, WARM_UP, 0)
    from app.main import app

    sent = stream(app, args.students, args.requests)
    answers = list(dict.fromkeys(sent))
    print(f"{args.students} students, {len(sent)} requests (assets aside), {len(answers)} "
          f"distinct answers: {len(answers) / len(sent):.1%} of the requests are a first ask")
    lab_of = {view.episode.path: view.name for view in VIEWS.values()}
    lab_of.update({view.lazy_path(d): f"{view.name} {d.name}" for view in VIEWS.values()
                   for d in view.diagrams if d.lazy_template})
    for path, query, target in answers[:args.skip]:
        render_child.render(scope(path, query, headers_of(target)), "light")
    if args.skip:
        render_child.collect()
    answers = answers[args.skip:args.skip + args.limit if args.limit else None]
    spent, count, digests = Counter(), Counter(), []
    start = time.process_time()
    for drawn, (path, query, target) in enumerate(answers, 1):
        before = time.process_time()
        answer = render_child.render(scope(path, query, headers_of(target)), "light")
        spent[lab_of.get(path, path)] += time.process_time() - before
        count[lab_of.get(path, path)] += 1
        if args.digest:  # its own CPU left out of the total
            hashing = time.process_time()
            digests.append(f"{path}?{query} {target} {digest(*answer)}\n")
            start += time.process_time() - hashing
        if drawn % COLLECT_EVERY == 0:
            render_child.collect()
    total = time.process_time() - start
    if args.digest:
        args.digest.write_text("".join(digests))
    print(f"{len(answers)} distinct answers drawn in class order: "
          f"{1e3 * total / len(answers):.3f} ms of CPU per miss (collections included)")
    for lab, seconds in spent.most_common():
        print(f"  {lab:12} {count[lab]:6} answers {1e3 * seconds / count[lab]:7.3f} ms each, "
              f"{seconds / total:5.1%} of the CPU")


if __name__ == "__main__":
    main()
