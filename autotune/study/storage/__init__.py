"""autotune's results tables, beside Optuna's in the same database.

Five tables, all prefixed ``autotune_`` and versioned by Alembic in their own version table:
hardware fingerprints, studies (linked to Optuna's by study name), one row per finished
trial with every figure (unit in the column name) and the full configuration, and the
verifications: one row per verification (its plan) and one per configuration and round. See
``storage/README.md`` for the columns and example queries.

Rows are written by :class:`ResultsCallback`, an Optuna callback in the study's process;
readers get frozen records (:class:`StudyRecord`, :class:`TrialRecord`), never ORM rows.

The models (:mod:`autotune.study.storage.models`) are the one source of the schema: the migrations
match them (``migrations/env.py`` says how to generate the next one), and each record maps to
its model's row in one place, :mod:`autotune.study.storage._rows`.
"""

from __future__ import annotations

from autotune.core.exceptions import StudyNotFoundError
from autotune.study.storage._callback import ResultsCallback, open_results_for_run
from autotune.study.storage._migrate import (
    head_revision,
    schema_revision,
    upgrade_schema,
)
from autotune.study.storage._optuna import (
    check_storage_reachable,
    open_storage,
    stored_study_attr,
    study_exists,
)
from autotune.study.storage._read import (
    load_existing_study,
    open_existing_storage,
    storage_location,
    study_names,
)
from autotune.study.storage._session import create_results_engine, sqlite_path
from autotune.study.storage._store import ResultsStore
from autotune.study.storage._url import error_reason, validate_storage_url
from autotune.study.storage.records import (
    ANSWERS,
    FINISHED_STATES,
    KNOB_COLUMNS,
    LANES,
    Answer,
    Evidence,
    HardwareFingerprint,
    Lane,
    StudyRecord,
    TrialRecord,
    VerificationPlan,
    VerificationRecord,
    VerificationRun,
    is_feasible,
    trial_record,
)

__all__ = [
    "ANSWERS",
    "FINISHED_STATES",
    "KNOB_COLUMNS",
    "LANES",
    "Answer",
    "Evidence",
    "HardwareFingerprint",
    "Lane",
    "ResultsCallback",
    "ResultsStore",
    "StudyNotFoundError",
    "StudyRecord",
    "TrialRecord",
    "VerificationPlan",
    "VerificationRecord",
    "VerificationRun",
    "check_storage_reachable",
    "create_results_engine",
    "error_reason",
    "head_revision",
    "is_feasible",
    "load_existing_study",
    "open_existing_storage",
    "open_results_for_run",
    "open_storage",
    "schema_revision",
    "sqlite_path",
    "storage_location",
    "stored_study_attr",
    "study_exists",
    "study_names",
    "trial_record",
    "upgrade_schema",
    "validate_storage_url",
]
