"""Report data gathering: classification, Pareto front, hypervolume, importances, speedups."""

from __future__ import annotations

import datetime as dt

import optuna
import pytest
from optuna.trial import TrialState

import autotune.study.report as report
from autotune.core.config import DEFAULT_STORAGE_URL
from autotune.core.units import MIB
from autotune.study.objectives import study_objectives
from autotune.study.report import (
    FEASIBLE,
    gather_report,
    verify_command,
)
from autotune.study.report._data import gather_from_trials
from autotune.study.report._hypervolume import hypervolume_history
from autotune.study.report._importances import (
    param_importances,
)
from autotune.study.report._points import (
    FAILED,
    INFEASIBLE,
    TrialPoint,
    classify,
    pareto_numbers,
)
from autotune.study.report._text import not_verified_line
from autotune.study.storage import ResultsStore
from autotune.study.verification import load_verification
from tests.studies.mock import DemoStudy, make_trial


def _trials() -> list[optuna.trial.FrozenTrial]:
    """Baseline, 3 feasible (one dominated), one over a limit, one failed, one pruned, and
    one running."""
    running = make_trial(7, (1.0, 0.1, 1.0))
    running.state = TrialState.RUNNING
    return [
        make_trial(0, (1000.0, 0.97, 8 * MIB), baseline=True),  # most accurate
        make_trial(1, (4000.0, 0.85, 4 * MIB), precision="bf16"),
        make_trial(2, (2000.0, 0.95, 6 * MIB), batch_size=32),
        make_trial(3, (1500.0, 0.80, 9 * MIB)),  # dominated by 1 and 2
        make_trial(4, (9000.0, 0.99, 90 * MIB), constraint=26.0),  # breaks max_memory_bytes
        make_trial(5, None, failure="oom", constraint=1.0),
        make_trial(6, state=TrialState.PRUNED, failure="infeasible"),
        running,
    ]


def test_public_names_are_exported() -> None:
    public = {n for n in dir(report) if not n.startswith("_") and n != "annotations"}
    assert set(report.__all__) == public


def test_classify_tells_feasible_infeasible_and_failed_apart() -> None:
    t = {x.number: x for x in _trials()}
    assert classify(t[1]) == (FEASIBLE, True, "")
    assert classify(t[4]) == (INFEASIBLE, True, "breaks failed")
    assert classify(t[5]) == (FAILED, False, "oom: last line of oom")
    status, measured, reason = classify(t[6])
    assert (status, measured) == (INFEASIBLE, False) and reason.startswith("not launched")
    # How an infeasible configuration is recorded now (COMPLETE, so the sampler learns).
    refused = make_trial(8, None, failure="infeasible", constraint=1.0)
    status, measured, reason = classify(refused)
    assert (status, measured) == (INFEASIBLE, False) and reason.startswith("not launched")
    # Stopped after one window below the throughput floor: infeasible, not fully measured.
    slow = make_trial(9, (80.0, 0.0, 3 * MIB), failure="too_slow", constraint=1.0)
    status, measured, reason = classify(slow)
    assert (status, measured) == (INFEASIBLE, False) and reason.startswith("too slow: ")
    with pytest.raises(ValueError, match="RUNNING"):
        classify(t[7])


def test_pareto_numbers_drop_only_dominated_points() -> None:
    values = {
        1: [4000.0, 0.85, 4.0],
        2: [2000.0, 0.95, 6.0],
        3: [1500.0, 0.80, 9.0],  # worse than 2 on every objective
        4: [2000.0, 0.95, 6.0],  # equal to 2: neither dominates the other
        5: [4000.0, 0.85, 5.0],  # more memory than 1, else equal: dominated
    }
    assert pareto_numbers(values) == {1, 2, 4}


def test_pareto_numbers_follow_each_objective_direction() -> None:
    loss = study_objectives("val_loss", "minimize")
    values = {
        1: [4000.0, 0.30, 4.0],
        2: [2000.0, 0.10, 6.0],  # the lowest loss
        3: [2000.0, 0.20, 6.0],  # a higher loss than 2, else equal: dominated
    }
    assert pareto_numbers(values, loss) == {1, 2}
    assert pareto_numbers(values) == {1}  # accuracy maximized: 1 is best at everything
    assert pareto_numbers({}) == set()


def test_gathered_points_speedups_and_pareto_rows() -> None:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    data = gather_from_trials("s", _trials(), space_name="cnn_small", importances=False, now=now)
    assert data.finished == 7 and data.running == 1
    assert (data.count(FEASIBLE), data.count(INFEASIBLE), data.count(FAILED)) == (4, 2, 1)
    by_number = {p.number: p for p in data.points}
    assert {n for n, p in by_number.items() if p.pareto} == {0, 1, 2}
    assert not by_number[4].pareto  # the fastest, but over the memory limit
    assert by_number[1].speedup == pytest.approx(4.0)
    assert by_number[5].throughput_sps is None and by_number[5].speedup is None
    assert [r.number for r in data.pareto] == [1, 2, 0]  # fastest first
    assert data.pareto[0].speedup == pytest.approx(4.0)
    # Every feasible, measured trial is a row (3 is dominated); the Pareto front is part of it.
    assert [r.number for r in data.configurations] == [0, 1, 2, 3]
    assert data.configuration(3) is not None and data.configuration(4) is None
    # Single trials never make the claim: without a verification, the study says so.
    assert data.verification is None and data.recommended is None
    assert data.verdict_line().startswith("not verified: run `autotune verify study=s`")
    assert data.pareto[2].baseline and data.pareto[0].step_time_s == pytest.approx(64 / 4000)
    assert data.baseline is not None and data.baseline.throughput_sps == 1000.0
    assert data.simulated and data.generated_at == now
    assert data.knob_names[:3] == ("depth", "width", "batch_size")


def test_without_a_measured_baseline_there_are_no_speedups_and_a_note_says_why() -> None:
    trials = [make_trial(0, None, failure="oom", constraint=1.0, baseline=True)]
    trials.append(make_trial(1, (4000.0, 0.85, 4 * MIB)))
    data = gather_from_trials("s", trials, importances=False)
    assert data.pareto[0].speedup is None and data.recommended is None
    assert any("baseline (trial 0) has no measurement" in n for n in data.notes)
    data = gather_from_trials("s", trials[1:], importances=False)
    assert data.baseline is None and any("no finished baseline" in n for n in data.notes)


def _point(
    number: int, values: tuple[float, float, float] | None, status: str = FEASIBLE
) -> TrialPoint:
    return TrialPoint(
        number, status, values is not None, False, False,
        *(values or (None, None, None)), {}, "", None,
    )  # fmt: skip


def test_hypervolume_history_by_hand() -> None:
    # Normalized goodness: throughput / best (100); accuracy; 1 - memory / (1.1 * max memory).
    # Trial 0: (0.5, 0.8, 1 - 10/11) -> 0.5 * 0.8 * (1/11).
    # Trial 2: (1.0, 0.5, 1 - 5/11) = box (1, 0.5, 6/11); union with trial 0's box:
    #   0.5*0.8/11 + 1*0.5*6/11 - overlap 0.5*0.5*(1/11).
    points = [
        _point(0, (50.0, 0.8, 10.0)),
        _point(1, None, FAILED),
        _point(2, (100.0, 0.5, 5.0)),
    ]
    history = hypervolume_history(points)
    first = 0.5 * 0.8 / 11
    assert [h.number for h in history] == [0, 1, 2]
    assert history[0].hypervolume == pytest.approx(first)
    assert history[1].hypervolume == pytest.approx(first)  # a failed trial adds nothing
    assert history[2].hypervolume == pytest.approx(first + 3.0 / 11 - 0.25 / 11)
    assert hypervolume_history([_point(0, None, FAILED)]) == ()


def test_hypervolume_never_decreases_in_the_demo_study(demo_study: DemoStudy) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    volumes = [h.hypervolume for h in gather_report(study, importances=False).hypervolume]
    assert len(volumes) == demo_study.n_trials
    assert volumes == sorted(volumes) and 0 < volumes[-1] <= 1


def test_importances_find_the_knob_that_drives_an_objective() -> None:
    trials = []
    for i, batch in enumerate([16, 32, 64, 128, 256] * 4):
        precision = ["fp32", "bf16"][i % 2]
        depth = 1 + i % 3
        trials.append(
            make_trial(
                i,
                (100.0 * batch, 0.5 + 0.1 * depth, (5 + (i % 2)) * MIB),
                batch_size=batch,
                precision=precision,
                depth=depth,
            )
        )
    importances, notes = param_importances(trials)
    assert notes == []
    assert max(importances["throughput_sps"], key=importances["throughput_sps"].get) == "batch_size"
    assert max(importances["accuracy"], key=importances["accuracy"].get) == "depth"
    assert (
        max(importances["peak_memory_bytes"], key=importances["peak_memory_bytes"].get)
        == "precision"
    )
    assert sum(importances["throughput_sps"].values()) == pytest.approx(1.0)
    assert param_importances(trials) == (importances, notes)  # seeded: the same again


def test_importances_need_two_feasible_trials() -> None:
    importances, notes = param_importances([make_trial(0, (1.0, 0.5, 1.0))])
    assert importances == {} and "2 or more feasible trials" in notes[0]


def test_gathered_pareto_front_is_optunas(demo_study: DemoStudy) -> None:
    study = optuna.load_study(study_name=demo_study.name, storage=demo_study.url)
    with ResultsStore.open(demo_study.url, create=False) as store:
        data = gather_report(study, store, importances=False)
        verification = load_verification(study, store)
    assert {r.number for r in data.pareto} == {t.number for t in study.best_trials}
    assert data.finished == demo_study.n_trials
    assert data.baseline is not None and data.baseline.number == 0
    assert dict(data.hardware)["simulated"].startswith("yes: SIMULATED")
    assert data.simulated and data.space_name == "cnn_small"
    # The claim is the study's newest finished verification, as load_verification reads it.
    assert verification is not None and data.verification == verification
    assert data.verdict_line() == verification.headline()
    assert data.storage_url == demo_study.url


def test_the_verdict_line_names_a_storage_other_than_the_default() -> None:
    assert not_verified_line("s") == (
        "not verified: run `autotune verify study=s` to re-measure the finalists; single-trial "
        "figures are not a claim"
    )
    assert verify_command("my study", "sqlite:///x.db") == (
        "autotune verify study='my study' storage=sqlite:///x.db"
    )
    assert verify_command("s", DEFAULT_STORAGE_URL) == "autotune verify study=s"
    data = gather_from_trials("s", [], importances=False, storage_url="sqlite:///x.db")
    assert "`autotune verify study=s storage=sqlite:///x.db`" in data.verdict_line()
