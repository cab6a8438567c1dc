"""A ``Server-Timing`` header on every response: the app's own time, for devtools and benchmarks.

Pure ASGI (no BaseHTTPMiddleware, which would add its own cost to every request). The time is
measured from the request's arrival at the app to the start of its response.
"""

import time


class ServerTimingMiddleware:
    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def send_with_timing(message) -> None:
            if message["type"] == "http.response.start":
                duration = (time.perf_counter() - start) * 1e3
                headers = list(message.get("headers", []))
                headers.append((b"server-timing", f"app;dur={duration:.3f}".encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_timing)
