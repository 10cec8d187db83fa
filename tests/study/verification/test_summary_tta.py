"""The verdicts of a time-to-accuracy verification (autotune/study/verification/_to_target.py): the
time over rounds (geometric mean, MLPerf's aggregate beside it), the paired "times sooner", a
missed target counted at the seconds trained (censored), and the headline, on hand-built
rows."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from autotune.study.storage import VerificationPlan, VerificationRecord, VerificationRun
from autotune.study.verification import (
    VerificationSummary,
    speedup_ci95,
    summarize_verification,
)
from autotune.study.verification._to_target import _seconds_text
from tests.study.verification.metrics import VAL_LOSS

TARGET = 0.98
PARAMS: Mapping[int, Mapping[str, Any]] = {
    0: {"batch_size": 64, "precision": "fp32"},
    1: {"batch_size": 256, "precision": "fp32"},
    2: {"batch_size": 64, "precision": "bf16"},
    3: {"batch_size": 128, "precision": "bf16"},
}
#: The baseline's seconds to the target in rounds 1, 2 and 3.
BASE_S = (30.0, 32.0, 31.0)


def _row(
    round_index: int,
    trial_number: int,
    seconds: float | None,
    *,
    failure: str | None = None,
) -> VerificationRecord:
    """A run that reached the target in ``seconds``, or missed it (None), or failed."""
    measured = failure is None
    reached = measured and seconds is not None
    return VerificationRecord(
        round_index=round_index,
        seed=1000 + round_index,
        trial_number=trial_number,
        is_baseline=trial_number == 0,
        simulated=True,
        failure=failure,
        failure_detail="MemoryError" if failure else None,
        throughput_sps=1000.0 if measured else None,
        throughput_iqr_sps=1.0 if measured else None,
        step_time_s=0.01 if measured else None,
        val_metric=(0.981 if reached else 0.95) if measured else None,
        peak_memory_bytes=(1 << 20) * (1 + trial_number) if measured else None,
        train_s=seconds if reached else (100.0 if measured else None),
        config_json="{}",
        time_to_accuracy_s=seconds if reached else None,
        target_reached=reached if measured else None,
        metric_curve_json="[]" if measured else None,
    )


def _summary(
    candidates: dict[int, Sequence[float | None]],
    *,
    base: Sequence[float | None] = BASE_S,
    failures: Mapping[tuple[int, int], str] | None = None,
    **kwargs: Any,
) -> VerificationSummary:
    """Summarize a verification whose configuration ``n`` took ``candidates[n][r]`` seconds to
    the target in round ``r`` (None: missed it); ``failures[(r, n)]`` fails that run."""
    failures = failures or {}
    times = {0: base, **candidates}
    rows = [
        _row(r, n, times[n][r], failure=failures.get((r, n)))
        for r in range(len(base))
        for n in times
    ]
    run = VerificationRun(
        study_name="s",
        number=1,
        plan=VerificationPlan(0, tuple(candidates), tuple(1000 + r for r in range(len(base))), 0.5),
        rows=tuple(rows),
        started_at=dt.datetime(2026, 11, 30),
        completed_at=dt.datetime(2026, 11, 30),
    )
    kwargs.setdefault("target", TARGET)
    return summarize_verification(
        run, PARAMS, simulated=True, objective="time_to_accuracy", **kwargs
    )


def test_a_candidate_that_reaches_the_target_sooner_in_every_round_qualifies() -> None:
    summary = _summary({1: (12.0, 12.5, 11.8)})

    (verdict,) = summary.candidates
    ratios = [30.0 / 12.0, 32.0 / 12.5, 31.0 / 11.8]
    speedup, ci = speedup_ci95(ratios)
    assert verdict.qualifies and summary.recommended == verdict
    assert verdict.verdict == "verified to reach the target sooner in all 3 rounds"
    assert verdict.time_to_accuracy_s == pytest.approx(
        statistics.geometric_mean((12.0, 12.5, 11.8))
    )
    assert verdict.time_to_accuracy_mlperf_s == 12.0  # MLPerf: the median of 3 rounds
    assert verdict.time_to_accuracy_spread_s == (11.8, 12.5)
    assert verdict.targets_missed == 0
    assert verdict.speedup == pytest.approx(speedup)
    assert verdict.speedup == pytest.approx((ratios[0] * ratios[1] * ratios[2]) ** (1 / 3))
    assert ci is not None and verdict.speedup_ci95 == pytest.approx(ci) and ci[0] > 1.0
    base_s = summary.baseline.time_to_accuracy_s
    assert base_s == pytest.approx(statistics.geometric_mean(BASE_S))
    assert summary.baseline.speedup is None
    # The same mean on both sides: the printed times' ratio is the "x sooner".
    assert base_s / verdict.time_to_accuracy_s == pytest.approx(verdict.speedup)
    assert summary.is_time_to_accuracy and summary.target == TARGET


def test_the_headline_says_how_soon_and_how_many_times_sooner() -> None:
    summary = _summary({1: (12.0, 12.5, 11.8)})

    rec = summary.recommended
    assert rec is not None and rec.speedup is not None and rec.speedup_ci95 is not None
    low, high = rec.speedup_ci95
    assert summary.headline() == (
        f"SIMULATED (mock device): reaches 98.0 % in 12.1 s, {rec.speedup:.2f}x sooner than "
        f"PyTorch's defaults (31.0 s) (95 % CI {low:.2f}-{high:.2f}x, verified over 3 rounds; "
        "times are geometric means over the rounds), peak memory 2 MiB: trial 1, "
        "batch_size 64->256"
    )
    assert f"{rec.speedup:.2f}" == "2.56"


def test_a_candidate_that_missed_the_target_in_one_round_does_not_qualify() -> None:
    summary = _summary({2: (10.0, None, 11.0)})

    (verdict,) = summary.candidates
    assert not verdict.qualifies and summary.recommended is None
    assert verdict.verdict == (
        "missed the target in 1 of 3 rounds (round 2; counted at the seconds it trained)"
    )
    assert verdict.targets_missed == 1 and verdict.rounds_measured == 3
    # Censored, not dropped: the missed round counts at its 100 s of training.
    assert verdict.time_to_accuracy_s == pytest.approx(statistics.geometric_mean((10, 100, 11)))
    assert verdict.time_to_accuracy_mlperf_s == pytest.approx(11.0)  # the median
    assert verdict.time_to_accuracy_spread_s == (10.0, 100.0)


def test_a_candidate_no_sooner_than_the_defaults_does_not_qualify() -> None:
    summary = _summary({3: (29.0, 33.0, 31.5)})

    (verdict,) = summary.candidates
    assert not verdict.qualifies
    assert verdict.verdict == "not verifiably sooner (95 % CI reaches 1.0x)"
    assert verdict.speedup_ci95 is not None and verdict.speedup_ci95[0] <= 1.0
    assert summary.ending == "not_faster"
    assert summary.headline() == (
        "SIMULATED (mock device): verified: not sooner than PyTorch's defaults to 98.0 % (the "
        "baseline: 31.0 s; verified over 3 rounds: trial 3 not verifiably sooner (95 % CI "
        "reaches 1.0x))"
    )


def test_a_failed_round_disqualifies_and_says_which() -> None:
    summary = _summary({1: (12.0, 12.5, 11.8)}, failures={(1, 1): "oom"})

    (verdict,) = summary.candidates
    assert not verdict.qualifies and verdict.verdict == "failed (round 2: oom)"
    assert verdict.rounds_measured == 2 and verdict.targets_missed == 0


def test_a_baseline_miss_counts_at_its_trained_seconds_as_a_bound() -> None:
    summary = _summary({1: (12.0, 12.5, 11.8)}, base=(None, 32.0, 31.0))

    (verdict,) = summary.candidates
    # Paired in every round: round 1 against the baseline's 100 s of training (a lower bound
    # of its time), not dropped and not a disqualification of every candidate.
    assert verdict.speedup == pytest.approx(
        statistics.geometric_mean((100 / 12.0, 32 / 12.5, 31 / 11.8))
    )
    assert summary.baseline.targets_missed == 1
    assert summary.baseline.time_to_accuracy_s == pytest.approx(
        statistics.geometric_mean((100.0, 32.0, 31.0))
    )
    assert "missed the target in 1 of 3 rounds (counted at the seconds trained)" in (
        summary.headline()
    )


def test_without_the_baselines_run_in_a_round_nothing_is_claimed() -> None:
    summary = _summary({1: (12.0, 12.5, 11.8)}, failures={(0, 0): "crash"})

    (verdict,) = summary.candidates
    assert not verdict.qualifies
    assert verdict.verdict == "no paired time: the baseline failed in round 1"


def test_the_recommendation_is_the_verifiably_soonest_of_those_that_qualify() -> None:
    summary = _summary({1: (12.0, 12.5, 11.8), 2: (6.0, 6.4, 6.1), 3: (20.0, 21.0, 20.5)})

    assert [c.qualifies for c in summary.candidates] == [True, True, True]
    assert summary.recommended is not None and summary.recommended.trial_number == 2


def test_five_rounds_aggregate_without_the_fastest_and_slowest() -> None:
    summary = _summary({1: (8.0, 50.0, 10.0, 11.0, 15.0)}, base=(30.0, 31.0, 32.0, 33.0, 60.0))

    (verdict,) = summary.candidates
    assert verdict.time_to_accuracy_mlperf_s == pytest.approx(12.0)  # mean of 10, 11, 15
    assert verdict.time_to_accuracy_spread_s == (8.0, 50.0)
    assert summary.baseline.time_to_accuracy_mlperf_s == pytest.approx(32.0)  # of 31, 32, 33


def test_without_finalists_the_headline_states_the_defaults_time_in_the_search() -> None:
    summary = _summary({}, search_baseline_time_to_accuracy_s=41.25)

    assert summary.ending == "nothing_to_verify"
    assert summary.headline() == (
        "SIMULATED (mock device): nothing to verify: no trial of the search reached 98.0 % "
        "sooner than PyTorch's defaults (the baseline reached it in 41.2 s in the search)"
    )


def test_a_target_in_another_metric_is_named_with_it() -> None:
    summary = _summary({3: (29.0, 33.0, 31.5)}, metric=VAL_LOSS, target=1.2)

    assert summary.target_text() == "val_loss 1.200"
    assert "not sooner than PyTorch's defaults to val_loss 1.200" in summary.headline()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0278, "0.0278 s"),
        (2.456, "2.46 s"),
        (12.44, "12.4 s"),
        (1234.0, "1,234 s"),
        (None, "n/a"),
    ],
)
def test_seconds_are_written_with_three_figures(seconds: float | None, text: str) -> None:
    assert _seconds_text(seconds) == text
