"""Server-Timing on every response, so a browser's devtools show where the time went.

Pure ASGI (not BaseHTTPMiddleware) so streaming responses pass through untouched; the
header carries the stages known when the response starts (`request.state.server_timing`)
and the handler's total up to that moment.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ServerTimingMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def send_with_timing(message: Message) -> None:
            if message["type"] == "http.response.start":
                stages = dict(scope.get("state", {}).get("server_timing", {}))
                stages["app"] = round((time.perf_counter() - started) * 1000, 2)
                value = ", ".join(f"{name};dur={dur}" for name, dur in stages.items())
                headers = list(message.get("headers", []))
                headers.append((b"server-timing", value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_timing)
