"""The study's validation metric, and how far below the baseline's a candidate's may be
(the tolerance, in the metric's worse direction)."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial

from autotune.objectives import METRIC_INDEX, OBJECTIVES, Objective
from autotune.objectives import study_metric as objectives_study_metric

__all__ = [
    "ACCURACY",
    "NOTHING_QUALIFIES",
    "metric_allowance",
    "nothing_qualifies",
    "study_metric",
    "tolerance_text",
    "trial_metric",
    "within_tolerance",
]

#: The validation metric of studies on the built-in workloads: top-1 accuracy, maximized.
ACCURACY: Objective = OBJECTIVES[METRIC_INDEX]
#: What every output says when no candidate passes verification (an accuracy study; see
#: :func:`nothing_qualifies` for any metric).
NOTHING_QUALIFIES = "no configuration is verifiably faster than your defaults at the same accuracy"


def nothing_qualifies(metric: Objective = ACCURACY) -> str:
    """What every output says when no candidate passes verification, for the study's metric:
    :data:`NOTHING_QUALIFIES` for accuracy, ``... at the same val_loss`` otherwise."""
    if metric.is_accuracy:
        return NOTHING_QUALIFIES
    return NOTHING_QUALIFIES.removesuffix("accuracy") + metric.name


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
    if metric.direction == "maximize":
        return value >= baseline_value - allowance
    return value <= baseline_value + allowance


def tolerance_text(metric: Objective, tolerance_pt: float) -> str:
    """The tolerance in words: ``0.5 pt`` (accuracy), ``0.5 % of the baseline's val_loss``."""
    if metric.is_accuracy:
        return f"{tolerance_pt:g} pt"
    return f"{tolerance_pt:g} % of the baseline's {metric.name}"


def trial_metric(trial: FrozenTrial) -> float | None:
    """A search trial's validation metric (``val_accuracy`` in studies written before
    workloads), None when it has none."""
    attrs = trial.user_attrs
    value = attrs.get("val_metric")
    if value is None:
        value = attrs.get("val_accuracy")
    return None if value is None else float(value)


def study_metric(study: optuna.Study) -> Objective:
    """The validation metric a study was created with (its name, direction and format): an
    objective in the throughput mode, the target's metric in a time-to-accuracy study
    (:func:`autotune.objectives.study_metric`)."""
    return objectives_study_metric(study)
