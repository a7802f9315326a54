"""`evalbot secrets sync | status | policy` — copy secrets from Vault into the provider's secret
groups, and watch that they stay fresh (docs/secrets.md).

The secret-sync code lives in `infra.secrets`; it is imported inside each command so that other
commands (and `evalbot --help`) do not pay for loading the Vault client. A `SecretsError` exits 2
with its sentence.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import click

from bot.commands.errors import CommandError, ExitCode, command_errors
from workflows.settings import Settings


@click.group("secrets")
def secrets_group() -> None:
    """Sync secrets from Vault into the sandbox provider and report their freshness."""


@secrets_group.command("sync")
@click.option("--dry-run", is_flag=True, help="Show what would change (key names, versions).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_obj
@command_errors
def sync_command(settings: Settings, dry_run: bool, as_json: bool) -> None:
    """Copy each mapped Vault secret's allowlisted keys into its secret group."""
    from infra.secrets import SecretsError
    from infra.secrets.secret_service import sync_secrets

    try:
        changes = sync_secrets(settings, os.environ, now=datetime.now(UTC), dry_run=dry_run)
    except SecretsError as error:
        raise CommandError.bad_input(f"secret sync failed: {error}") from None
    if as_json:
        click.echo(json.dumps({"dry_run": dry_run, "groups": [c.as_dict() for c in changes]}))
        return
    for change in changes:
        click.echo(change.describe(dry_run=dry_run))
    changed = sum(1 for c in changes if c.action != "unchanged")
    verb = "would change" if dry_run else "changed"
    click.echo(f"{len(changes)} group(s) checked, {changed} {verb}")


@secrets_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--check", is_flag=True, help="Exit 1 when any group is flagged.")
@click.pass_obj
@command_errors
def status_command(settings: Settings, as_json: bool, check: bool) -> None:
    """Each group's age and Vault version; flags stale, never-synced and overdue groups."""
    from infra.secrets import SecretsError
    from infra.secrets.secret_service import secret_status
    from infra.secrets.status import format_age

    try:
        statuses = secret_status(settings, now=datetime.now(UTC))
    except SecretsError as error:
        raise CommandError.bad_input(str(error)) from None
    if as_json:
        click.echo(json.dumps({"groups": [s.as_dict() for s in statuses]}))
    else:
        click.echo(f"{'GROUP':<24} {'VERSION':>7}  {'SYNCED':>8}  {'SECRET AGE':>10}  FLAGS")
        for s in statuses:
            version = f"v{s.version}" if s.version is not None else "-"
            flags = "; ".join(s.flags) or "ok"
            click.echo(
                f"{s.group:<24} {version:>7}  {format_age(s.age):>8}  "
                f"{format_age(s.secret_age):>10}  {flags}"
            )
    if check and not all(s.ok for s in statuses):
        raise SystemExit(ExitCode.COULD_NOT_RUN)  # a result, not an error: the table says why


@secrets_group.command("policy")
@click.pass_obj
@command_errors
def policy_command(settings: Settings) -> None:
    """Print the Vault policy that grants read on exactly the mapped paths."""
    from infra.secrets import SecretsError, load_mapping, render_policy

    try:
        click.echo(render_policy(load_mapping(settings.secrets.mapping_path)), nl=False)
    except SecretsError as error:
        raise CommandError.bad_input(str(error)) from None


COMMANDS: list[click.Command] = [secrets_group]
