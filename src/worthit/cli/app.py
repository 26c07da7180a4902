"""The `worthit` command line."""

from __future__ import annotations

import typer

from worthit.cli.ask import ask_command
from worthit.cli.audit import audit_app
from worthit.cli.backtest import backtest_command
from worthit.cli.calibration import calibration_command
from worthit.cli.engine_serve import engine_app
from worthit.cli.errors import user_errors
from worthit.cli.explain import explain_command
from worthit.cli.facts import facts_command
from worthit.cli.keys import keys_app
from worthit.cli.market import import_command, simulate_command
from worthit.cli.serve import serve_command
from worthit.cli.sources import sources_app

app = typer.Typer(
    name="worthit",
    help="Is this worth buying? A grounded verdict at once, an explanation streamed after it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("ask")(user_errors(ask_command))
app.command("facts")(user_errors(facts_command))
app.command("explain")(user_errors(explain_command))
app.command("import")(user_errors(import_command))
app.command("simulate")(user_errors(simulate_command))
app.command("serve")(user_errors(serve_command))
app.command("backtest")(user_errors(backtest_command))
app.command("calibration")(user_errors(calibration_command))
app.add_typer(keys_app, name="keys")
app.add_typer(sources_app, name="sources")
app.add_typer(audit_app, name="audit")
app.add_typer(engine_app, name="engine")


def main() -> None:
    app()
