"""One process, two threads: uvicorn serves HTTP on a thread of its own while the
engine runs on the process's main thread.

Why this way round: llama.cpp's OpenMP build decodes much faster when ``llama_decode``
is called from the initial thread (see ``Engine.claim_current_thread``), and the event
loop does not care which thread it is on. Signals arrive on the main thread; they only
ask uvicorn to shut down, and the engine stops once uvicorn has.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path
from types import FrameType

import uvicorn
from fastapi import FastAPI

from worthit.engine.engine import Engine
from worthit.service.https import HttpsServer, TlsFiles
from worthit.service.transport import DEFAULT_LIMITS, TransportLimits, uvicorn_config

ENGINE_NICE = 5
"""Niceness `worthit serve` gives every thread but uvicorn's: on a machine with as many
cores as llama.cpp threads, the engine's threads then yield the CPU at once to a request
being decided (a verdict costs a millisecond; a decode step hardly notices). The plain
OpenAI-compatible server (`worthit engine serve`) has no verdicts and keeps 0."""


def _yield_cpu_to(http: threading.Thread, nice: int) -> None:
    """Lower the priority of the process's other threads (llama.cpp's OpenMP workers
    included: Linux keeps a nice value per thread). Not on systems without /proc."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir() or http.native_id is None:
        return
    for task in tasks.iterdir():
        if int(task.name) != http.native_id:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, int(task.name), nice)


def run(
    app: FastAPI,
    engine: Engine | None,
    host: str,
    port: int,
    engine_nice: int = 0,
    limits: TransportLimits = DEFAULT_LIMITS,
    tls: TlsFiles | None = None,
) -> None:
    """Serve app until SIGINT/SIGTERM, driving engine (claimed, not started) here.
    engine_nice > 0 lowers the priority of every thread but uvicorn's (the shopper
    service does, so a verdict preempts a decode step); `limits` bound what a
    connection may hold before the app sees it. With `tls`, Hypercorn serves HTTPS and
    HTTP/2 in uvicorn's place (service/https.py).

    `engine` None (the engine is remote, `worthit serve --engine URL`): the HTTP server
    runs on this thread, as nothing here needs it.

    Raises SystemExit(1) when uvicorn could not start (the port is taken, say): it has
    logged why.
    """
    server: uvicorn.Server | HttpsServer = (
        uvicorn.Server(uvicorn_config(app, host, port, limits))
        if tls is None
        else HttpsServer(app, host, port, tls, limits)
    )

    def shut_down(signum: int, frame: FrameType | None) -> None:
        server.handle_exit(signum, frame)  # a second Ctrl-C forces it, as uvicorn's own

    previous = {sig: signal.signal(sig, shut_down) for sig in (signal.SIGINT, signal.SIGTERM)}
    if engine is None:
        try:
            server.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if not server.started:
            raise SystemExit(1)
        return

    def serve_http() -> None:
        try:
            server.run()
        finally:
            engine.stop()

    http = threading.Thread(target=serve_http, name="worthit-http")
    http.start()
    if engine_nice:
        _yield_cpu_to(http, engine_nice)
    try:
        engine.run_here()
    finally:
        server.should_exit = True
        http.join()
        engine.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not server.started:
        raise SystemExit(1)
