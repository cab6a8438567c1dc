"""A bad day for one class server: what one client can no longer do to everyone else (issue 20).

Run: ``python tests/benchmarks/hostile_load.py [--only flood,header,stalled,stuck,junk]
[--duration 20]``, or ``--calibrate`` (app/lanes.py's estimates beside the renders' own times).
It starts the lab the way ``make run`` and the container do (``python -m app``: one worker,
two render processes, the request limits of app/limits.py) on a free port of 127.0.0.1, its
log in a temporary file, then:

1. flood: 16 clients (each from its own 127.0.0.x address, so each is a client of its own)
   loop the heaviest uncached planner request (EP08 on 2,048 GPUs, GLM-4.7, batch 65,536,
   top 50, a random matmul efficiency: never cached; about 1.2 CPU-s each), each waiting the
   Retry-After it is given; meanwhile a prober asks an uncached light answer (EP01's
   /api/memory at a new sequence length) and /healthz every 100 ms. Reports p50/p99/max of
   both and what the 16 got (answers or 429s, the slowest: never a hang). Targets: light
   p99 < 150 ms, /healthz p99 < 50 ms, no flood request unanswered.
2. header: one 100 MB header, sent as fast as the socket takes it: the worker's CPU while it
   does (its threads' /proc/<pid>/task/*/schedstat, in ns: its event loop parses every
   head), what it answered, /healthz after; then 8 x 50 MB at once and the worker's and its
   children's memory. Target: < 10 ms of the worker's CPU.
3. stalled: 300 connections with half a request head and 50 POSTs whose body never comes:
   when the server closed each. Target: all within CLIENT_TIMEOUT (10 s) + 2 s, and no
   traceback in the server's log.
4. stuck: the general render process stopped (SIGSTOP) and a heavy request sent: its answer
   and when (target: a 503 at RENDER_TIMEOUT, 10 s), light answers meanwhile, then how long
   until a heavy request is drawn again by a new process (the stopped one killed).
5. junk: 20 lesson answers asked twice each (as a class does), then 5,000 junk variants (an
   asset with a junk ?v=, unique junk queries, junk HX-Target and Host values), then
   whether each of the 20 is still answered from the cache. Target: all 20.

Every figure is wall time on this machine unless it says CPU; the load average is printed at
each step (other work on a shared machine makes latencies noisy; CPU figures much less so).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks.class_client import Browser  # noqa: E402
from tests.benchmarks.class_load import cpu_seconds, family, load, rss_mb  # noqa: E402
from tests.conftest import free_port  # noqa: E402

HEAVY = ("/api/plan?gpus=2048&model=glm-4.7&global_batch=65536&top=50&seq_len=8192"
         "&matmul_efficiency={:.9f}")
LIGHT = "/api/memory?seq_len={}"
TARGETS = {"light_p99_ms": 150.0, "healthz_p99_ms": 50.0, "header_cpu_ms": 10.0}


# --- the server --------------------------------------------------------------------------------

class Server:
    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - open while the server runs
            "w+", prefix="hostile-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app"], cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "HOST": "127.0.0.1", "PORT": str(self.port),
                 "LOG_LEVEL": "warning", "RENDER_PROCESSES": "2", **env})
        for _ in range(1200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2)
                break
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the server exited: {self.log_text()[-2000:]}") from None
                time.sleep(0.1)  # readiness poll
        deadline = time.monotonic() + 120
        while len(self.children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # the render processes import the app

    def children(self) -> list[int]:
        """The render processes (niceness 0: light only; a thread at 10: general), not the resource
        tracker multiprocessing may start: those whose command line runs spawn_main."""
        out = []
        for pid in family(self.proc.pid)[1:]:
            try:
                if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    out.append(pid)
            except OSError:
                continue
        return out

    def worker_cpu_ns(self) -> int:
        """CPU time of the worker's live threads (its event loop parses every request head),
        in ns (/proc/<pid>/task/*/schedstat; the process-wide /proc/<pid>/stat counts 10 ms
        ticks)."""
        total = 0
        for task in Path(f"/proc/{self.proc.pid}/task").glob("*/schedstat"):
            try:
                total += int(task.read_text().split()[0])
            except OSError:
                continue
        return total

    def cpu_s(self) -> float:
        """CPU of the worker and its render processes, every thread that ever ran, in s."""
        return cpu_seconds(self.proc.pid)

    def log_text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def nice_of(pid: int) -> int:
    """The highest niceness of a process's threads: a general render process draws heavy
    answers in a thread at HEAVY_NICE (app/render_child.py), its other threads at 0."""
    nices = [0]
    for task in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            nices.append(int(task.read_text().rsplit(")", 1)[1].split()[16]))
        except OSError:  # a thread gone meanwhile
            continue
    return max(nices)


# --- a client ----------------------------------------------------------------------------------

class Client:
    """One keep-alive connection from a chosen loopback address (a client of its own)."""

    def __init__(self, port: int, local: str = "127.0.0.1") -> None:
        self.port, self.local, self.conn = port, local, None
        self.http = Browser("127.0.0.1", port)

    async def get(self, target: str, headers: dict | None = None, timeout: float = 120.0):
        """(status, headers, body, ms)."""
        start = time.perf_counter()
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = await asyncio.open_connection("127.0.0.1", self.port,
                                                          local_addr=(self.local, 0))
            try:
                answer = await asyncio.wait_for(
                    self.http._exchange(self.conn, target, headers or {}), timeout)
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt == 2:
                    raise
                continue
            except BaseException:
                self.close()
                raise
            if answer.headers.get("connection", "").lower() == "close":
                self.close()
            return (answer.status_code, answer.headers, answer.body,
                    (time.perf_counter() - start) * 1e3)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn[1].close()
            self.conn = None


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> str:
    return (f"n={len(values)} p50 {pct(values, 0.5):.1f} ms, p99 {pct(values, 0.99):.1f} ms, "
            f"max {max(values, default=float('nan')):.1f} ms")


async def probe(port: int, until: float, light: list, healthz: list, errors: list) -> None:
    """An uncached light answer and /healthz, every 100 ms, from an address of its own."""
    client, n = Client(port, "127.0.0.200"), random.randrange(10**6)
    while time.monotonic() < until:
        n += 1
        try:
            status, _, _, ms = await client.get(LIGHT.format(4096 + n), timeout=30)
            (light if status == 200 else errors).append(ms if status == 200 else status)
            status, _, _, ms = await client.get("/healthz", timeout=30)
            (healthz if status == 200 else errors).append(ms if status == 200 else status)
        except (OSError, TimeoutError) as exc:
            errors.append(repr(exc))
        await asyncio.sleep(0.1)
    client.close()


# --- 1. the heavy flood ------------------------------------------------------------------------

async def flood(server: Server, duration: float, clients: int = 16) -> bool:
    print(f"\n== flood: {clients} clients loop the heaviest uncached planner request for "
          f"{duration:.0f} s (load {load()})")
    got: dict[int | str, int] = {}
    slowest = [0.0]

    async def one(i: int) -> None:
        client, rng = Client(server.port, f"127.0.0.{10 + i}"), random.Random(i)
        while time.monotonic() < until:
            try:
                status, headers, _, ms = await client.get(
                    HEAVY.format(rng.uniform(0.2, 1.0)), timeout=60)
            except (OSError, TimeoutError) as exc:
                got[type(exc).__name__] = got.get(type(exc).__name__, 0) + 1
                continue
            got[status] = got.get(status, 0) + 1
            slowest[0] = max(slowest[0], ms)
            if status in (429, 503):
                wait = float(headers.get("retry-after", "1"))
                await asyncio.sleep(min(wait, max(0.0, until - time.monotonic())))
        client.close()

    quiet_light, quiet_healthz, errors = [], [], []
    await probe(server.port, time.monotonic() + 5, quiet_light, quiet_healthz, errors)
    print(f"  first, 5 s without the flood: light {summary(quiet_light)}; /healthz "
          f"{summary(quiet_healthz)}")
    until = time.monotonic() + duration
    light, healthz = [], []
    cpu = server.cpu_s()
    await asyncio.gather(probe(server.port, until, light, healthz, errors),
                         *(one(i) for i in range(clients)))
    used = server.cpu_s() - cpu
    print(f"  uncached light answer (EP01 at a new seq_len): {summary(light)}")
    print(f"  /healthz: {summary(healthz)}")
    print(f"  prober errors: {errors[:5] or 'none'}")
    print(f"  the {clients} flood clients got: " + ", ".join(
        f"{k}: {v}" for k, v in sorted(got.items(), key=str)) +
        f"; slowest answer {slowest[0] / 1e3:.1f} s")
    print(f"  server CPU over the flood {used:.1f} s ({used / duration:.2f} cores); "
          f"load {load()}")
    ok = (pct(light, 0.99) < TARGETS["light_p99_ms"]
          and pct(healthz, 0.99) < TARGETS["healthz_p99_ms"]
          and not errors and set(got) <= {200, 429})
    print(f"  {'PASS' if ok else 'FAIL'} (light p99 < {TARGETS['light_p99_ms']:.0f} ms, "
          f"/healthz p99 < {TARGETS['healthz_p99_ms']:.0f} ms, "
          "each flood request an answer or a 429)")
    return ok


# --- 2. a 100 MB header ------------------------------------------------------------------------

def send_header(port: int, megabytes: int) -> tuple[int, bytes]:
    """(bytes sent before the server closed, what it answered)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sent, chunk = 0, b"a" * (1 << 20)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        for _ in range(megabytes):
            sock.sendall(chunk)
            sent += len(chunk)
        sock.sendall(b"\r\n\r\n")
    except OSError:
        pass  # refused and closed: what it said is in the socket's buffer (or was reset)
    try:
        answer = sock.recv(4096)
    except OSError:
        answer = b""
    sock.close()
    return sent, answer


async def header(server: Server) -> bool:
    print(f"\n== header: one 100 MB header (load {load()})")
    loop = asyncio.get_running_loop()
    until = time.monotonic() + 3
    healthz, light, errors = [], [], []
    await asyncio.sleep(0.5)
    idle0 = server.worker_cpu_ns()
    await asyncio.sleep(1.0)
    idle = server.worker_cpu_ns() - idle0  # what the worker spends doing nothing for 1 s
    cpu = server.worker_cpu_ns()
    start = time.perf_counter()
    sent, answer = await loop.run_in_executor(None, send_header, server.port, 100)
    took = time.perf_counter() - start
    await asyncio.sleep(0.2)
    used = server.worker_cpu_ns() - cpu
    await probe(server.port, until, light, healthz, errors)
    status = answer.split(b"\r\n", 1)[0].decode(errors="replace") or "(connection reset)"
    print(f"  answered {status!r} after {sent / 2**20:.2f} MB of it, in {took * 1e3:.0f} ms")
    print(f"  the worker's CPU: {used / 1e6:.2f} ms in all (its idle rate: {idle / 1e6:.2f} "
          f"ms/s); "
          f"/healthz after: {summary(healthz)}")
    rss0 = rss_mb(server.proc.pid)
    await asyncio.gather(*(loop.run_in_executor(None, send_header, server.port, 50)
                           for _ in range(8)))
    print(f"  8 x 50 MB at once: worker and children {rss0:.0f} -> "
          f"{rss_mb(server.proc.pid):.0f} MB")
    ok = used / 1e6 < TARGETS["header_cpu_ms"] + idle / 1e6 * (took + 0.2)
    print(f"  {'PASS' if ok else 'FAIL'} (< {TARGETS['header_cpu_ms']:.0f} ms of the worker's "
          "CPU, above its idle rate)")
    return ok


# --- 3. stalled connections --------------------------------------------------------------------

async def stalled(server: Server, heads: int = 300, bodies: int = 50, timeout: float = 10.0):
    print(f"\n== stalled: {heads} half-sent heads and {bodies} POST bodies that never come "
          f"(CLIENT_TIMEOUT {timeout:.0f} s; load {load()})")
    log_before = len(server.log_text())

    async def one(request: bytes, local: str) -> float | None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port,
                                                       local_addr=(local, 0))
        start = time.monotonic()
        writer.write(request)
        try:
            while await asyncio.wait_for(reader.read(65536), timeout + 30):
                pass
        except (TimeoutError, ConnectionError):
            return None
        finally:
            writer.close()
        return time.monotonic() - start

    half = b"GET /episodes/memory HTTP/1.1\r\nHost: x\r\nX-Slow: "
    post = (b"POST /api/models/parse HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{")
    tasks = [one(half, f"127.0.1.{1 + i % 200}") for i in range(heads)]
    tasks += [one(post, f"127.0.2.{1 + i}") for i in range(bodies)]
    healthz, light, errors = [], [], []
    closed, _ = await asyncio.gather(asyncio.gather(*tasks),
                                     probe(server.port, time.monotonic() + 5, light, healthz,
                                           errors))
    late = [c for c in closed if c is None or c > timeout + 2]
    done = [c for c in closed if c is not None]
    log = server.log_text()[log_before:]
    print(f"  closed by the server: {len(done)} of {len(closed)}, after {min(done):.1f}"
          f"-{max(done):.1f} s; later than {timeout + 2:.0f} s or never: {len(late)}")
    print(f"  /healthz meanwhile: {summary(healthz)}")
    print(f"  server log: {log.count('408 from')} lines '408 from ...', "
          f"{log.count('went away')} disconnects, {log.count('Traceback')} tracebacks")
    ok = not late and "Traceback" not in log
    print(f"  {'PASS' if ok else 'FAIL'} (every one closed within {timeout + 2:.0f} s, no "
          "traceback)")
    return ok


# --- 4. a stuck render -------------------------------------------------------------------------

async def stuck(server: Server, deadline: float = 10.0) -> bool:
    general = [p for p in server.children() if nice_of(p) > 0]
    print(f"\n== stuck: the general render process ({general}) stopped, a heavy request "
          f"sent (RENDER_TIMEOUT {deadline:.0f} s; load {load()})")
    if len(general) != 1:
        print("  FAIL: no general render process found")
        return False
    (pid,) = general
    os.kill(pid, signal.SIGSTOP)
    client = Client(server.port, "127.0.3.1")
    light, healthz, errors = [], [], []
    rng = random.Random(7)
    try:
        (status, headers, body, ms), _ = await asyncio.gather(
            client.get(HEAVY.format(rng.uniform(0.2, 1.0)), timeout=deadline + 60),
            probe(server.port, time.monotonic() + deadline, light, healthz, errors))
    finally:
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGCONT)
    print(f"  the heavy request: {status} after {ms / 1e3:.1f} s, Retry-After "
          f"{headers.get('retry-after')}: {body[:150].decode(errors='replace')}")
    print(f"  light answers meanwhile: {summary(light)}; errors {errors[:3] or 'none'}")
    start = time.monotonic()
    while time.monotonic() - start < 120:
        again, _, _, _ = await client.get(HEAVY.format(rng.uniform(0.2, 1.0)), timeout=120)
        if again == 200:
            break
        await asyncio.sleep(0.5)
    recovered = time.monotonic() - start
    gone = not Path(f"/proc/{pid}").exists() or "\nState:\tZ" in Path(
        f"/proc/{pid}/status").read_text()
    print(f"  a heavy answer drawn again {recovered:.1f} s later (status {again}); the "
          f"stopped process {'gone' if gone else 'STILL THERE'}; render processes now "
          f"{server.children()}")
    client.close()
    ok = status == 503 and ms / 1e3 < deadline + 3 and again == 200 and gone
    print(f"  {'PASS' if ok else 'FAIL'} (503 within about {deadline:.0f} s, the pool "
          "recovered, the stopped process killed)")
    return ok


# --- 5. junk cannot empty the cache ------------------------------------------------------------

WARM = ([(f"/episodes/memory?dp={d}", {"HX-Request": "true", "HX-Target": "bench"})
         for d in range(1, 9)] +
        [(f"/episodes/{slug}", {}) for slug in ("memory", "data-parallel", "zero", "pipeline")] +
        [(f"/api/{lab}", {}) for lab in ("memory", "dp", "zero", "tp", "pipeline", "cp", "moe",
                                         "placement")])


async def junk(server: Server, count: int = 5000, connections: int = 8) -> bool:
    print(f"\n== junk: {len(WARM)} lesson answers asked twice, then {count:,} junk variants "
          f"(load {load()})")
    client = Client(server.port, "127.0.4.1")
    for path, headers in WARM:
        for _ in range(2):
            status, _, _, _ = await client.get(path, headers)
            assert status == 200, (path, status)
    from app.assets import asset_url  # the asset's real URL, content hash and all

    plotly = asset_url("vendor/plotly.min.js").split("?")[0]
    kinds = [lambda i: (f"{plotly}?v=junk{i}", {}),
             lambda i: (f"/episodes/memory?junk={i}", {}),
             lambda i: ("/episodes/memory?dp=2", {"HX-Request": "true", "HX-Target": f"j{i}"}),
             lambda i: ("/api/memory?dp=3", {"Host": f"junk{i}.example"})]
    queue = list(range(count))
    statuses: dict[int, int] = {}
    start = time.perf_counter()

    async def worker(k: int) -> None:
        mine = Client(server.port, f"127.0.5.{1 + k}")
        while queue:
            i = queue.pop()
            status, _, _, _ = await mine.get(*kinds[i % len(kinds)](i))
            statuses[status] = statuses.get(status, 0) + 1
        mine.close()

    await asyncio.gather(*(worker(k) for k in range(connections)))
    took = time.perf_counter() - start
    hits = 0
    for path, headers in WARM:
        _, answer_headers, _, _ = await client.get(path, headers)
        hits += 'desc="cache hit"' in answer_headers.get("server-timing", "")
    client.close()
    print(f"  {count:,} junk requests in {took:.1f} s: {statuses}")
    print(f"  warmed answers still served from the cache: {hits} of {len(WARM)}")
    ok = hits == len(WARM)
    print(f"  {'PASS' if ok else 'FAIL'} (all {len(WARM)})")
    return ok


# --- calibration of app/lanes.py -----------------------------------------------------------------

CALIBRATE = [
    "/api/memory", "/episodes/memory", "/api/playground", "/episodes/playground",
    "/api/cheatsheet", "/episodes/recipe-3d",
    "/api/recipe?model=gpt-3-175b&gpu=a100-80gb&nodes=8&tp=8&pp=4&dp=2&microbatches=16"
    "&replan_nodes=6",
    "/api/pipeline?schedule=interleaved-1f1b&stages=32&microbatches=256&virtual=4",
    "/api/pipeline?schedule=zb-h1&stages=32&microbatches=256",
    "/api/pipeline?stages=16&microbatches=64", "/api/plan?gpus=8", "/api/plan?gpus=64",
    "/api/plan?gpus=512", HEAVY.format(0.5)[:-len("0.500000000")]]


async def calibrate(server: Server) -> None:
    from app.lanes import estimate

    print(f"\n== calibrate: app/lanes.py's estimate beside the render's own time (load {load()})")
    client = Client(server.port)
    for target in CALIBRATE:
        path, _, query = target.partition("?")
        sep = "&" if query else "?"
        times, statuses = [], set()
        for i in range(3):  # made unique: a render each time
            unique = (f"{target}{0.5 + i / 1000:.9f}" if target.endswith("=") else
                      f"{target}{sep}matmul_efficiency={0.5 + i / 1000}" if "plan" in target
                      else f"{target}{sep}seq_len={4096 + 8 * (i + 1)}")
            status, headers, _, _ = await client.get(unique)
            statuses.add(status)
            timing = headers.get("server-timing", "")
            times.append(float(timing.split("dur=")[1].split(";")[0].split(",")[0]))
        cost = estimate(path, query.encode(), page=True)  # asked as a browser does
        print(f"  {target[:66]:66s} {sorted(statuses)} estimate {cost.ms:7.1f} ms "
              f"({cost.lane}); drawn in {statistics.median(times):7.1f} ms")
    client.close()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="flood,header,stalled,stuck,junk")
    parser.add_argument("--duration", type=float, default=20.0, help="s of the flood")
    parser.add_argument("--calibrate", action="store_true")
    args = parser.parse_args()
    server = Server({})
    print(f"python -m app on port {server.port}: worker {server.proc.pid}, render processes "
          f"{[(p, nice_of(p)) for p in server.children()]} (pid, nice); load {load()}")
    results = {}
    try:
        if args.calibrate:
            await calibrate(server)
            return 0
        steps = {"flood": lambda: flood(server, args.duration), "header": lambda: header(server),
                 "stalled": lambda: stalled(server), "stuck": lambda: stuck(server),
                 "junk": lambda: junk(server)}
        for name in args.only.split(","):
            results[name] = await steps[name]()
    finally:
        server.stop()
        print(f"\nserver log: {server.log.name}")
    print("\n" + ", ".join(f"{k}: {'PASS' if v else 'FAIL'}" for k, v in results.items()))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
