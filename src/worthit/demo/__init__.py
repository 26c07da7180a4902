"""The demo market: a seeded simulator of a shop's catalogue and history, its product
names, and the ticker (ticker.py) that moves its prices and stock while a demo serves. Used by
the CLI (`worthit demo`, `serve --demo --live-rate`) and tests, never on a real market."""
