"""Results tables: hardware fingerprints, studies, one row per finished trial.

Revision ID: 0001_results_tables
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_results_tables"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "autotune_hardware",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint_sha256", sa.String(64), nullable=False),
        sa.Column("device_kind", sa.String(16), nullable=False),
        sa.Column("device_name", sa.String(256), nullable=False),
        sa.Column("device_count", sa.Integer(), nullable=False),
        sa.Column("device_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("compute_capability", sa.String(16), nullable=True),
        sa.Column("driver_version", sa.String(64), nullable=True),
        sa.Column("cuda_version", sa.String(32), nullable=True),
        sa.Column("cudnn_version", sa.String(32), nullable=True),
        sa.Column("torch_version", sa.String(64), nullable=False),
        sa.Column("cpu_model", sa.String(256), nullable=False),
        sa.Column("cpu_cores", sa.Integer(), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_autotune_hardware"),
        sa.UniqueConstraint("fingerprint_sha256", name="uq_autotune_hardware_fingerprint_sha256"),
    )
    op.create_table(
        "autotune_studies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("optuna_study_name", sa.String(512), nullable=False),
        sa.Column("space_name", sa.String(256), nullable=False),
        sa.Column("space_source", sa.String(1024), nullable=False),
        sa.Column("device_kind", sa.String(16), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("sampler", sa.String(32), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("hardware_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["hardware_id"],
            ["autotune_hardware.id"],
            name="fk_autotune_studies_hardware_id_autotune_hardware",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_autotune_studies"),
        sa.UniqueConstraint("optuna_study_name", name="uq_autotune_studies_optuna_study_name"),
    )
    op.create_table(
        "autotune_trial_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.Column("hardware_id", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("is_baseline", sa.Boolean(), nullable=False),
        sa.Column("is_feasible", sa.Boolean(), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("failure", sa.String(32), nullable=True),
        sa.Column("failure_detail", sa.Text(), nullable=True),
        sa.Column("throughput_sps", sa.Float(), nullable=True),
        sa.Column("throughput_iqr_sps", sa.Float(), nullable=True),
        sa.Column("step_time_s", sa.Float(), nullable=True),
        sa.Column("step_time_p90_s", sa.Float(), nullable=True),
        sa.Column("compile_s", sa.Float(), nullable=True),
        sa.Column("peak_memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_kind", sa.String(32), nullable=True),
        sa.Column("val_accuracy", sa.Float(), nullable=True),
        sa.Column("train_loss", sa.Float(), nullable=True),
        sa.Column("train_s", sa.Float(), nullable=True),
        sa.Column("flops_per_sample", sa.Float(), nullable=True),
        sa.Column("mfu", sa.Float(), nullable=True),
        sa.Column("energy_j_per_sample", sa.Float(), nullable=True),
        sa.Column("parameters", sa.BigInteger(), nullable=True),
        sa.Column("samples_per_step", sa.Integer(), nullable=True),
        sa.Column("steps", sa.Integer(), nullable=True),
        sa.Column("timed_steps", sa.Integer(), nullable=True),
        sa.Column("family", sa.String(16), nullable=True),
        sa.Column("depth", sa.Integer(), nullable=True),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("batch_size", sa.Integer(), nullable=True),
        sa.Column("precision", sa.String(8), nullable=True),
        sa.Column("memory_format", sa.String(16), nullable=True),
        sa.Column("compile_mode", sa.String(32), nullable=True),
        sa.Column("num_workers", sa.Integer(), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=True),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("config_json", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("completed_at", sa.DateTime(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"],
            ["autotune_studies.id"],
            name="fk_autotune_trial_results_study_id_autotune_studies",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["hardware_id"],
            ["autotune_hardware.id"],
            name="fk_autotune_trial_results_hardware_id_autotune_hardware",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_autotune_trial_results"),
        sa.UniqueConstraint(
            "study_id", "trial_number", name="uq_autotune_trial_results_study_id_trial_number"
        ),
    )
    op.create_index("ix_autotune_trial_results_study_id", "autotune_trial_results", ["study_id"])


def downgrade() -> None:
    op.drop_index("ix_autotune_trial_results_study_id", table_name="autotune_trial_results")
    op.drop_table("autotune_trial_results")
    op.drop_table("autotune_studies")
    op.drop_table("autotune_hardware")
