"""Migrations build exactly the sqlmodel tables, on both databases, and ship with the package."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, func, inspect, select, text

from tests.workflows.store.builders import make_result, make_spec
from workflows.records import SandboxUsage
from workflows.store import Store, schema
from workflows.store.engine import parse_url
from workflows.store.tables import criterion_scores, metadata, runs

REPO_ROOT = Path(__file__).resolve().parents[3]
TABLES = {
    "experiments", "arms", "runs", "criterion_scores", "webhook_deliveries", "secret_syncs",
    "prewarmed_images", "rate_buckets",
}  # fmt: skip


def _table_names(store_url: str) -> set[str]:
    engine = create_engine(store_url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_from_empty_matches_the_tables_exactly(store_url: str) -> None:
    with Store(store_url) as store:
        assert store.schema_revision() is None
        store.migrate()
        assert store.schema_revision() == schema.head_revision()
        assert schema.schema_diff(store._engine) == []
    assert _table_names(store_url) == TABLES | {"alembic_version"}
    assert set(metadata.tables) == TABLES


def test_the_comparison_notices_drift(store: Store, store_url: str) -> None:
    engine = create_engine(store_url)
    try:
        with engine.begin() as connection:
            connection.execute(text("DROP INDEX ix_experiments_dataset"))
    finally:
        engine.dispose()
    diff = schema.schema_diff(store._engine)
    assert [entry[0] for entry in diff] == ["add_index"]


def test_migrating_again_is_a_no_op_that_keeps_data(store: Store) -> None:
    store.save_experiment(make_spec())
    store.save_run(make_result())
    store.migrate()
    assert store.get_run(make_result().run_id) == make_result()
    assert store.schema_revision() == schema.head_revision()


def test_runs_stored_before_0006_read_without_a_provision_time(store: Store) -> None:
    store.save_experiment(make_spec())
    store.save_run(make_result())
    with store._engine.begin() as connection:
        command.downgrade(schema.alembic_config(connection), "0005")
    store.migrate()
    assert store.get_run(make_result().run_id) == make_result(provision_s=None)


def test_0007_turns_stored_host_paths_into_blob_keys(store: Store) -> None:
    """Runs stored with the worker's folder as outputs_ref read back with their key; keys and
    empty refs are left as they are."""
    store.save_experiment(make_spec())
    on_host = make_result(trial=0, outputs_ref="/srv/evalbot/blobs/exp-1/contract-1/main/0")
    keyed = make_result(trial=1, outputs_ref="exp-1/contract-1/main/1")
    empty = make_result(trial=2, outputs_ref="")
    for run in (on_host, keyed, empty):
        store.save_run(run)
    with store._engine.begin() as connection:
        command.downgrade(schema.alembic_config(connection), "0006")
    store.migrate()
    with store._engine.connect() as connection:
        refs = dict(connection.execute(select(runs.c.run_id, runs.c.outputs_ref)).all())
    assert refs == {
        on_host.run_id: "exp-1/contract-1/main/0",
        keyed.run_id: "exp-1/contract-1/main/1",
        empty.run_id: "",
    }


@pytest.mark.parametrize("target", ["0005", "0004", "0003", "0002", "0001"])
def test_downgrades_keep_runs_and_their_criterion_scores(store: Store, target: str) -> None:
    """A downgrade that only drops columns keeps the rows: on SQLite a batch-mode rebuild of
    `runs` would drop the old table and, through ON DELETE CASCADE, every criterion score."""
    sandbox = SandboxUsage(cpu_seconds=3.0, sandbox_seconds=9.0, cost_usd=0.002)
    store.save_experiment(make_spec())
    store.save_run(make_result(sandbox=sandbox))
    with store._engine.begin() as connection:
        command.downgrade(schema.alembic_config(connection), target)
    with store._engine.connect() as connection:
        count_runs = connection.scalar(select(func.count()).select_from(runs))
        count_scores = connection.scalar(select(func.count()).select_from(criterion_scores))
    assert (count_runs, count_scores) == (1, 3)
    store.migrate()
    expected = make_result(
        sandbox=sandbox if target >= "0005" else SandboxUsage(), provision_s=None
    )
    assert store.get_run(expected.run_id) == expected


def test_downgrade_to_base_removes_every_table(store: Store, store_url: str) -> None:
    engine = parse_url(store_url)
    with store._engine.begin() as connection:
        command.downgrade(schema.alembic_config(connection), "base")
    assert _table_names(engine.render_as_string(hide_password=False)) == {"alembic_version"}
    store.migrate()
    assert _table_names(store_url) == TABLES | {"alembic_version"}


def test_revisions_are_numbered_and_linear() -> None:
    names = sorted(p.stem for p in (schema.MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))
    assert names, "no migration scripts found next to the package"
    assert [name[:4] for name in names] == [f"{i:04d}" for i in range(1, len(names) + 1)]
    assert schema.head_revision() == names[-1][:4]


def test_every_migration_file_is_packaged() -> None:
    """Non-Python files under migrations/ must match [tool.setuptools.package-data]."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    patterns = [p for ps in config["tool"]["setuptools"]["package-data"].values() for p in ps]
    files = [p for p in schema.MIGRATIONS_DIR.rglob("*") if p.is_file()]
    data = [p for p in files if p.suffix not in (".py", ".pyc")]
    assert any(p.name == "script.py.mako" for p in data)
    unpackaged = [p.name for p in data if not any(fnmatch.fnmatch(p.name, pat) for pat in patterns)]
    assert unpackaged == []
    packages = [p.parent for p in files if p.suffix == ".py"]
    assert all((folder / "__init__.py").exists() for folder in packages)
