"""``autotune trials --csv FILE``: one CSV row per finished trial, from the results table or rebuilt from
Optuna's record of the study."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
from pathlib import Path

import optuna

from autotune.core.exceptions import ConfigError
from autotune.study.storage import ResultsStore, TrialRecord, load_existing_study, trial_record

__all__ = ["export_csv", "trial_records"]


def trial_records(study_name: str, storage: str) -> list[TrialRecord]:
    """One row per finished trial: from the results table, or rebuilt from Optuna's record of
    the study where the table has none (a study from before the results tables).

    Raises:
        StudyNotFoundError: no such study.
        StorageError: the database cannot be read.
    """
    study = load_existing_study(study_name, storage)
    with ResultsStore.open(storage, create=False) as results:
        records = results.trials(study_name)
    if records:
        return records
    finished = study.get_trials(
        deepcopy=False,
        states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED),
    )
    return [trial_record(study_name, t) for t in finished]


def export_csv(study_name: str, storage: str, path: Path) -> int:
    """Write one CSV row per finished trial (columns: :class:`TrialRecord`'s fields).

    Returns:
        The number of rows written.

    Raises:
        StudyNotFoundError: no such study (no file is created).
    """
    records = trial_records(study_name, storage)
    columns = [f.name for f in dataclasses.fields(TrialRecord)]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            for record in records:
                row = record.as_row()
                for key, value in row.items():
                    if isinstance(value, dt.datetime):
                        row[key] = value.isoformat()
                writer.writerow(row)
    except OSError as e:
        raise ConfigError(f"--csv {path}: cannot write ({e.strerror or e})") from None
    return len(records)
