"""`evalbot cases new DATASET ID --prompt TEXT [--tag T] [--expect TEXT] [--reference TEXT]`.

Scaffolds `datasets/DATASET/cases/ID/case.toml` (under settings.catalog_root) with a rubric:
- `accuracy` (weight 2): `contains_any` of the --expect values, when given; otherwise an `llm`
  criterion asking whether the answer matches the reference answer;
- `clarity` (weight 0.5): an `llm` criterion on a short, direct answer.
--reference writes reference.md. The new case is loaded back through the catalog loader before the
command succeeds, so a scaffold that would not load is removed and reported. Exit codes: 0 created,
2 unknown dataset, bad id, or the case exists already (a `CommandError`, bot/commands/errors.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click

from bot.commands.errors import CommandError, command_errors
from bot.commands.names import name_callback
from workflows.catalog.catalog_errors import CatalogError, UnknownNameError
from workflows.catalog.loaders import load_dataset
from workflows.catalog.names import InvalidNameError, is_name
from workflows.settings import Settings


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def case_toml(prompt: str, tags: list[str], expect: list[str]) -> str:
    lines = [f"prompt = {_toml_string(prompt)}", f"tags = [{', '.join(map(_toml_string, tags))}]"]
    lines += ["", "[[criteria]]", 'name = "accuracy"', "weight = 2.0"]
    if expect:
        values = ", ".join(map(_toml_string, expect))
        lines += [
            'grader = "contains_any"',
            f"description = {_toml_string('Contains one of: ' + '; '.join(expect))}",
            f"params = {{ values = [{values}] }}",
        ]
    else:
        lines += [
            'grader = "llm"',
            'description = "Reaches the same conclusion as the reference answer"',
            'params = { prompt = "Does the answer reach the reference answer\'s conclusion?", '
            "reference = true }",
        ]
    lines += [
        "",
        "[[criteria]]",
        'name = "clarity"',
        'grader = "llm"',
        "weight = 0.5",
        'description = "A short, direct answer a partner could forward as is"',
        'params = { prompt = "Is the answer short and direct, with its conclusion first?" }',
    ]
    return "\n".join(lines) + "\n"


def create_case(
    catalog_root: Path,
    dataset: str,
    case_id: str,
    prompt: str,
    *,
    tags: list[str],
    expect: list[str],
    reference: str | None,
) -> Path:
    if not is_name(case_id):
        raise CommandError.bad_input(str(InvalidNameError("case", case_id)))
    try:
        load_dataset(catalog_root, dataset)
    except (CatalogError, UnknownNameError) as error:
        raise CommandError.bad_input(str(error)) from None
    folder = catalog_root / "datasets" / dataset / "cases" / case_id
    if folder.exists():
        raise CommandError.bad_input(
            f"case '{case_id}' exists already in dataset '{dataset}': {folder}"
        )
    if not expect and reference is None:
        raise CommandError.bad_input(
            "give --expect TEXT (repeatable) or --reference TEXT for the rubric"
        )
    folder.mkdir(parents=True)
    (folder / "case.toml").write_text(case_toml(prompt, tags, expect))
    if reference is not None:
        (folder / "reference.md").write_text(reference.rstrip() + "\n")
    try:
        load_dataset(catalog_root, dataset)
    except (CatalogError, UnknownNameError) as error:
        shutil.rmtree(folder)
        raise CommandError.bad_input(f"the scaffold did not load, removed it: {error}") from None
    return folder


@click.group("cases")
def cases_group() -> None:
    """Cases of a dataset."""


@cases_group.command("new")
@click.argument("dataset", callback=name_callback("dataset"))
@click.argument("case_id", callback=name_callback("case"))
@click.option("--prompt", required=True, help="The task given to the agent.")
@click.option("--tag", "tags", multiple=True, help="Tag (repeatable); select with --cases tag:T.")
@click.option("--expect", multiple=True, help="Text a correct answer contains (repeatable).")
@click.option("--reference", help="Reference answer, written to reference.md.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@command_errors
def new_case_command(
    settings: Settings,
    dataset: str,
    case_id: str,
    prompt: str,
    tags: tuple[str, ...],
    expect: tuple[str, ...],
    reference: str | None,
    as_json: bool,
) -> None:
    """Scaffold case CASE_ID in DATASET with a rubric."""
    folder = create_case(
        Path(settings.catalog_root), dataset, case_id, prompt,
        tags=list(tags), expect=list(expect), reference=reference,
    )  # fmt: skip
    if as_json:
        files = sorted(p.name for p in folder.iterdir())
        payload = {"dataset": dataset, "case_id": case_id, "path": str(folder), "files": files}
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(f"created {folder / 'case.toml'}; run it with --cases {case_id}")
