"""criterion_scores: the rubric hash a criterion was scored under, and the judge's record.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 10:12:39.452156

Rows stored before this revision get an empty rubric hash ("unknown") and no judge record.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("criterion_scores", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("rubric_hash", sa.String(length=64), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("judge", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("criterion_scores", schema=None) as batch_op:
        batch_op.drop_column("judge")
        batch_op.drop_column("rubric_hash")
