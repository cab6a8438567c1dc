"""The FastAPI application: one router per lab, joined here (FastAPI "Bigger Applications")."""

import gc
import importlib
import sys
from contextlib import asynccontextmanager
from types import ModuleType

import anyio.to_thread
from fastapi import FastAPI
from fastapi.middleware.gzip import GZipMiddleware

from app import assets, docs
from app.classroom import db as class_db
from app.classroom import router as classroom
from app.episodes import EPISODES
from app.labkit import DRILLS, VIEWS
from app.labkit.routes import GZIP_LEVEL, GZIP_MIN
from app.limits import QuietDisconnects
from app.render_pool import POOL
from app.response_cache import ResponseCacheMiddleware
from app.routers import home, models, presets
from app.security import SecurityHeadersMiddleware
from app.settings import SETTINGS
from app.templating import compile_templates
from app.timing import ServerTimingMiddleware

DESCRIPTION = """
Every diagram of Parallelism Lab answers as JSON here, with the same query names as the
page's controls. Sizes are bytes and times are seconds. Out-of-range or inconsistent
controls answer 422 with the field named in `detail[].loc`.
"""


# Simulations run in worker threads and hold the GIL in pure Python; the event loop thread
# gets it back at most this often. CPython's default, 5 ms, lets four busy workers delay a
# /healthz answer by hundreds of ms (each I/O step of the loop waits for the GIL again);
# 1 ms keeps it in tens (tests/benchmarks/bench.py, "--blocking-only").
SWITCH_INTERVAL = 0.001


# Handlers that simulate and render run in worker threads; they hold the GIL in pure Python,
# so more of them at once adds no throughput, only turns: with anyio's default of 40, the
# event loop (which sends every cached answer and /healthz) waited behind dozens of threads
# for each GIL turn. A few keep a long simulation from blocking short ones.
WORKER_THREADS = 4


@asynccontextmanager
async def _lifespan(app: FastAPI):
    compile_templates()
    # The live class's schema, before the first request (app/classroom/db.py): a database
    # that cannot be reached or written stops the start-up here, with its reason.
    await anyio.to_thread.run_sync(class_db.migrate)
    anyio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
    # Lab answers render in child processes (app/render_pool.py); the in-process test client
    # sets app.state.render_processes = 0 to keep them in this process's threads.
    await POOL.start(getattr(app.state, "render_processes", SETTINGS.render_processes))
    try:
        yield
    finally:
        POOL.stop(wait=True)


def create_app() -> FastAPI:
    assets.check_assets()
    sys.setswitchinterval(SWITCH_INTERVAL)
    app = FastAPI(
        title="Parallelism Lab", version="0.1.0", description=DESCRIPTION,
        docs_url=None, redoc_url=None,  # served offline by app/docs.py instead
        # Behind a proxy under BASE_PATH: routes match with or without the prefix, and the
        # OpenAPI document's server URL carries it (Starlette/FastAPI "root_path").
        root_path=SETTINGS.base_path, lifespan=_lifespan,
    )
    # Fragments carry figure JSON; compress those over 1 kB. Assets are pre-compressed and
    # already carry Content-Encoding, which this middleware leaves alone.
    # Level 3 (GZIP_LEVEL): zlib's fast strategy (levels 1-3). On a class's control answers
    # (32 kB of HTML and figure JSON on average) it took 0.41 ms against level 5's 0.66 ms,
    # for 9% more bytes (6.8 kB against 6.2 kB); a class's misses are CPU-bound, the bytes go
    # over a LAN (issue 31). Level 9, the default, costs 15x level 5's time for 15% fewer.
    app.add_middleware(GZipMiddleware, minimum_size=GZIP_MIN, compresslevel=GZIP_LEVEL)
    app.add_middleware(ServerTimingMiddleware)  # includes compression
    # Answers of the lab routes, as sent (compressed), for every student asking the same.
    app.add_middleware(ResponseCacheMiddleware, cacheable=lab_route,
                       public_url=SETTINGS.public_url, pool=POOL)
    # Outermost: normalises HEAD and Accept-Encoding before anything else reads them, and
    # sees every answer's final headers.
    app.add_middleware(SecurityHeadersMiddleware, settings=SETTINGS)
    app.add_middleware(QuietDisconnects)  # a client gone before its body: a line, no traceback
    # The site's own routes, then every lab's, in teaching order (app/episodes.py).
    for router in (assets.router, docs.router, home.router, presets.router, models.router,
                   classroom.router):
        app.include_router(router)
    for module in lab_modules():
        app.include_router(module.router)
    app.openapi = _openapi_with_drill_ids(app)
    return app


def lab_modules() -> list[ModuleType]:
    """Every lab's router modules, in the order of app/episodes.py: importing one registers
    its view (app/labkit), so the registry fills in teaching order too."""
    return [importlib.import_module(name) for episode in EPISODES for name in episode.routers]


_LAB_PATHS: set[str] = set()


def lab_route(path: str) -> bool:
    """A route whose answer is a pure function of its request: a lab's page (and fragment),
    its lazy diagrams, embeds and JSON, the planner, cheat sheet and compare, and the static
    assets (in memory already; the cache spares them the routing and the thread hop). Read
    from the registry at the first request, once every lab registered."""
    if not _LAB_PATHS:
        for view in VIEWS.values():
            _LAB_PATHS.update((view.episode.path, f"/api/{view.name}"))
            _LAB_PATHS.update(view.lazy_path(d) for d in view.diagrams if d.lazy_template)
        # GET routes beside the views whose answer is as pure (EP08's planner, the heaviest
        # answer a page asks for; EP12's cheat sheet and A/B compare): each module says so.
        for module in lab_modules():
            _LAB_PATHS.update(getattr(module, "PURE_ROUTES", ()))
    return path in _LAB_PATHS or path.startswith(("/embed/", "/static/"))


def _openapi_with_drill_ids(app: FastAPI):
    """The drill id of /api/drills/{drill_id} as an enum of the registered drills, so clients
    (and schemathesis) know every valid id; computed once, after every router registered."""
    generate = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = generate()
            ids = sorted(DRILLS)
            for item in schema.get("paths", {}).values():
                for operation in item.values():
                    for param in operation.get("parameters", []):
                        if param.get("name") == "drill_id" and param.get("in") == "path" and ids:
                            param["schema"] = {**param.get("schema", {}), "enum": ids}
            app.openapi_schema = schema
        return app.openapi_schema

    return openapi


app = create_app()
# Everything imported so far lives as long as the process: move it out of the collector's
# reach, so that a full collection (which pauses every thread) walks only what requests made.
gc.freeze()
