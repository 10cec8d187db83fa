"""Alembic migrations of the results tables, run from Python (no ``alembic.ini``).

The migrations ship inside the package (``autotune/study/storage/migrations``). They keep their
revision in their own version table, ``autotune_alembic_version``, so they never touch the
``alembic_version`` table with which Optuna versions its own schema.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from autotune.core.exceptions import StorageError
from autotune.study.storage.models import TABLE_PREFIX

__all__ = [
    "MIGRATIONS_DIR",
    "VERSION_TABLE",
    "head_revision",
    "is_our_table",
    "schema_revision",
    "upgrade_schema",
]

#: The Alembic script directory shipped in the package.
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
#: Alembic's version table for our tables (Optuna's is ``alembic_version``).
VERSION_TABLE = f"{TABLE_PREFIX}alembic_version"


def is_our_table(name: str | None, type_: str, parent_names: Mapping[Any, str | None]) -> bool:
    """Alembic's ``include_name`` hook: autogenerate compares autotune's tables (and what is
    in them) only, never Optuna's nor the version tables, which share the database."""
    if type_ != "table":
        return True
    return name is not None and name.startswith(TABLE_PREFIX) and name != VERSION_TABLE


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str:
    """The newest revision the shipped migrations define."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "autotune/study/storage/migrations/versions holds no revision"
    return head


def schema_revision(engine: Engine) -> str | None:
    """The revision the database's results tables are at, or None when they do not exist.

    Raises:
        StorageError: the database cannot be read.
    """
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
            return context.get_current_revision()
    except SQLAlchemyError as e:
        raise StorageError(f"results tables: cannot read the schema revision: {e}") from e


def upgrade_schema(engine: Engine) -> str:
    """Create or upgrade the results tables to the newest revision (idempotent).

    Returns:
        The revision the tables are at afterwards.

    Raises:
        StorageError: a migration failed, or the tables are at a revision these migrations do
            not know (written by an unreleased autotune).
    """
    config = _config()
    head = head_revision()
    logging.getLogger("alembic").setLevel(logging.WARNING)
    current = schema_revision(engine)
    if current == head:
        return head
    known = {s.revision for s in ScriptDirectory.from_config(config).walk_revisions()}
    if current is not None and current not in known:
        raise StorageError(
            f"results tables: revision {current} was written by an unreleased autotune, whose "
            "migrations were folded into one; use a new database (storage=URL), or drop the "
            f"{TABLE_PREFIX}* tables (the next run rebuilds the trials' rows from Optuna's "
            "record; stored verifications are lost)"
        )
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    except SQLAlchemyError as e:
        # Several workers opening a new database at once: one of them created the tables.
        if schema_revision(engine) == head:
            return head
        reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0]
        raise StorageError(f"results tables: migration failed: {reason}") from e
    return head
