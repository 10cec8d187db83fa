"""Alembic environment of autotune's results tables.

Run only through :func:`autotune.storage.upgrade_schema`, which passes an open connection in
``config.attributes["connection"]``. The revision is kept in ``autotune_alembic_version``, not
in Optuna's ``alembic_version``.
"""

from __future__ import annotations

from alembic import context

from autotune.storage._migrate import VERSION_TABLE
from autotune.storage.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "autotune's migrations run through autotune.storage.upgrade_schema(engine), "
        "which passes the connection"
    )

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
