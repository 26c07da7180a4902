"""Engine replicas as real child processes: `worthit engine serve` and llama_cpp.server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

SMALL_ENGINE = ("--threads", "1", "--context", "1024", "--max-sequences", "4")
"""A replica that starts fast and leaves the machine's other core to the test."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Replica:
    """One server process on a free loopback port; `url` is its OpenAI base (…/v1)."""

    def __init__(self, command: list[str], port: int, log: Path) -> None:
        self.port = port
        self.log = log
        self.command = command
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Replica:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "NO_COLOR": "1"},
            )  # fmt: skip
        return self

    def wait_ready(self, within_s: float = 180) -> Replica:
        give_up = time.monotonic() + within_s
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.command[:4]} exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > give_up:
                raise RuntimeError(f"no answer on {self.url}: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: a crash, not a shutdown (no response is finished)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def worthit_replica(log_dir: Path, *extra: str) -> Replica:
    """`worthit engine serve` on the bare bundled model (`--lora none`), as llama.cpp's own
    servers load it, so their outputs and model ids compare."""
    port = free_port()
    command = [sys.executable, "-m", "worthit", "engine", "serve", "--port", str(port),
               "--lora", "none", *SMALL_ENGINE, *extra]  # fmt: skip
    return Replica(command, port, log_dir / f"worthit-{port}.log")


def llama_cpp_replica(log_dir: Path, model: Path) -> Replica:
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
               "--port", str(port), "--n_ctx", "1024",
               "--n_threads", "1", "--n_threads_batch", "1"]  # fmt: skip
    return Replica(command, port, log_dir / f"llama-cpp-{port}.log")
