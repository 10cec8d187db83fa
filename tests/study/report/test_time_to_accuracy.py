"""Reports of a time-to-accuracy study (``objective=time_to_accuracy``: two objectives, the
seconds to the target and peak memory): data, Pareto rows, figures and tables."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autotune.core.exceptions import ConfigError
from autotune.core.units import MIB
from autotune.study.objectives import study_objectives
from autotune.study.report import (
    FEASIBLE,
    DashboardApp,
    ReportData,
    build_figures,
    gather_report,
    pareto_row,
    pareto_table,
    ratio_text,
    render_report,
    seconds_text,
    trial_mode,
)
from autotune.study.report._data import gather_from_trials
from autotune.study.report._figures import TTA_FIGURE_IDS, learning_curves
from autotune.study.report._hypervolume import hypervolume_history
from autotune.study.report._points import INFEASIBLE
from tests.rendered import rendered_text
from tests.studies.mock import make_trial
from tests.studies.tta import TARGET, TtaStudy, hand_trials, tta_trial

TTA = study_objectives(mode="time_to_accuracy")


def _data(simulated: bool | None = None) -> ReportData:
    return gather_from_trials(
        "tta", hand_trials(), objectives=TTA, target=TARGET, importances=False, simulated=simulated
    )


def test_the_front_is_the_trials_that_reached_the_target_non_dominated() -> None:
    data = _data()
    assert data.objective_mode == "time_to_accuracy" and data.time_to_accuracy
    assert data.metric.name == "accuracy" and data.target == TARGET
    points = {p.number: p for p in data.points}
    # Trial 2 (1 s, 2 MiB) would dominate every other trial, but it missed the target.
    assert points[2].status == INFEASIBLE and points[2].measured and not points[2].pareto
    assert points[2].reason == "missed the target" and points[2].time_to_accuracy_s is None
    assert points[2].target_reached is False and points[2].trained_s == 1.0
    assert points[5].status != FEASIBLE and not points[5].measured  # oom
    assert {n for n, p in points.items() if p.pareto} == {1, 3}
    # Rows: soonest to the target first; x sooner = the baseline's 10 s over the trial's.
    assert [r.number for r in data.pareto] == [3, 1]
    assert [r.time_to_accuracy_s for r in data.pareto] == [4.0, 5.0]
    assert [r.speedup for r in data.pareto] == [pytest.approx(2.5), pytest.approx(2.0)]
    assert points[1].speedup == pytest.approx(2.0) and points[2].speedup is None
    # The metric reached and the throughput come from the attributes, memory from the values.
    row = data.pareto[1]
    assert row.val_metric == 0.96 and row.throughput_sps == 1001.0
    assert row.peak_memory_bytes == 8 * MIB and row.eval_s == 0.1
    assert data.baseline is not None and data.baseline.time_to_accuracy_s == 10.0
    assert len(points[1].curve) == 3 and points[1].curve[-1] == (5.0, 30, 0.96)
    assert {r.number for r in data.configurations} == {0, 1, 3, 4}


def test_a_missed_target_never_reaches_the_front_even_when_alone() -> None:
    trials = [tta_trial(0, 3.0, 4.0, reached=False, baseline=True)]
    data = gather_from_trials("tta", trials, objectives=TTA, target=TARGET, importances=False)
    assert data.pareto == () and data.hypervolume == ()
    assert any("did not reach the target" in n for n in data.notes)


def test_pareto_row_and_trial_mode_of_a_time_to_accuracy_trial() -> None:
    trial = tta_trial(7, 2.0, 5.0, metric=0.97)
    assert trial_mode(trial) == "time_to_accuracy"
    assert trial_mode(make_trial(1, (100.0, 0.5, 1e6))) == "throughput"
    row = pareto_row(trial, baseline_time_s=8.0)
    assert row.time_to_accuracy and row.time_to_accuracy_s == 2.0
    assert row.speedup == pytest.approx(4.0) and row.val_metric == 0.97
    assert row.peak_memory_bytes == 5 * MIB and row.compile_s == 0.5
    assert pareto_row(trial).speedup is None
    # A throughput trial's row is as before: no time to target.
    old = pareto_row(make_trial(1, (4000.0, 0.85, 4 * MIB)), 1000.0)
    assert old.speedup == 4.0 and old.time_to_accuracy_s is None and not old.time_to_accuracy


def test_hypervolume_in_two_dimensions_by_hand() -> None:
    # Goodness: 1 - t / (1.1 * 10 s) and 1 - m / (1.1 * 16 MiB), feasible trials 0, 1, 3, 4.
    history = hypervolume_history(_data().points, None, "time_to_accuracy")
    assert [h.number for h in history] == [0, 1, 2, 3, 4, 5]

    def good(t: float, m: float) -> tuple[float, float]:
        return 1 - t / 11.0, 1 - m / 17.6

    b0, b1, b3 = good(10.0, 12.0), good(5.0, 8.0), good(4.0, 16.0)
    assert history[0].hypervolume == pytest.approx(b0[0] * b0[1])
    assert history[1].hypervolume == pytest.approx(b1[0] * b1[1])  # trial 1 dominates 0
    assert history[2].hypervolume == history[1].hypervolume  # missed: adds nothing
    union = b1[0] * b1[1] + (b3[0] - b1[0]) * b3[1]
    assert history[3].hypervolume == pytest.approx(union)
    assert history[5].hypervolume == pytest.approx(union)


def test_the_figures_of_a_time_to_accuracy_study() -> None:
    data = _data(simulated=True)
    figures = build_figures(data)
    assert tuple(figures) == TTA_FIGURE_IDS and "pareto-3d" not in figures
    # The learning curves: the baseline, then every Pareto-optimal trial, then the target.
    curves = figures["metric-vs-time"]
    names = [t.name for t in curves.data]
    assert names == [
        "baseline (trial 0)", "trial 3 (Pareto-optimal)", "trial 1 (Pareto-optimal)",
        "target 95.0%",
    ]  # fmt: skip
    assert len(curves.data) == len(data.pareto) + 1 + 1
    target = curves.data[-1]
    assert list(target.y) == [95.0, 95.0] and target.line.dash == "dash"
    assert list(curves.data[2].x) == pytest.approx([5 / 3, 10 / 3, 5.0])
    assert list(curves.data[2].y) == pytest.approx([80.0, 90.0, 96.0])  # accuracy in %
    assert curves.layout.yaxis.title.text == "validation accuracy (%)"
    assert "wall time" in curves.layout.xaxis.title.text
    assert "[SIMULATED]" in curves.layout.title.text
    assert [c.number for c in learning_curves(data)] == [0, 3, 1]
    # One 2-D Pareto figure: time to target against peak memory.
    pareto = figures["pareto-time-memory"]
    assert pareto.layout.xaxis.title.text == "time to target (s)"
    assert pareto.layout.yaxis.title.text == "peak memory (MiB)"
    assert "[SIMULATED]" in pareto.layout.title.text
    by_name = {t.name: t for t in pareto.data}
    front = by_name["Pareto-optimal (2)"]
    assert sorted(front.customdata) == [1, 3] and sorted(front.x) == [4.0, 5.0]
    missed = by_name["infeasible (missed the target, or breaks a constraint) (1)"]
    assert list(missed.customdata) == [2] and missed.y[0] == pytest.approx(2.0)
    assert missed.x[0] > 10.0  # no time to target: past the slowest measured time
    assert "missed 95.0% (91.0% after 1.00 s)" in missed.text[0]
    assert "reached 96.0% in 5.00 s" in front.text[list(front.customdata).index(1)]
    assert "2.00x sooner than the baseline" in front.text[list(front.customdata).index(1)]
    assert "time to target" in figures["hypervolume"].layout.title.text
    dims = [d.label for d in figures["parallel-coordinates"].data[0].dimensions]
    assert dims[-2:] == ["time to target (s)", "peak memory (MiB)"]


def test_importances_are_per_objective_of_the_study() -> None:
    trials = [tta_trial(0, 10.0, 12.0, baseline=True)] + [
        tta_trial(i, 2.0 + i, 4.0 + (i % 3), batch_size=(16, 32, 64, 128)[i % 4])
        for i in range(1, 9)
    ]
    data = gather_from_trials("tta", trials, objectives=TTA, target=TARGET)
    assert set(data.importances) == {"time_to_accuracy_s", "peak_memory_bytes"}
    bars = build_figures(data)["importances"].data
    assert [b.name for b in bars] == ["time to target (s)", "peak memory (MiB)"]


def test_the_terminal_table_of_a_time_to_accuracy_study() -> None:
    data = _data()
    table = pareto_table(list(data.pareto), "front", data.metric, recommended=3)
    headers = [str(c.header) for c in table.columns]
    assert headers[:6] == [
        "trial", "time to target s", "x sooner", "val acc reached", "peak MiB", "compile s",
    ]  # fmt: skip
    assert "samples/s" not in headers and "step ms" not in headers
    text = rendered_text(table)
    assert "3 (recommended)" in text and "2.50x" in text and "2.00x" in text
    assert "4.00" in text and "96.0%" in text and "16.0" in text


def test_seconds_and_ratios_keep_two_or_three_significant_figures() -> None:
    assert [seconds_text(s) for s in (0.02893, 3.14159, 12.43, 124.4, 1234.5)] == [
        "0.0289", "3.14", "12.4", "124", "1,234",
    ]  # fmt: skip
    assert seconds_text(None) == "n/a"
    assert [ratio_text(r) for r in (2.6, 0.5, 0.00116, None)] == [
        "2.60x", "0.50x", "0.0012x", "n/a",
    ]  # fmt: skip


def test_the_mock_study_through_the_report(tta_study: TtaStudy) -> None:
    study = optuna.load_study(study_name=tta_study.name, storage=tta_study.url)
    data = gather_report(study)
    assert data.time_to_accuracy and data.target == TARGET and data.simulated
    assert data.finished == tta_study.n_trials and data.pareto
    for point in data.points:
        if point.target_reached is False:
            assert point.status == INFEASIBLE and not point.pareto
    front = {t.number for t in study.best_trials}
    assert {r.number for r in data.pareto} == front  # the same front as Optuna's
    assert all(r.time_to_accuracy_s is not None for r in data.pareto)
    times = [r.time_to_accuracy_s or 0.0 for r in data.pareto]
    assert times == sorted(times)
    page = render_report(data)
    assert 'id="metric-vs-time"' in page and 'id="pareto-time-memory"' in page
    assert 'id="pareto-3d"' not in page and "time to target s" in page
    assert (
        "Time to accuracy: each trial trains until its validation accuracy is at least 95.0%"
        in page
    )
    app = DashboardApp(tta_study.url, importances=False)
    try:
        payload = app.study_payload(tta_study.name)
        assert tuple(payload["figures"]) == TTA_FIGURE_IDS
        assert payload["objective"] == "time_to_accuracy" and payload["target"] == TARGET
        shell = app.page(tta_study.name)
        assert all(f'id="{fid}"' in shell for fid in TTA_FIGURE_IDS)
    finally:
        app.close()


def test_a_two_objective_study_that_is_not_time_to_accuracy_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    study = optuna.create_study(study_name="two", storage=url, directions=["minimize"] * 2)
    with pytest.raises(ConfigError, match="not an autotune study"):
        gather_report(study)
