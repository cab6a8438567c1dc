"""A render process's CPU per miss, measured in this process with the child's own machinery.

Run: ``python tests/benchmarks/render_cpu.py [--draws 5]``. It starts app/render_child.py's
side in this process (its lane threads, the app below the response cache), then draws every
class request of every lab (tests/benchmarks/profile_requests.py ``class_requests``: each
"try it" link's bench and each slider one stop either side) ``--draws`` times, the lab's
result cache cleared before each, and keeps each request's least CPU (process CPU time: a
loaded machine adds to some draws, rarely to all). Between answers it runs the pool's full
collection every 200 answers, as app/render_pool.py asks, and reports its CPU per answer
apart. Issue 31 compared commits with it on a machine shared with other jobs, where latency
and even a class run's CPU per request moved by tens of percent from run to run.

Timings live here, not in tests.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

COLLECT_EVERY = 200  # answers, as app/render_pool.py's COLLECT_IDLE


def scope(path: str, query: str, headers: dict) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
            "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
            "query_string": query.encode(), "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 5000),
            "headers": [(k.encode(), v.encode()) for k, v in
                        {"host": "127.0.0.1:8000", "accept-encoding": "gzip, deflate, br",
                         **headers}.items()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=5, help="draws of each request")
    args = parser.parse_args()
    from app import render_child
    from app.render_pool import APP, WARM_UP

    render_child.init(APP, WARM_UP, 0)
    from app.labkit import VIEWS, parsing
    from app.main import app
    from tests.benchmarks.profile_requests import class_requests, clear_response_cache

    clear_response_cache()
    scopes = [scope(view.episode.path, query, headers)
              for view in VIEWS.values() for query, headers in class_requests(app, view)]
    for s in scopes:  # templates and the engine's per-model caches warm, as a child's are
        render_child.render(s, "light")
    least = [float("inf")] * len(scopes)
    collections, drawn = 0.0, 0
    for _ in range(args.draws):
        for i, s in enumerate(scopes):
            parsing.CACHES.clear()
            start = time.process_time()
            render_child.render(s, "light")
            least[i] = min(least[i], time.process_time() - start)
            drawn += 1
            if drawn % COLLECT_EVERY == 0:
                start = time.process_time()
                render_child.collect()
                collections += time.process_time() - start
    per_miss = sum(least) / len(least) * 1e3
    per_collect = collections / drawn * 1e3
    print(f"{len(scopes)} class requests of every lab, {args.draws} draws each: CPU ms per "
          f"miss (the least of {args.draws}) {per_miss:.3f}; full collections "
          f"{per_collect:.3f} per answer; together {per_miss + per_collect:.3f}")


if __name__ == "__main__":
    main()
