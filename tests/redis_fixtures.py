"""Redis for the shared-state tests: a key prefix of one test's own on the shared Redis,
deleted after, and a private redis-server a test may kill."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from conftest import require_service

REAL_CLOCK = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "FAKETIME")}
"""A redis-server keeps the machine's clock when the suite runs under libfaketime
(.ci/any-date), as the shared Redis does: under the preload it never answers."""


def poll(check: Callable[[], bool], within_s: float = 15.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """`worthit:test:<random>:`; every key under it is deleted after the test."""
    prefix = f"worthit:test:{uuid.uuid4().hex[:12]}:"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


class PrivateRedis:
    """A redis-server of this test's own on a free port, which it may kill and restart;
    `persistent` keeps an append-only file fsynced on every write, so a restart loses
    nothing."""

    def __init__(self, folder: Path, persistent: bool = False) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.folder = folder
        self.persistent = persistent
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Started and answering; a server that never answers is killed, not left behind."""
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else []
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--dir", str(self.folder), *(persistence or ["--appendonly", "no"])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=REAL_CLOCK,
        )  # fmt: skip
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.2)
        try:
            poll(lambda: _answers(client), within_s=10, what="the private redis-server answers")
        except BaseException:
            self.kill()
            raise
        finally:
            client.close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


@pytest.fixture
def private_redis(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[PrivateRedis]:
    """Not persistent unless parametrized indirectly with True."""
    require_service(shutil.which("redis-server") is not None, "no redis-server to start")
    server = PrivateRedis(tmp_path, persistent=getattr(request, "param", False))
    server.start()
    yield server
    server.kill()
