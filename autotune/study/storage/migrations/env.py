"""Alembic environment of autotune's results tables.

Run only through :func:`autotune.study.storage.upgrade_schema` (or the snippet below), which passes
an open connection in ``config.attributes["connection"]``. The revision is kept in
``autotune_alembic_version``, not in Optuna's ``alembic_version``.

The models (:mod:`autotune.study.storage.models`) are the one source of the schema: the migrations
upgraded to head match them exactly (``tests/study/storage/test_migrations.py`` runs Alembic's
autogenerate comparison on SQLite and PostgreSQL). So a change of schema is: edit the
models, then let Alembic write the migration from the difference to a database at head (there
is no ``alembic.ini``; this is ``alembic revision --autogenerate``)::

    python - <<'PY'
    from alembic import command
    from alembic.config import Config
    from autotune.study.storage import MIGRATIONS_DIR, create_results_engine, upgrade_schema
    engine = create_results_engine("sqlite:////tmp/autotune_head.db")  # a new, empty file
    upgrade_schema(engine)  # the shipped migrations, up to head
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("file_template", "%%(rev)s")  # versions/0002_what_changed.py
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.revision(config, "what changed", autogenerate=True, rev_id="0002_what_changed")
    PY

then ``ruff format`` the new file in ``versions/`` and read it (a renamed column reads as a
drop and an add: write the rename and carry the rows over by hand, with ``op.execute``),
and run ``pytest tests/study/storage``. Autogenerate compares autotune's tables only
(:func:`autotune.study.storage._migrate.is_our_table`), never Optuna's beside them.
"""

from __future__ import annotations

from alembic import context

from autotune.study.storage._migrate import VERSION_TABLE, is_our_table
from autotune.study.storage.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "autotune's migrations run through autotune.study.storage.upgrade_schema(engine), "
        "which passes the connection"
    )

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
    compare_type=True,
    compare_server_default=True,
    include_name=is_our_table,
)
with context.begin_transaction():
    context.run_migrations()
