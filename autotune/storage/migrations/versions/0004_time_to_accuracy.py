"""Time to accuracy: the study's objective and target, and each run's time to the target.

- ``autotune_studies``: ``objective`` (``throughput`` for the studies before) and ``target``
  (the quality target of a ``time_to_accuracy`` study, else NULL).
- ``autotune_trial_results``: ``time_to_accuracy_s``, ``target_reached``, ``eval_s`` and
  ``metric_curve_json`` (a JSON list of ``[wall_s, step, metric]``), NULL in throughput
  studies.
- ``autotune_verifications``: ``time_to_accuracy_s``, ``target_reached`` and
  ``metric_curve_json``, likewise.

Columns added only (nullable, or with a server default), so the rows before keep their
values. Batch mode, for SQLite.

Revision ID: 0004_time_to_accuracy
Revises: 0003_workloads
Create Date: 2026-11-30 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_time_to_accuracy"
down_revision = "0003_workloads"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_studies") as batch:
        batch.add_column(
            sa.Column("objective", sa.String(32), nullable=False, server_default="throughput")
        )
        batch.add_column(sa.Column("target", sa.Float(), nullable=True))
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.add_column(sa.Column("time_to_accuracy_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("target_reached", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("eval_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("metric_curve_json", sa.Text(), nullable=True))
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.add_column(sa.Column("time_to_accuracy_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("target_reached", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("metric_curve_json", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.drop_column("metric_curve_json")
        batch.drop_column("target_reached")
        batch.drop_column("time_to_accuracy_s")
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.drop_column("metric_curve_json")
        batch.drop_column("eval_s")
        batch.drop_column("target_reached")
        batch.drop_column("time_to_accuracy_s")
    with op.batch_alter_table("autotune_studies") as batch:
        batch.drop_column("target")
        batch.drop_column("objective")
