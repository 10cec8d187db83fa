"""A busy machine, noticed: how much of the CPUs other processes used while a run was timed,
and a verification's busy runs measured again.

- ``autotune_trial_results`` and ``autotune_verifications``: ``other_cpu_share`` (the share of
  the run's CPUs other processes used over its timed windows, 0-1), ``load_avg_1m`` (the
  1-minute load average at their end) and ``busy_machine`` (the share passed
  ``measure.max_other_cpu_share``); NULL for the rows before, and on the mock device.
- ``autotune_verifications``: ``attempt`` (0 for the rows before; 1, 2, ... for a run measured
  again because the attempt before it was busy), now part of the unique key of a round's row.

Columns added only (nullable, or with a server default), so the rows before keep their
values; the unique key of ``autotune_verifications`` gains ``attempt``. Batch mode, for SQLite.
Downgrading keeps the last attempt of each round and trial (the one that counted).

Revision ID: 0006_busy_machine
Revises: 0005_race_and_screen
Create Date: 2026-11-24 06:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_busy_machine"
down_revision = "0005_race_and_screen"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.add_column(sa.Column("other_cpu_share", sa.Float(), nullable=True))
        batch.add_column(sa.Column("load_avg_1m", sa.Float(), nullable=True))
        batch.add_column(sa.Column("busy_machine", sa.Boolean(), nullable=True))
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("other_cpu_share", sa.Float(), nullable=True))
        batch.add_column(sa.Column("load_avg_1m", sa.Float(), nullable=True))
        batch.add_column(sa.Column("busy_machine", sa.Boolean(), nullable=True))
        batch.drop_constraint(
            batch.f("uq_autotune_verifications_run_id_round_index_trial_number"), type_="unique"
        )
        batch.create_unique_constraint(
            "uq_autotune_verifications_run_round_trial_attempt",
            ["run_id", "round_index", "trial_number", "attempt"],
        )


def downgrade() -> None:
    # The earlier (busy) attempts go: the old key holds one row per round and trial. The
    # derived table lets MySQL delete from the table it reads.
    op.execute(
        "DELETE FROM autotune_verifications WHERE id IN (SELECT id FROM ("
        "SELECT a.id AS id FROM autotune_verifications a JOIN autotune_verifications b "
        "ON a.run_id = b.run_id AND a.round_index = b.round_index "
        "AND a.trial_number = b.trial_number AND b.attempt > a.attempt) AS superseded)"
    )
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.drop_constraint("uq_autotune_verifications_run_round_trial_attempt", type_="unique")
        batch.create_unique_constraint(
            batch.f("uq_autotune_verifications_run_id_round_index_trial_number"),
            ["run_id", "round_index", "trial_number"],
        )
        batch.drop_column("busy_machine")
        batch.drop_column("load_avg_1m")
        batch.drop_column("other_cpu_share")
        batch.drop_column("attempt")
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.drop_column("busy_machine")
        batch.drop_column("load_avg_1m")
        batch.drop_column("other_cpu_share")
