"""`evalbot prewarm --repo URL|PATH [--ref main]`, `prewarm gc`, `prewarm status` — the hourly
prewarmed images (docs/prewarm.md).

`prewarm` builds the ref's head with its evalbot.toml `build.setup` for the configured provider,
records the image in the `prewarmed_images` table, then applies the retention policy (keep the
newest `--keep`, default EVALBOT_PREWARM_KEEP, per repository, plus those running experiments use).
`status` shows the newest image per repository and its age, flagging images older than two hours.
A repository, catalog, sandbox or store error exits 2 with one sentence (`prewarm_errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from bot.commands.errors import CommandError, CommandErrors, ExitCode
from workflows.providers.base import SandboxError
from workflows.settings import Settings
from workflows.store import StoreError

if TYPE_CHECKING:
    from infra.prewarm import PrewarmJobs


@contextlib.contextmanager
def _jobs(settings: Settings) -> Iterator[PrewarmJobs]:
    from bot.composition import share_creation_rate
    from infra.prewarm import PrewarmJobs
    from workflows.providers import create_provider
    from workflows.store import Store
    from workflows.store.prewarmed_images import PrewarmRecords

    store = Store.from_settings(settings)
    store.migrate()
    records = PrewarmRecords(settings.resolved_database_url)
    provider = create_provider(settings)
    share_creation_rate(provider, settings, store)  # builds count against the cluster's rate
    try:
        yield PrewarmJobs(provider, records, store, settings.data_dir / "repos")
    finally:
        records.close()
        store.close()


prewarm_errors = CommandErrors(((SandboxError, StoreError), ExitCode.BAD_INPUT))
"""Repository and catalog errors exit 2 (LIBRARY_ERRORS), and here sandbox and store errors too."""


def _size(size: int | None) -> str:
    return "-" if size is None else f"{size / (1 << 20):.0f} MiB"


@click.group("prewarm", invoke_without_command=True)
@click.option("--repo", help="Agent repository to prewarm (path or URL).")
@click.option("--ref", default="main", show_default=True, help="Branch, tag or commit to build.")
@click.option("--keep", type=click.IntRange(min=1), help="Images kept per repository.")
@click.option("--rebuild", is_flag=True, help="Build even if the ref's head has an image.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
@prewarm_errors
def prewarm_group(
    ctx: click.Context, repo: str | None, ref: str, keep: int | None, rebuild: bool, as_json: bool
) -> None:
    """Build a repository's ref into a prewarmed image (hourly job); see also gc and status."""
    if ctx.invoked_subcommand is not None:
        return
    if not repo:
        raise CommandError.bad_input("say which repository to prewarm: --repo URL|PATH")
    settings: Settings = ctx.obj
    with _jobs(settings) as jobs:
        outcome = asyncio.run(
            jobs.prewarm(
                repo, ref, keep_last=keep or settings.sandbox.prewarm_keep, rebuild=rebuild
            )
        )
    record = outcome.record
    if as_json:
        payload = record.model_dump(mode="json") | {
            "built": outcome.built, "removed": outcome.removed, "kept_in_use": outcome.kept_in_use,
        }  # fmt: skip
        click.echo(json.dumps(payload))
        return
    from workflows.prewarm.image_label import duration

    verb = f"built in {duration(record.build_seconds)}" if outcome.built else "already current"
    click.echo(
        f"prewarmed {record.repo} @ {record.commit[:12]} ({record.provider}): {verb}, "
        f"{_size(record.size_bytes)} -> {record.reference}"
    )
    _echo_gc(outcome.removed, outcome.kept_in_use)


def _echo_gc(removed: list[str], kept: list[str]) -> None:
    for reference in removed:
        click.echo(f"removed old image {reference}")
    for reference in kept:
        click.echo(f"kept old image {reference}: a running experiment or sandbox uses it")


@prewarm_group.command("gc")
@click.option("--repo", help="Only this repository (default: all).")
@click.option("--keep", type=click.IntRange(min=1), help="Images kept per repository.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_obj
@prewarm_errors
def gc_command(settings: Settings, repo: str | None, keep: int | None, as_json: bool) -> None:
    """Delete prewarmed images beyond the newest --keep per repository (unless in use)."""
    with _jobs(settings) as jobs:
        outcome = asyncio.run(
            jobs.collect_garbage(keep or settings.sandbox.prewarm_keep, repo=repo)
        )
    if as_json:
        click.echo(json.dumps({"removed": outcome.removed, "kept_in_use": outcome.kept_in_use}))
        return
    _echo_gc(outcome.removed, outcome.kept_in_use)
    click.echo(f"{len(outcome.removed)} removed, {len(outcome.kept_in_use)} kept in use")


@prewarm_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--check", is_flag=True, help="Exit 1 when an image is stale (or there is none).")
@click.pass_obj
@prewarm_errors
def status_command(settings: Settings, as_json: bool, check: bool) -> None:
    """The newest prewarmed image per repository, its age, and whether it is stale (> 2 h)."""
    from infra.prewarm import prewarm_status
    from workflows.prewarm.image_label import duration
    from workflows.store import Store
    from workflows.store.prewarmed_images import PrewarmRecords

    with Store.from_settings(settings) as store:
        store.migrate()
    records = PrewarmRecords(settings.resolved_database_url)
    try:
        statuses = prewarm_status(records, datetime.now(UTC))
    finally:
        records.close()
    if as_json:
        click.echo(json.dumps({"images": [s.as_dict() for s in statuses]}))
    elif not statuses:
        click.echo("no prewarmed images yet: run `evalbot prewarm --repo URL|PATH`")
    else:
        click.echo(f"{'REPO':<40} {'COMMIT':<12} {'PROVIDER':<8} {'AGE':>6} {'BUILD':>6}  FLAGS")
        for s in statuses:
            r = s.record
            flag = "stale (> 2h): is the prewarm job running?" if s.stale else "ok"
            click.echo(
                f"{r.repo[-40:]:<40} {r.commit[:12]:<12} {r.provider:<8} "
                f"{duration(s.age_s):>6} {duration(r.build_seconds):>6}  {flag}"
            )
    if check and (not statuses or any(s.stale for s in statuses)):
        raise SystemExit(ExitCode.COULD_NOT_RUN)  # a result, not an error: the table says why


COMMANDS: list[click.Command] = [prewarm_group]
