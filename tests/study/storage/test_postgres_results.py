"""The results tables on PostgreSQL: migrations, rows, and the README's queries."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa

from autotune.core.config import VerifySettings
from autotune.study.api import verify_study
from autotune.study.storage import (
    ResultsStore,
    create_results_engine,
    head_revision,
    schema_revision,
)
from tests.studies.mock import fail_some, run_mock_study

README = Path(__file__).resolve().parents[3] / "storage" / "README.md"


@pytest.mark.postgres
def test_results_tables_on_postgres(postgres_url: str) -> None:
    url = postgres_url  # a schema of its own (tests/conftest.py), dropped afterwards
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
        engine.dispose()  # the schema, the study's rows and Optuna's with it, goes after the test
