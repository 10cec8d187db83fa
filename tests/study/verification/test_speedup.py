"""The paired speedup's 95 % interval and the MLPerf-style aggregate of times to accuracy
(autotune/study/verification/_speedup.py)."""

from __future__ import annotations

import math

import pytest

from autotune.study.verification import (
    mlperf_time_to_accuracy_s,
    speedup_ci95,
)
from autotune.study.verification._speedup import (
    MLPERF_DROP_MIN_ROUNDS,
    projected_half_width,
    rounds_to_resolve,
)

#: Student's t quantile t(0.975, 2), from any table.
T_975_2 = 4.302652729911275


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


# --------------------------------------------------------------------------------------------
# mlperf_time_to_accuracy_s


def test_mlperf_aggregate_of_three_rounds_is_their_median() -> None:
    assert mlperf_time_to_accuracy_s([12.0, 30.0, 10.0]) == 12.0


def test_mlperf_aggregate_of_four_rounds_is_their_median() -> None:
    assert mlperf_time_to_accuracy_s([10.0, 40.0, 12.0, 14.0]) == 13.0


def test_mlperf_aggregate_of_five_rounds_drops_the_fastest_and_slowest_then_averages() -> None:
    # Dropped: 8.0 (fastest) and 50.0 (slowest); mean of 10, 11, 15 = 12.0.
    assert mlperf_time_to_accuracy_s([15.0, 8.0, 50.0, 10.0, 11.0]) == pytest.approx(12.0)


def test_mlperf_aggregate_of_six_rounds_drops_one_of_each_end_only() -> None:
    # Dropped: one 1.0 and the 100.0; mean of 1, 2, 3, 4 = 2.5.
    times = [1.0, 1.0, 2.0, 3.0, 4.0, 100.0]
    assert mlperf_time_to_accuracy_s(times) == pytest.approx(2.5)
    assert MLPERF_DROP_MIN_ROUNDS == 5


def test_mlperf_aggregate_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one time"):
        mlperf_time_to_accuracy_s([])


# --------------------------------------------------------------------------------------------
# the confirmation's projected interval (the race as its pilot)


def test_the_projected_half_width_is_students_t_at_the_low_end_of_the_pilots_spread() -> None:
    """t(0.975, n - 1) * s * sqrt((k - 1) / chi2(0.95, k - 1)) / sqrt(n): two pilot
    differences (k = 2, s = 0.02 * sqrt(2)) and 8 planned rounds, against the tables' values
    (t(0.975, 7) = 2.3646, chi2(0.95, 1) = 3.8415)."""
    s = math.sqrt(2) * 0.02
    expected = 2.3646 * s * math.sqrt(1 / 3.8415) / math.sqrt(8)

    assert projected_half_width([-0.01, 0.03], 8) == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize(("pilot", "rounds"), [([0.01], 8), ([0.01, 0.02], 1), ([], 3)])
def test_without_a_spread_or_an_interval_nothing_is_projected(
    pilot: list[float], rounds: int
) -> None:
    assert projected_half_width(pilot, rounds) is None


def test_the_rounds_to_resolve_are_the_fewest_whose_projection_reaches_the_margin() -> None:
    pilot = [-0.01, 0.03]

    needed = rounds_to_resolve(pilot, 0.005)

    assert needed is not None
    assert projected_half_width(pilot, needed) <= 0.005 < projected_half_width(pilot, needed - 1)  # type: ignore[operator]
    assert rounds_to_resolve(pilot, 1e-9, most=50) is None
    assert rounds_to_resolve([0.01], 0.005) is None
