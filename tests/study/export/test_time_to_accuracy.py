"""`autotune best`, `best --export`, `trials --csv` and `ls` on a time-to-accuracy study; the
verification section of an export of one."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import optuna
import pytest
import yaml

from autotune.cli import main
from autotune.core.exceptions import ConfigError
from autotune.study.console import best_table, studies_table
from autotune.study.export import (
    best_configurations,
    export_best_yaml,
    list_studies,
)
from autotune.study.export._best import (
    sort_pareto,
)
from autotune.study.export._yaml import _verification_section
from tests.rendered import rendered_text
from tests.studies.mock import DemoStudy
from tests.studies.summaries import verification_summary
from tests.studies.tta import TARGET, TtaStudy


def test_best_ranks_by_time_to_target_by_default(tta_study: TtaStudy) -> None:
    best = best_configurations(tta_study.name, tta_study.url)
    assert best.objective == "time" and best.objective_mode == "time_to_accuracy"
    assert best.target == TARGET and best.metric.name == "accuracy"
    times = [r.time_to_accuracy_s for r in best.rows]
    assert times and None not in times and times == sorted(t or 0.0 for t in times)
    study = optuna.load_study(study_name=tta_study.name, storage=tta_study.url)
    assert {r.number for r in best.rows} == {t.number for t in study.best_trials}
    memory = sort_pareto(best.rows, "memory")
    assert memory[0].peak_memory_bytes == min(r.peak_memory_bytes for r in best.rows)
    by_throughput = best_configurations(tta_study.name, tta_study.url, "throughput").rows
    assert by_throughput[0].throughput_sps == max(r.throughput_sps for r in best.rows)
    text = rendered_text(best_table(best))
    assert "time to target s" in text and "x sooner" in text and "to reach 95.0%" in text
    assert "by time to target" in text and "[SIMULATED]" in text


def test_time_is_refused_for_a_throughput_study(demo_study: DemoStudy) -> None:
    with pytest.raises(ConfigError, match="--objective time: study=demo is a throughput study"):
        best_configurations(demo_study.name, demo_study.url, "time")
    assert best_configurations(demo_study.name, demo_study.url).objective == "throughput"


def test_export_of_a_trial_carries_its_time_to_target(tta_study: TtaStudy, tmp_path: Path) -> None:
    best = best_configurations(tta_study.name, tta_study.url)
    row = best.rows[0]
    path = tmp_path / "best.yaml"
    document = export_best_yaml(best, path, trial=row.number)
    loaded = yaml.safe_load(path.read_text())
    figures = loaded["single_trial_figures"]
    assert figures["time_to_accuracy_s"] == pytest.approx(row.time_to_accuracy_s)
    assert figures["target"] == {"metric": "accuracy", "direction": "maximize", "value": TARGET}
    assert figures["val_metric"] >= TARGET and figures["peak_memory_bytes"] > 0
    assert loaded["verification"] is None and "NOT VERIFIED" in loaded["note"]
    assert document["trial"] == row.number
    header = path.read_text().splitlines()[:4]
    assert any(
        "reached validation accuracy" in line and "(target 95.0%)" in line for line in header
    )


def test_csv_has_the_time_to_accuracy_columns(tta_study: TtaStudy, tmp_path: Path) -> None:
    path = tmp_path / "trials.csv"
    study, storage = f"study={tta_study.name}", f"storage={tta_study.url}"
    assert main(["trials", study, storage, "--csv", str(path)]) == 0
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == tta_study.n_trials
    for name in ("time_to_accuracy_s", "target_reached", "eval_s", "metric_curve_json"):
        assert name in rows[0]
    reached = [r for r in rows if r["target_reached"] == "True"]
    missed = [r for r in rows if r["target_reached"] == "False"]
    assert reached and all(float(r["time_to_accuracy_s"]) > 0 for r in reached)
    assert all(r["time_to_accuracy_s"] == "" for r in missed)
    curve = json.loads(reached[0]["metric_curve_json"])
    assert curve[-1][2] >= TARGET and all(len(point) == 3 for point in curve)


def test_ls_shows_the_best_time_to_target(
    tta_study: TtaStudy, capsys: pytest.CaptureFixture[str]
) -> None:
    [summary] = list_studies(tta_study.url)
    assert summary.objective == "time_to_accuracy" and summary.target == "95.0%"
    study = optuna.load_study(study_name=tta_study.name, storage=tta_study.url)
    assert summary.best_time_to_accuracy_s == min(t.values[0] for t in study.best_trials)
    assert summary.metric == "time to accuracy >= 95.0%"
    assert main(["ls", f"storage={tta_study.url}"]) == 0
    out = capsys.readouterr().out
    assert "best (1 trial)" in out and "s to 95.0%" in out and "not verified" in out
    text = rendered_text(studies_table([summary], tta_study.url))
    assert "s to 95.0%" in text


def test_the_best_and_report_commands_on_a_time_to_accuracy_study(
    tta_study: TtaStudy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"storage={tta_study.url}"
    assert main(["best", f"study={tta_study.name}", storage, "--objective", "time"]) == 0
    out = capsys.readouterr().out
    assert "time to target s" in out and "not verified" in out
    report = tmp_path / "r.html"
    assert main(["report", f"study={tta_study.name}", storage, "--out", str(report)]) == 0
    page = report.read_text()
    assert 'id="metric-vs-time"' in page and "SIMULATED" in page


def test_the_verification_section_of_an_export_has_the_times(tmp_path: Path) -> None:
    summary = verification_summary(tta=True, study_name="tta")
    section = _verification_section(summary)
    assert section["time_to_accuracy_s"] == 4.0 and section["target"] == TARGET
    assert section["baseline_time_to_accuracy_s"] == 10.0
    assert section["time_to_accuracy_spread_s"] == [3.5, 4.5] and section["speedup"] == 2.5
