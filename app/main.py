"""The FastAPI application: one router per lab, joined here (FastAPI "Bigger Applications")."""

import gc
import sys

from fastapi import FastAPI
from fastapi.middleware.gzip import GZipMiddleware

from app import assets, docs
from app.routers import data_parallel, home, memory, pipeline, presets
from app.routers import moe as moe_lab
from app.routers import plan as plan_router
from app.routers import recipe as recipe_router
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


def create_app() -> FastAPI:
    assets.check_assets()
    sys.setswitchinterval(SWITCH_INTERVAL)
    app = FastAPI(
        title="Parallelism Lab", version="0.1.0", description=DESCRIPTION,
        docs_url=None, redoc_url=None,  # served offline by app/docs.py instead
    )
    # Fragments carry figure JSON; compress those over 1 kB. Assets are pre-compressed and
    # already carry Content-Encoding, which this middleware leaves alone.
    # Level 5: level 9 (the default) costs 15x the time for 15% fewer bytes on big answers.
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=5)
    app.add_middleware(ServerTimingMiddleware)  # outermost: includes compression
    app.include_router(assets.router)
    app.include_router(docs.router)
    app.include_router(home.router)
    app.include_router(presets.router)
    app.include_router(memory.router)
    app.include_router(pipeline.router)
    app.include_router(data_parallel.router)
    app.include_router(moe_lab.router)
    app.include_router(recipe_router.router)
    app.include_router(plan_router.router)
    return app


app = create_app()
# Everything imported so far lives as long as the process: move it out of the collector's
# reach, so that a full collection (which pauses every thread) walks only what requests made.
gc.freeze()
