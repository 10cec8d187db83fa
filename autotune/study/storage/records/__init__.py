"""Frozen value objects the results store hands back (never ORM rows), and the pure builder
that turns one finished Optuna trial into a :class:`TrialRecord`.

By job: :mod:`._hardware` (the fingerprint), :mod:`._results` (a study, its trials and the figures of every measured run),
:mod:`._verification` (a verification's plan, rows and run) and :mod:`._trial` (the record of
a finished Optuna trial). How each record maps to its table's row is
:mod:`autotune.study.storage._rows`.
"""

from __future__ import annotations

from autotune.study.storage.records._hardware import HardwareFingerprint
from autotune.study.storage.records._results import (
    COLUMN_ATTR,
    MeasuredRun,
    StudyRecord,
    TrialRecord,
    column,
)
from autotune.study.storage.records._trial import (
    FINISHED_STATES,
    KNOB_COLUMNS,
    is_feasible,
    trial_record,
)
from autotune.study.storage.records._verification import (
    ANSWERS,
    LANES,
    Answer,
    Evidence,
    Lane,
    VerificationPlan,
    VerificationRecord,
    VerificationRun,
    counted_rows,
    rotated,
)

__all__ = [
    "ANSWERS",
    "COLUMN_ATTR",
    "FINISHED_STATES",
    "KNOB_COLUMNS",
    "LANES",
    "Answer",
    "Evidence",
    "HardwareFingerprint",
    "Lane",
    "MeasuredRun",
    "StudyRecord",
    "TrialRecord",
    "VerificationPlan",
    "VerificationRecord",
    "VerificationRun",
    "column",
    "counted_rows",
    "is_feasible",
    "rotated",
    "trial_record",
]
