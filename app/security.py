"""Headers every answer carries, and the request normalisations that make them hold.

Pure ASGI (no BaseHTTPMiddleware: it would add a task and a stream copy to every request).
On the way in: HEAD is answered as GET without its body (health checks use HEAD, and FastAPI
routes list only GET); ``Accept-Encoding`` is rewritten to the codings the client really
accepts (``gzip;q=0`` refuses gzip, RFC 9110 sec 12.5.3), so the compression further in,
which only looks for the word "gzip", gets it right; the bare base path redirects to its
home. On the way out:

- ``Location`` of a redirect never spells the request's Host once PUBLIC_URL is set: an
  absolute one (Starlette's trailing-slash redirect builds it from the Host header; the app
  never redirects off-site) is re-rooted on PUBLIC_URL.
- ``Content-Security-Policy`` on HTML: our own origin only, no inline script or style; framing
  refused (``frame-ancestors 'none'``) except on ``/embed/*``, which EMBED_ALLOWED_ORIGINS
  may frame. A page that sends its own policy (the /docs pages) keeps it, framing refused.
- ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: strict-origin-when-cross-origin``
  everywhere (OWASP Secure Headers Project).
- ``Vary``: pages answer a fragment or the whole page by ``HX-Request``, ``HX-Target`` and
  ``HX-History-Restore-Request`` (htmx docs, "Caching"); every answer may be gzipped.
- ``Cache-Control`` where the route set none: pages ``no-cache`` (revalidate: a deploy may
  change them), JSON answers of the pure labs cacheable for five minutes, errors not stored.
"""

from urllib.parse import urlsplit

from app.settings import SETTINGS, Settings

# Styles from this site's files only: no 'unsafe-inline'. plotly.js's own rules are a file
# (static/css/plotly.css, linked with the id that stops plotly inserting a <style>), plotly
# sets element styles through CSSOM (allowed), and templates put computed colours and sizes
# in data attributes that static/js/lab.js sets through CSSOM.
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'"
)
PAGE_VARY = ("HX-Request", "HX-Target", "HX-History-Restore-Request", "Accept-Encoding")
API_MAX_AGE = 300


def accepted_codings(header: str) -> str:
    """The Accept-Encoding codings with a non-zero quality, in their order (RFC 9110)."""
    kept = []
    for item in header.split(","):
        coding, _, params = item.strip().partition(";")
        coding = coding.strip().lower()
        if not coding:
            continue
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0:
            kept.append(coding)
    if "*" in kept and "gzip" not in header.lower():
        kept.append("gzip")  # "*" accepts any coding not named
    return ", ".join(kept)


def route_path(scope) -> str:
    """The path as the app's routes see it (without the base path, if the proxy kept it)."""
    path, root = scope["path"], scope.get("root_path", "")
    if root and path.startswith(root + "/"):
        return path[len(root):]
    return path


def _merge_vary(existing: str, names) -> str:
    have = [v.strip() for v in existing.split(",") if v.strip()]
    lower = {v.lower() for v in have}
    return ", ".join(have + [n for n in names if n.lower() not in lower])


class SecurityHeadersMiddleware:
    def __init__(self, app, settings: Settings = SETTINGS) -> None:
        self.app = app
        self.base_path = settings.base_path
        self.public_url = settings.public_url
        ancestors = " ".join(settings.embed_allowed_origins)
        self.embed_csp = f"{POLICY}; frame-ancestors {ancestors}".encode()
        self.page_csp = f"{POLICY}; frame-ancestors 'none'".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.base_path and scope["path"] == self.base_path:
            await _redirect(send, self.base_path + "/")
            return
        head = scope["method"] == "HEAD"
        headers = []
        for key, value in scope["headers"]:
            if key == b"accept-encoding":
                value = accepted_codings(value.decode("latin-1")).encode("latin-1")
            headers.append((key, value))
        scope = {**scope, "headers": headers, "method": "GET" if head else scope["method"]}
        path = route_path({**scope, "root_path": self.base_path or scope.get("root_path", "")})
        embed = path.startswith("/embed/")
        api = path.startswith("/api/") or path == "/openapi.json"

        async def send_wrapped(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": self._headers(message, embed, api)}
                if self.public_url and 300 <= message["status"] < 400:
                    message["headers"] = self._relocated(message["headers"])
            elif head and message["type"] == "http.response.body":
                if message.get("more_body"):
                    return  # the rest of the body, never sent for HEAD
                message = {**message, "body": b""}
            await send(message)

        await self.app(scope, receive, send_wrapped)

    def _headers(self, message, embed: bool, api: bool) -> list:
        raw = list(message.get("headers", []))
        names = {k.lower(): v for k, v in raw}
        status = message["status"]
        ctype = names.get(b"content-type", b"")
        html = ctype.startswith(b"text/html")
        out = [(k, v) for k, v in raw if k.lower() != b"vary"]
        vary = _merge_vary(names.get(b"vary", b"").decode("latin-1"),
                           PAGE_VARY if html else ("Accept-Encoding",))
        out.append((b"vary", vary.encode("latin-1")))
        if html:
            own = names.get(b"content-security-policy")
            if own is None:
                out.append((b"content-security-policy", self.embed_csp if embed else self.page_csp))
            else:  # its own policy, with framing decided here like every page's
                kept = [d for d in own.split(b";")
                        if d.strip() and not d.strip().startswith(b"frame-ancestors")]
                out = [(k, v) for k, v in out if k.lower() != b"content-security-policy"]
                out.append((b"content-security-policy",
                            b";".join([*kept, b" frame-ancestors 'none'"])))
            if not embed:
                out.append((b"x-frame-options", b"DENY"))
        out.append((b"x-content-type-options", b"nosniff"))
        out.append((b"referrer-policy", b"strict-origin-when-cross-origin"))
        if b"cache-control" not in names:
            if status >= 400:
                policy = b"no-store"
            elif api and ctype.startswith(b"application/json"):
                policy = f"public, max-age={API_MAX_AGE}".encode()
            else:
                policy = b"no-cache"
            out.append((b"cache-control", policy))
        return out

    def _relocated(self, headers: list) -> list:
        """A redirect's absolute Location re-rooted on PUBLIC_URL (path and query kept)."""
        out = []
        for key, value in headers:
            if key.lower() == b"location":
                parts = urlsplit(value.decode("latin-1"))
                if parts.netloc:
                    rest = parts.path + (f"?{parts.query}" if parts.query else "")
                    value = (self.public_url + rest).encode("latin-1")
            out.append((key, value))
        return out


async def _redirect(send, location: str) -> None:
    await send({"type": "http.response.start", "status": 308,
                "headers": [(b"location", location.encode("latin-1")),
                            (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})
