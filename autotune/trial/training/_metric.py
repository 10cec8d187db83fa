"""The validation metric a trial hands to the study, checked once for every door
(:func:`checked_metric`): the workload door's evaluation and the loop, HF and Lightning
doors' reports."""

from __future__ import annotations

import math

from autotune.core.config import MetricSpec
from autotune.core.exceptions import DoorUsageError

__all__ = ["checked_metric"]


def checked_metric(value: float, metric: MetricSpec | None, source: str) -> float:
    """``value``, the validation metric read from the user's code (a door's report, or a
    workload's ``evaluate``), once it is a figure a
    study can rank: finite, and, for the default metric (top-1 ``accuracy``, maximized), in
    [0, 1].

    A NaN reached Optuna as the trial's value, which Optuna fails (``FAIL``, not counted
    towards ``--trials``): the study then ran trial after trial for ever. Raised here, it
    fails the trial as ``error`` with this one line, and the trial counts.

    Args:
        value: the metric as read (a float).
        metric: the space's ``metric:`` (the door's default when it has none); None: no rule
            beyond finiteness.
        source: where it was read, for the message (``trial.report(metric)``,
            ``trainer.evaluate()['eval_loss']``).

    Raises:
        DoorUsageError: a NaN or infinite metric, or an accuracy outside [0, 1].
    """
    name = metric.name if metric is not None else "metric"
    if not math.isfinite(value):
        raise DoorUsageError(
            f"{source}: the {name} is {value}, not a finite number (did the training diverge?)"
        )
    if (
        metric is not None
        and metric.name == "accuracy"
        and metric.direction == "maximize"
        and not 0.0 <= value <= 1.0
    ):
        raise DoorUsageError(
            f"{source}: the accuracy is {value:g}, outside [0, 1]: report a fraction (correct / "
            "total), or name another metric in the space's metric: block"
        )
    return value
