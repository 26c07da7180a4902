"""README.md runs: every `worthit …` and `curl …` line of it, as written, in a directory of
its own with a small demo market at `var/demo.db` (and a copy at `shop.db`), its exit code
(and a curl's HTTP status) checked.

tests/test_docs.py checks that each line parses; this runs them, which is what a newcomer
does with the README, and what found "Is the NC700 worth it?" exiting 4 and a raw UTF-8
query answered with plain text. What a line may not do here is said in NEEDS, with the
reason; the few rewrites are in `as_run` (ports, /tmp, the warm-up's time budget). The
lines run in the README's order, since some need what an earlier one made (the audit log a
server wrote).

The model writes every `ask` and `explain --warm` line's text, so on a 2-core machine the
whole run takes tens of minutes. `WORTHIT_README_QUICK=1` leaves those lines out, for a
check of everything else in a few minutes while editing the README.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from test_docs import readme_commands, words

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
MARKET = ["--skus", "12", "--days", "150", "--seed", "7", "--end", "2026-12-01"]
"""Small enough to build in seconds and for `explain --warm` to cover in minutes; the
README's dates (--as-of 2026-11-20, the audit report's 2026-12-01) fall inside it whatever
day the suite runs."""
RIVALS = [
    ("S341", "Orbitek NC700 Pro Wireless Headphones", "Orbitek", 189.0),
    ("S594", "Meridian NC700 True Wireless Earbuds", "Meridian", 129.0),
]
"""Two of the full demo market's other NC700s (its SKUs and titles), imported into the
small one, so "Is the NC700 worth it?" is as ambiguous as the README says."""
QUICK = os.environ.get("WORTHIT_README_QUICK") == "1"
WARM_BUDGET_S = 20
"""`explain --warm --budget-s 1500` is a ceiling a shop sets for a night's work; here the
line only has to run and end well, so it gets seconds, not 25 minutes."""

NEEDS = {
    "postgresql://": "a PostgreSQL server",
    "redis://": "a Redis server",
    "feeds.example.com": "a price feed on the internet",
    "--tls-cert chain.pem": "a certificate and its key",
    "--engine ": "engine replicas on other ports and hosts",
    "models/other.gguf --threads": "another GGUF (ask --model's missing file is run: exit 2)",
    "producer |": "the retailer's producer program",
    "--skus 2000 --days 180": "the full demo market (minutes); built small above",
}
"""A line containing the key is not run, for the reason given."""

EXIT = {
    '"Is the NC700 worth it?"': 4,  # ambiguous, as the README says
    "--model ~/models/other.gguf": 2,  # a model file that is missing
    "wk_3f2a9c1d0b7e": 1,  # no such key in this store
}
"""Lines whose documented outcome is not exit code 0."""

READY_S = 300.0


@dataclass
class Outcome:
    line: str
    problem: str | None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def as_run(line: str, ports: dict[str, int], where: Path) -> str:
    """The line with this machine's free ports for the README's, and the test's directory
    for /tmp (other work on this machine may own /tmp/small.db)."""
    for written, port in ports.items():
        line = line.replace(f"127.0.0.1:{written}", f"127.0.0.1:{port}")
        line = line.replace(f"--port {written}", f"--port {port}")
    line = line.replace("/tmp/", f"{where}/")
    line = re.sub(r"--budget-s \d+", f"--budget-s {WARM_BUDGET_S}", line)
    parts = words(line)
    serving = parts[1:2] == ["serve"] or parts[1:3] == ["engine", "serve"]
    if serving and "--port" not in parts:
        line = line.split(" #", 1)[0] + f" --port {ports['8000']}"
    return line


def run_all(where: Path, env: dict[str, str]) -> list[Outcome]:
    ports = {"8000": free_port(), "8001": free_port()}
    lines = [c for c in readme_commands() if words(c)[:1] in (["worthit"], ["curl"])]
    curls = [c for c in lines if words(c)[0] == "curl"]
    outcomes = []
    for line in lines:
        parts = words(line)
        reason = next((why for key, why in NEEDS.items() if key in line), None)
        writes = parts[1:2] == ["ask"] and not {"--no-llm", "--model"} & set(parts)
        if QUICK and (writes or "--warm" in parts):
            reason = "the model's time (WORTHIT_README_QUICK=1)"
        if reason is not None:
            outcomes.append(Outcome(line, f"not run: needs {reason}"))
            continue
        if parts[0] == "curl":
            continue  # run while `serve --demo` is up
        command = as_run(line, ports, where)
        if parts[1:2] == ["serve"] or parts[1:3] == ["engine", "serve"] or "--live" in parts:
            with_curls = curls if "--demo" in parts else []
            outcomes += serve(line, command, where, env, ports, with_curls)
            continue
        done = subprocess.run(
            ["bash", "-c", command], cwd=where, env=env, capture_output=True, text=True,
            timeout=1800, check=False,
        )  # fmt: skip
        expected = next((code for key, code in EXIT.items() if key in line), 0)
        problem = None
        if done.returncode != expected:
            problem = f"exit {done.returncode}, expected {expected}: {done.stderr[-600:]}"
        outcomes.append(Outcome(line, problem))
    return outcomes


def serve(
    line: str,
    command: str,
    where: Path,
    env: dict[str, str],
    ports: dict[str, int],
    curls: list[str],
) -> list[Outcome]:
    """Start a long-running line, wait until it answers (a server's /readyz or /v1/models;
    the live simulator's first seconds), run `curls` against it, stop it with Ctrl-C as a
    user would."""
    problem = start_and_wait(command, where, env, lambda: [
        Outcome(c, run_curl(c, ports, where)) for c in curls
    ])  # fmt: skip
    if isinstance(problem, list):
        return [Outcome(line, None), *problem]
    return [Outcome(line, problem), *(Outcome(c, "not run: the server did not start")
                                      for c in curls)]  # fmt: skip


def start_and_wait(
    command: str, where: Path, env: dict[str, str], ready: Callable[[], list[Outcome]]
) -> str | list[Outcome]:
    """What went wrong starting `command`, or what `ready` returned while it ran."""
    log = where / "serve.err"  # a file: a server's pipe left unread would fill and block it
    with log.open("w") as err:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], cwd=where, env=env,
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        parts = words(command)
        port = int(parts[parts.index("--port") + 1]) if "--port" in parts else None
        path = "/v1/models" if parts[1:3] == ["engine", "serve"] else "/readyz"
        give_up = time.monotonic() + (3.0 if port is None else READY_S)
        while time.monotonic() < give_up:
            if process.poll() is not None:
                said = log.read_text()[-600:]
                return f"exited {process.returncode} before it was ready: {said}"
            if port is not None:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2).status_code == 200:
                        return ready()
                except httpx.HTTPError:
                    pass
            time.sleep(0.5)
        return ready() if port is None else f"not ready after {READY_S:.0f} s"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_curl(line: str, ports: dict[str, int], where: Path) -> str | None:
    """The line as written, plus what makes curl print the status."""
    written = re.sub(r"\s+#\s.*$", "", as_run(line, ports, where))  # the comment, not flags
    command = written + " -s -o /dev/null -w '%{http_code}'"
    done = subprocess.run(
        ["bash", "-c", command], cwd=where, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    if done.returncode != 0 or done.stdout.strip() != "200":
        return f"curl exit {done.returncode}, status {done.stdout.strip()!r}: {done.stderr}"
    return None


def test_every_worthit_and_curl_line_of_the_readme_runs(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),  # ~/models/… is this directory's, never the user's
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "NO_COLOR": "1",
    }
    env.pop("WORTHIT_DB", None)
    (tmp_path / "var").mkdir()
    built = subprocess.run(
        ["worthit", "simulate", "--db", "var/demo.db", *MARKET],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    rivals = "".join(
        json.dumps({"type": "product", "sku": sku, "title": title, "brand": brand,
                    "category": "headphones"}) + "\n"
        + "".join(json.dumps({"type": "price", "sku": sku, "price": price,
                              "ts": f"2026-11-{day:02d}T08:00:00Z"}) + "\n"
                  for day in range(1, 31))
        for sku, title, brand, price in RIVALS
    )  # fmt: skip
    imported = subprocess.run(
        ["worthit", "import", "--db", "var/demo.db", "-"], input=rivals,
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    (tmp_path / "shop.db").write_bytes((tmp_path / "var" / "demo.db").read_bytes())
    lines = [
        {"type": "product", "sku": "M1", "title": "Harbor K2 Kettle", "brand": "Harbor",
         "category": "kitchen"},
        {"type": "price", "sku": "M1", "ts": "2026-11-30T08:00:00Z", "price": 39.5},
    ]  # fmt: skip
    (tmp_path / "market.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    outcomes = run_all(tmp_path, env)
    ran = [o for o in outcomes if not (o.problem or "").startswith("not run")]
    failed = [f"{o.line}\n    {o.problem}" for o in ran if o.problem is not None]
    skipped = [f"{o.line}\n    {o.problem}" for o in outcomes if o not in ran]
    print("\n".join(["not run:", *skipped]))
    assert len(ran) >= (25 if QUICK else 40)
    assert not failed, "\n".join(failed)
