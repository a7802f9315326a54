"""`evalbot wait ID` — block until an experiment has finished.

Polls the store, where the engine records each experiment's state. Exit codes: 0 completed, 1
failed or cancelled, 3 still running when --timeout ran out, 2 unknown experiment. `--json` prints
the final state as `evalbot status --json` does. Except for 2 (a `CommandError`), the exit code is
the result: the state is printed, no error sentence.
"""

from __future__ import annotations

import json
import sys
import time

import click

from bot import composition
from bot.commands.errors import CommandError, ExitCode, command_errors
from workflows.settings import Settings

TERMINAL = {
    "completed": ExitCode.OK,
    "failed": ExitCode.COULD_NOT_RUN,
    "cancelled": ExitCode.COULD_NOT_RUN,
}


@click.command("wait")
@click.argument("experiment_id")
@click.option("--timeout", type=float, default=3600.0, show_default=True, help="Seconds.")
@click.option("--poll", type=float, default=2.0, show_default=True, help="Seconds between looks.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@command_errors
def wait_command(
    settings: Settings, experiment_id: str, timeout: float, poll: float, as_json: bool
) -> None:
    """Wait until EXPERIMENT_ID is completed, failed or cancelled."""
    deadline = time.monotonic() + timeout
    store = composition.open_store(settings)
    while True:
        record = store.get_experiment(experiment_id)
        if record is None:
            raise CommandError.bad_input(f"no experiment '{experiment_id}'")
        status = str(record.status)
        if status in TERMINAL or time.monotonic() >= deadline:
            break
        time.sleep(poll)
    counts = store.count_runs(experiment_id)
    state = {
        "experiment_id": experiment_id,
        "status": status,
        "cells": len(record.spec.cells()),
        "finished": sum(counts.values()),
        "by_status": counts,
        "timed_out": status not in TERMINAL,
    }
    if as_json:
        click.echo(json.dumps(state, indent=2))
    else:
        click.echo(
            f"{experiment_id}: {status}; {state['finished']}/{state['cells']} cells finished"
        )
    sys.exit(TERMINAL.get(status, ExitCode.STILL_RUNNING))
