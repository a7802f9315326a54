"""The `evalbot` command: one click group combining the subcommand modules in bot/commands/.

Errors reach the user as one sentence (`evalbot: error: ...`) and a non-zero exit code, never a
traceback; `EVALBOT_DEBUG=1` shows the traceback. Commands fail with a `CommandError`
(bot/commands/errors.py); `main()` reports anything else the same way, with exit code 1.
"""

from __future__ import annotations

import sys

import click

from bot.commands import (
    bot,
    budget,
    cases,
    compare,
    doctor,
    experiments,
    history,
    modal,
    prewarm,
    regrade,
    secrets,
    wait,
)
from bot.commands.errors import CommandError, debugging
from workflows.settings import Settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run agent evaluations: experiments, results, the GitHub bot and its jobs."""
    ctx.obj = Settings()


def _register_commands() -> None:
    for command in [*experiments.COMMANDS, *bot.COMMANDS]:
        cli.add_command(command)
    cli.add_command(secrets.secrets_group)
    cli.add_command(regrade.regrade_command)
    cli.add_command(prewarm.prewarm_group)
    cli.add_command(modal.modal_group)
    for extra in (compare.compare_command, wait.wait_command, cases.cases_group,
                  history.history_command, budget.estimate_command,
                  doctor.doctor_command):  # fmt: skip
        cli.add_command(extra)


def main() -> None:
    _register_commands()
    try:
        cli.main(standalone_mode=True)
    except Exception as error:  # a last line of defence: one sentence, not a traceback
        if debugging():
            raise
        failure = CommandError.could_not_run(str(error))
        failure.show()
        sys.exit(failure.exit_code)
