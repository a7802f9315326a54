"""`evalbot modal reap [--dry-run] [--json]` — terminate Modal sandboxes no run needs any more.

The same pass the workers' schedule runs every ten minutes (workflows/engine/reaper.py): a
sandbox is terminated when its experiment is not running on Temporal. `--dry-run` lists what would
go. Exit 0 when every doomed sandbox was terminated, 1 when some could not be (named in the
output).
"""

from __future__ import annotations

import asyncio
import json

import click

from bot import composition
from bot.commands.errors import CommandError, ExitCode, command_errors
from workflows.engine.reaper import ReapReport, reap
from workflows.providers import create_provider
from workflows.settings import Settings


@click.group("modal")
def modal_group() -> None:
    """The Modal deployment: reaping stray sandboxes (docs/modal.md)."""


@modal_group.command("reap")
@click.option("--dry-run", is_flag=True, help="List what would be terminated; terminate nothing.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@command_errors
def reap_command(settings: Settings, dry_run: bool, as_json: bool) -> None:
    """Terminate the sandboxes of finished, cancelled or unknown runs."""
    if settings.sandbox.provider != "modal":
        raise CommandError.bad_input(
            f"reaping is for the modal provider; this deployment uses "
            f"{settings.sandbox.provider!r} (set EVALBOT_PROVIDER=modal)"
        )
    report = asyncio.run(_reap(settings, dry_run))
    if as_json:
        click.echo(json.dumps(report.as_dict() | {"dry_run": dry_run}, indent=2))
    else:
        _print(report, dry_run)
    if report.failed:
        raise SystemExit(ExitCode.COULD_NOT_RUN)


async def _reap(settings: Settings, dry_run: bool) -> ReapReport:
    store = composition.open_store(settings)
    try:
        async with composition.session(settings, store, run_workers=False) as active:
            return await reap(create_provider(settings), active.client, dry_run=dry_run)
    finally:
        store.close()


def _print(report: ReapReport, dry_run: bool) -> None:
    verb = "would terminate" if dry_run else "terminated"
    click.echo(
        f"{report.checked} run sandboxes: {verb} {len(report.terminated)}, "
        f"kept {len(report.kept)} (their runs are going on)"
    )
    for sandbox_id in report.terminated:
        click.echo(f"  {verb} {sandbox_id}")
    for failure in report.failed:
        click.echo(f"  could not terminate {failure}")
