"""`worthit serve --workers N`: N API processes on one listening socket, and the engine in
a process of its own.

One Python process decides one answer at a time (the GIL), so past a few hundred answers
a second the decision path, not the model, is what a flash sale queues on. Each worker is
a whole service without a local model: it reaches the engine over the OpenAI-compatible
wire exactly as it would remote replicas (`--engine URL`), so the engine process alone
owns the model, its KV cache and its batch, and every worker's requests share them. The
parent starts the engine first (unless `--engine` names replicas), and starts a worker
again when one dies.

On Linux each worker listens on a socket of its own on the one port (SO_REUSEPORT), and
the kernel spreads new connections over them by their addresses; the parent holds the
port with a bound socket that never listens, so it stays the service's while a worker
restarts. With one shared accept queue instead, a burst's connections went to whichever
worker woke first: of 50 questions at once the verdict p99 was 169–171 ms with two
workers, against 41–49 ms in most runs with a queue each (bench/peak.py,
docs/benchmarks.md). The price: connections still queued on a worker that dies are reset,
where a shared queue would hand them to the others. Elsewhere (no balancing SO_REUSEPORT)
the parent binds one listening socket that every worker accepts on. With TLS each worker
runs Hypercorn (service/https.py) on its socket in uvicorn's place.

What stays one per market, since two writers of it would disagree:

- worker 0 alone runs the live simulator, the feed pollers, the background generator and
  the watches' webhook deliveries;
- each worker appends to its own audit log (a Merkle log has one writer): worker 0's is
  the market's usual one, worker i's sits beside it as `<name>.w<i>.db` with its own key,
  and every receipt names the log it is in by its origin.

Everything else they share through the store (SQLite in WAL mode, or PostgreSQL): a
product's facts are revalidated against its revision on every read, so an event applied
by one worker is in every worker's next answer. With `--redis` they also share rate
limits, built fact sheets, explanations and watch notifications; without it each worker
has its own limits (a tenant may use N times its rate) and a watch's SSE stream hears only
the notifications of the worker it is connected to.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.process
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Protocol

import httpx
from fastapi import FastAPI

from worthit.audit import AuditPaths
from worthit.audit.log import DEFAULT_ORIGIN
from worthit.engine.model_files import NO_LORA
from worthit.service.https import HttpsServer, TlsFiles
from worthit.service.runtime import ENGINE_NICE
from worthit.service.settings import ServiceSettings
from worthit.service.transport import TransportLimits

if TYPE_CHECKING:
    from worthit.engine.remote.router import Router

log = logging.getLogger(__name__)

ENGINE_START_S = 120.0
"""How long the engine process may take to load its model and answer /v1/models."""
WATCH_POLL_S = 1.0
"""How often worker 0 looks for webhook deliveries the other workers queued."""
QUICK_DEATH_S = 10.0
"""A worker that dies this soon after its start counts towards giving up..."""
QUICK_DEATHS = 5
"""...and after this many such deaths in a row the service stops: it would only loop."""


class AppFactory(Protocol):
    """What builds one worker's app over the engine replicas (`http.app.create_app`): a
    module-level function, so a spawned worker can import it by name."""

    def __call__(self, settings: ServiceSettings, *, remote: Router) -> FastAPI: ...


@dataclass(frozen=True)
class WorkerPlan:
    settings: ServiceSettings
    """Worker 0's settings; the others' are derived from them (`worker_settings`)."""
    workers: int
    host: str
    port: int
    limits: TransportLimits
    engines: tuple[str, ...] = ()
    """Engine replicas' OpenAI-compatible base URLs; empty: start one (`engine_command`)."""
    engine_command: tuple[str, ...] = ()
    """`worthit engine serve …` without `--host`/`--port`, which are chosen here."""
    tls: TlsFiles | None = None
    """HTTPS on every worker; checked before this plan is made (`check_tls_files`)."""
    make_app: AppFactory = field(kw_only=True)
    """The service each worker serves; the runtime knows no routes."""


def worker_settings(settings: ServiceSettings, index: int) -> ServiceSettings:
    """Worker `index`'s settings: its own audit log, and past worker 0 none of the
    market's single writers."""
    if index == 0:
        return replace(settings, worker=0, watch_poll_s=WATCH_POLL_S)
    return replace(
        settings,
        audit_db=worker_audit_db(settings, index),
        ticker_rate=0.0,
        feeds=(),
        background=False,
        deliver_watches=False,
        audit_origin=f"{DEFAULT_ORIGIN}/w{index}",
        worker=index,
    )


def worker_audit_db(settings: ServiceSettings, index: int) -> Path:
    """Worker `index`'s audit log: worker 0's file with `.w<index>` before `.db`."""
    assert settings.db_path is not None
    first = settings.audit_db or AuditPaths.beside(Path(settings.db_path)).db
    if index == 0:
        return first
    return first.with_name(f"{first.name.removesuffix('.db')}.w{index}.db")


def serve_workers(plan: WorkerPlan) -> None:
    """Serve until SIGINT/SIGTERM with `plan.workers` API processes. Raises SystemExit(1)
    when the engine or the workers cannot start."""
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    engine: subprocess.Popen[bytes] | None = None
    workers: dict[int, _Worker] = {}
    try:
        engines = plan.engines
        if not engines:
            engine, url = _start_engine(plan.engine_command, lambda: stopping)
            engines = (url,)
        endpoint = Endpoint.reserve(plan.host, plan.port)
        context = multiprocessing.get_context("spawn")
        workers = {
            i: _Worker.start(context, plan, i, engines, endpoint) for i in range(plan.workers)
        }
        quick_deaths = 0
        while not stopping:
            time.sleep(0.2)
            if engine is not None and engine.poll() is not None:
                log.error("the engine process exited (%s): stopping", engine.returncode)
                raise SystemExit(1)
            for index, worker in list(workers.items()):
                if worker.process.is_alive() or stopping:
                    continue
                quick = time.monotonic() - worker.started < QUICK_DEATH_S
                quick_deaths = quick_deaths + 1 if quick else 0
                if quick_deaths >= QUICK_DEATHS:
                    log.error("workers keep dying at start: stopping")
                    raise SystemExit(1)
                log.warning("worker %d exited (%s): starting it again", index,
                            worker.process.exitcode)  # fmt: skip
                workers[index] = _Worker.start(context, plan, index, engines, endpoint)
    finally:
        for worker in workers.values():
            worker.stop()
        for worker in workers.values():
            worker.join()
        if engine is not None:
            _stop_process(engine)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    started: float

    @classmethod
    def start(
        cls,
        context: multiprocessing.context.SpawnContext,
        plan: WorkerPlan,
        index: int,
        engines: Sequence[str],
        endpoint: Endpoint,
    ) -> _Worker:
        process = context.Process(
            target=_worker_main,
            args=(
                plan.make_app,
                worker_settings(plan.settings, index),
                tuple(engines),
                endpoint,
                plan.limits,
                plan.tls,
            ),
            name=f"worthit-worker-{index}",
        )
        process.start()
        return cls(process, time.monotonic())

    def stop(self) -> None:
        if self.process.is_alive() and self.process.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGINT)

    def join(self) -> None:
        self.process.join(30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _worker_main(
    make_app: AppFactory,
    settings: ServiceSettings,
    engines: tuple[str, ...],
    endpoint: Endpoint,
    limits: TransportLimits,
    tls: TlsFiles | None,
) -> None:
    """One API process: the service on the port, the engines behind the router.
    In a process group of its own, so a Ctrl-C in the terminal reaches the parent only
    (uvicorn takes a second signal as "force"). Exits 1 when its server did not start."""
    os.setpgid(0, 0)
    import uvicorn

    from worthit.engine.remote.router import Router
    from worthit.service.transport import uvicorn_config

    app = make_app(settings, remote=Router(engines))
    listener = endpoint.worker_socket()
    host, port = endpoint.host, endpoint.port
    server: uvicorn.Server | HttpsServer
    if tls is None:
        server = uvicorn.Server(uvicorn_config(app, host, port, limits))
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises the parent's SIGINT again
            server.run(sockets=[listener])
    else:
        server = HttpsServer(app, host, port, tls, limits, sock=listener)
        for sig in (signal.SIGINT, signal.SIGTERM):  # Hypercorn leaves them to its caller
            signal.signal(sig, server.handle_exit)
        server.run()
    if not server.started:
        raise SystemExit(1)


BACKLOG = 2048
BALANCED_REUSEPORT = sys.platform == "linux"
"""Linux spreads connections over a port's SO_REUSEPORT listeners; BSD and macOS hand
them all to one."""


@dataclass(frozen=True)
class Endpoint:
    """The port the workers serve, held by the parent for the service's whole life."""

    host: str
    port: int
    family: socket.AddressFamily
    held: socket.socket
    """Bound by the parent: with a balancing SO_REUSEPORT never listening, only holding
    the port; without, the one listening socket every worker accepts on."""

    @classmethod
    def reserve(cls, host: str, port: int) -> Endpoint:
        """Hold `port` (0: any free one). With SO_REUSEPORT a plain bind comes first: it
        fails on a port anyone listens on, where an SO_REUSEPORT bind would silently join
        a running `worthit serve --workers` on the same port."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            if BALANCED_REUSEPORT:
                with socket.socket(family, socket.SOCK_STREAM) as probe:
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    probe.bind((host, port))
                    port = int(probe.getsockname()[1])
                held = _reuseport_socket(family, host, port)
            else:
                held = socket.create_server((host, port), family=family, backlog=BACKLOG)
        except OSError as exc:
            log.error("cannot listen on %s:%d: %s", host, port, exc)
            raise SystemExit(1) from None
        held.set_inheritable(True)
        return cls(host, int(held.getsockname()[1]), family, held)

    def worker_socket(self) -> socket.socket:
        """The socket a worker accepts on: its own (SO_REUSEPORT), or the shared one.

        Its own is bound but not listening: the server listens on it once the app has
        started (asyncio's and uvloop's `create_server` do), so the kernel hands no
        connection to a worker still starting (loading, building its fact sheets), which
        would hold it for seconds."""
        if not BALANCED_REUSEPORT:
            return self.held
        return _reuseport_socket(self.family, self.host, self.port)


def _reuseport_socket(family: socket.AddressFamily, host: str, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        # Bound: a plain bind on the port (another service, `reserve`'s probe) now
        # conflicts with this socket even while it does not listen.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
    except OSError:
        sock.close()
        raise
    return sock


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_engine(
    command: Sequence[str], stopping: Callable[[], bool]
) -> tuple[subprocess.Popen[bytes], str]:
    """`worthit engine serve` on a loopback port of its own, once it answers. It runs
    niced (as a single `worthit serve` nices its engine threads), so a worker deciding a
    verdict preempts a decode step, and in a process group of its own, so a Ctrl-C in the
    terminal reaches only the parent, which stops it after the workers."""
    port = _free_port()
    engine = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)], process_group=0
    )
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, engine.pid, ENGINE_NICE)
    url = f"http://127.0.0.1:{port}/v1"
    give_up = time.monotonic() + ENGINE_START_S
    while time.monotonic() < give_up:
        if engine.poll() is not None:
            log.error("the engine process exited at start (%s)", engine.returncode)
            raise SystemExit(1)
        if stopping():
            _stop_process(engine)
            raise SystemExit(0)
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/models", timeout=1.0).status_code == 200:
                return engine, url
        time.sleep(0.2)
    _stop_process(engine)
    log.error("the engine did not answer within %.0f s", ENGINE_START_S)
    raise SystemExit(1)


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def engine_command(
    model: Path,
    *,
    lora: Path | None,
    threads: int,
    context: int,
    max_sequences: int,
    deadline_ms: int,
) -> tuple[str, ...]:
    """The engine process for `worthit serve --workers`, configured as the in-process
    engine of a single `worthit serve` would be."""
    return (
        sys.executable, "-m", "worthit", "engine", "serve", "--model", str(model),
        "--lora", str(lora) if lora is not None else NO_LORA,
        "--threads", str(threads), "--context", str(context),
        "--max-sequences", str(max_sequences), "--default-deadline-ms", str(deadline_ms),
    )  # fmt: skip
