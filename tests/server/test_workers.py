"""`worthit serve --workers N`: what each worker runs, and the real thing: N API processes
on one port, the engine in its own process, a dead worker started again, one Ctrl-C
stopping them all."""

from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from worthit.service.settings import ServiceSettings
from worthit.service.workers import Endpoint, worker_audit_db, worker_settings

from replica_processes import free_port
from service_fixtures import start_workers


def test_a_port_held_by_another_service_is_refused_even_one_of_ours() -> None:
    """The workers' SO_REUSEPORT sockets would let a second `worthit serve --workers`
    join the first's port and split its traffic; the parent's plain bind refuses it,
    before the workers listen and after."""
    first = Endpoint.reserve("127.0.0.1", 0)
    worker = first.worker_socket()
    try:
        with pytest.raises(SystemExit):
            Endpoint.reserve("127.0.0.1", first.port)
        worker.listen()
        with pytest.raises(SystemExit):
            Endpoint.reserve("127.0.0.1", first.port)
    finally:
        worker.close()
        first.held.close()
    again = Endpoint.reserve("127.0.0.1", first.port)  # free once the first let go
    again.held.close()


def test_a_worker_takes_connections_only_once_it_listens() -> None:
    """Until its server has started the app (and listens), a worker's socket is not in
    the port's group: a connection goes to a worker that can answer it, or is refused
    while none can, never queued on one still starting."""
    endpoint = Endpoint.reserve("127.0.0.1", 0)
    worker = endpoint.worker_socket()
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", endpoint.port), timeout=5).close()
        worker.listen()
        socket.create_connection(("127.0.0.1", endpoint.port), timeout=5).close()
    finally:
        worker.close()
        endpoint.held.close()


def test_only_worker_0_runs_the_markets_single_writers(tmp_path: Path) -> None:
    settings = ServiceSettings(db_path=tmp_path / "m.db", ticker_rate=80.0, background=True)
    first, second = worker_settings(settings, 0), worker_settings(settings, 1)
    assert (first.ticker_rate, first.background, first.deliver_watches) == (80.0, True, True)
    assert first.watch_poll_s is not None  # it sends what the other workers queue
    assert (second.ticker_rate, second.background, second.deliver_watches) == (0.0, False, False)
    assert second.feeds == ()


def test_each_worker_appends_to_a_log_of_its_own(tmp_path: Path) -> None:
    settings = ServiceSettings(db_path=tmp_path / "m.db")
    logs = {worker_audit_db(settings, i) for i in range(4)}
    assert len(logs) == 4
    assert worker_audit_db(settings, 0) == tmp_path / "m.audit.db"
    assert worker_audit_db(settings, 2) == tmp_path / "m.audit.w2.db"
    origins = {worker_settings(settings, i).audit_origin for i in range(1, 4)}
    assert len(origins) == 3
    chosen = replace(settings, audit_db=tmp_path / "logs" / "a.db")
    assert worker_audit_db(chosen, 1) == tmp_path / "logs" / "a.w1.db"


def _ready(base: str) -> dict[str, Any] | None:
    try:
        response = httpx.get(base + "/readyz", timeout=5, headers={"connection": "close"})
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def _workers_ready(base: str, want: int, tries: int = 400) -> dict[int, dict[str, Any]]:
    """Worker index → its /readyz, from fresh connections until `want` are seen."""
    seen: dict[int, dict[str, Any]] = {}
    for _ in range(tries):
        body = _ready(base)
        if body is not None and "worker" in body:
            seen[body["worker"]["index"]] = body
        if len(seen) >= want:
            break
        time.sleep(0.02)
    return seen


def _workers_seen(base: str, want: int, tries: int = 400) -> dict[int, int]:
    """Worker index → pid."""
    return {i: body["worker"]["pid"] for i, body in _workers_ready(base, want, tries).items()}


@pytest.mark.slow
def test_two_workers_share_the_port_survive_a_crash_and_stop_together(
    small_market: Path, tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_workers(small_market, tmp_path, port)
    try:
        give_up = time.monotonic() + 180
        while _ready(base) is None:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < give_up, "no worker became ready"
            time.sleep(0.2)
        ready = _workers_ready(base, 2)
        assert set(ready) == {0, 1}, ready
        seen = {i: body["worker"]["pid"] for i, body in ready.items()}
        for body in ready.values():  # each built its own sheets before it took questions
            assert body["facts"]["warmed"] == body["products"] == body["facts"]["cached"]

        answer = httpx.post(
            base + "/v1/decide", json={"question": "Is the Aurora NC700 worth buying?"}, timeout=30
        ).json()
        assert answer["status"] == "answered" and answer["explanation"]
        assert answer["receipt"]["leaf_index"] >= 0

        os.kill(seen[1], signal.SIGKILL)
        give_up = time.monotonic() + 60
        again: dict[int, int] = {}
        while again.get(1) in (None, seen[1]):
            assert time.monotonic() < give_up, "worker 1 was not started again"
            again = _workers_seen(base, 2, tries=50)
        assert again[0] == seen[0]

        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0
        for pid in (seen[0], again[1]):
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        assert (tmp_path / "market.audit.db").exists()
        assert (tmp_path / "market.audit.w1.db").exists()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
