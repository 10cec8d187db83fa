"""The results tables' schema: Alembic migrations, models, and Optuna's tables left alone."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

import autotune.study.storage as storage
from autotune.study.storage import (
    create_results_engine,
    head_revision,
    schema_revision,
    upgrade_schema,
)
from autotune.study.storage._migrate import (
    MIGRATIONS_DIR,
    VERSION_TABLE,
)
from autotune.study.storage.models import Base
from tests.studies.mock import sqlite_url

OUR_TABLES = {
    "autotune_hardware",
    "autotune_studies",
    "autotune_trial_results",
    "autotune_verification_runs",
    "autotune_verifications",
}


def _optuna_db(tmp_path: Path) -> str:
    url = sqlite_url(tmp_path)
    optuna.create_study(study_name="plain", storage=url, directions=["maximize", "minimize"])
    return url


def _optuna_snapshot(
    engine: sa.Engine,
) -> tuple[set[str], list[tuple[str, ...]], dict[str, list[str]]]:
    """Optuna's tables, its Alembic revision, and each table's columns."""
    inspector = sa.inspect(engine)
    tables = {t for t in inspector.get_table_names() if not t.startswith("autotune_")}
    columns = {t: [c["name"] for c in inspector.get_columns(t)] for t in sorted(tables)}
    with engine.connect() as conn:
        revision = [tuple(r) for r in conn.execute(sa.text("SELECT * FROM alembic_version"))]
    return tables, revision, columns


def test_public_names_are_exported() -> None:
    public = sorted(n for n in dir(storage) if not n.startswith("_") and n not in ("annotations",))
    modules = {"models", "records"}
    assert sorted(storage.__all__) == sorted(n for n in public if n not in modules)


def test_upgrade_creates_our_tables_beside_optunas_and_changes_none_of_theirs(
    tmp_path: Path,
) -> None:
    engine = create_results_engine(_optuna_db(tmp_path))
    before = _optuna_snapshot(engine)
    assert schema_revision(engine) is None

    assert upgrade_schema(engine) == head_revision()

    tables = set(sa.inspect(engine).get_table_names())
    assert OUR_TABLES | {VERSION_TABLE} <= tables
    assert _optuna_snapshot(engine) == before  # same tables, columns and Optuna revision
    assert all(t.startswith("autotune_") for t in tables - before[0])
    assert schema_revision(engine) == head_revision()
    # Optuna still opens it, and checks its own schema version without complaint.
    assert optuna.load_study(study_name="plain", storage=str(engine.url)).study_name == "plain"


def test_upgrade_is_idempotent(tmp_path: Path) -> None:
    engine = create_results_engine(sqlite_url(tmp_path))
    upgrade_schema(engine)
    upgrade_schema(engine)
    with engine.connect() as conn:
        versions = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
    assert versions == [(head_revision(),)]


def test_downgrade_removes_only_our_tables(tmp_path: Path) -> None:
    engine = create_results_engine(_optuna_db(tmp_path))
    before = _optuna_snapshot(engine)
    upgrade_schema(engine)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "base")
    tables = set(sa.inspect(engine).get_table_names())
    assert not tables & OUR_TABLES
    assert _optuna_snapshot(engine) == before


def test_migrations_ship_inside_the_package() -> None:
    assert (MIGRATIONS_DIR / "env.py").is_file()
    assert list((MIGRATIONS_DIR / "versions").glob("0001_*.py"))
    assert MIGRATIONS_DIR.parent.name == "storage"


@pytest.mark.parametrize("table", sorted(OUR_TABLES))
def test_every_table_name_has_the_prefix(table: str) -> None:
    assert table in Base.metadata.tables
    assert all(name.startswith("autotune_") for name in Base.metadata.tables)
