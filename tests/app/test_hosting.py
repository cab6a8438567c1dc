"""Hosting a class: settings from the environment, the whole site under BASE_PATH, embed codes
from PUBLIC_URL, framing by EMBED_ALLOWED_ORIGINS, HIDE_ANSWERS, bounded caches, and the
compose file and proxy config of docs/hosting.md."""

import html
import importlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

import app
import app.main  # noqa: F401  (registers every lab view)
import labs
from app.labkit import DRILLS, VIEWS
from app.limits import MAX_BODY_BYTES, MAX_HEAD_BYTES
from app.settings import ServerSettings, Settings, SettingsError
from tests.conftest import running_app

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = "https://lab.example.edu"
LMS = "https://lms.example.edu"
ENV = {"BASE_PATH": "/lab", "PUBLIC_URL": PUBLIC, "EMBED_ALLOWED_ORIGINS": LMS,
       "HIDE_ANSWERS": "1"}
VARIANTS = 3  # states a crawled page is read in
ATTRS = re.compile(r'\s(href|src|action|hx-get|data-openapi-url)="([^"]*)"')


# --- settings ------------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "expected"), [
    ("", ""), ("/", ""), ("/lab", "/lab"), ("lab/", "/lab"), ("/course/lab-2", "/course/lab-2")])
def test_base_path_is_normalised(given, expected):
    assert Settings.from_env({"BASE_PATH": given}).base_path == expected


@pytest.mark.parametrize(("name", "value"), [
    ("BASE_PATH", "/lab?x=1"), ("BASE_PATH", '/a"b'), ("PUBLIC_URL", "lab.example.edu"),
    ("PUBLIC_URL", "https://lab.example.edu/lab"), ("PUBLIC_URL", "javascript:alert(1)"),
    ("EMBED_ALLOWED_ORIGINS", "https://ok.example 'unsafe-inline'"),
    ("EMBED_ALLOWED_ORIGINS", "https://a.example; script-src *"),
    ("RENDER_PROCESSES", "-1"), ("RENDER_PROCESSES", "two"), ("RENDER_PROCESSES", "33"),
    # issue 20: a path that climbs, digits of another script, a flag misspelt
    ("BASE_PATH", "/lab/../x"), ("BASE_PATH", "/lab/./x"), ("BASE_PATH", ".."),
    ("RENDER_PROCESSES", "\u0661"), ("RENDER_PROCESSES", "\u00b2"), ("RENDER_PROCESSES", "1_0"),
    ("RENDER_PROCESSES", "+1"), ("HIDE_ANSWERS", "ture"), ("HIDE_ANSWERS", "2"),
    ("PUBLIC_URL", "https://user@evil.example"), ("PUBLIC_URL", "https://a.example#x"),
    ("PUBLIC_URL", "https://a b.example"), ("RENDER_TIMEOUT", "0"), ("RENDER_TIMEOUT", "1.5"),
    ("CLIENT_TIMEOUT", "x"), ("CLIENT_TIMEOUT", "\u0665"), ("RESPONSE_CACHE_MB", "7"),
    ("RESPONSE_CACHE_MB", "4097"), ("RESPONSE_CACHE_MB", "1e3")])
def test_bad_settings_are_refused_by_name(name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value})


@pytest.mark.parametrize(("name", "value"), [
    ("PORT", "abc"), ("PORT", "0"), ("PORT", "65536"), ("PORT", "\u0668\u0660\u0660\u0660"),
    ("WORKERS", "abc"), ("WORKERS", "0"), ("WORKERS", "1.0"), ("HOST", "a b"),
    ("HOST", "127.0.0.1; rm"), ("LOG_LEVEL", "loud")])
def test_bad_server_settings_are_refused_by_name(name, value):
    with pytest.raises(SettingsError, match=name):
        ServerSettings.from_env({name: value})


def test_server_settings_defaults():
    assert ServerSettings.from_env({}) == ServerSettings("127.0.0.1", 8000, 1, "info")
    assert ServerSettings.from_env({"HOST": "0.0.0.0", "PORT": " 9000 ", "WORKERS": "2",
                                    "LOG_LEVEL": "WARNING"}) == \
        ServerSettings("0.0.0.0", 9000, 2, "warning")
    assert ServerSettings.from_env({"HOST": "::"}).host == "::"


@pytest.mark.parametrize(("name", "value"), [("PORT", "abc"), ("WORKERS", "abc"),
                                             ("RENDER_PROCESSES", "\u0661"),
                                             ("BASE_PATH", "/lab/../x")])
def test_python_m_app_stops_with_a_message_naming_the_variable(name, value):
    done = subprocess.run([sys.executable, "-m", "app"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, name: value})
    assert done.returncode == 1
    assert done.stderr.startswith(f"parallelism-lab: {name}") and "Traceback" not in done.stderr


def test_settings_defaults_and_lists():
    assert Settings.from_env({}) == Settings("", "", ("*",), False, 2, 10, 10)
    assert Settings.from_env({"HIDE_ANSWERS": "off"}).hide_answers is False
    assert Settings.from_env({"RENDER_PROCESSES": " 0 "}).render_processes == 0
    assert Settings.from_env({}).response_cache_mb == 192
    assert Settings.from_env({"RESPONSE_CACHE_MB": "8"}).response_cache_mb == 8
    s = Settings.from_env({"EMBED_ALLOWED_ORIGINS": "https://a.example, https://b.example:8443",
                           "HIDE_ANSWERS": "true", "PUBLIC_URL": "https://x.example/"})
    assert s.embed_allowed_origins == ("https://a.example", "https://b.example:8443")
    assert s.hide_answers and s.public_url == "https://x.example"


# --- the app under BASE_PATH=/lab -----------------------------------------------------------

def fetch(url: str, headers: dict | None = None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return (response.status, {k.lower(): v for k, v in response.headers.items()},
                    response.read().decode())
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read().decode()


@pytest.fixture(scope="module")
def lab():
    with running_app(ENV, probe="/lab/healthz") as origin:
        yield origin


def links(text: str) -> list[tuple[str, str]]:
    text = re.sub(r"<textarea[^>]*>.*?</textarea>", "", text, flags=re.S)  # embed codes
    return [(attr, html.unescape(value)) for attr, value in ATTRS.findall(text)]


def test_every_page_link_asset_and_htmx_call_is_under_the_base_path(lab):
    """Crawls the lab under /lab: every link of every page reached must carry the base path,
    and each distinct fragment, asset and page it names must answer. A page is read in at most
    ``VARIANTS`` states (its links do not change in kind with the state), each distinct htmx
    fragment and asset is fetched once."""
    seen, queue, checked, fetched = set(), ["/lab/"], 0, set()
    variants: dict[str, int] = defaultdict(int)
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        status, headers, text = fetch(lab + path)
        assert status == 200, (path, status, text[:200])
        if not headers.get("content-type", "").startswith("text/html"):
            continue
        for attr, value in links(text):
            if value.startswith(("#", "data:", "blob:", "mailto:")) or not value:
                continue
            assert value.startswith("/lab/"), (path, attr, value)
            checked += 1
            target = urlsplit(value)
            if attr == "hx-get" and value not in fetched:  # the fragment htmx fetches
                fetched.add(value)
                status, _, _ = fetch(lab + value, {"HX-Request": "true"})
                assert status in (200, 422), (path, value)
            if attr in ("href", "action", "hx-get") and target.path.startswith(
                    ("/lab/episodes/", "/lab/embed/", "/lab/drills/", "/lab/docs")):
                page = target.path + (f"?{target.query}" if target.query else "")
                if page not in seen and variants[target.path] < VARIANTS:
                    variants[target.path] += 1
                    queue.append(page)
            elif (attr == "src" or attr == "data-openapi-url") and value not in fetched:
                fetched.add(value)
                assert fetch(lab + value)[0] == 200, value
    for view in VIEWS.values():
        assert f"/lab/episodes/{view.episode.slug}" in seen
        for d in view.diagrams:
            assert any(p.startswith(f"/lab/embed/{view.name}") for p in seen) or d
    assert checked > 50


def test_bare_base_path_redirects_and_a_stripping_proxy_works(lab):
    request = urllib.request.Request(lab + "/lab", method="GET")
    opener = urllib.request.build_opener(type("NoRedirect", (urllib.request.HTTPRedirectHandler,),
                                              {"redirect_request": lambda *a: None}))
    with pytest.raises(urllib.error.HTTPError) as err:
        opener.open(request)
    assert err.value.code == 308 and err.value.headers["location"] == "/lab/"
    # A proxy that strips the prefix: the same routes answer, and links still carry /lab.
    status, _, text = fetch(lab + "/episodes/memory")
    assert status == 200 and 'href="/lab/"' in text


def test_a_redirect_never_spells_the_requests_host(lab):
    """Issue 20: Starlette's trailing-slash redirect was built from the Host header."""
    opener = urllib.request.build_opener(type("NoRedirect", (urllib.request.HTTPRedirectHandler,),
                                              {"redirect_request": lambda *a: None}))
    for path, to in (("/lab/episodes/memory/", "/lab/episodes/memory"),
                     ("/lab/api/memory/?dp=2", "/lab/api/memory?dp=2")):
        request = urllib.request.Request(lab + path, headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as err:
            opener.open(request)
        assert 300 <= err.value.code < 400
        assert err.value.headers["location"] == PUBLIC + to


def test_openapi_and_docs_carry_the_base_path(lab):
    _, _, text = fetch(lab + "/lab/openapi.json")
    assert json.loads(text)["servers"] == [{"url": "/lab"}]
    _, _, text = fetch(lab + "/lab/docs")
    assert 'data-openapi-url="/lab/openapi.json"' in text


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_embed_codes_spell_public_url_whatever_the_host(lab, name):
    view = VIEWS[name]
    _, _, text = fetch(lab + f"/lab/episodes/{view.episode.slug}", {"Host": "evil.example"})
    codes = html.unescape(" ".join(re.findall(r"<textarea[^>]*>(.*?)</textarea>", text, re.S)))
    srcs = re.findall(r'<iframe src="([^"]+)"', codes)
    assert srcs and all(s.startswith(f"{PUBLIC}/lab/embed/{name}") for s in srcs), srcs
    assert f'e.origin!=="{PUBLIC}"' in codes
    assert "evil.example" not in text
    for src in srcs:  # each embed code's URL answers, framed only from the LMS
        status, headers, _ = fetch(lab + src[len(PUBLIC):])
        assert status == 200
        assert headers["content-security-policy"].endswith(f"frame-ancestors {LMS}")


def test_diagram_list_spells_public_url(lab):
    _, _, text = fetch(lab + "/lab/api/diagrams", {"Host": "evil.example"})
    entries = json.loads(text)
    assert len(entries) == sum(len(v.diagrams) for v in VIEWS.values())
    for entry in entries:
        for key in ("page_url", "embed_url", "api_url"):
            assert entry[key].startswith(PUBLIC + "/lab/"), entry
            assert fetch(lab + entry[key][len(PUBLIC):])[0] == 200


def wrong_answer(drill_id: str) -> str:
    """A wrong try: an absurd number, or a decide drill's wrong choice (as the lab judges)."""
    _, drill = DRILLS[drill_id]
    if drill.kind != "decide":
        return "-1e30"
    return next(o.key for o in drill.judge() if not o.right)


@pytest.mark.parametrize("drill_id", sorted(DRILLS))
def test_hidden_answers_are_never_revealed(lab, drill_id):
    wrong = wrong_answer(drill_id)
    for attempt in (1, 2, 3, 50):
        _, _, text = fetch(lab + f"/lab/api/drills/{drill_id}?answer={wrong}&attempt={attempt}")
        outcome = json.loads(text)
        assert outcome["status"] == "hint" and outcome["answer"] is None, outcome
        # A decide drill says why the choice made is wrong, and nothing of the others.
        assert [f["key"] for f in outcome["feedback"]] in ([], [wrong]), outcome
    _, _, page = fetch(lab + f"/lab/drills/{drill_id}?answer={wrong}&attempt=2")
    assert "The answer is" not in page


# --- drills and caches, in process ------------------------------------------------------------

@pytest.mark.parametrize("drill_id", sorted(DRILLS))
def test_a_wrong_format_answer_uses_no_try(client, drill_id):
    text = client.get(f"/drills/{drill_id}", params={"answer": "twelve", "attempt": 1},
                      headers={"HX-Request": "true"}).text
    assert re.search(r'name="attempt" value="1"', text)
    text = client.get(f"/drills/{drill_id}", params={"answer": wrong_answer(drill_id),
                                                     "attempt": 1},
                      headers={"HX-Request": "true"}).text
    assert re.search(r'name="attempt" value="2"', text)


def cached_functions():
    """Every functools cache in app/ and labs/ whose function takes arguments."""
    found = {}
    for package in (app, labs):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for obj in vars(module).values():
                wrapped = getattr(obj, "__wrapped__", None)
                if hasattr(obj, "cache_info") and wrapped and inspect.signature(wrapped).parameters:
                    found[f"{wrapped.__module__}.{wrapped.__qualname__}"] = obj
    return sorted(found.items())


# Unbounded on purpose: the key ranges over a fixed set (asset names; option styles).
FINITE = {"app.assets._cached", "app.options.model_options"}


# Ids by name alone: a function's repr carries its address, which differs between processes
# (pytest-xdist's workers must collect the same ids).
@pytest.mark.parametrize(("name", "func"), cached_functions(),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_every_cache_is_bounded(name, func):
    assert name in FINITE or func.cache_parameters()["maxsize"] is not None, name


def test_the_result_caches_stay_bounded(client):
    from app.labkit.parsing import CACHE_SIZE, CACHES
    for i in range(CACHE_SIZE * 3):
        client.get("/api/memory", params={"params": f"{7e9 + i * 1e6:.0f}"})
    assert all(len(cache.data) <= CACHE_SIZE for cache in CACHES.values())


# --- compose.yaml and deploy/Caddyfile --------------------------------------------------------

def caddy_blocks(text: str) -> list[tuple[int, str]]:
    """(depth, line) for each directive of a Caddyfile; fails on unbalanced braces."""
    depth, out = 0, []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.strip().startswith("#") else ""
        if not line:
            continue
        if line == "}":
            depth -= 1
            assert depth >= 0, raw
            continue
        out.append((depth, line))
        if line.endswith("{"):
            depth += 1
    assert depth == 0, "unbalanced braces"
    return out


def test_compose_replicates_the_lab_behind_caddy_under_the_base_path():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    lab, proxy = services["lab"], services["proxy"]
    assert lab["deploy"]["replicas"] >= 2
    assert lab["environment"]["WORKERS"] == "1"
    assert "ports" not in lab  # reached through the proxy only
    assert set(proxy["depends_on"]) <= set(services)
    for volume in proxy["volumes"]:
        source = volume.split(":")[0]
        assert source in compose.get("volumes", {}) or (ROOT / source).exists(), volume
    base = lab["environment"]["BASE_PATH"]
    assert Settings.from_env({"BASE_PATH": base}).base_path == base == "/lab"
    # The live class's database: one postgres service with a volume, every replica on it.
    postgres = services["postgres"]
    assert postgres["volumes"][0].split(":")[0] in compose["volumes"]
    assert lab["depends_on"]["postgres"]["condition"] == "service_healthy"
    url = Settings.from_env({"DATABASE_URL": lab["environment"]["DATABASE_URL"]}).database_url
    assert url.startswith("postgresql+psycopg://lab:") and url.endswith("@postgres:5432/lab")
    assert (ROOT / lab["build"] / "Dockerfile").exists()

    caddy = caddy_blocks((ROOT / "deploy/Caddyfile").read_text())
    lines = [line for _, line in caddy]
    assert f"handle {base}/* {{" in lines
    assert f"redir {base} {base}/ 308" in lines
    assert "name lab" in lines and "port 8000" in lines  # every replica, by Docker DNS
    assert not any(line.startswith(("uri strip_prefix", "handle_path")) for line in lines)
    # The proxy bounds requests as each replica does (app/limits.py, app/settings.py).
    timeout = f"{Settings().client_timeout}s"
    assert {f"read_header {timeout}", f"read_body {timeout}",
            f"max_header_size {MAX_HEAD_BYTES // 1024}KiB",
            f"max_size {MAX_BODY_BYTES // 1024}KiB"} <= set(lines)


ORIGIN_SCOPES = [  # (scheme, first Host header, server)
    ("http", "127.0.0.1:8000", ("127.0.0.1", 8000)), ("http", None, ("127.0.0.1", 80)),
    ("https", None, ("::1", 8443)), ("http", "evil.example:99999", ("10.0.0.1", 8000)),
    ("http", "a.example:80", None), ("https", "[::1]:443", ("x", 1)), ("http", "h/x?y", ("s", 2)),
    ("http", None, None),
]


@pytest.mark.parametrize(("scheme", "host", "server"), ORIGIN_SCOPES)
def test_an_embed_codes_origin_is_its_requests_own(client, scheme, host, server):
    """Without PUBLIC_URL, embed codes spell the request's origin as Starlette's request.url
    does (app/labkit/render.py request_origin, kept per scheme, Host and server since issue
    31: no other request's origin, whatever was asked before)."""
    from starlette.requests import Request

    from app.labkit.render import public_origin

    scope = {"type": "http", "scheme": scheme, "server": server, "path": "/episodes/memory",
             "query_string": b"tp=2&pp=4",
             "headers": [(b"host", host.encode())] if host else []}
    expected = f"{Request(scope).url.scheme}://{Request(scope).url.netloc}"
    for asked in ORIGIN_SCOPES:  # each other origin asked first
        other = {**scope, "scheme": asked[0], "server": asked[2],
                 "headers": [(b"host", asked[1].encode())] if asked[1] else []}
        public_origin(Request(other))
        assert public_origin(Request(scope)) == expected
    from app.response_cache import CACHE

    CACHE.clear()
    text = client.get("/episodes/memory", headers={"Host": "b.example:8123"}).text
    assert 'src="http://b.example:8123/embed/memory' in text
