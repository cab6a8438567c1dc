"""Static assets served by the app itself: no CDN, compressed once, cached forever by URL.

Every asset URL carries a content hash (``/static/js/lab.js?v=3f2a...``), so a browser may
keep it for a year (``immutable``) and a new release still reaches it. Files are compressed
once in memory, not per request, with brotli (RFC 7932) for browsers that accept it and gzip
for the others: gzipping plotly's 1 MB bundle costs tens of milliseconds, which would dominate
every cold page load. Brotli at its best quality (11) takes seconds for a file that large, so
the plotly bundle comes with its brotli form from the build (static/vendor/build.mjs writes
``plotly.min.js.br``, checked here against the file); other large files take quality 5
(milliseconds) and small ones 11.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import brotli
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
    # plotly.js with only the trace types the labs draw, built by static/vendor/build.mjs.
    "vendor/plotly.min.js": NODE_MODULES / ".lab/plotly.min.js",
    # The offline API docs (app/docs.py): /docs and /redoc.
    "vendor/swagger-ui-bundle.js": NODE_MODULES / "swagger-ui-dist/swagger-ui-bundle.js",
    "vendor/swagger-ui.css": NODE_MODULES / "swagger-ui-dist/swagger-ui.css",
    "vendor/redoc.standalone.js": NODE_MODULES / "redoc/bundles/redoc.standalone.js",
    "js/docs.js": STATIC / "js/docs.js",
    "js/lab.js": STATIC / "js/lab.js",
    "js/embed.js": STATIC / "js/embed.js",
    "js/first-paint.js": STATIC / "js/first-paint.js",
    "js/progress.js": STATIC / "js/progress.js",
    "js/classroom.js": STATIC / "js/classroom.js",
    "js/byom.js": STATIC / "js/byom.js",
    "js/plan.js": STATIC / "js/plan.js",
    "css/lab.css": STATIC / "css/lab.css",
    "css/plotly.css": STATIC / "css/plotly.css",  # tests/browser/plotly_css.py
}

MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
# Brotli quality by size: 11 (the smallest output) costs ~2.5 s a MB, 5 costs ~25 ms.
BROTLI_BEST_UP_TO = 256 * 1024


class MissingAssetError(RuntimeError):
    """A pinned front-end file is absent: the npm install step was not run."""


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes
    brotli: bytes
    digest: str
    media_type: str


def _brotli(path: Path, body: bytes) -> bytes:
    """The body in brotli: the build's own ``<file>.br`` if it holds exactly this body (a stale
    one, left by an earlier build, is ignored), else compressed here."""
    beside = path.with_name(path.name + ".br")
    if beside.is_file():
        packed = beside.read_bytes()
        try:
            if brotli.decompress(packed) == body:
                return packed
        except brotli.error:
            pass
    quality = 11 if len(body) <= BROTLI_BEST_UP_TO else 5
    return brotli.compress(body, mode=brotli.MODE_TEXT, quality=quality)


def _load(path: Path) -> Asset:
    if not path.is_file():
        raise MissingAssetError(
            f"{path} is missing: run `make assets` (or `npm ci --prefix static/vendor` then "
            "`node static/vendor/build.mjs`, see README.md) to install and build the pinned "
            "front-end assets"
        )
    body = path.read_bytes()
    return Asset(
        body=body,
        gzipped=gzip.compress(body, compresslevel=9, mtime=0),
        brotli=_brotli(path, body),
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
    # app/security.py has already dropped the codings refused (q=0).
    codings = {c.strip() for c in request.headers.get("accept-encoding", "").split(",")}
    if "br" in codings:
        headers["Content-Encoding"] = "br"
        return Response(asset.brotli, media_type=asset.media_type, headers=headers)
    if "gzip" in codings:
        headers["Content-Encoding"] = "gzip"
        return Response(asset.gzipped, media_type=asset.media_type, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)
