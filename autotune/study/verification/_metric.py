"""The study's validation metric, how far below the baseline's a candidate's may be (the
tolerance, in the metric's worse direction), and the screen that widens the tolerance by the
noise of the measured difference."""

from __future__ import annotations

import math

import optuna

from autotune.core.config import VerifySettings
from autotune.study.objectives import METRIC_INDEX, OBJECTIVES, Objective
from autotune.study.objectives import study_metric as objectives_study_metric

__all__ = [
    "ACCURACY",
    "DEFAULT_SCREEN_Z",
    "NON_PROPORTION_SCREEN_FACTOR",
    "agresti_caffo_se",
    "difference_number",
    "difference_unit",
    "is_non_inferior",
    "metric_allowance",
    "passes_screen",
    "screen_allowance",
    "study_metric",
    "tolerance_text",
    "within_tolerance",
]

#: The validation metric of studies on the built-in workloads: top-1 accuracy, maximized.
ACCURACY: Objective = OBJECTIVES[METRIC_INDEX]


def metric_allowance(metric: Objective, baseline_value: float, tolerance_pt: float) -> float:
    """How much worse than the baseline's a candidate's metric may be, in the metric's units.

    Args:
        metric: the study's validation metric.
        baseline_value: the baseline's value of it.
        tolerance_pt: ``verify.accuracy_tolerance_pt``. For accuracy (in [0, 1]) it is in
            points: 0.5 allows 0.005. For any other metric, whose scale autotune cannot know,
            it is relative to the baseline: 0.5 allows 0.5 % of ``|baseline_value|``.
    """
    if metric.is_accuracy:
        return tolerance_pt / 100.0
    return abs(baseline_value) * tolerance_pt / 100.0


def within_tolerance(
    metric: Objective, value: float, baseline_value: float, tolerance_pt: float
) -> bool:
    """Whether ``value`` is at most :func:`metric_allowance` worse than ``baseline_value``:
    for a maximized metric ``value >= baseline - allowance``, for a minimized one
    ``value <= baseline + allowance``."""
    allowance = metric_allowance(metric, baseline_value, tolerance_pt)
    return metric.gain(value) >= metric.gain(baseline_value) - allowance


def is_non_inferior(
    metric: Objective,
    difference_ci95: tuple[float, float] | None,
    baseline_value: float,
    tolerance_pt: float,
) -> bool:
    """Whether a paired metric difference (candidate minus baseline) is shown non-inferior:
    its whole 95 % confidence interval lies on the better side of ``-allowance`` (a maximized
    metric: the lower end ``>= -allowance``; a minimized one, a loss: the upper end
    ``<= +allowance``), with :func:`metric_allowance` as the margin.

    This is the non-inferiority test of clinical trials: the two-sided 95 % interval's bound
    against the margin, a one-sided test at 2.5 % (ICH E9, "Statistical Principles for
    Clinical Trials", 1998, section 3.3.2; S. Wellek, *Testing Statistical Hypotheses of
    Equivalence and Noninferiority*, 2nd ed., CRC Press, 2010). A mean within the margin is
    not enough: half of the configurations that are truly at the margin would pass.

    Args:
        metric: the study's validation metric (its direction).
        difference_ci95: the interval of the paired difference, in the metric's units; None
            (fewer than two paired rounds) is never non-inferior.
        baseline_value: the baseline's mean value (the margin of a metric other than
            accuracy is relative to it).
        tolerance_pt: ``verify.accuracy_tolerance_pt``.

    Returns:
        True when the interval ends at the margin or on its better side; an interval that
        ends exactly at ``-allowance`` is non-inferior.
    """
    if difference_ci95 is None or not all(math.isfinite(x) for x in difference_ci95):
        return False
    allowance = metric_allowance(metric, baseline_value, tolerance_pt)
    # The interval's worse end: the lower for a maximized metric, the upper for a loss.
    return min(metric.gain(end) for end in difference_ci95) >= -allowance


#: The screen's default z: a one-sided 95 % bound (``advanced.verify.screen_z``'s default,
#: read from its declaration).
DEFAULT_SCREEN_Z: float = VerifySettings().screen_z
#: For a metric that is not a proportion (a loss, a perplexity), whose standard error autotune
#: cannot compute from one value, the screen allows this many times the tolerance.
NON_PROPORTION_SCREEN_FACTOR = 3.0


def agresti_caffo_se(p1: float, n1: int, p2: float, n2: int) -> float:
    """Standard error of the difference of two proportions, Agresti-Caffo adjusted.

    Each proportion gets one success and one failure added, ``p~ = (x + 1) / (n + 2)``, and
    ``SE = sqrt(p~1 (1 - p~1) / (n1 + 2) + p~2 (1 - p~2) / (n2 + 2))``: the interval it gives
    keeps its coverage near 95 % even at accuracies near 100 %, where the plain Wald interval
    collapses (A. Agresti and B. Caffo, "Simple and Effective Confidence Intervals for
    Proportions and Differences of Proportions Result from Adding Two Successes and Two
    Failures", The American Statistician 54(4), 2000).

    Args:
        p1: the first proportion (e.g. an accuracy in [0, 1]).
        n1: the samples it was measured on (> 0).
        p2: the second proportion.
        n2: its samples (> 0).

    Returns:
        The standard error, in the proportions' units (0.007 = 0.7 points).

    Raises:
        ValueError: a sample count below 1.
    """
    if n1 < 1 or n2 < 1:
        raise ValueError(f"sample counts must be >= 1, but got n1={n1}, n2={n2}")
    x1, x2 = round(p1 * n1), round(p2 * n2)
    q1, q2 = (x1 + 1) / (n1 + 2), (x2 + 1) / (n2 + 2)
    return math.sqrt(q1 * (1 - q1) / (n1 + 2) + q2 * (1 - q2) / (n2 + 2))


def screen_allowance(
    metric: Objective,
    value: float,
    samples: int | None,
    baseline_value: float,
    baseline_samples: int | None,
    tolerance_pt: float,
    z: float,
) -> float:
    """How much worse than the baseline's a metric measured once (or pooled over a race) may
    be and still pass the screen, in the metric's units.

    For accuracy: the tolerance plus ``z`` standard errors of the difference of the two
    proportions (:func:`agresti_caffo_se`); where either sample count is unknown (trials
    stored before ``val_samples`` was), the tolerance alone. For any other metric: the
    tolerance times :data:`NON_PROPORTION_SCREEN_FACTOR` (3), since one value carries no
    standard error.

    Args:
        metric: the study's validation metric.
        value: the candidate's value.
        samples: the validation samples behind ``value`` (None: unknown).
        baseline_value: the baseline's value.
        baseline_samples: the validation samples behind it (None: unknown).
        tolerance_pt: ``verify.accuracy_tolerance_pt`` (:func:`metric_allowance`).
        z: ``advanced.verify.screen_z``.
    """
    allowance = metric_allowance(metric, baseline_value, tolerance_pt)
    if not metric.is_accuracy:
        return NON_PROPORTION_SCREEN_FACTOR * allowance
    if not samples or not baseline_samples:
        return allowance
    return allowance + z * agresti_caffo_se(value, samples, baseline_value, baseline_samples)


def passes_screen(
    metric: Objective,
    value: float,
    samples: int | None,
    baseline_value: float,
    baseline_samples: int | None,
    tolerance_pt: float,
    z: float,
) -> bool:
    """Whether ``value`` is at most :func:`screen_allowance` worse than ``baseline_value``
    (non-finite values never pass)."""
    if not (math.isfinite(value) and math.isfinite(baseline_value)):
        return False
    allowance = screen_allowance(
        metric, value, samples, baseline_value, baseline_samples, tolerance_pt, z
    )
    return metric.gain(value) >= metric.gain(baseline_value) - allowance


def difference_number(metric: Objective, difference: float) -> str:
    """A difference of two values of ``metric``, signed, without its unit: accuracy in points
    with two decimals (-0.0008 is ``-0.08``), any other metric in its own units with three
    significant figures (``+0.005``); :func:`difference_unit` gives the unit."""
    if metric.is_accuracy:
        return f"{100 * difference:+.2f}"
    return f"{difference:+.3g}"


def difference_unit(metric: Objective) -> str:
    """The unit :func:`difference_number` writes in, with its leading space: `` pt`` for
    accuracy, nothing for another metric (its own units)."""
    return " pt" if metric.is_accuracy else ""


def tolerance_text(metric: Objective, tolerance_pt: float) -> str:
    """The tolerance in words: ``0.5 pt`` (accuracy), ``0.5 % of the baseline's val_loss``."""
    if metric.is_accuracy:
        return f"{tolerance_pt:g} pt"
    return f"{tolerance_pt:g} % of the baseline's {metric.name}"


def study_metric(study: optuna.Study) -> Objective:
    """The validation metric a study was created with (its name, direction and format): an
    objective in the throughput mode, the target's metric in a time-to-accuracy study
    (:func:`autotune.study.objectives.study_metric`)."""
    return objectives_study_metric(study)
