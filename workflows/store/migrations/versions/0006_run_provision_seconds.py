"""runs.provision_s: how long provisioning the run's sandbox took, for /metrics.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29 12:58:07.000000

The web process serves /metrics, but provisioning happens in the workers: the latency travels with
the stored run. Rows stored before this revision have none (NULL, left out of the histogram).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("provision_s", sa.Float(), nullable=True))


def downgrade() -> None:
    # Not batch mode: on SQLite that copies `runs` into a new table and drops the old one, and
    # the drop cascades to criterion_scores (foreign keys are on). SQLite >= 3.35 drops natively.
    op.drop_column("runs", "provision_s")
