"""Benchmark: server time per fragment, and fragment throughput under a bounded local load.

Run: ``python tests/benchmarks/bench.py`` (starts its own uvicorn on a free port of
127.0.0.1 and stops it). For each fragment (an htmx slider move) it reports the app's own
time from the ``Server-Timing`` header, median and p99 over sequential requests, then the
throughput under a bounded load (wrk if installed, else a Python client), beside the bare
``/healthz`` endpoint measured in the same run. It also times the engines in-process.
Timings live here, not in tests.
"""

from __future__ import annotations

import argparse
import http.client
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.episodes import BY_LAB  # noqa: E402
from tests.conftest import free_port  # noqa: E402

MEMORY, PIPELINE = BY_LAB["memory"], BY_LAB["pipeline"]
FRAGMENTS = {
    f"{MEMORY.code} memory, slider move": MEMORY.path + "?model=llama-3.1-70b&micro_batch={i}&dp=8",
    f"{MEMORY.code} memory, JSON": "/api/memory?model=llama-3.1-70b&micro_batch={i}&dp=8",
    f"{PIPELINE.code} pipeline 8 stages, slider move": PIPELINE.path + "?stages=8&microbatches={i}",
    f"{PIPELINE.code} pipeline 16x128 v4 (raster)": (
        PIPELINE.path + "?schedule=interleaved-1f1b&stages=16&microbatches=128&virtual=4&f={i}"),
    f"{BY_LAB['data_parallel'].code} data-parallel, bucketed, uncached": (
        BY_LAB["data_parallel"].path + "?gpus=64&link=ib-ndr&overlap=bucketed&global_batch={i}"),
}
BARE = "/healthz"


def registry_fragments() -> dict[str, str]:
    """Every registered lab's good and bad case as a fragment: the same query each time, so
    these measure rendering from the result cache."""
    import app.main  # noqa: F401  (registers every lab view)
    from app.labkit import VIEWS

    out = {}
    for view in VIEWS.values():
        for kind, case in (("good", view.good), ("bad", view.bad)):
            if case:
                out[f"{view.episode.code} {view.name} {kind} case (cached)"] = (
                    f"{view.episode.url}?{case.query_string}".replace("{", "{{")
                    .replace("}", "}}"))
    return out
# The largest pipeline answer the engine admits (p*m*v*2 = MAX_EVENTS), for the blocking check.
BIGGEST = ("/api/pipeline?schedule=interleaved-1f1b&stages=32&microbatches=256&virtual=4"
           "&f={i}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def server_times(port: int, path: str, n: int) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    out = []
    for i in range(n):
        conn.request("GET", path.format(i=1 + i % 16), headers={"HX-Request": "true"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200, (path, response.status)
        timing = response.getheader("server-timing")
        out.append(float(re.search(r"dur=([\d.]+)", timing).group(1)))
    conn.close()
    return out


def load_wrk(port: int, path: str, seconds: int, connections: int) -> float:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-H", "HX-Request: true",
         f"http://127.0.0.1:{port}{path.format(i=4)}"],
        capture_output=True, text=True, check=True, timeout=seconds + 30,
    ).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def load_python(port: int, path: str, seconds: int, connections: int) -> float:
    stop = time.monotonic() + seconds
    counts = [0] * connections

    def worker(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        while time.monotonic() < stop:
            conn.request("GET", path.format(i=4), headers={"HX-Request": "true"})
            conn.getresponse().read()
            counts[k] += 1
        conn.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / seconds


def fetch(port: int, path: str, headers: dict | None = None) -> tuple[float, int, int]:
    """(wall ms, status, body bytes) of one request on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.perf_counter()
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    body = response.read()
    elapsed = (time.perf_counter() - t0) * 1e3
    conn.close()
    return elapsed, response.status, len(body)


BIG_CLIENT = """
import http.client, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
conn.request("GET", sys.argv[2], headers={"Accept-Encoding": "gzip"})
conn.getresponse().read()
"""


def blocking(port: int, rounds: int = 5) -> None:
    """The largest /api/pipeline answer (time, size), then /healthz latency while four of
    them (each a distinct query, so none is a cache hit) are in flight."""
    for events in ("rows", "columns", "none"):
        ms, status, size = fetch(port, BIGGEST.format(i=1) + f"&events={events}")
        print(f"largest /api/pipeline events={events:8} {ms:8.1f} ms  {size:>10,} bytes  "
              f"(status {status})")
    idle = sorted(fetch(port, BARE)[0] for _ in range(50))
    print(f"/healthz idle: median {statistics.median(idle):.1f} ms, worst {idle[-1]:.1f} ms")
    worst, medians = [], []
    for r in range(rounds):
        # The four big requests come from other processes, so that reading their answers
        # does not compete with the probe for this process's GIL.
        clients = [
            subprocess.Popen([sys.executable, "-c", BIG_CLIENT, str(port),
                              BIGGEST.format(i=2 + 4 * r + k)])
            for k in range(4)
        ]
        time.sleep(0.1)  # let the four big requests reach the server first
        probes = []
        while any(c.poll() is None for c in clients):
            probes.append(fetch(port, BARE)[0])
        for c in clients:
            c.wait()
        if probes:
            worst.append(max(probes))
            medians.append(statistics.median(probes))
    print("/healthz while 4 largest /api/pipeline run, per round (ms): median "
          f"{', '.join(f'{m:.1f}' for m in medians)}; worst {', '.join(f'{w:.1f}' for w in worst)}")


def engine_times() -> list[tuple[str, float, float]]:
    from app.charts.pipeline import activations_figure, gantt_figure
    from labs.schedules.inputs import PipelineInput
    from labs.schedules.simulate import simulate

    rows = []
    cases = {
        "pipeline p=32 m=256 v=4 interleaved (simulate)": PipelineInput(
            schedule="interleaved-1f1b", stages=32, microbatches=256, virtual=4),
        "pipeline p=8 m=32 1f1b (simulate)": PipelineInput(stages=8, microbatches=32),
    }
    for name, inp in cases.items():
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            result = simulate(inp)
            times.append((time.perf_counter() - t0) * 1e3)
        rows.append((name, statistics.median(times), max(times)))
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            gantt_figure(result)
            activations_figure(result)
            times.append((time.perf_counter() - t0) * 1e3)
        rows.append((name.replace("(simulate)", "(charts)"), statistics.median(times), max(times)))
    rows.append(ledger_time())
    rows.append(failures_time())
    rows.append(recipe_time())
    rows.append(planner_time())
    rows.append(planner_time("gpt-3-175b", 2048, 2048, 1536))  # Megatron-LM's GPT-3 batch
    # Fine-grained MoE as their teams ran them (tests/labs/test_moe_runs.py): NVIDIA's zoo,
    # and DeepSeek-V3 with its FP8 recipe, DeepEP and DualPipe's overlap.
    rows.append(planner_time("qwen3-235b-a22b", 256, 4096, 2048,
                             software=(("ep_dispatch", "deepep"),)))
    rows.append(planner_time("deepseek-v3", 2048, 4096, 15360, cluster="hgx-h800",
                             precision="fp8-blockwise",
                             software=(("ep_dispatch", "deepep"), ("ep_overlap", True))))
    return rows


def ledger_time() -> tuple[str, float, float]:
    """The memory ledger's worst common case: 61 pipeline ranks, each with its own bill."""
    from labs.hardware.gpus import get_gpu
    from labs.memory.inputs import MemoryInput
    from labs.memory.lab import compute_memory
    from labs.model.presets import get_model

    inp = MemoryInput(model=get_model("deepseek-v3"), gpu=get_gpu("h100-sxm"), tp=8, pp=61,
                      dp=8, ep=64, zero=1)
    times = []
    for _ in range(21):
        t0 = time.perf_counter()
        compute_memory(inp)
        times.append((time.perf_counter() - t0) * 1e3)
    return ("ledger DeepSeek-V3 TP8 PP61 DP8 EP64 (compute_memory)", statistics.median(times),
            max(times))


def failures_time() -> tuple[str, float, float]:
    """One new EP11 answer (run, JSON and figures: 72 intervals and 9 cluster sizes x 3 saves
    at Daly's interval), a new interval each time so no result is reused."""
    from app.routers import failures as router

    times = []
    for interval in range(600, 621):
        t0 = time.perf_counter()
        result = router.run(router.FailuresQuery(interval=interval))
        router.to_api(result)
        router.figures(result)
        times.append((time.perf_counter() - t0) * 1e3)
    return ("failures 405B on 16,384 GPUs (run, JSON, figures)", statistics.median(times),
            max(times))


def recipe_time() -> tuple[str, float, float]:
    """One new EP08 answer (the seed plan, a new micro-batch count each time: run, JSON and
    figures) with the recipe's evaluation cache cleared; "max" is the first, every cache of
    the labs cold (the op-level step model's kernel and collective caches included)."""
    import labs.recipe.lab as recipe
    from app.routers import recipe as router

    seed = dict(model="gpt-3-175b", gpu="a100-80gb", nodes=8, gpus_per_node=8, tp=8, pp=4,
                dp=2, zero=1, seq_len=2048)

    def answer(m: int) -> None:
        state = router.run(router.RecipeQuery(**seed, microbatches=m))
        router.to_api(state)
        router.figures(state)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("labs."):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()
    t0 = time.perf_counter()
    answer(16)
    cold = (time.perf_counter() - t0) * 1e3
    times = []
    for m in range(17, 57):
        recipe._evaluate.cache_clear()
        recipe.ledger.cache_clear()
        t0 = time.perf_counter()
        answer(m)
        times.append((time.perf_counter() - t0) * 1e3)
    return ("recipe answer, GPT-3 seed, new plan (run + JSON + figures)",
            statistics.median(times), cold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--blocking-only", action="store_true",
                        help="only the largest-answer and /healthz-under-load measurement")
    args = parser.parse_args()

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log"], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                server_times(port, BARE, 1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        blocking(port)
        if args.blocking_only:
            return
        load = load_wrk if shutil.which("wrk") else load_python
        print(f"load generator: {'wrk' if load is load_wrk else 'python threads'}, "
              f"{args.connections} connections, {args.seconds} s each")
        print(f"{'endpoint':44} {'median ms':>10} {'p99 ms':>8} {'req/s':>8}")
        for name, path in {**FRAGMENTS, **registry_fragments(),
                           "bare FastAPI /healthz": BARE}.items():
            server_times(port, path, 20)  # warm up
            times = server_times(port, path, args.requests)
            rps = load(port, path, args.seconds, args.connections)
            print(f"{name:44} {statistics.median(times):10.2f} "
                  f"{percentile(times, 0.99):8.2f} {rps:8.0f}")
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"\n{'engine (in-process)':55} {'median ms':>10} {'max ms':>8}")
    for name, median, worst in engine_times():
        print(f"{name:55} {median:10.2f} {worst:8.2f}")


def planner_time(model: str = "llama-3.1-405b", gpus: int = 16_384, seq_len: int = 8192,
                 global_batch: int = 2048, cluster: str = "dgx-h100", precision: str = "adam16",
                 software: tuple = ()) -> tuple[str, float, float]:
    """EP08's auto-planner, the issue's case by default: Llama 3.1 405B on 16,384 H100s (2,048
    DGX nodes), sequence 8192, global batch 2048 (Llama 3's 16M tokens). The first search
    runs cold (the labs' caches cleared: no bubble, ledger or evaluation kept), "max" is
    that run; the median is over the warm ones after it."""
    from labs.hardware import kernels, nccl
    from labs.hardware.links import get_cluster
    from labs.model import head, ops
    from labs.model.presets import get_model
    from labs.parallel import layer_time
    from labs.recipe import bounds as plan_bounds
    from labs.recipe import inputs as recipe_inputs
    from labs.recipe import lab as recipe
    from labs.recipe import stage_time
    from labs.recipe import step_time as recipe_time
    from labs.recipe.planner import PlanRequest, search
    from labs.schedules import stages as placement

    for cached in (recipe._evaluate, recipe.ledger, recipe._schedule_run,
                   recipe_time.spread, recipe_time.stage_times, placement.stage_params,
                   stage_time.layer_kinds, stage_time._stage_layer_counts,
                   plan_bounds._distinct_stages, plan_bounds._first_stage_activations,
                   layer_time.layer_time, ops.layer_ops, head.head_ops, kernels.gemm_time,
                   kernels.flash_time, nccl.nccl_time, recipe_inputs._step_options):
        cached.cache_clear()
    req = PlanRequest(get_model(model), get_cluster(cluster), gpus, seq_len, global_batch,
                      recipe=precision, software=software)
    times = []
    for _ in range(6):
        t0 = time.perf_counter()
        search(req)
        times.append((time.perf_counter() - t0) * 1e3)
    return (f"planner {model} on {gpus:,} {req.cluster.gpu.name}, batch {global_batch} "
            f"(search)",
            statistics.median(times[1:]), times[0])


if __name__ == "__main__":
    main()
