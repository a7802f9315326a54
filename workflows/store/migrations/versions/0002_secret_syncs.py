"""secret_syncs: the last Vault -> provider sync of each secret group (no values).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 12:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "secret_syncs",
        sa.Column("group_name", sa.String(), nullable=False),
        sa.Column("vault_path", sa.Text(), nullable=False),
        sa.Column("vault_version", sa.Integer(), nullable=False),
        sa.Column("vault_created_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("keys", sa.JSON(), nullable=False),
        sa.Column("key_fingerprints", sa.JSON(), nullable=False),
        sa.Column("fingerprint", sa.String(length=80), nullable=False),
        sa.Column("sink", sa.String(length=32), nullable=False),
        sa.Column("synced_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("group_name", name=op.f("pk_secret_syncs")),
    )


def downgrade() -> None:
    op.drop_table("secret_syncs")
