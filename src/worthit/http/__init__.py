"""HTTP: the shopper's API, the OpenAI-compatible API and the page, over the service's
parts. Routes, middleware (guard, timing, security headers), problem details, SSE.
Nothing imports it but the CLI's serve commands."""
