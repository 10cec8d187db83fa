"""The results tables on PostgreSQL: migrations, rows, and the README's queries."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa

from autotune.api import verify_study
from autotune.config import VerifySettings
from autotune.storage import ResultsStore, create_results_engine, head_revision, schema_revision
from tests.studies.mock import fail_some, run_mock_study

POSTGRES_URL = os.environ.get(
    "AUTOTUNE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
README = Path(__file__).resolve().parents[2] / "storage" / "README.md"


def _postgres_or_skip() -> str:
    try:
        with sa.create_engine(POSTGRES_URL).connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as e:  # any driver or connection failure means: no server here
        pytest.skip(f"no PostgreSQL server answers at {POSTGRES_URL}: {type(e).__name__}")
    return POSTGRES_URL


@pytest.mark.postgres
def test_results_tables_on_postgres() -> None:
    url = _postgres_or_skip()
    name = f"results-{uuid.uuid4().hex[:8]}"
    engine = create_results_engine(url)
    try:
        run_mock_study(url, 6, study=name, constrained=False, extra=["verify.rounds=0"])
        assert schema_revision(engine) == head_revision()
        with ResultsStore.open(url, create=False) as store:
            rows = store.trials(name)
            record = store.study(name)
        study = optuna.load_study(study_name=name, storage=url)
        assert [r.trial_number for r in rows] == [t.number for t in study.trials] == list(range(6))
        assert rows[0].is_baseline and record is not None and record.hardware is not None
        first, second = re.findall(r"```sql\n(.*?)```", README.read_text(), re.S)
        with engine.connect() as conn:
            models = conn.execute(sa.text(first)).mappings().all()
            close = conn.execute(sa.text(second.replace("'cnn_small'", f"'{name}'"))).all()
        assert any(m["gpu_model"] == record.hardware.device_name for m in models)
        assert close
        summary = verify_study(
            name, url, settings=VerifySettings(rounds=3, candidates=1), run_trial_fn=fail_some
        )
        with ResultsStore.open(url, create=False) as store:
            stored = store.latest_verification(name, complete=True)
        assert stored is not None and len(stored.rows) == summary.runs_done == summary.runs_planned
    finally:
        with engine.begin() as conn:
            ids = "SELECT id FROM autotune_studies WHERE optuna_study_name = :n"
            conn.execute(
                sa.text(f"DELETE FROM autotune_trial_results WHERE study_id IN ({ids})"),
                {"n": name},
            )
            conn.execute(
                sa.text("DELETE FROM autotune_studies WHERE optuna_study_name = :n"), {"n": name}
            )
        if name in optuna.get_all_study_names(url):
            optuna.delete_study(study_name=name, storage=url)
        engine.dispose()
