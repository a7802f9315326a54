"""rate_buckets: rate limits shared by every worker of the database (docs/judges.md, docs/modal.md,
"Limits across workers").

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 01:40:00.000000

One row per limit (`judge`, `modal-create`): the time its next slot is free. Rows are created by
the first caller; nothing to convert.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_buckets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("next_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_rate_buckets")),
    )


def downgrade() -> None:
    op.drop_table("rate_buckets")
