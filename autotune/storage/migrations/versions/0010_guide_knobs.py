"""The Tuning Guide's knobs, one results column each: ``optimizer_impl``,
``activation_checkpointing``, ``cpu_threads``, ``cudnn_benchmark``,
``cuda_expandable_segments``, ``data_parallel`` on ``autotune_trial_results``. Nullable: the
rows before hold NULL (the trials ran at PyTorch's defaults, which those rows do not say).

Batch mode, for SQLite.

Revision ID: 0010_guide_knobs
Revises: 0009_two_answers
Create Date: 2026-11-27 17:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_guide_knobs"
down_revision = "0009_two_answers"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("optimizer_impl", sa.String(16)),
    ("activation_checkpointing", sa.Boolean()),
    ("cpu_threads", sa.Integer()),
    ("cudnn_benchmark", sa.Boolean()),
    ("cuda_expandable_segments", sa.Boolean()),
    ("data_parallel", sa.String(8)),
)


def upgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
