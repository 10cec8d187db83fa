"""Two answers per verification: ``autotune_verification_runs.model_changes_json``, the
finalists whose model knobs differ from the baseline's (the model-change answer; the others
are the same-model answer). ``[]`` for the runs before, which are read as one answer.

A column with a server default added only, so the rows before keep their values. Batch mode,
for SQLite.

Revision ID: 0009_two_answers
Revises: 0008_metric_from_trial
Create Date: 2026-11-26 22:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_two_answers"
down_revision = "0008_metric_from_trial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_verification_runs") as batch:
        batch.add_column(
            sa.Column("model_changes_json", sa.Text(), nullable=False, server_default="[]")
        )


def downgrade() -> None:
    with op.batch_alter_table("autotune_verification_runs") as batch:
        batch.drop_column("model_changes_json")
