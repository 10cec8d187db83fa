"""The pure side of verification (autotune/verification.py): finalists, speedup intervals,
verdicts and the recommendation, on hand-built trials and rows."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from autotune.exceptions import VerificationError
from autotune.objectives import METRIC_INDEX, study_objectives
from autotune.storage import VerificationPlan, VerificationRecord, VerificationRun
from autotune.verification import (
    NOTHING_QUALIFIES,
    changed_knobs,
    metric_allowance,
    nothing_qualifies,
    round_seeds,
    select_finalists,
    speedup_ci95,
    summarize_verification,
    within_tolerance,
)

#: A user workload's metric: a validation loss, lower is better.
VAL_LOSS = study_objectives("val_loss", "minimize")[METRIC_INDEX]
#: A user workload's metric that is maximized but is not a top-1 accuracy.
F1 = study_objectives("f1", "maximize")[METRIC_INDEX]

#: Student's t quantile t(0.975, 2), from any table.
T_975_2 = 4.302652729911275


def _trial(
    number: int,
    batch_size: int,
    throughput_sps: float | None,
    val_metric: float | None,
    *,
    baseline: bool = False,
    failure: str | None = None,
    constraint: float = 0.0,
) -> FrozenTrial:
    attrs: dict[str, Any] = {"baseline": True} if baseline else {}
    if throughput_sps is not None:
        attrs.update(throughput_sps=throughput_sps, val_metric=val_metric)
    if failure is not None:
        attrs["failure"] = failure
    trial = optuna.trial.create_trial(
        state=TrialState.COMPLETE,
        values=[throughput_sps or 0.0, val_metric or 0.0, 1.0],
        params={"batch_size": batch_size},
        distributions={"batch_size": CategoricalDistribution([16, 32, 64, 128, 256, 512])},
        user_attrs=attrs,
        system_attrs={"constraints": [constraint]},
    )
    trial.number = number
    return trial


# --------------------------------------------------------------------------------------------
# speedup_ci95


def test_equal_ratios_give_a_point_interval() -> None:
    speedup, ci = speedup_ci95([2.0, 2.0, 2.0])

    assert speedup == pytest.approx(2.0)
    assert ci == pytest.approx((2.0, 2.0))


def test_interval_is_students_t_on_log_ratios() -> None:
    ratios = [1.9, 2.0, 2.1]
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    half = T_975_2 * sd / math.sqrt(3)

    speedup, ci = speedup_ci95(ratios)

    assert speedup == pytest.approx(math.exp(mean))  # the geometric mean
    assert ci == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert ci is not None and ci[0] < 1.9 and ci[1] > 2.1  # three rounds: a wide t interval


def test_one_ratio_has_no_interval() -> None:
    assert speedup_ci95([1.5]) == (pytest.approx(1.5), None)


@pytest.mark.parametrize("ratios", [[], [1.0, 0.0], [-1.0, 2.0]])
def test_bad_ratios_are_refused(ratios: list[float]) -> None:
    with pytest.raises(ValueError):
        speedup_ci95(ratios)


# --------------------------------------------------------------------------------------------
# Seeds and knobs


def test_round_seeds_never_repeat_the_search_seed_nor_another_verification() -> None:
    first, second = round_seeds(7, 1, 3), round_seeds(7, 2, 3)

    assert len(first) == len(set(first)) == 3
    assert 7 not in first + second
    assert not set(first) & set(second)


def test_changed_knobs_lists_only_differences_in_order() -> None:
    changed = changed_knobs(
        {"batch_size": 256, "precision": "bf16", "num_workers": 0},
        {"batch_size": 64, "precision": "fp32", "num_workers": 0},
    )

    assert changed == (("batch_size", 64, 256), ("precision", "fp32", "bf16"))


# --------------------------------------------------------------------------------------------
# select_finalists


def test_finalists_are_pareto_first_then_fastest_within_the_tolerance() -> None:
    trials = [
        _trial(0, 64, 1000.0, 0.950, baseline=True),
        _trial(1, 128, 1800.0, 0.948),  # faster, 0.2 pt lower: eligible (not Pareto)
        _trial(2, 256, 2500.0, 0.930),  # 2 pt lower: too inaccurate
        _trial(3, 32, 1500.0, 0.952),  # Pareto
        _trial(4, 16, 900.0, 0.960),  # slower than the baseline
        _trial(5, 512, 3000.0, 0.949, constraint=1.0),  # infeasible
        _trial(6, 128, 1700.0, 0.951),  # same knobs as trial 1
        _trial(7, 512, 2000.0, 0.947, failure="oom"),  # failed
    ]

    baseline, finalists = select_finalists(trials, {3}, candidates=4, accuracy_tolerance_pt=0.5)

    assert baseline == 0
    assert finalists == (3, 1)


def test_finalists_stop_at_k() -> None:
    trials = [_trial(0, 64, 1000.0, 0.9, baseline=True)] + [
        _trial(n, 16 * 2 ** (n % 6), 1000.0 + 100 * n, 0.9) for n in range(1, 6)
    ]

    _, finalists = select_finalists(trials, set(), candidates=2, accuracy_tolerance_pt=0.5)

    assert finalists == (5, 4)


def test_no_eligible_trial_gives_no_finalist() -> None:
    trials = [_trial(0, 64, 1000.0, 0.9, baseline=True), _trial(1, 128, 800.0, 0.9)]

    assert select_finalists(trials, {1}, 4, 0.5) == (0, ())


def test_finalists_of_a_minimized_metric_are_within_the_tolerance_above_it() -> None:
    trials = [
        _trial(0, 64, 1000.0, 2.000, baseline=True),
        _trial(1, 128, 1800.0, 2.008),  # faster, 0.4 % higher loss: eligible
        _trial(2, 256, 2500.0, 2.012),  # 0.6 % higher loss: too lossy
        _trial(3, 32, 1500.0, 1.500),  # faster and a lower loss
        _trial(4, 16, 900.0, 1.000),  # slower than the baseline
    ]

    assert select_finalists(trials, {3}, 4, 0.5, VAL_LOSS) == (0, (3, 1))
    # Read as accuracy (maximized), the same figures would pick the higher losses.
    assert select_finalists(trials, set(), 4, 0.5) == (0, (2, 1))


def test_finalists_of_studies_written_before_workloads_read_val_accuracy() -> None:
    old = [_trial(0, 64, 1000.0, None, baseline=True), _trial(1, 128, 1500.0, None)]
    for trial, value in zip(old, (0.950, 0.948), strict=True):
        del trial.user_attrs["val_metric"]
        trial.user_attrs["val_accuracy"] = value

    assert select_finalists(old, set(), 4, 0.5) == (0, (1,))


@pytest.mark.parametrize(
    ("metric", "value", "baseline", "within"),
    [
        (VAL_LOSS, 2.01, 2.0, True),  # 0.5 % of 2.0 = 0.01 above: just within
        (VAL_LOSS, 2.011, 2.0, False),
        (VAL_LOSS, 0.5, 2.0, True),  # lower is better
        (F1, 0.796, 0.8, True),  # 0.5 % of 0.8 = 0.004 below
        (F1, 0.795, 0.8, False),
        (F1, 0.9, 0.8, True),
    ],
)
def test_tolerance_of_other_metrics_is_relative_to_the_baseline_in_their_direction(
    metric: Any, value: float, baseline: float, within: bool
) -> None:
    assert within_tolerance(metric, value, baseline, 0.5) is within


def test_tolerance_of_accuracy_is_in_points() -> None:
    accuracy = study_objectives()[METRIC_INDEX]
    assert metric_allowance(accuracy, 0.95, 0.5) == pytest.approx(0.005)
    assert metric_allowance(VAL_LOSS, 3.0, 0.5) == pytest.approx(0.015)
    assert within_tolerance(accuracy, 0.945, 0.95, 0.5)
    assert not within_tolerance(accuracy, 0.944, 0.95, 0.5)


@pytest.mark.parametrize(
    ("trials", "why"),
    [
        ([_trial(1, 128, 800.0, 0.9)], "no baseline trial"),
        ([_trial(0, 64, None, None, baseline=True, failure="oom")], "produced no measurement"),
    ],
)
def test_a_study_without_a_measured_baseline_cannot_be_verified(
    trials: list[FrozenTrial], why: str
) -> None:
    with pytest.raises(VerificationError, match=why):
        select_finalists(trials, set(), 4, 0.5)


# --------------------------------------------------------------------------------------------
# summarize_verification


def _row(
    round_index: int,
    trial_number: int,
    throughput_sps: float | None,
    val_metric: float | None = 0.95,
    *,
    baseline: bool = False,
    failure: str | None = None,
) -> VerificationRecord:
    return VerificationRecord(
        round_index=round_index,
        seed=1000 + round_index,
        trial_number=trial_number,
        is_baseline=baseline,
        simulated=False,
        failure=failure,
        failure_detail="MemoryError" if failure else None,
        throughput_sps=throughput_sps,
        throughput_iqr_sps=1.0 if throughput_sps else None,
        step_time_s=0.01 if throughput_sps else None,
        val_metric=val_metric if failure is None else None,
        peak_memory_bytes=(1 << 20) * (1 + trial_number) if failure is None else None,
        train_s=1.0,
        config_json="{}",
    )


def _run(
    candidates: Sequence[int],
    rows: Sequence[VerificationRecord],
    *,
    complete: bool = True,
    rounds: int = 3,
) -> VerificationRun:
    return VerificationRun(
        study_name="s",
        number=1,
        plan=VerificationPlan(0, tuple(candidates), tuple(1000 + r for r in range(rounds)), 0.5),
        rows=tuple(rows),
        started_at=dt.datetime(2026, 11, 22),
        completed_at=dt.datetime(2026, 11, 22) if complete else None,
    )


PARAMS: Mapping[int, Mapping[str, Any]] = {
    0: {"batch_size": 64, "precision": "fp32"},
    1: {"batch_size": 256, "precision": "fp32"},
    2: {"batch_size": 64, "precision": "bf16"},
    3: {"batch_size": 128, "precision": "bf16"},
}


def _baseline_rows(
    throughputs: Sequence[float] = (1000.0, 1100.0, 900.0),
) -> list[VerificationRecord]:
    return [_row(r, 0, tp, 0.950, baseline=True) for r, tp in enumerate(throughputs)]


def test_recommendation_is_the_fastest_qualifying_candidate() -> None:
    rows = _baseline_rows()
    for r, base in enumerate((1000.0, 1100.0, 900.0)):
        rows += [
            _row(r, 1, base * 3.0, 0.940),  # fastest, but 1 pt less accurate
            _row(r, 2, base * (2.0 + 0.01 * r), 0.949),  # qualifies
            _row(r, 3, base * 1.5, 0.951),  # qualifies, slower
        ]

    summary = summarize_verification(_run([1, 2, 3], rows), PARAMS, simulated=False)

    assert summary.complete and summary.runs_done == summary.runs_planned == 12
    assert summary.recommended is not None and summary.recommended.trial_number == 2
    by_trial = {c.trial_number: c for c in summary.candidates}
    assert by_trial[1].verdict.startswith("accuracy more than 0.5 pt lower")
    assert by_trial[3].qualifies and by_trial[3].speedup == pytest.approx(1.5)
    rec = summary.recommended
    assert rec.speedup == pytest.approx((2.0 * 2.01 * 2.02) ** (1 / 3))
    assert rec.speedup_ci95 is not None and 1.0 < rec.speedup_ci95[0] < 2.0 < rec.speedup_ci95[1]
    assert rec.val_metric_mean == pytest.approx(0.949)
    assert rec.changed == (("precision", "fp32", "bf16"),)
    assert summary.baseline.val_metric_mean == pytest.approx(0.950)
    line = summary.headline()
    assert line.startswith("2.01x faster than your defaults (verified over 3 rounds, 95 % CI ")
    assert "trial 2, precision fp32->bf16" in line
    assert "SIMULATED" not in line


def test_a_candidate_failing_in_one_round_is_not_recommended() -> None:
    rows = _baseline_rows()
    rows += [_row(r, 2, 3000.0) for r in (0, 1)] + [_row(2, 2, None, failure="oom")]

    summary = summarize_verification(_run([2], rows), PARAMS, simulated=False)

    assert summary.recommended is None
    assert summary.candidates[0].verdict == "failed (round 3: oom)"
    assert NOTHING_QUALIFIES in summary.headline()


def test_an_interval_reaching_one_is_not_verified() -> None:
    rows = _baseline_rows((1000.0, 1000.0, 1000.0))
    rows += [_row(0, 2, 1300.0), _row(1, 2, 900.0), _row(2, 2, 1100.0)]

    summary = summarize_verification(_run([2], rows), PARAMS, simulated=True)

    candidate = summary.candidates[0]
    assert candidate.speedup is not None and candidate.speedup > 1.0
    assert candidate.speedup_ci95 is not None and candidate.speedup_ci95[0] < 1.0
    assert candidate.verdict.startswith("not verifiably faster")
    assert (
        summary.headline()
        == f"SIMULATED (mock device): {NOTHING_QUALIFIES} (verified over 3 rounds)"
    )


def test_an_incomplete_verification_recommends_nothing_and_says_how_to_finish() -> None:
    rows = [*_baseline_rows()[:2], _row(0, 2, 3000.0)]

    summary = summarize_verification(_run([2], rows, complete=False), PARAMS, simulated=False)

    assert not summary.complete and (summary.runs_done, summary.runs_planned) == (3, 6)
    assert summary.recommended is None
    assert "incomplete (3 of 6 runs)" in summary.headline()
    assert "autotune verify s" in summary.headline()


def test_without_finalists_the_headline_says_nothing_was_faster() -> None:
    summary = summarize_verification(_run([], []), PARAMS, simulated=False)

    assert summary.complete and summary.recommended is None and summary.runs_planned == 0
    assert NOTHING_QUALIFIES in summary.headline()
    assert "no trial of the search was faster" in summary.headline()


def test_a_minimized_metric_recommends_the_fastest_within_the_tolerance_above() -> None:
    rows = [_row(r, 0, tp, 2.0, baseline=True) for r, tp in enumerate((1000.0, 1100.0, 900.0))]
    for r, base in enumerate((1000.0, 1100.0, 900.0)):
        rows += [
            _row(r, 1, base * 3.0, 2.02),  # fastest, but a 1 % higher loss
            _row(r, 2, base * (2.0 + 0.01 * r), 2.005),  # qualifies
            _row(r, 3, base * 1.5, 1.9),  # qualifies, slower
        ]

    summary = summarize_verification(
        _run([1, 2, 3], rows), PARAMS, simulated=False, metric=VAL_LOSS
    )

    assert summary.metric == VAL_LOSS
    assert summary.recommended is not None and summary.recommended.trial_number == 2
    by_trial = {c.trial_number: c for c in summary.candidates}
    assert by_trial[1].verdict == "val_loss more than 0.5 % higher than the baseline's"
    assert by_trial[3].verdict == "verified faster at the same val_loss"
    line = summary.headline()
    assert " at val_loss 2.005 (defaults 2.000), peak memory " in line
    assert "accuracy" not in line
    assert summary.tolerance_text() == "0.5 % of the baseline's val_loss"


def test_a_maximized_metric_other_than_accuracy_is_not_shown_as_a_percentage() -> None:
    rows = [_row(r, 0, 1000.0, 0.80, baseline=True) for r in range(3)]
    rows += [_row(r, 2, 2000.0 + r, 0.799) for r in range(3)]

    summary = summarize_verification(_run([2], rows), PARAMS, simulated=False, metric=F1)

    assert summary.recommended is not None
    assert " at f1 0.799 (defaults 0.800)" in summary.headline()


def test_nothing_qualifies_names_the_metric() -> None:
    assert nothing_qualifies() == NOTHING_QUALIFIES
    assert nothing_qualifies(VAL_LOSS).endswith("at the same val_loss")
    summary = summarize_verification(_run([], []), PARAMS, simulated=False, metric=VAL_LOSS)
    assert summary.headline() == (
        f"{nothing_qualifies(VAL_LOSS)} (no trial of the search was faster than the defaults "
        "within 0.5 % of their val_loss)"
    )
