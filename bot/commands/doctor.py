"""`evalbot doctor` — can this machine run experiments with these settings? (bot/doctor.py)

One line per check, with its fix. Exit codes: 0 when everything the configured provider (and every
experiment: disk, Temporal, the database) needs is there, 1 otherwise; weaker guarantees and
broken optional integrations are warnings. `--json` prints {"ok", "provider", "checks": [...]}.
"""

from __future__ import annotations

import json
import sys

import click

from bot.commands.errors import ExitCode, command_errors
from bot.doctor import failed, run_checks
from workflows.settings import Settings


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.pass_obj
@command_errors
def doctor_command(settings: Settings, as_json: bool) -> None:
    """Check the sandbox, disk, Temporal, database and integrations; say how to fix each."""
    checks = run_checks(settings)
    missing = failed(checks)
    if as_json:
        document = {
            "ok": not missing,
            "provider": settings.sandbox.provider,
            "checks": [check.as_dict() for check in checks],
        }
        click.echo(json.dumps(document, indent=2))
    else:
        for check in checks:
            click.echo(check.line())
        names = ", ".join(check.name for check in missing)
        verdict = f"not ready: {names}" if missing else "ready"
        click.echo(f"evalbot doctor: {verdict} (provider {settings.sandbox.provider})")
    if missing:
        sys.exit(ExitCode.COULD_NOT_RUN)
