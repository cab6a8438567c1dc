"""No request blocks another: simulations run in worker threads, off the event loop, and a
lab result is computed once per canonical query. Synchronised with events, never sleeps."""

import asyncio
import threading

import pytest

import app.labkit.parsing as parse_module
import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS, parse
from app.labkit.parsing import CACHES, canonical

WAIT = 30  # seconds: only a bound so that a broken app fails instead of hanging the run


@pytest.fixture
def instrumented(monkeypatch):
    """Wraps the lab runner: records where it ran and lets a test hold it."""
    from app.response_cache import CACHE
    CACHE.clear()  # an answer sent before would come from the cache, without a run
    real = parse_module.run_cached
    seen = {"threads": [], "loop": [], "entered": threading.Semaphore(0),
            "release": threading.Event()}
    seen["release"].set()

    def wrapper(view, query):
        seen["threads"].append(threading.get_ident())
        try:
            asyncio.get_running_loop()
            seen["loop"].append(True)
        except RuntimeError:  # no running loop: a worker thread
            seen["loop"].append(False)
        seen["entered"].release()
        assert seen["release"].wait(WAIT)
        return real(view, query)

    monkeypatch.setattr(parse_module, "run_cached", wrapper)
    return seen


@pytest.mark.parametrize("url", ["/api/pipeline", "/episodes/pipeline", "/embed/pipeline/gantt",
                                 "/api/memory"])
def test_simulations_run_off_the_event_loop(client, instrumented, url):
    assert client.get(url, params={"microbatches": 12} if "pipeline" in url else {}).is_success
    assert instrumented["loop"] == [False]


def test_healthz_answers_while_four_large_simulations_are_in_flight(client, instrumented):
    instrumented["release"].clear()  # hold every simulation until /healthz has answered
    big = {"schedule": "interleaved-1f1b", "stages": 32, "microbatches": 256, "virtual": 4,
           "events": "none"}
    results: list[int] = []

    def fetch(k: int) -> None:
        results.append(client.get("/api/pipeline", params={**big, "f": 1 + k}).status_code)

    threads = [threading.Thread(target=fetch, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(4):  # all four are inside the lab runner, holding their workers
            assert instrumented["entered"].acquire(timeout=WAIT)
        assert client.get("/healthz").json() == {"status": "ok"}
        assert results == []  # none of the four had finished
    finally:
        instrumented["release"].set()
        for t in threads:
            t.join(WAIT)
    assert results == [200] * 4
    assert len(set(instrumented["threads"])) == 4  # four distinct worker threads


def test_a_result_is_computed_once_per_canonical_query():
    view = VIEWS["pipeline"]
    CACHES.pop("pipeline", None)
    first, _, _ = parse(view, [("stages", "6"), ("microbatches", "12")])
    # The same state spelt differently: defaults given, keys reordered.
    second, _, _ = parse(view, [("microbatches", "12"), ("schedule", "1f1b"), ("stages", "6")])
    assert canonical(first.query) == canonical(second.query)
    assert second.result is first.result  # from the cache, not a second simulation
    third, _, _ = parse(view, [("stages", "6"), ("microbatches", "13")])
    assert third.result is not first.result


def test_the_cache_is_bounded():
    view = VIEWS["memory"]
    CACHES.pop("memory", None)
    for dp in range(1, 40):
        parse(view, [("dp", str(dp)), ("model", "llama-3.1-8b")])
    assert len(CACHES["memory"].data) == parse_module.CACHE_SIZE
