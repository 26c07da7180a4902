"""Security headers on every response.

The page loads only its own script, style and worker (no inline script, no third-party
origin), so its Content-Security-Policy can be `'self'` throughout (and `data:` images: the page's
empty icon, which saves a favicon request); framing is refused so
no other site can overlay the verdict. FastAPI's interactive docs load Swagger UI from a
CDN with an inline bootstrap script, so `/docs` keeps only the headers that do not
forbid that.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; base-uri 'none'; object-src 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
ALWAYS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
STRICT = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
)
DOCS_PATHS = ("/docs", "/redoc")


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = ALWAYS if scope["path"].startswith(DOCS_PATHS) else ALWAYS + STRICT

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
