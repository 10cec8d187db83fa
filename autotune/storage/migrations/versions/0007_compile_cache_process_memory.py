"""Compile caches and the memory outside the allocator (issue 23, items 5 and 8).

- ``autotune_trial_results.compile_cache``: whether torch.compile found the trial's graphs in
  its cache (``cold``, ``warm``, ``partly warm``); NULL when not compiled, not known, and for
  the rows before.
- ``autotune_trial_results.process_memory_bytes``: on CUDA, NVML's memory of the trial's
  processes on their GPUs, summed over ranks (CUDA contexts and NCCL buffers included); NULL
  on the CPU, without NVML's figure, and for the rows before.

Nullable columns added only, so the rows before keep their values. Batch mode, for SQLite.

Revision ID: 0007_compile_cache
Revises: 0006_busy_machine
Create Date: 2026-11-24 09:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_compile_cache"
down_revision = "0006_busy_machine"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.add_column(sa.Column("compile_cache", sa.String(16), nullable=True))
        batch.add_column(sa.Column("process_memory_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("autotune_trial_results") as batch:
        batch.drop_column("process_memory_bytes")
        batch.drop_column("compile_cache")
