"""runs.outputs_ref holds a blob-store key, never a host path (docs/store.md, "Blobs").

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 23:10:00.000000

Before this revision the collect stage stored the absolute path of the run's folder on the worker
(`<data_dir>/blobs/<key>`); another host could not read it. Every such path becomes the run's key
(`<key>` = the run id made safe, as workflows/blobs/base.py's `safe_key` does it — copied here, a
migration must not change when that code does). The files stay where they are: the local blob
store finds them under the same key in `<data_dir>/blobs`. The downgrade keeps the keys (no host
path can be recovered from a key), which the older code cannot read: it is for tests only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SAFE_PART = re.compile(r"[^A-Za-z0-9._=-]")
BATCH = 500

runs = sa.table("runs", sa.column("run_id", sa.Text()), sa.column("outputs_ref", sa.Text()))


def _key(run_id: str) -> str:
    parts = [SAFE_PART.sub("_", part) for part in run_id.split("/") if part]
    return "/".join(p if p not in {".", ".."} else p.replace(".", "_") for p in parts)


def _is_path(ref: str) -> bool:
    return ref.startswith("/") or (len(ref) > 2 and ref[1] == ":" and ref[2] in "\\/")


def upgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(runs.c.run_id, runs.c.outputs_ref).where(runs.c.outputs_ref != "")
    ).all()
    changes = [{"id": run_id, "key": _key(run_id)} for run_id, ref in rows if _is_path(ref)]
    update = (
        runs.update()
        .where(runs.c.run_id == sa.bindparam("id"))
        .values(outputs_ref=sa.bindparam("key"))
    )
    for start in range(0, len(changes), BATCH):
        connection.execute(update, changes[start : start + BATCH])


def downgrade() -> None:
    pass  # keys stay keys (module docstring)
