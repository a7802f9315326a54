"""runs.sandbox_usage: what each run's sandbox used and cost as its provider bills it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 12:30:00.000000

Rows stored before this revision have no sandbox usage (read as zeros).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sandbox_usage", sa.JSON(), nullable=True))


def downgrade() -> None:
    # Not batch mode: on SQLite that copies `runs` into a new table and drops the old one, and
    # the drop cascades to criterion_scores (foreign keys are on). SQLite >= 3.35 drops natively.
    op.drop_column("runs", "sandbox_usage")
