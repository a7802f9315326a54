"""Write a new migration by autogenerate: `python -m workflows.store revision "add images"`.

The comparison runs against a scratch SQLite database upgraded to the current head, so it needs no
server. Review the generated file (PostgreSQL-only details are not seen) before committing it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from workflows.store.engine import WRITE_OPTION, make_engine
from workflows.store.schema import alembic_config, head_revision, schema_diff, upgrade
from workflows.store.store_errors import StoreError


def next_revision_id(head: str | None) -> str:
    """Revisions are numbered 0001, 0002, ... so files sort in order."""
    return f"{(int(head) if head else 0) + 1:04d}"


def write_revision(message: str) -> Path:
    """Autogenerate a revision for what the tables have and the migrations lack; return its path."""
    with tempfile.TemporaryDirectory(prefix="evalbot-revise-") as scratch:
        engine = make_engine(f"sqlite:///{Path(scratch) / 'scratch.db'}")
        try:
            upgrade(engine)
            if not schema_diff(engine):
                raise StoreError("The tables match the migrations; there is no revision to write.")
            with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
                config = _with_ruff_hooks(alembic_config(connection))
                command.revision(
                    config, message, autogenerate=True, rev_id=next_revision_id(head_revision())
                )
        finally:
            engine.dispose()
    script = ScriptDirectory.from_config(alembic_config()).get_revision("head")
    if script is None:
        raise RuntimeError("alembic wrote no revision")
    return Path(script.path)


def _with_ruff_hooks(config: Config) -> Config:
    """Format and lint-fix the new file with the venv's ruff, when there is one."""
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        return config
    config.set_section_option("post_write_hooks", "hooks", "fix, format")
    for name, options in (("fix", "check --fix"), ("format", "format")):
        config.set_section_option("post_write_hooks", f"{name}.type", "exec")
        config.set_section_option("post_write_hooks", f"{name}.executable", str(ruff))
        config.set_section_option(
            "post_write_hooks", f"{name}.options", f"{options} REVISION_SCRIPT_FILENAME"
        )
    return config
