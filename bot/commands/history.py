"""`evalbot history --dataset NAME [--json]` — main's scores over commits (workflows.score_history).

Exit codes: 0 printed (an empty history is printed as such), 1 the store could not be read.
"""

from __future__ import annotations

import json

import click

from bot import composition
from bot.commands.errors import command_errors
from bot.commands.names import name_callback
from workflows.score_history import MeanInterval, score_history
from workflows.settings import Settings


def _fmt(value: MeanInterval) -> str:
    if value.mean is None:
        return "–"
    if value.ci_low is None or value.ci_high is None:
        return f"{value.mean:.3f}"
    return f"{value.mean:.3f} [{value.ci_low:.3f}, {value.ci_high:.3f}]"


@click.command("history")
@click.option("--dataset", required=True, callback=name_callback("dataset"), help="Dataset name.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@command_errors
def history_command(settings: Settings, dataset: str, limit: int, as_json: bool) -> None:
    """Main's scores on DATASET over commits: overall and per criterion, with 95% intervals."""
    store = composition.open_store(settings)
    points = score_history(store, dataset, limit=limit)
    if as_json:
        payload = {"dataset": dataset, "points": [p.model_dump(mode="json") for p in points]}
        click.echo(json.dumps(payload, indent=2))
        return
    if not points:
        click.echo(f"no completed main evaluations of '{dataset}' yet")
        return
    criteria = sorted({name for p in points for name in p.criteria})
    click.echo("| commit | date | overall | " + " | ".join(criteria) + " | cost | experiment |")
    click.echo("|---" * (len(criteria) + 5) + "|")
    for p in points:
        cells = [_fmt(p.criteria[c]) if c in p.criteria else "–" for c in criteria]
        click.echo(
            f"| {p.short_sha} | {p.date:%Y-%m-%d %H:%M} | {_fmt(p.overall)} | "
            + " | ".join(cells)
            + f" | ${p.cost_usd:.2f} | {p.experiment_id} |"
        )
