"""What `evalbot demo` does after its PR experiment (docs/dashboard.md, "The demo"): record a short
history of main (bot/demo_history.py) and say how to open the dashboard, with a token."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import click

from bot import demo_history
from workflows.catalog.loaders import load_dataset
from workflows.settings import Settings

DEFAULT_URL = "http://127.0.0.1:8000/dashboard"


def history_cases(settings: Settings, dataset: str, cases: list[str]) -> list[str]:
    """The demo's own case selection, or else the first HISTORY_CASES cases of the dataset."""
    if cases:
        return cases
    loaded = load_dataset(Path(settings.catalog_root), dataset)
    return [case.id for case in loaded.cases[: demo_history.HISTORY_CASES]]


def record_demo_history(
    settings: Settings,
    repo: Path,
    base: str,
    cases: list[str],
    run: demo_history.Runner,
    *,
    dataset: str = "bar",
) -> list[str]:
    """Commit the history (bot/demo_history.py) and run its main evaluations (`run` runs one to
    its end), one trial each."""
    commits = demo_history.history_commits(repo, base)
    chosen = history_cases(settings, dataset, cases)
    specs = demo_history.history_specs(settings, repo, dataset, commits, chosen)
    click.echo(
        f"\ndemo: recording main's history: {len(specs)} main evaluations of {len(chosen)} cases, "
        "1 trial",
        err=True,
    )

    done = asyncio.run(demo_history.record_history(specs, run))
    for commit, experiment_id in zip(commits, done, strict=True):
        tag = f" ({commit.release})" if commit.release else ""
        click.echo(f"demo:   {commit.sha[:8]} {commit.message}{tag}: {experiment_id}", err=True)
    return done


def print_dashboard(settings: Settings, experiment_id: str, dataset: str, *, err: bool) -> None:
    """How to serve the dashboard on this store, where to look, and the token to sign in with."""
    base = (settings.dashboard.public_url or DEFAULT_URL).rstrip("/")
    if settings.dashboard.token is not None:
        token_env, sign_in = "", "sign in with your EVALBOT_DASHBOARD_TOKEN"
    else:
        token = secrets.token_urlsafe(18)
        token_env = f"EVALBOT_DASHBOARD_TOKEN={token} "
        sign_in = f"sign in with the token {token}"
    click.echo(
        "\ndemo: the dashboard — serve it from this folder:\n"
        f"  {token_env}evalbot serve --dashboard-only\n"
        f"then open {base}/login and {sign_in}:\n"
        f"  {base}/experiments/{experiment_id}\n"
        f"  {base}/datasets/{dataset}/history",
        err=err,
    )
