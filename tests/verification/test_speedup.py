"""The paired speedup's 95 % interval (autotune/verification/_speedup.py)."""

from __future__ import annotations

import math

import pytest

from autotune.verification import speedup_ci95

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
