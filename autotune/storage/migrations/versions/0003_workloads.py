"""Workloads: model knobs as JSON, the validation metric by its own name.

- ``autotune_trial_results``: ``family``, ``depth`` and ``width`` become ``workload`` (the
  workload's short name) and ``model_knobs_json`` (any knob names), filled from the old
  columns; ``val_accuracy`` becomes ``val_metric``.
- ``autotune_verifications``: ``val_accuracy`` becomes ``val_metric``.
- ``autotune_studies``: ``metric_name`` and ``metric_direction`` (``accuracy``,
  ``maximize`` for the studies before).

Written by hand after Alembic's autogenerate against 0002 (which sees a rename as a drop and
an add, and cannot carry the old values over); batch mode, for SQLite.

Revision ID: 0003_workloads
Revises: 0002_verifications
Create Date: 2026-11-23 01:30:00
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0003_workloads"
down_revision = "0002_verifications"
branch_labels = None
depends_on = None

_RESULTS = "autotune_trial_results"


def upgrade() -> None:
    with op.batch_alter_table(_RESULTS) as batch:
        batch.add_column(sa.Column("workload", sa.String(255), nullable=True))
        batch.add_column(sa.Column("model_knobs_json", sa.Text(), nullable=True))
        batch.alter_column("val_accuracy", new_column_name="val_metric")
    results = sa.table(
        _RESULTS,
        sa.column("id", sa.Integer()),
        sa.column("family", sa.String()),
        sa.column("depth", sa.Integer()),
        sa.column("width", sa.Integer()),
        sa.column("workload", sa.String()),
        sa.column("model_knobs_json", sa.Text()),
    )
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(results.c.id, results.c.family, results.c.depth, results.c.width)
    ).all()
    for row_id, family, depth, width in rows:
        knobs = {k: v for k, v in (("depth", depth), ("width", width)) if v is not None}
        connection.execute(
            results.update()
            .where(results.c.id == row_id)
            .values(workload=family, model_knobs_json=json.dumps(knobs, sort_keys=True))
        )
    with op.batch_alter_table(_RESULTS) as batch:
        batch.drop_column("family")
        batch.drop_column("depth")
        batch.drop_column("width")
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.alter_column("val_accuracy", new_column_name="val_metric")
    with op.batch_alter_table("autotune_studies") as batch:
        batch.add_column(
            sa.Column("metric_name", sa.String(64), nullable=False, server_default="accuracy")
        )
        batch.add_column(
            sa.Column("metric_direction", sa.String(8), nullable=False, server_default="maximize")
        )


def downgrade() -> None:
    with op.batch_alter_table("autotune_studies") as batch:
        batch.drop_column("metric_direction")
        batch.drop_column("metric_name")
    with op.batch_alter_table("autotune_verifications") as batch:
        batch.alter_column("val_metric", new_column_name="val_accuracy")
    with op.batch_alter_table(_RESULTS) as batch:
        batch.add_column(sa.Column("family", sa.String(16), nullable=True))
        batch.add_column(sa.Column("depth", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("width", sa.Integer(), nullable=True))
        batch.alter_column("val_metric", new_column_name="val_accuracy")
        batch.drop_column("model_knobs_json")
        batch.drop_column("workload")
