"""HTTP serving: the OpenAI-compatible API over the engine (``worthit serve``)."""

from worthit.server.app import create_app, serve

__all__ = ["create_app", "serve"]
