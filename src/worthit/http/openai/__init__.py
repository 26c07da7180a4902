"""The OpenAI-compatible API: /v1/chat/completions and /v1/models over the engine, the
`worthit` chat model over the answer flow, the request schema and OpenAI's wire shapes."""
