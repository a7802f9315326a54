"""The `evalbot` command: one click group combining the subcommand modules in bot/commands/.

Errors reach the user as one sentence (`evalbot: error: ...`) and a non-zero exit code, never a
traceback; `EVALBOT_DEBUG=1` shows the traceback.
"""

from __future__ import annotations

import os
import sys

import click

from workflows.settings import Settings


class EvalbotError(click.ClickException):
    """A failure the user can act on; printed as one sentence."""

    exit_code = 2

    def show(self, file: object = None) -> None:
        click.echo(f"evalbot: error: {self.format_message()}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run agent evaluations: experiments, results, the GitHub bot and its jobs."""
    ctx.obj = Settings()


def _register_commands() -> None:
    from bot.commands import bot, engine, prewarm, regrade, secrets

    for command in [*engine.COMMANDS, *bot.COMMANDS]:
        cli.add_command(command)
    cli.add_command(secrets.secrets_group)
    cli.add_command(regrade.regrade_command)
    cli.add_command(prewarm.prewarm_group)
    from bot.commands import budget, cases, compare, history, wait  # agents and release managers

    for extra in (compare.compare_command, wait.wait_command, cases.cases_group,
                  history.history_command, budget.estimate_command):  # fmt: skip
        cli.add_command(extra)


def main() -> None:
    _register_commands()
    try:
        cli.main(standalone_mode=True)
    except Exception as error:  # a last line of defence: one sentence, not a traceback
        if os.environ.get("EVALBOT_DEBUG"):
            raise
        click.echo(f"evalbot: error: {error}", err=True)
        sys.exit(1)
