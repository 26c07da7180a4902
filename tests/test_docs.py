"""The docs stay true: every command README.md shows parses against the real CLI, every
URL it shows is a route of the real app, the layers import one way, and docs/engine.md
lists every module of the engine."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer.main
from starlette.routing import Match

from worthit.cli.app import app as cli_app
from worthit.server.app import create_app
from worthit.server.settings import ServiceSettings

ROOT = Path(__file__).parents[1]
SRC = ROOT / "src" / "worthit"
README = (ROOT / "README.md").read_text()


def readme_commands() -> list[str]:
    """Every `$ …` line of README.md's console blocks, continuation lines joined."""
    commands = []
    for block in re.findall(r"```console\n(.*?)```", README, re.S):
        lines = block.replace("\\\n", " ").splitlines()
        commands += [line[2:] for line in lines if line.startswith("$ ")]
    return commands


def words(command: str) -> list[str]:
    """The command's words, its trailing comment and any pipe before it dropped."""
    parts = shlex.split(command, comments=True)
    if "|" in parts:
        parts = parts[parts.index("|") + 1 :]
    return parts


WORTHIT = [c for c in readme_commands() if words(c)[:1] == ["worthit"]]
BENCH = [c for c in readme_commands() if words(c)[:1] == [".venv/bin/python"]]
CURL = [c for c in readme_commands() if words(c)[:1] == ["curl"]]
MAKE = [c for c in readme_commands() if words(c)[:1] == ["make"]]


def test_the_readme_shows_commands_of_every_kind() -> None:
    assert len(WORTHIT) >= 20 and BENCH and CURL and MAKE


@pytest.mark.parametrize("command", WORTHIT)
def test_every_worthit_command_in_the_readme_parses(command: str) -> None:
    """Parsed by the real click command (options, their types, required arguments),
    without running it."""
    group = typer.main.get_command(cli_app)
    args = words(command)[1:]
    cmd: click.Command = group
    ctx_args = list(args)
    while isinstance(cmd, click.Group):
        name, ctx_args = ctx_args[0], ctx_args[1:]
        sub = cmd.get_command(click.Context(cmd), name)
        assert sub is not None, f"no command {name!r}: {command}"
        cmd = sub
    cmd.make_context(cmd.name or "worthit", ctx_args)


@pytest.mark.parametrize("command", BENCH)
def test_every_bench_command_in_the_readme_names_its_real_options(command: str) -> None:
    script, *args = words(command)[1:]
    assert (ROOT / script).is_file(), script
    help_text = subprocess.run(
        [sys.executable, str(ROOT / script), "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    for flag in (a.split("=")[0] for a in args if a.startswith("--")):
        assert flag in help_text, f"{script} has no {flag}"


@pytest.mark.parametrize("command", CURL)
def test_every_url_in_the_readme_is_a_route(command: str, tmp_path: Path) -> None:
    app = create_app(ServiceSettings(db_path=tmp_path / "m.db", auth=False, model_path=ROOT))
    method = "POST" if "-d" in words(command) else "GET"
    url = next(w for w in words(command) if w.startswith("http"))
    path = re.sub(r"^https?://[^/]+", "", url).split("?")[0]
    scope = {"type": "http", "path": path, "method": method, "root_path": ""}
    assert any(route.matches(scope)[0] is Match.FULL for route in app.routes), url


def test_every_make_target_in_the_readme_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for command in MAKE:
        target = words(command)[1]
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), target


# -- layers ---------------------------------------------------------------------------

LAYERS = ["text", "market", "facts", "decide", "explain", "engine", "answer", "audit", "server"]
MAY_IMPORT = {
    "text": set(),
    "market": {"text"},
    "facts": {"market", "text"},
    "decide": {"facts", "market", "text"},
    "explain": {"decide", "facts", "market", "text"},
    "engine": {"text"},
    "answer": {"audit", "explain", "decide", "engine", "facts", "market", "text"},
    "audit": {"market", "text"},
    "server": {"answer", "audit", "explain", "decide", "engine", "facts", "market", "text"},
    "cli": {"server", "answer", "audit", "explain", "decide", "engine", "facts", "market", "text"},
}
"""design.md: server → answer → explain/decide/engine → facts → market; the engine knows
nothing about products; audit is fed by answer and read by server; the CLI sits beside
the server and uses answer."""
SERVER_IMPORTERS = {"cli/serve.py", "cli/engine_serve.py", "cli/keys.py"}
"""Nothing imports `server` but the CLI's serve commands (and `keys`, which manages the
tenant store the server authenticates against)."""


def imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n.split(".")[1] for n in names if n.startswith("worthit.") and n.count(".") >= 1}


MODULES = sorted(p for p in SRC.rglob("*.py") if p.parent != SRC)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_layers_import_one_way(path: Path) -> None:
    layer = path.relative_to(SRC).parts[0]
    assert layer in MAY_IMPORT, f"{layer}/ is no layer of design.md: add it to the table"
    imported = imported_layers(path) - {layer}
    assert imported <= MAY_IMPORT[layer], f"{layer} may not import {imported - MAY_IMPORT[layer]}"
    if "server" in imported:
        assert str(path.relative_to(SRC)) in SERVER_IMPORTERS


# -- engine.md ----------------------------------------------------------------------


def test_engine_md_lists_every_engine_module() -> None:
    doc = (ROOT / "docs" / "engine.md").read_text()
    files = doc.split("## Files", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_]+\.py)` \|", files, re.M))
    modules = {p.name for p in (SRC / "engine").glob("*.py")} - {"__init__.py"}
    assert listed == modules


def test_readme_layout_lists_every_package() -> None:
    layout = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^  ([a-z]+)/", layout, re.M))
    packages = {p.parent.name for p in SRC.glob("*/__init__.py")}
    assert listed == packages
