"""The response cache (app/response_cache.py): bounded by count and bytes, keyed by every
request header that changes an answer, conditional GET, one render for simultaneous misses."""

import asyncio

import pytest

from app.main import app as lab_app
from app.response_cache import (
    CACHE,
    MAX_BYTES,
    MAX_ENTRIES,
    Entry,
    ResponseCache,
    ResponseCacheMiddleware,
    etag_of,
)
from tests.run_async import run_async

FRAGMENT = {"HX-Request": "true", "HX-Target": "memory-ledger"}


def entry(size: int) -> Entry:
    body = b"x" * size
    return Entry(200, ((b"content-type", b"text/html"),), body, etag_of(body))


def test_bounded_by_count():
    cache = ResponseCache(max_entries=4, max_bytes=10**9)
    for i in range(20):
        cache.put(("k", i), entry(10))
    assert len(cache.data) == 4
    assert list(cache.data) == [("k", i) for i in range(16, 20)]  # least recently used out


def test_bounded_by_bytes():
    cache = ResponseCache(max_entries=1000, max_bytes=10_000, max_entry_bytes=5_000)
    for i in range(50):
        cache.put(("k", i), entry(900))
    assert cache.bytes <= 10_000
    assert cache.bytes == sum(e.size for e in cache.data.values())
    assert 5 <= len(cache.data) < 50
    assert not cache.put(("big",), entry(6_000))  # larger than one entry may be
    assert ("big",) not in cache.data


def test_a_hit_moves_an_entry_to_the_back():
    cache = ResponseCache(max_entries=2, max_bytes=10**9)
    cache.put("a", entry(1))
    cache.put("b", entry(1))
    assert cache.get("a") is not None
    cache.put("c", entry(1))
    assert set(cache.data) == {"a", "c"}


def test_the_apps_cache_has_finite_bounds():
    assert CACHE.max_entries == MAX_ENTRIES > 0 and CACHE.max_bytes == MAX_BYTES > 0
    assert CACHE.max_entry_bytes <= CACHE.max_bytes


def test_the_apps_cache_stays_bounded_under_many_states(client, monkeypatch):
    CACHE.clear()
    monkeypatch.setattr(CACHE, "max_entries", 6)
    for i in range(20):
        assert client.get("/episodes/memory", params={"micro_batch": 1 + i % 32, "dp": 1 + i},
                          headers=FRAGMENT).status_code == 200
    assert len(CACHE.data) == 6
    monkeypatch.setattr(CACHE, "max_bytes", 3 * max(e.size for e in CACHE.data.values()))
    client.get("/episodes/memory", params={"dp": 99}, headers=FRAGMENT)
    assert CACHE.bytes <= CACHE.max_bytes and len(CACHE.data) <= 3


def test_a_repeat_is_a_hit_with_the_same_answer(client):
    CACHE.clear()
    first = client.get("/episodes/memory", params={"dp": 4}, headers=FRAGMENT)
    second = client.get("/episodes/memory", params={"dp": 4}, headers=FRAGMENT)
    assert 'desc="cache hit"' not in first.headers["server-timing"]
    assert 'desc="cache hit"' in second.headers["server-timing"]
    assert first.content == second.content and first.status_code == second.status_code == 200
    for name in ("content-security-policy", "vary", "cache-control", "etag", "content-type"):
        assert first.headers[name] == second.headers[name], name


@pytest.mark.parametrize("headers", [
    {},  # the whole page
    {"HX-Request": "true", "HX-Target": "bench"},  # the bench, controls included
    {"HX-Request": "true", "HX-Target": "memory-ledger"},  # the diagram alone
    {"HX-Request": "true", "HX-Target": "memory-ledger", "HX-History-Restore-Request": "true"},
])
def test_each_varying_header_gets_its_own_answer(client, headers):
    """Warm the cache with every variant first, then each must still get what the app
    renders for it fresh."""
    variants = [{}, {"HX-Request": "true", "HX-Target": "bench"},
                {"HX-Request": "true", "HX-Target": "memory-ledger"},
                {"HX-Request": "true", "HX-Target": "memory-ledger",
                 "HX-History-Restore-Request": "true"}]
    for other in variants:
        client.get("/episodes/memory", params={"dp": 2}, headers=other)
    cached = client.get("/episodes/memory", params={"dp": 2}, headers=headers)
    CACHE.clear()
    fresh = client.get("/episodes/memory", params={"dp": 2}, headers=headers)
    assert cached.content == fresh.content


def test_gzip_and_identity_are_apart(client):
    gz = client.get("/episodes/memory", params={"dp": 3}, headers={"Accept-Encoding": "gzip"})
    plain = client.get("/episodes/memory", params={"dp": 3},
                       headers={"Accept-Encoding": "identity"})
    again = client.get("/episodes/memory", params={"dp": 3},
                       headers={"Accept-Encoding": "gzip;q=0"})
    assert gz.headers.get("content-encoding") == "gzip"
    assert "content-encoding" not in plain.headers and "content-encoding" not in again.headers
    assert gz.text == plain.text == again.text  # httpx decodes the gzipped one


def test_the_host_spelled_in_embed_codes_is_part_of_the_key(client):
    one = client.get("/episodes/memory", headers={"Host": "lab-a.example"}).text
    two = client.get("/episodes/memory", headers={"Host": "lab-b.example"}).text
    assert "http://lab-a.example/embed/" in one and "lab-a.example" not in two
    assert "http://lab-b.example/embed/" in two


def test_conditional_get_answers_304(client):
    first = client.get("/episodes/memory", params={"dp": 5})
    etag = first.headers["etag"]
    again = client.get("/episodes/memory", params={"dp": 5}, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag and "content-security-policy" in again.headers
    other = client.get("/episodes/memory", params={"dp": 6}, headers={"If-None-Match": etag})
    assert other.status_code == 200 and other.headers["etag"] != etag


def test_refusals_are_cached_as_refusals(client):
    bad = {"dp": "0"}
    first = client.get("/api/memory", params=bad)
    second = client.get("/api/memory", params=bad)
    assert first.status_code == second.status_code == 422
    assert first.json() == second.json()
    assert second.headers["cache-control"] == "no-store"


def test_routes_that_are_not_pure_are_not_cached(client):
    for path in ("/healthz", "/api/models"):
        response = client.get(path)
        assert response.status_code == 200 and "etag" not in response.headers, path


def test_head_of_a_cached_answer_has_no_body(client):
    client.get("/api/memory", params={"dp": 7})
    head = client.head("/api/memory", params={"dp": 7})
    assert head.status_code == 200 and head.content == b""


def test_simultaneous_misses_render_once():
    """Five requests for one answer arriving together: the app renders it once."""
    renders, gate = [], asyncio.Event()

    async def counted(scope, receive, send):
        renders.append(scope["path"])
        await gate.wait()
        await lab_app(scope, receive, send)

    cache = ResponseCache()
    middleware = ResponseCacheMiddleware(counted, cacheable=lambda path: True, cache=cache)

    async def one():
        sent = []
        scope = {"type": "http", "method": "GET", "path": "/api/memory", "root_path": "",
                 "query_string": b"dp=12", "scheme": "http", "headers": [(b"host", b"t")],
                 "http_version": "1.1", "server": ("t", 80), "client": ("c", 1)}

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        await middleware(scope, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    async def main():
        tasks = [asyncio.create_task(one()) for _ in range(5)]
        for _ in range(5):
            await asyncio.sleep(0)  # let every request reach the middleware
        gate.set()
        return await asyncio.gather(*tasks)

    CACHE.clear()
    answers = run_async(main())
    assert renders == ["/api/memory"]
    assert len({a for a in answers}) == 1 and answers[0][0] == 200


# --- the result cache behind it (app/labkit/parsing.py) ----------------------------------------

def test_heavy_results_are_kept_two_at_a_time():
    from app.labkit.parsing import _LRU

    cache = _LRU(8, heavy_kept=2)
    for i in range(3):
        cache.put(("light", i), i)
    for i in range(5):
        cache.put(("heavy", i), i, heavy=True)
    assert [k for k in cache.data if k[0] == "heavy"] == [("heavy", 3), ("heavy", 4)]
    assert [k for k in cache.data if k[0] == "light"] == [("light", i) for i in range(3)]
    cache.put(("heavy", 3), 3)  # computed again, light this time: no longer counted
    assert cache.heavy == {("heavy", 4)}


def test_the_largest_pipelines_do_not_pile_up_in_the_result_cache():
    from app.labkit import VIEWS, parsing

    view = VIEWS["pipeline"]
    parsing.CACHES.pop("pipeline", None)
    for f in (2, 3, 4):
        state, errors, _ = parsing.parse(view, [
            ("schedule", "interleaved-1f1b"), ("stages", "32"), ("microbatches", "256"),
            ("virtual", "4"), ("f", str(f))])
        assert state is not None, errors
    cache = parsing.CACHES["pipeline"]
    assert len(cache.data) == parsing.HEAVY_KEPT == len(cache.heavy)


def test_an_asset_keeps_its_own_etag_once(client):
    from app.assets import asset_url

    path, query = asset_url("js/lab.js").split("?")
    first = client.get(path, params=dict([query.split("=")]))
    second = client.get(path, params=dict([query.split("=")]),
                        headers={"If-None-Match": first.headers["etag"]})
    assert first.headers.get_list("etag") == [first.headers["etag"]]
    assert first.headers["etag"].strip('"') == query.split("=")[1]  # the content hash
    assert second.status_code == 304 and 'desc="cache hit"' in second.headers["server-timing"]


# --- junk cannot empty it (issue 20) -----------------------------------------------------------

def hit(response) -> bool:
    return 'desc="cache hit"' in response.headers["server-timing"]


LESSON = [("/episodes/memory", {"dp": str(d)}, FRAGMENT) for d in range(1, 11)] + \
    [("/api/memory", {"seq_len": str(1024 * s)}, {}) for s in range(1, 11)]


def warm(client) -> None:
    for path, params, headers in LESSON:  # asked twice: the class shares it
        client.get(path, params=params, headers=headers)
        assert hit(client.get(path, params=params, headers=headers))


def test_a_protected_answer_outlives_any_number_of_one_off_answers():
    cache = ResponseCache(max_entries=10, max_bytes=10**9)
    for i in range(5):
        cache.put(("warm", i), entry(10))
        assert cache.get(("warm", i)) is not None
    for i in range(1000):
        cache.put(("junk", i), entry(10))
    assert all(("warm", i) in cache.data for i in range(5))
    assert len(cache.data) == 10 and len(cache.protected) == 5


def test_the_protected_segment_is_bounded_too():
    cache = ResponseCache(max_entries=10, max_bytes=10**9)
    for i in range(30):
        cache.put(("k", i), entry(10))
        cache.get(("k", i))
    assert len(cache.protected) == 8 and len(cache.data) == 10  # PROTECTED_SHARE of 10
    cache = ResponseCache(max_entries=100, max_bytes=10_000)
    for i in range(30):
        cache.put(("k", i), entry(900))
        cache.get(("k", i))
    assert cache.protected_bytes <= 8_000 and cache.bytes <= 10_000
    assert cache.bytes == sum(e.size for e in cache.data.values())


def test_junk_asset_queries_are_one_entry(client):
    """105 requests for plotly.js with a junk ?v= emptied a warmed cache: each was an entry."""
    from app.assets import asset_url

    CACHE.clear()
    warm(client)
    path = asset_url("vendor/plotly.min.js").split("?")[0]
    first = client.get(path, params={"v": "junk0"})
    for i in range(1, 105):
        again = client.get(path, params={"v": f"junk{i}"})
        assert again.content == first.content and hit(again)
    assert first.headers["cache-control"] == "public, max-age=0, must-revalidate"
    right = client.get(asset_url("vendor/plotly.min.js"))
    assert right.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert sum(1 for key in CACHE.data if key[0] == path) == 2
    assert all(hit(client.get(p, params=q, headers=h)) for p, q, h in LESSON)


@pytest.mark.parametrize("target", ["junk", "memory-ledger", '"><b>', ""])
def test_hx_target_values_that_select_nothing_share_the_fragment(client, target):
    CACHE.clear()
    fragment = client.get("/episodes/memory", params={"dp": 3}, headers=FRAGMENT)
    other = client.get("/episodes/memory", params={"dp": 3},
                       headers={"HX-Request": "true", "HX-Target": target})
    assert hit(other) and other.content == fragment.content
    CACHE.clear()
    fresh = client.get("/episodes/memory", params={"dp": 3},
                       headers={"HX-Request": "true", "HX-Target": target})
    assert fresh.content == fragment.content  # what the app renders for it anyway


def test_json_answers_ignore_host_and_htmx_headers(client):
    CACHE.clear()
    first = client.get("/api/memory", params={"dp": 9})
    for i in range(20):
        again = client.get("/api/memory", params={"dp": 9},
                           headers={"Host": f"junk{i}.example", "HX-Request": "true",
                                    "HX-Target": f"t{i}"})
        assert hit(again) and again.content == first.content
    assert len(CACHE.data) == 1


def test_one_off_variants_leave_the_warmed_answers_cached(client, monkeypatch):
    """Unique junk queries and Host values (each a real render and an entry) on a cache with
    room for a tenth of them: every answer the class asked for twice is still a hit."""
    CACHE.clear()
    monkeypatch.setattr(CACHE, "max_entries", 40)
    warm(client)
    for i in range(400):
        junk = client.get("/episodes/memory", params={"junk": i},
                          headers={"Host": f"h{i % 7}.example"})
        assert junk.status_code == 200
    assert len(CACHE.data) == 40
    assert all(hit(client.get(p, params=q, headers=h)) for p, q, h in LESSON)


def test_a_long_query_is_answered_but_not_kept(client):
    from app.response_cache import MAX_QUERY_BYTES

    CACHE.clear()
    long = {"dp": "4", "junk": "x" * MAX_QUERY_BYTES}
    assert client.get("/api/memory", params=long).status_code == 200
    assert not hit(client.get("/api/memory", params=long)) and not CACHE.data
