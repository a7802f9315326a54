"""webhook_deliveries.lease_expires_at: a delivery's claim, shared by every web process.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 23:00:00.000000

A web process claims a delivery with a lease before handling it and clears the lease once it is
handled; a failed delivery's row is deleted (a redelivery then runs, at any process or host), and a
process that dies mid-handling leaves a lease that expires. Rows stored before this revision have
none (NULL): handled, as they were.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    op.drop_column("webhook_deliveries", "lease_expires_at")
