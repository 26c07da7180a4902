"""uvicorn on a free loopback port in a background thread: the real transport."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from fastapi import FastAPI

from worthit.service.transport import DEFAULT_LIMITS, TransportLimits, uvicorn_config


class LiveServer:
    """uvicorn on a free loopback port in a background thread: the real transport."""

    def __init__(self, app: FastAPI, limits: TransportLimits = DEFAULT_LIMITS) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", self.port, limits))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
