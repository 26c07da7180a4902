"""The service assembled and run: its settings, the parts built from them and shared
by handlers, the event inputs, what workers share through Redis, tenants and their rate
limits, and the process runtime (uvicorn or Hypercorn beside the engine's thread, TLS,
workers). No business rule lives here, and nothing here knows a route."""
