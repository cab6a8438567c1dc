"""Static assets served by the app itself: no CDN, compressed once, cached forever by URL.

Every asset URL carries a content hash (``/static/js/lab.js?v=3f2a...``), so a browser may
keep it for a year (``immutable``) and a new release still reaches it. Files are gzipped once
in memory, not per request: gzipping plotly's 1.5 MB bundle costs tens of milliseconds, which
would dominate every cold page load.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from app.settings import url

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "static"
NODE_MODULES = STATIC / "vendor/node_modules"

# URL path under /static/ -> file on disk. Vendor files are pinned by
# static/vendor/package-lock.json.
ASSETS: dict[str, Path] = {
    "vendor/htmx.min.js": NODE_MODULES / "htmx.org/dist/htmx.min.js",
    "vendor/plotly.min.js": NODE_MODULES / "plotly.js-cartesian-dist-min/plotly-cartesian.min.js",
    # The offline API docs (app/docs.py): /docs and /redoc.
    "vendor/swagger-ui-bundle.js": NODE_MODULES / "swagger-ui-dist/swagger-ui-bundle.js",
    "vendor/swagger-ui.css": NODE_MODULES / "swagger-ui-dist/swagger-ui.css",
    "vendor/redoc.standalone.js": NODE_MODULES / "redoc/bundles/redoc.standalone.js",
    "js/docs.js": STATIC / "js/docs.js",
    "js/lab.js": STATIC / "js/lab.js",
    "js/embed.js": STATIC / "js/embed.js",
    "js/first-paint.js": STATIC / "js/first-paint.js",
    "js/progress.js": STATIC / "js/progress.js",
    "js/byom.js": STATIC / "js/byom.js",
    "js/plan.js": STATIC / "js/plan.js",
    "css/lab.css": STATIC / "css/lab.css",
    "css/plotly.css": STATIC / "css/plotly.css",  # tests/browser/plotly_css.py
}

MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


class MissingAssetError(RuntimeError):
    """A pinned front-end file is absent: the npm install step was not run."""


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes
    digest: str
    media_type: str


def _load(path: Path) -> Asset:
    if not path.is_file():
        raise MissingAssetError(
            f"{path} is missing: run `make run` (or `npm ci --prefix static/vendor`, see "
            "README.md) to install the pinned front-end assets"
        )
    body = path.read_bytes()
    return Asset(
        body=body,
        gzipped=gzip.compress(body, compresslevel=9, mtime=0),
        digest=hashlib.sha256(body).hexdigest()[:16],
        media_type=MEDIA_TYPES[path.suffix],
    )


@cache
def _cached(name: str, mtime_ns: int) -> Asset:
    # Keyed by mtime so that editing lab.js or lab.css during development is picked up.
    return _load(ASSETS[name])


def get_asset(name: str) -> Asset:
    path = ASSETS[name]
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        return _load(path)  # raises MissingAssetError with the fix
    return _cached(name, mtime)


def check_assets() -> None:
    """Fail at start-up, with the command that fixes it, if any asset is missing."""
    for name in ASSETS:
        get_asset(name)


def asset_url(name: str) -> str:
    return url(f"/static/{name}?v={get_asset(name).digest}")  # under BASE_PATH


router = APIRouter(include_in_schema=False)


@router.get("/static/{name:path}")
def serve_asset(name: str, request: Request) -> Response:
    if name not in ASSETS:
        raise HTTPException(status_code=404, detail="no such asset")
    asset = get_asset(name)
    etag = f'"{asset.digest}"'
    headers = {"ETag": etag, "Vary": "Accept-Encoding"}
    if request.query_params.get("v") == asset.digest:
        headers["Cache-Control"] = "public, max-age=31536000, immutable"
    else:
        headers["Cache-Control"] = "public, max-age=0, must-revalidate"
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    if "gzip" in request.headers.get("accept-encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return Response(asset.gzipped, media_type=asset.media_type, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)
