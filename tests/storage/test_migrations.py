"""Migration 0003 (workloads) carries the rows of a database written at 0002 over: model knobs
as JSON, the workload's short name, the metric under its new name; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from autotune.storage import (
    MIGRATIONS_DIR,
    ResultsStore,
    create_results_engine,
    head_revision,
    schema_revision,
    upgrade_schema,
)
from tests.storage.studies import sqlite_url

POSTGRES_URL = os.environ.get(
    "AUTOTUNE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
BEFORE_WORKLOADS = "0002_verifications"
_NOW = "2026-11-20 10:00:00"


def _migrate(engine: sa.Engine, revision: str) -> None:
    """Upgrade the results tables to ``revision`` (as autotune.storage.upgrade_schema does
    for the head)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database: SQLite in tmp_path, or a schema of its own on the
    PostgreSQL server (its search path set in the URL; dropped afterwards)."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    schema = f"migration_{uuid.uuid4().hex[:8]}"
    try:
        admin = sa.create_engine(POSTGRES_URL)
        with admin.begin() as conn:
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    except Exception as e:  # any driver or connection failure means: no server here
        pytest.skip(f"no PostgreSQL server answers at {POSTGRES_URL}: {type(e).__name__}")
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def engine(url: str) -> Iterator[sa.Engine]:
    engine = create_results_engine(url)
    yield engine
    engine.dispose()


def _write_rows_at_0002(engine: sa.Engine) -> None:
    """A study, one cnn trial (depth 2, width 16) and one verification row, as 0002 stored
    them."""
    config = {"family": "cnn", "depth": 2, "width": 16, "batch_size": 64, "seed": 0}
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO autotune_studies (id, optuna_study_name, space_name, space_source,"
                " device_kind, simulated, sampler, seed, created_at) VALUES (1, 'old',"
                " 'cnn_small', 'search_spaces/cnn_small.yaml', 'mock', :t, 'gp', 0, :now)"
            ),
            {"t": True, "now": _NOW},
        )
        conn.execute(
            sa.text(
                "INSERT INTO autotune_trial_results (id, study_id, trial_number, state,"
                " is_baseline, is_feasible, simulated, throughput_sps, val_accuracy, family,"
                " depth, width, batch_size, precision, config_json, recorded_at) VALUES (1, 1,"
                " 0, 'COMPLETE', :t, :t, :t, 1234.5, 0.9731, 'cnn', 2, 16, 64, 'fp32', :config,"
                " :now)"
            ),
            {"t": True, "config": json.dumps(config), "now": _NOW},
        )
        conn.execute(
            sa.text(
                "INSERT INTO autotune_verification_runs (id, study_id, number, baseline_trial,"
                " candidates_json, rounds, seeds_json, accuracy_tolerance_pt, started_at)"
                " VALUES (1, 1, 1, 0, '[]', 1, '[0]', 0.5, :now)"
            ),
            {"now": _NOW},
        )
        conn.execute(
            sa.text(
                "INSERT INTO autotune_verifications (id, run_id, round_index, seed,"
                " trial_number, is_baseline, simulated, val_accuracy, config_json, recorded_at)"
                " VALUES (1, 1, 0, 0, 0, :t, :t, 0.9644, :config, :now)"
            ),
            {"t": True, "config": json.dumps(config), "now": _NOW},
        )


def test_upgrading_a_database_written_before_workloads_keeps_its_rows(engine: sa.Engine) -> None:
    _migrate(engine, BEFORE_WORKLOADS)
    assert schema_revision(engine) == BEFORE_WORKLOADS
    _write_rows_at_0002(engine)

    assert upgrade_schema(engine) == head_revision()

    with engine.connect() as conn:
        result = conn.execute(
            sa.text(
                "SELECT workload, model_knobs_json, val_metric, batch_size"
                " FROM autotune_trial_results"
            )
        ).one()
        study = conn.execute(
            sa.text("SELECT metric_name, metric_direction FROM autotune_studies")
        ).one()
        verification = conn.execute(sa.text("SELECT val_metric FROM autotune_verifications")).one()
    assert result.workload == "cnn"
    assert result.model_knobs_json == '{"depth": 2, "width": 16}'
    assert result.val_metric == pytest.approx(0.9731)
    assert result.batch_size == 64
    assert tuple(study) == ("accuracy", "maximize")
    assert verification.val_metric == pytest.approx(0.9644)
    columns = {c["name"] for c in sa.inspect(engine).get_columns("autotune_trial_results")}
    assert not columns & {"family", "depth", "width", "val_accuracy"}


def test_the_store_upgrades_and_reads_the_old_rows(engine: sa.Engine, url: str) -> None:
    _migrate(engine, BEFORE_WORKLOADS)
    _write_rows_at_0002(engine)

    with ResultsStore.open(url, create=True) as store:  # as a new run opens it: upgraded
        (row,) = store.trials("old")
        record = store.study("old")

    assert (row.workload, json.loads(row.model_knobs_json or "")) == (
        "cnn",
        {"depth": 2, "width": 16},
    )
    assert row.val_metric == pytest.approx(0.9731)
    assert record is not None
    assert (record.metric_name, record.metric_direction) == ("accuracy", "maximize")


def test_downgrading_to_0002_restores_the_old_columns(engine: sa.Engine) -> None:
    upgrade_schema(engine)

    _migrate_down(engine, BEFORE_WORKLOADS)

    assert schema_revision(engine) == BEFORE_WORKLOADS
    columns = {c["name"] for c in sa.inspect(engine).get_columns("autotune_trial_results")}
    assert {"family", "depth", "width", "val_accuracy"} <= columns
    assert not columns & {"workload", "model_knobs_json", "val_metric"}


def _migrate_down(engine: sa.Engine, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
