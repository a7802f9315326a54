"""prewarmed_images: the prewarmed images each provider holds (docs/prewarm.md).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 11:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "prewarmed_images",
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("reference", sa.Text(), nullable=False),
        sa.Column("repo", sa.Text(), nullable=False),
        sa.Column("commit", sa.String(length=64), nullable=False),
        sa.Column("build_seconds", sa.Float(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("provider", "reference", name=op.f("pk_prewarmed_images")),
    )
    op.create_index(op.f("ix_prewarmed_images_repo"), "prewarmed_images", ["repo"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_prewarmed_images_repo"), table_name="prewarmed_images")
    op.drop_table("prewarmed_images")
