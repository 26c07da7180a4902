"""HTTP serving (the `server` layer): the shopper's API, the OpenAI-compatible API and
the page, over the answer flow and the engine. Nothing imports it but `worthit serve`.

Modules: `app` (create_app: the service from explicit parts), `settings`, `state` (the
typed state handlers share), `decide_api` (POST /v1/decide), `chat_api` (/v1/chat/
completions, /v1/models), `worthit_chat` (the `worthit` chat model), `products_api`
(search, fact sheets, history), `health_api` (/healthz, /readyz, /metrics), `page` (the
web page), `guard` (body size, API keys, rate limits), `priority` (a key's class as a
ceiling), `tenants` (API keys), `ratelimit`, `problems` (RFC 9457 errors), `openai_wire`
(OpenAI's error and completion shapes), `openai_schema` (the chat request body),
`json_body` (a body read in one pass on the answer path), `sse`,
`timing` (Server-Timing), `runtime` (uvicorn beside the engine's thread).
"""
