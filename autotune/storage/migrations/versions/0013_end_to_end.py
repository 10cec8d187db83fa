"""The end-to-end speedup over a whole run of the budget: each verification run's compile
seconds (``autotune_verifications.compile_s``) and the budget's steps a timed run's seconds
are projected over (``autotune_verification_runs.budget_steps``). Nullable: the rows before
hold none.

Batch mode, for SQLite.

Revision ID: 0013_end_to_end
Revises: 0012_evidence
Create Date: 2026-11-28 20:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_end_to_end"
down_revision = "0012_evidence"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_verification_runs") as batch:
        batch.add_column(sa.Column("budget_steps", sa.Integer(), nullable=True))
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.add_column(sa.Column("compile_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.drop_column("compile_s")
    with op.batch_alter_table("autotune_verification_runs") as batch:
        batch.drop_column("budget_steps")
