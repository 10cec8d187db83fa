"""`autotune trials --csv FILE`: one CSV row per finished trial."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import optuna
import pytest

from autotune.cli import main
from autotune.study.export import (
    export_csv,
    list_studies,
)
from autotune.study.export._csv import (
    trial_records,
)
from autotune.study.storage import StudyNotFoundError, TrialRecord
from tests.studies.mock import DemoStudy, make_trial, sqlite_url


def test_export_csv_writes_one_row_per_finished_trial(
    demo_study: DemoStudy, tmp_path: Path
) -> None:
    path = tmp_path / "trials.csv"
    study, storage = f"study={demo_study.name}", f"storage={demo_study.url}"
    assert main(["trials", study, storage, "--csv", str(path)]) == 0
    with path.open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == [f.name for f in dataclasses.fields(TrialRecord)]
    assert [int(r["trial_number"]) for r in rows] == list(range(demo_study.n_trials))
    assert rows[0]["is_baseline"] == "True" and rows[0]["precision"] == "fp32"
    assert float(rows[0]["throughput_sps"]) > 0


def test_export_of_an_unknown_study_writes_no_file(demo_study: DemoStudy, tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    with pytest.raises(StudyNotFoundError):
        export_csv("nope", demo_study.url, path)
    assert not path.exists()
    storage = f"storage={demo_study.url}"
    assert main(["trials", "study=nope", storage, "--csv", str(path)]) == 2
    assert main(["trials", f"study={demo_study.name}", storage]) == 2  # --csv missing
    assert not path.exists()


def test_rows_are_rebuilt_for_a_study_made_without_our_tables(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    study = optuna.create_study(study_name="old", storage=url, directions=["maximize"] * 3)
    study.add_trials([make_trial(0, (100.0, 0.5, 1e6)), make_trial(1, None, failure="oom")])
    records = trial_records("old", url)
    assert [(r.trial_number, r.failure) for r in records] == [(0, None), (1, "oom")]
    assert records[0].throughput_sps == 100.0
    [summary] = list_studies(url)
    assert summary.hardware == "unknown" and summary.verification == "not verified"
