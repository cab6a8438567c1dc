"""A class on one server: 300 students moving controls, and a 32-connection fragment burst.

Run: ``python tests/benchmarks/class_load.py [--students 300] [--duration 600]``. It starts
the lab under uvicorn with ONE worker on a free port of 127.0.0.1 (and, for the burst, a bare
FastAPI app in another uvicorn), then:

1. Class: each student opens a live episode (every registered lab, read from the home page),
   then about every 2 s (1.5-2.5 s) moves one control the way a hand does: a slider by one to
   three steps, a select to another option, now and then a case button or a step's "try it"
   link (which swap the whole bench). Each move is the htmx request the page sends. Reports
   p50/p95/p99 latency, errors (5xx, refused, timed out; a 422 is the lab's answer to an
   inconsistent state, counted apart) and the server's RSS every 10 s.
2. Burst: 32 connections back to back for ``--burst`` seconds on one lab fragment, then on a
   bare FastAPI endpoint rendering a Jinja fragment of the same byte size; both req/s.

The machine's load average is printed with each figure. Targets (issue 12): p99 < 100 ms and
no errors; RSS flat; lab burst >= half the bare one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import subprocess
import sys
import time
import urllib.request
from html import unescape
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port  # noqa: E402

# --- the bare comparison app (imported by its own uvicorn: tests.benchmarks.class_load:bare)

BARE_SIZE = int(os.environ.get("BARE_FRAGMENT_BYTES", "4000"))


def _bare_app():
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse
    from jinja2 import Environment

    template = Environment(autoescape=True).from_string(
        '<div id="chart"><script type="application/json" class="figure">'
        '{% for i in rows %}{"x":{{ i }},"y":"{{ label }}"},{% endfor %}</script></div>')
    row = len('{"x":1000,"y":"bar"},')
    rows = range(1000, 1000 + max(1, BARE_SIZE // row))
    api = FastAPI()

    @api.get("/fragment", response_class=HTMLResponse)
    def fragment() -> str:
        return template.render(rows=rows, label="bar")

    return api


bare = _bare_app() if os.environ.get("BARE_FRAGMENT_BYTES") else None


# --- servers ---------------------------------------------------------------------------------

def start(target: str, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--log-level", "warning", "--backlog", "2048"],
        cwd=ROOT, env={**os.environ, **(env or {})})
    origin = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(origin + "/docs" if "bare" in target else origin + "/healthz",
                                   timeout=2)
            return proc, origin
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{target} did not start")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# --- what a student can do on an episode page ------------------------------------------------

class Episode:
    """The controls of one lesson page as its HTML has them, and its bench links."""

    def __init__(self, url: str, text: str) -> None:
        self.url = url
        self.controls: dict[str, list[str]] = {}
        self.state: dict[str, str] = {}
        form = re.search(r'<form class="controls".*?</form>', text, re.S)
        body = form.group(0) if form else ""
        for tag in re.findall(r"<input[^>]*>", body):
            name = re.search(r'name="([^"]+)"', tag)
            if not name or 'type="range"' not in tag:
                continue
            lo, hi, value = (int(float(re.search(rf'{a}="([^"]+)"', tag).group(1)))
                             for a in ("min", "max", "value"))
            self.controls[name.group(1)] = [str(v) for v in range(lo, hi + 1)]
            self.state[name.group(1)] = str(value)
        for name, inner in re.findall(r'<select name="([^"]+)"[^>]*>(.*?)</select>', body, re.S):
            self.controls[name] = [unescape(v) for v in re.findall(r'value="([^"]*)"', inner)]
            chosen = re.search(r'value="([^"]*)" selected', inner)
            self.state[name] = unescape(chosen.group(1)) if chosen else self.controls[name][0]
        self.links = [unescape(u) for u in re.findall(r'hx-get="([^"]+)" hx-target="#bench"',
                                                      text)]

    def move(self, rng: random.Random) -> tuple[str, dict, dict]:
        """(url, params, headers) of one hand move."""
        if self.links and rng.random() < 0.1:
            return rng.choice(self.links), {}, {"HX-Request": "true", "HX-Target": "bench"}
        name = rng.choice(sorted(self.controls))
        options = self.controls[name]
        at = options.index(self.state[name]) if self.state[name] in options else 0
        if len(options) > 12:  # a slider: a few steps either way
            at = min(len(options) - 1, max(0, at + rng.choice([-3, -2, -1, 1, 2, 3])))
        else:
            at = rng.randrange(len(options))
        self.state[name] = options[at]
        return self.url, dict(self.state), {"HX-Request": "true", "HX-Target": "x"}


async def student(client, episodes, rng, until, out) -> None:
    await asyncio.sleep(rng.uniform(0, 2))
    mine = Episode(episodes[rng.randrange(len(episodes))].url, "")
    source = next(e for e in episodes if e.url == mine.url)
    mine.controls, mine.state, mine.links = source.controls, dict(source.state), source.links
    while time.monotonic() < until:
        url, params, headers = mine.move(rng)
        start = time.perf_counter()
        try:
            response = await client.get(url, params=params, headers=headers)
            out["latency"].append((time.perf_counter() - start) * 1e3)
            if response.status_code >= 500:
                out["errors"].append(f"{response.status_code} {url}")
            elif response.status_code == 422:
                out["refused"] += 1
        except httpx.HTTPError as exc:
            out["errors"].append(f"{type(exc).__name__} {url}")
        await asyncio.sleep(rng.uniform(1.5, 2.5))


async def watch_rss(pid, until, samples) -> None:
    start = time.monotonic()
    while time.monotonic() < until:
        samples.append((time.monotonic() - start, rss_mb(pid), load()))
        await asyncio.sleep(10)
    samples.append((time.monotonic() - start, rss_mb(pid), load()))


def pct(values, q) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def run_class(origin: str, pid: int, students: int, duration: float) -> None:
    async with httpx.AsyncClient(base_url=origin, timeout=30,
                                 limits=httpx.Limits(max_connections=students + 10)) as client:
        home = (await client.get("/")).text
        urls = sorted(set(re.findall(r'<li class="episode live">.*?href="([^"]+)"', home, re.S)))
        episodes = [Episode(u, (await client.get(u)).text) for u in urls]
        print(f"episodes: {', '.join(u for u in urls)}; controls: "
              + "; ".join(f"{e.url}: {len(e.controls)}" for e in episodes))
        out = {"latency": [], "errors": [], "refused": 0}
        until = time.monotonic() + duration
        rss: list = []
        rng = random.Random(12)
        await asyncio.gather(watch_rss(pid, until, rss), *(
            student(client, episodes, random.Random(rng.random()), until, out)
            for _ in range(students)))
    lat = out["latency"]
    print(f"\nclass: {students} students, {duration:.0f} s, {len(lat)} requests "
          f"({len(lat) / duration:.0f}/s), {out['refused']} answered 422, "
          f"{len(out['errors'])} errors")
    print(f"latency ms: p50 {pct(lat, .5):.1f}  p95 {pct(lat, .95):.1f}  "
          f"p99 {pct(lat, .99):.1f}  max {max(lat, default=float('nan')):.1f}")
    for err in sorted(set(out["errors"]))[:10]:
        print("  error:", err)
    print("RSS of the lab's worker (s, MB, load average 1/5/15 min):")
    for t, mb, avg in rss:
        print(f"  {t:6.0f}  {mb:7.1f}  {avg}")


async def burst(origin: str, path: str, params: dict, headers: dict, seconds: float,
                connections: int = 32) -> tuple[float, int]:
    count, errors = 0, 0
    until = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=origin, timeout=30,
                                 limits=httpx.Limits(max_connections=connections)) as client:
        async def worker():
            nonlocal count, errors
            while time.monotonic() < until:
                try:
                    response = await client.get(path, params=params, headers=headers)
                    errors += response.status_code != 200
                except httpx.HTTPError:
                    errors += 1
                count += 1
        start = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(connections)))
    return count / (time.monotonic() - start), errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--duration", type=float, default=600, help="seconds (bounded)")
    parser.add_argument("--burst", type=float, default=15, help="seconds per side")
    args = parser.parse_args()
    duration = min(args.duration, 1800)
    lab, origin = start("app.main:app")
    try:
        print(f"lab pid {lab.pid} at {origin}; load average {load()}; cpus {os.cpu_count()}")
        if args.students and duration:  # --students 0: the burst alone
            asyncio.run(run_class(origin, lab.pid, args.students, duration))
        # Burst: the memory lab's slider fragment at its default state (cached result: this
        # is the cost of the page machinery, parse, render, headers), identity encoding.
        path, headers = "/episodes/memory", {"HX-Request": "true", "HX-Target": "x",
                                            "Accept-Encoding": "identity"}
        size = len(httpx.get(origin + path, headers=headers).content)
        bare_proc, bare_origin = start("tests.benchmarks.class_load:bare",
                                       {"BARE_FRAGMENT_BYTES": str(size)})
        try:
            bare_size = len(httpx.get(bare_origin + "/fragment").content)
            print(f"\nburst: 32 connections, {args.burst:.0f} s each; lab fragment {size} B, "
                  f"bare fragment {bare_size} B")
            for _ in range(2):  # alternate, so both see the same machine
                rate, errs = asyncio.run(burst(origin, path, {}, headers, args.burst))
                print(f"  lab  {path} (HX-Request): {rate:7.0f} req/s, {errs} errors, "
                      f"load {load()}")
                rate_bare, errs = asyncio.run(burst(bare_origin, "/fragment", {}, {}, args.burst))
                print(f"  bare FastAPI+Jinja /fragment:   {rate_bare:7.0f} req/s, {errs} errors, "
                      f"load {load()}  (lab/bare = {rate / rate_bare:.2f})")
        finally:
            bare_proc.terminate()
            bare_proc.wait(timeout=10)
    finally:
        lab.terminate()
        lab.wait(timeout=10)


if __name__ == "__main__":
    main()
