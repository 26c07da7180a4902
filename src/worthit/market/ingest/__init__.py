"""How events reach the market from outside: the JSONL import, feeds polled over HTTP,
the Redis stream, and the webhook sources (their secrets and delivery ids). Each hands
events to the one apply path (market/apply.py, through the bus)."""
