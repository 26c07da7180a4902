"""The docs stay true: every command README.md shows parses against the real CLI, every
URL it shows is a route of the real app, the layers import one way and no package in a
cycle, README.md's Layout names every package, and docs/engine.md lists every module of
the engine."""

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
from worthit.http.app import create_app
from worthit.service.settings import ServiceSettings

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

BELOW_SERVICE = {"answer", "audit", "explain", "decide", "engine", "watches", "facts", "market"}
MAY_IMPORT = {
    "text": set(),
    "db": {"text"},
    "market": {"db", "text"},
    "demo": {"market", "db", "text"},
    "facts": {"market", "db", "text"},
    "decide": {"facts", "market", "db", "text"},
    "explain": {"decide", "facts", "market", "db", "text"},
    "engine": {"text"},
    "watches": {"decide", "facts", "market", "db", "text"},
    "audit": {"text"},
    "answer": {"audit", "explain", "decide", "engine", "facts", "market", "db", "text"},
    "service": BELOW_SERVICE | {"demo", "db", "text"},
    "http": BELOW_SERVICE | {"service", "db", "text"},
    "cli": BELOW_SERVICE | {"http", "service", "demo", "db", "text"},
}
"""design.md: http → service → answer → explain/decide/engine/watches → facts → market →
db; the engine knows nothing about products; audit is fed by answer and read by http;
demo writes through market; the CLI uses service; text is shared by all."""
HTTP_IMPORTERS = {"cli/serve.py", "cli/engine_serve.py"}
"""Nothing imports `http` but the CLI's serve commands."""
DEMO_IMPORTERS = {"cli/market.py", "service/event_service.py"}
"""The demo market is reached from the CLI (`worthit demo`) and from the service's event
inputs, which run its live feed when `serve --live-rate` asks (the demo's moving prices)."""
MAX_MODULES = 20


def imported_modules(path: Path) -> set[str]:
    """Every worthit module `path` imports, TYPE_CHECKING and function-local imports
    included: `from worthit.a import b` names the module `worthit.a.b` when it is one."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if module_path(full) is not None else node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.startswith("worthit.")}


def module_path(name: str) -> Path | None:
    base = SRC.parent.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_layers(path: Path) -> set[str]:
    return {n.split(".")[1] for n in imported_modules(path)}


MODULES = sorted(p for p in SRC.rglob("*.py") if p.parent != SRC)
PACKAGES = sorted(p.parent for p in SRC.rglob("__init__.py") if p.parent != SRC)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_layers_import_one_way(path: Path) -> None:
    layer = path.relative_to(SRC).parts[0]
    assert layer in MAY_IMPORT, f"{layer}/ is no layer of design.md: add it to the table"
    imported = imported_layers(path) - {layer}
    assert imported <= MAY_IMPORT[layer], f"{layer} may not import {imported - MAY_IMPORT[layer]}"
    if "http" in imported:
        assert str(path.relative_to(SRC)) in HTTP_IMPORTERS
    if "demo" in imported:
        assert str(path.relative_to(SRC)) in DEMO_IMPORTERS


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_package_imports_in_a_cycle(package: Path) -> None:
    """Inside one package (its subpackages included) the modules import one way, so each
    can be read, and imported, after the ones it uses."""
    inside = {module_name(p): p for p in package.rglob("*.py")}
    graph = {
        name: {m for m in imported_modules(path) if m in inside and m != name}
        for name, path in inside.items()
    }
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            cycle = [*trail[trail.index(name) :], name]
            pytest.fail(f"import cycle: {' → '.join(cycle)}")
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_package_holds_more_than_twenty_modules(package: Path) -> None:
    modules = [p for p in package.glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES, f"{len(modules)} modules: split it by concept"


# -- engine.md ----------------------------------------------------------------------


def test_engine_md_lists_every_engine_module() -> None:
    doc = (ROOT / "docs" / "engine.md").read_text()
    files = doc.split("## Files", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_/]+\.py)` \|", files, re.M))
    engine = SRC / "engine"
    modules = {str(p.relative_to(engine)) for p in engine.rglob("*.py")}
    assert listed == {m for m in modules if not m.endswith("__init__.py")}


def test_readme_layout_lists_every_package() -> None:
    """Every package and subpackage, at its depth: `  market/` and under it `    ingest/`."""
    layout = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = {
        (len(indent) // 2 - 1, name)
        for indent, name in re.findall(r"^((?:  )+)([a-z_]+)/", layout, re.M)
    }
    packages = {(len(p.relative_to(SRC).parts) - 1, p.name) for p in PACKAGES}
    assert listed == packages
