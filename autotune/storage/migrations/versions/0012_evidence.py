"""Evidence follows the math: each trial's class of change, the source of its accuracy, its
paired check's figures and its cost in seconds (``autotune_trial_results``); the finalists a
verification verifies by timing and the check, and the check's floor
(``autotune_verification_runs``); each verification run's check losses and seconds
(``autotune_verifications``). Nullable (or ``[]``): the rows before hold none.

Batch mode, for SQLite.

Revision ID: 0012_evidence
Revises: 0011_warmup_peak_memory
Create Date: 2026-11-28 19:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_evidence"
down_revision = "0011_warmup_peak_memory"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.add_column(sa.Column("evidence_class", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("accuracy_source", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("evidence_detail", sa.Text(), nullable=True))
        batch.add_column(sa.Column("check_first_divergence", sa.Float(), nullable=True))
        batch.add_column(sa.Column("check_max_divergence", sa.Float(), nullable=True))
        batch.add_column(sa.Column("run_s", sa.Float(), nullable=True))
    with op.batch_alter_table("autotune_verification_runs") as batch:
        batch.add_column(
            sa.Column("inherited_json", sa.Text(), server_default="[]", nullable=False)
        )
        batch.add_column(sa.Column("check_floor_json", sa.Text(), nullable=True))
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.add_column(sa.Column("check_losses_json", sa.Text(), nullable=True))
        batch.add_column(sa.Column("run_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.drop_column("run_s")
        batch.drop_column("check_losses_json")
    with op.batch_alter_table("autotune_verification_runs") as batch:
        batch.drop_column("check_floor_json")
        batch.drop_column("inherited_json")
    with op.batch_alter_table("autotune_trial_results") as batch:
        for name in (
            "run_s",
            "check_max_divergence",
            "check_first_divergence",
            "evidence_detail",
            "accuracy_source",
            "evidence_class",
        ):
            batch.drop_column(name)
