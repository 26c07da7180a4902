"""The `worthit` command line."""

from __future__ import annotations

import typer

from worthit.cli.ask import ask_command
from worthit.cli.facts import facts_command
from worthit.cli.keys import keys_app
from worthit.cli.market import import_command, simulate_command
from worthit.cli.serve import serve_command

app = typer.Typer(
    name="worthit",
    help="Is this worth buying? A grounded verdict at once, an explanation streamed after it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("ask")(ask_command)
app.command("facts")(facts_command)
app.command("import")(import_command)
app.command("simulate")(simulate_command)
app.command("serve")(serve_command)
app.add_typer(keys_app, name="keys")


def main() -> None:
    app()
