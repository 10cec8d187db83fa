"""`autotune ls`: the studies of a database with counts, hardware and verdicts."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autotune.cli import main
from autotune.study.export import list_studies
from autotune.study.storage import ResultsStore
from autotune.study.verification import load_verification
from tests.studies.mock import DemoStudy, sqlite_url


def test_a_study_that_is_not_autotunes_is_refused_by_report_and_marked_by_ls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sqlite_url(tmp_path)
    other = optuna.create_study(study_name="other", storage=url)
    other.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    out = tmp_path / "r.html"
    assert main(["report", "study=other", f"storage={url}", "--out", str(out)]) == 2
    assert "not an autotune study (it has 1 objectives" in capsys.readouterr().err
    assert not out.exists()
    [summary] = list_studies(url)
    assert summary.space_name == "(not an autotune study)" and summary.total == 2


def test_ls_lists_studies_with_counts_and_hardware(
    demo_study: DemoStudy, capsys: pytest.CaptureFixture[str]
) -> None:
    [summary] = list_studies(demo_study.url)
    assert summary.study_name == demo_study.name and summary.space_name == "cnn_small"
    assert summary.finished == summary.total == demo_study.n_trials
    assert summary.simulated and "simulated" in summary.hardware
    assert 0 < summary.pareto <= summary.feasible < summary.finished
    # The speedup shown is the verified recommendation's, never a single trial's.
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    with ResultsStore.open(demo_study.url, create=False) as results:
        verification = load_verification(study, results)
    assert verification is not None and verification.recommended is not None
    assert summary.verification == "recommended"
    assert summary.recommended_trial == verification.recommended.trial_number
    assert summary.verified_speedup == verification.recommended.speedup
    assert main(["ls", f"storage={demo_study.url}"]) == 0
    out = capsys.readouterr().out
    assert demo_study.name in out and "[SIMULATED]" in out
    assert f"{summary.verified_speedup:.2f}x (trial {summary.recommended_trial})" in out


def test_ls_of_a_missing_database_exits_2_without_creating_it(tmp_path: Path) -> None:
    assert main(["ls", f"storage={sqlite_url(tmp_path / 'none')}"]) == 2
    assert not (tmp_path / "none").exists()
