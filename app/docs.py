"""The API documentation pages, /docs (Swagger UI) and /redoc (Redoc), served offline.

FastAPI's built-in pages load Swagger UI, Redoc and Google fonts from public CDNs, so
without a network they are blank. Here the same pinned bundles (static/vendor/package.json)
come through app/assets.py like every other asset, and the start-up code is a static file
(static/js/docs.js) that reads the OpenAPI URL from a data attribute: no inline script, no
other host.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import escape  # what Jinja escapes with: one escaping for every page

from app.assets import asset_url
from app.settings import url

router = APIRouter(include_in_schema=False)

# Everything from this origin only. Redoc 2.5.4's side menu always draws a logo from
# cdn.redoc.ly (no option turns it off): img-src keeps the browser from even asking.
# Swagger UI sets its styles through the DOM (React), which CSP allows: no 'unsafe-inline'
# (tests/browser/test_csp_browser.py walks it). Redoc writes <style> elements with
# styled-components, which only 'unsafe-inline' lets through; its search index runs in a
# blob: worker.
def _policy(styles: str) -> str:
    return "; ".join([
        "default-src 'self'",
        "script-src 'self'",
        f"style-src {styles}",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "worker-src 'self' blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'self'",
    ])


SWAGGER_POLICY = _policy("'self'")
REDOC_POLICY = _policy("'self' 'unsafe-inline'")


def _page(title: str, styles: list[str], scripts: list[str], mount: str, openapi: str) -> str:
    links = "".join(f'<link rel="stylesheet" href="{escape(asset_url(s))}">' for s in styles)
    tags = "".join(f'<script src="{escape(asset_url(s))}" defer></script>' for s in scripts)
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>{links}{tags}</head>"
        f'<body><div id="{mount}" data-openapi-url="{escape(openapi)}"></div></body></html>\n'
    )


def _openapi_url(request: Request) -> str:
    return url(request.app.openapi_url or "/openapi.json")  # under BASE_PATH


@router.get("/docs", response_class=HTMLResponse)
def swagger_ui(request: Request) -> HTMLResponse:
    html = _page(
        f"{request.app.title}: API (Swagger UI)",
        styles=["vendor/swagger-ui.css"],
        scripts=["vendor/swagger-ui-bundle.js", "js/docs.js"],
        mount="swagger-ui",
        openapi=_openapi_url(request),
    )
    return HTMLResponse(html, headers={"Content-Security-Policy": SWAGGER_POLICY})


@router.get("/redoc", response_class=HTMLResponse)
def redoc(request: Request) -> HTMLResponse:
    html = _page(
        f"{request.app.title}: API (Redoc)",
        styles=[],
        scripts=["vendor/redoc.standalone.js", "js/docs.js"],
        mount="redoc",
        openapi=_openapi_url(request),
    )
    return HTMLResponse(html, headers={"Content-Security-Policy": REDOC_POLICY})
