"""CLI start-up: wall and CPU time of `worthit --help`, `ask --help` and `ask --no-llm`.

A command that imports what it does not use (llama.cpp, FastAPI, scipy, the engine) makes a
user wait seconds for a help text or a 12 ms template answer. This runs each command in a
fresh process, several times, and reports the median wall time and the median CPU time
(user + system of the child, which a loaded machine does not inflate as much as wall).

    .venv/bin/python bench/cli_start.py --db /tmp/small.db
    .venv/bin/python bench/cli_start.py --db /tmp/small.db --before /tmp/wt28/src

`--before SRC` runs the same commands with another checkout's `src` first on the path,
interleaved with this one's run by run, so a busy spell of the machine hits both alike.
The `--db` market is built first when missing (`worthit simulate`, 200 products), and for
`--before` a copy of it built by that checkout (its schema may be older), beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def commands(db: str) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "ask --help": ["ask", "--help"],
        "ask --no-llm": ["ask", "--db", db, "--no-llm", "--sku", "S1", "worth it?"],
        "facts": ["facts", "--db", db, "S1"],
    }


def run_once(src: Path, args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one `python -m worthit ARGS` with `src` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src), "NO_COLOR": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "worthit", *args], env=env, capture_output=True, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{args} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--db", required=True, help="a market (built when missing)")
    parser.add_argument("--before", type=Path, default=None, help="another checkout's src/")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sides = {"after": (SRC, args.db)}
    if args.before:
        sides["before"] = (args.before, str(Path(args.db).with_suffix(".before.db")))
    for src, db in sides.values():
        if not Path(db).exists():
            subprocess.run(
                [sys.executable, "-m", "worthit", "simulate", "--db", db, "--skus", "200",
                 "--days", "90", "--seed", "1"],
                env={**os.environ, "PYTHONPATH": str(src)}, check=True, capture_output=True,
            )  # fmt: skip
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {s: {} for s in sides}
    for _ in range(args.runs):
        for side, (src, db) in sides.items():
            for name, argv in commands(db).items():
                samples[side].setdefault(name, []).append(run_once(src, argv))
    for side, by_command in samples.items():
        for name, runs in by_command.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            row = {"side": side, "command": name, "runs": len(runs),
                   "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}  # fmt: skip
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
