"""The tolerance of the metric (autotune/study/verification/_metric.py)."""

from __future__ import annotations

from typing import Any

import pytest

from autotune.study.objectives import METRIC_INDEX, study_objectives
from autotune.study.verification._metric import (
    metric_allowance,
    within_tolerance,
)
from tests.study.verification.metrics import F1, VAL_LOSS


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
