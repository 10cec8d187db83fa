"""Verification tables: verification runs (the plan) and one row per configuration and round.

Generated from autotune/storage/models.py with Alembic's autogenerate (against 0001).

Revision ID: 0002_verifications
Revises: 0001_results_tables
Create Date: 2026-11-22 22:46:49.895463
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_verifications"
down_revision = "0001_results_tables"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "autotune_verification_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("baseline_trial", sa.Integer(), nullable=False),
        sa.Column("candidates_json", sa.Text(), nullable=False),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("seeds_json", sa.Text(), nullable=False),
        sa.Column("accuracy_tolerance_pt", sa.Float(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("completed_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["study_id"],
            ["autotune_studies.id"],
            name=op.f("fk_autotune_verification_runs_study_id_autotune_studies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_autotune_verification_runs")),
        sa.UniqueConstraint(
            "study_id", "number", name=op.f("uq_autotune_verification_runs_study_id_number")
        ),
    )
    with op.batch_alter_table("autotune_verification_runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_autotune_verification_runs_study_id"), ["study_id"], unique=False
        )

    op.create_table(
        "autotune_verifications",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("round_index", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.Column("is_baseline", sa.Boolean(), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("failure", sa.String(length=32), nullable=True),
        sa.Column("failure_detail", sa.Text(), nullable=True),
        sa.Column("throughput_sps", sa.Float(), nullable=True),
        sa.Column("throughput_iqr_sps", sa.Float(), nullable=True),
        sa.Column("step_time_s", sa.Float(), nullable=True),
        sa.Column("val_accuracy", sa.Float(), nullable=True),
        sa.Column("peak_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("train_s", sa.Float(), nullable=True),
        sa.Column("config_json", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["autotune_verification_runs.id"],
            name=op.f("fk_autotune_verifications_run_id_autotune_verification_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_autotune_verifications")),
        sa.UniqueConstraint(
            "run_id",
            "round_index",
            "trial_number",
            name=op.f("uq_autotune_verifications_run_id_round_index_trial_number"),
        ),
    )
    with op.batch_alter_table("autotune_verifications", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_autotune_verifications_run_id"), ["run_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("autotune_verifications", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_autotune_verifications_run_id"))

    op.drop_table("autotune_verifications")
    with op.batch_alter_table("autotune_verification_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_autotune_verification_runs_study_id"))

    op.drop_table("autotune_verification_runs")
