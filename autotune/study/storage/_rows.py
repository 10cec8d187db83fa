"""How each frozen record maps to its table's row, written once.

The models (:mod:`autotune.study.storage.models`) are the one source of the schema; a record's
fields are the columns of its model under the same names, except where its
:class:`RowMapping` says otherwise:

- ``renamed``: the field is stored in a column of another name (the study's ``study_name``
  is ``optuna_study_name``, the link to Optuna's table);
- ``json_fields``: the field, a tuple, is stored as a JSON list in a text column;
- ``record_only``: fields that are no column of the table (a trial's ``study_name``: its row
  has the study's key instead; a study's ``hardware``: its row has the hardware's key);
- ``row_only``: columns no field holds (keys, foreign keys, when the row was written, values
  derived from the record).

``tests/study/storage/test_rows.py`` checks that these are the only differences between each
record and its model.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.study.storage.models import (
    Base,
    HardwareModel,
    StudyModel,
    TrialResultModel,
    VerificationModel,
    VerificationRunModel,
)
from autotune.study.storage.records import (
    HardwareFingerprint,
    StudyRecord,
    TrialRecord,
    VerificationPlan,
    VerificationRecord,
    VerificationRun,
    counted_rows,
)

__all__ = [
    "HARDWARE",
    "MAPPINGS",
    "PLAN",
    "RUN",
    "STUDY",
    "TRIAL",
    "VERIFICATION",
    "RowMapping",
    "hardware_from_row",
    "new_hardware_row",
    "new_run_row",
    "new_study_row",
    "run_from_rows",
    "study_from_row",
    "trial_from_row",
    "verification_from_row",
]


@dataclass(frozen=True)
class RowMapping:
    """Which fields of a frozen record are which columns of its model.

    Attributes:
        record: the frozen dataclass.
        model: the SQLAlchemy model of its table.
        renamed: field name -> column name, where they differ.
        json_fields: tuple fields stored as a JSON list (read back as a tuple).
        record_only: fields that are no column.
        row_only: columns that no field holds.
    """

    record: type[Any]
    model: type[Base]
    renamed: Mapping[str, str] = field(default_factory=dict)
    json_fields: frozenset[str] = frozenset()
    record_only: frozenset[str] = frozenset()
    row_only: frozenset[str] = frozenset()

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """``(field, column)`` of every field stored in a column, in the record's order."""
        return tuple(
            (f.name, self.renamed.get(f.name, f.name))
            for f in dataclasses.fields(self.record)
            if f.name not in self.record_only
        )

    def values(self, record: Any) -> dict[str, Any]:
        """The stored fields of ``record`` by column name, as the columns hold them."""
        values = {}
        for name, column in self.pairs():
            value = getattr(record, name)
            values[column] = json.dumps(list(value)) if name in self.json_fields else value
        return values

    def fields(self, row: Base) -> dict[str, Any]:
        """The stored fields of ``row`` by field name (the record's others are the caller's)."""
        fields = {}
        for name, column in self.pairs():
            value = getattr(row, column)
            fields[name] = tuple(json.loads(value)) if name in self.json_fields else value
        return fields

    def assign(self, row: Base, record: Any) -> None:
        """Overwrite every stored field of ``row`` with ``record``'s."""
        for column, value in self.values(record).items():
            setattr(row, column, value)


#: A hardware fingerprint, in its row.
HARDWARE = RowMapping(
    HardwareFingerprint,
    HardwareModel,
    # fingerprint_sha256 is the record's property (a hash of its fields).
    row_only=frozenset({"id", "fingerprint_sha256", "created_at"}),
)
#: A study's record, in its row.
STUDY = RowMapping(
    StudyRecord,
    StudyModel,
    renamed={"study_name": "optuna_study_name"},
    record_only=frozenset({"hardware"}),  # the row's hardware_id
    row_only=frozenset({"id", "hardware_id"}),
)
#: A trial's results, in its row.
TRIAL = RowMapping(
    TrialRecord,
    TrialResultModel,
    record_only=frozenset({"study_name"}),  # the row's study_id
    # The machine of a row is the writer's (ResultsStore.record_trials), not the record's.
    row_only=frozenset({"id", "study_id", "hardware_id", "recorded_at"}),
)
#: One configuration measured in one verification round, in its row.
VERIFICATION = RowMapping(
    VerificationRecord,
    VerificationModel,
    row_only=frozenset({"id", "run_id", "recorded_at"}),
)
#: The plan of a verification, in its run's row (``rounds`` is the plan's ``len(seeds)``).
PLAN = RowMapping(
    VerificationPlan,
    VerificationRunModel,
    renamed={
        "candidates": "candidates_json",
        "seeds": "seeds_json",
        "race_seeds": "race_seeds_json",
        "model_changes": "model_changes_json",
        "inherited": "inherited_json",
    },
    json_fields=frozenset({"candidates", "seeds", "race_seeds", "model_changes", "inherited"}),
    row_only=frozenset({"id", "study_id", "number", "rounds", "started_at", "completed_at"}),
)
#: A verification's run row, less its plan (:data:`PLAN`).
RUN = RowMapping(
    VerificationRun,
    VerificationRunModel,
    record_only=frozenset({"study_name", "plan", "rows", "superseded"}),
    row_only=frozenset(
        {"id", "study_id", "rounds"} | {column for _, column in PLAN.pairs()},
    ),
)
#: Every mapping, for the test that they cover their models.
MAPPINGS = (HARDWARE, STUDY, TRIAL, VERIFICATION, PLAN, RUN)


def hardware_from_row(row: HardwareModel | None) -> HardwareFingerprint | None:
    """The fingerprint of a hardware row (None for None)."""
    return HardwareFingerprint(**HARDWARE.fields(row)) if row is not None else None


def new_hardware_row(record: HardwareFingerprint) -> HardwareModel:
    """A new (unsaved) hardware row for ``record``, with its hash."""
    return HardwareModel(fingerprint_sha256=record.fingerprint_sha256, **HARDWARE.values(record))


def study_from_row(row: StudyModel) -> StudyRecord:
    """The record of a study row, with its hardware's fingerprint."""
    return StudyRecord(hardware=hardware_from_row(row.hardware), **STUDY.fields(row))


def new_study_row(record: StudyRecord, hardware: HardwareModel | None) -> StudyModel:
    """A new (unsaved) study row for ``record``; ``created_at`` is now where the record's is
    None."""
    values = STUDY.values(record)
    if values["created_at"] is None:
        del values["created_at"]  # the column's default
    return StudyModel(hardware=hardware, **values)


def trial_from_row(study_name: str, row: TrialResultModel) -> TrialRecord:
    """The record of a trial row of the study ``study_name``."""
    return TrialRecord(study_name=study_name, **TRIAL.fields(row))


def verification_from_row(row: VerificationModel) -> VerificationRecord:
    """The record of one verification measurement row."""
    return VerificationRecord(**VERIFICATION.fields(row))


def new_run_row(
    study_id: int, number: int, plan: VerificationPlan, started_at: dt.datetime
) -> VerificationRunModel:
    """A new (unsaved) row of verification ``number`` of the study with key ``study_id``."""
    return VerificationRunModel(
        study_id=study_id,
        number=number,
        rounds=plan.rounds,
        started_at=started_at,
        **PLAN.values(plan),
    )


def run_from_rows(
    study_name: str, run: VerificationRunModel, rows: Iterable[VerificationModel]
) -> VerificationRun:
    """The verification of ``study_name`` that ``run`` holds, with its measurement rows: the
    last attempt of each round and trial counts, the busy ones before it are ``superseded``
    (:func:`~autotune.study.storage.records.counted_rows`)."""
    counted, superseded = counted_rows(tuple(verification_from_row(row) for row in rows))
    return VerificationRun(
        study_name=study_name,
        plan=VerificationPlan(**PLAN.fields(run)),
        rows=counted,
        superseded=superseded,
        **RUN.fields(run),
    )
