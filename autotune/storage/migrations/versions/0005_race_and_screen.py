"""Verification that can say yes: the race before the confirmation, the screen's width, the
limits the verified figures are checked against, and each run's validation size.

- ``autotune_verification_runs``: ``race_seeds_json`` (the seeds of the race, stage A;
  ``[]`` for the verifications before, which confirmed every finalist directly),
  ``screen_z``, ``max_memory_bytes`` and ``min_accuracy`` (NULL for the verifications before).
- ``autotune_trial_results`` and ``autotune_verifications``: ``val_samples``, the number of
  validation samples the metric was computed on (NULL for the rows before).

Columns added only (nullable, or with a server default), so the rows before keep their
values. Batch mode, for SQLite.

Revision ID: 0005_race_and_screen
Revises: 0004_time_to_accuracy
Create Date: 2026-11-24 04:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_race_and_screen"
down_revision = "0004_time_to_accuracy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_verification_runs") as batch:
        batch.add_column(
            sa.Column("race_seeds_json", sa.Text(), nullable=False, server_default="[]")
        )
        batch.add_column(sa.Column("screen_z", sa.Float(), nullable=True))
        batch.add_column(sa.Column("max_memory_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("min_accuracy", sa.Float(), nullable=True))
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.add_column(sa.Column("val_samples", sa.Integer(), nullable=True))
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.add_column(sa.Column("val_samples", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.drop_column("val_samples")
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.drop_column("val_samples")
    with op.batch_alter_table("autotune_verification_runs") as batch:
        batch.drop_column("min_accuracy")
        batch.drop_column("max_memory_bytes")
        batch.drop_column("screen_z")
        batch.drop_column("race_seeds_json")
