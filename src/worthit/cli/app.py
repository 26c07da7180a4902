"""The `worthit` command line.

Each command's module is imported only when that command runs (or its own `--help` is
asked for): the commands between them need llama.cpp, FastAPI, scipy and the engine, and
importing all of them made every command, `worthit --help` included, take seconds to
start. The listing under `worthit --help` comes from the table below, so it imports
nothing; tests/test_cli.py checks that it says what each command's own help says.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

COMMANDS: dict[str, tuple[str, str, str]] = {
    "ask": (
        "worthit.cli.ask",
        "ask_command",
        "Is it worth buying? Prints the verdict, then streams the explanation.",
    ),
    "facts": (
        "worthit.cli.facts",
        "facts_command",
        "Print one product's fact sheet as of now (or as of --as-of).",
    ),
    "explain": (
        "worthit.cli.explain",
        "explain_command",
        "How much of the market's expected demand the explanation store covers; with "
        "--warm, have the model write what is missing, most-asked-for first.",
    ),
    "import": (
        "worthit.cli.market",
        "import_command",
        "Import products, prices, stock, reviews, promotions and sales from JSONL.",
    ),
    "simulate": (
        "worthit.cli.market",
        "simulate_command",
        "Build a deterministic demo market (same seed and end day → same content).",
    ),
    "serve": ("worthit.cli.serve", "serve_command", "Serve worthit over HTTP until interrupted."),
    "backtest": (
        "worthit.cli.backtest",
        "backtest_command",
        "Replay the market: the verdict as of each decision day, a shopper who follows it, "
        "and the share of the clairvoyant saving that shopper captures.",
    ),
    "calibration": (
        "worthit.cli.calibration",
        "calibration_command",
        "Replay the backtest and read the feedback; print the rules' confidence against how "
        "often the advice was right (a reliability table), and the calibrated confidence per "
        "verdict and category.",
    ),
    "keys": (
        "worthit.cli.keys",
        "keys_app",
        "API keys: create, list and revoke them (stored hashed beside the market).",
    ),
    "sources": (
        "worthit.cli.sources",
        "sources_app",
        "Webhook sources: add, list and remove them (each with its signing secret).",
    ),
    "audit": (
        "worthit.cli.audit",
        "audit_app",
        "The tamper-evident log of answers: its key, proofs, verification, SLA reports.",
    ),
    "engine": (
        "worthit.cli.engine_serve",
        "engine_app",
        "The LLM engine on its own, over the OpenAI-compatible wire.",
    ),
}
"""name → (module, attribute: a command function or a Typer group, one-line help)."""


def load_command(name: str) -> Any:
    """The real click command `name`, its module imported now."""
    module_name, attribute, _ = COMMANDS[name]
    target = getattr(importlib.import_module(module_name), attribute)
    holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)  # a group even when it holds one command
    else:
        from worthit.cli.errors import user_errors

        holder.command(name)(user_errors(target))
    return typer.main.get_group(holder).commands[name]  # built as the root app built it


class LazyGroup(TyperGroup):
    """Loads a command when it is resolved; lists them all from COMMANDS."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if self._listing:  # the help's table needs names and one line each
            return TyperCommand(name=cmd_name, help=COMMANDS[cmd_name][2])
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="worthit",
    cls=LazyGroup,
    help="Is this worth buying? A grounded verdict at once, an explanation streamed after it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """No options of its own: a callback makes Typer build a group with no command yet."""


def main() -> None:
    app()
