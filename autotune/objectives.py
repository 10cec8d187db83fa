"""From a :class:`~autotune.measure.Measurement` to objective and constraint values.

A study has three objectives, in this order: throughput (samples/s, maximize), the
workload's validation metric (``accuracy``, maximize, for the built-in workloads; a user's
workload names its own, e.g. ``val_loss``, minimize), and peak memory (bytes, minimize).
Optuna stores their names (``study.metric_names``) and directions with the study, so every
reader takes them from there (:func:`objectives_of_study`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from autotune.measure import Measurement

__all__ = [
    "METRIC_INDEX",
    "OBJECTIVES",
    "Objective",
    "failed_values",
    "objective_values",
    "objectives_of_study",
    "study_objectives",
]

Direction = Literal["maximize", "minimize"]
#: The position of the validation metric among the objectives.
METRIC_INDEX = 1
#: The name studies written before workloads gave the metric objective.
_OLD_METRIC_NAME = "val_accuracy"


@dataclass(frozen=True)
class Objective:
    """One objective: its name (Optuna's metric name), direction, and a display label."""

    name: str
    direction: Direction
    label: str

    @property
    def is_accuracy(self) -> bool:
        """True for a top-1 accuracy in [0, 1], shown as a percentage."""
        return self.name == "accuracy"

    def format(self, value: float | None, digits: int = 2) -> str:
        """The value for display: ``98.42%`` for accuracy, ``1.234`` otherwise; ``n/a`` for
        None."""
        if value is None:
            return "n/a"
        if self.is_accuracy:
            return f"{100 * value:.{digits}f}%"
        return f"{value:.{digits + 2}g}" if abs(value) >= 1e4 else f"{value:.{digits + 2}f}"


def study_objectives(
    metric_name: str = "accuracy", metric_direction: str = "maximize"
) -> tuple[Objective, Objective, Objective]:
    """The three objectives of a study whose workload's metric is ``metric_name``.

    Raises:
        ValueError: a direction other than ``maximize`` or ``minimize``.
    """
    if metric_direction not in ("maximize", "minimize"):
        raise ValueError(f"metric_direction must be maximize or minimize, got {metric_direction!r}")
    label = "validation accuracy" if metric_name == "accuracy" else f"validation {metric_name}"
    direction: Direction = "maximize" if metric_direction == "maximize" else "minimize"
    return (
        Objective("throughput_sps", "maximize", "throughput (samples/s)"),
        Objective(metric_name, direction, label),
        Objective("peak_memory_bytes", "minimize", "peak memory (bytes)"),
    )


#: The objectives of a study on a built-in workload (metric: top-1 accuracy).
OBJECTIVES: tuple[Objective, ...] = study_objectives()


def objectives_of_study(study: Any) -> tuple[Objective, ...]:
    """The objectives an Optuna study was created with: names from ``study.metric_names``
    (``val_accuracy`` in studies written before workloads reads as ``accuracy``), directions
    from ``study.directions``."""
    names: Sequence[str | None] = study.metric_names or [None, None, None]
    directions = [d.name.lower() for d in study.directions]
    if len(directions) != len(OBJECTIVES):
        return OBJECTIVES
    name = names[METRIC_INDEX] or "accuracy"
    return study_objectives(
        "accuracy" if name == _OLD_METRIC_NAME else name, directions[METRIC_INDEX]
    )


def objective_values(measurement: Measurement) -> tuple[float, float, float]:
    """``(throughput_sps, val_metric, peak_memory_bytes)`` in the objectives' order."""
    return (
        measurement.throughput_sps,
        measurement.val_metric,
        float(measurement.peak_memory_bytes),
    )


def failed_values(
    memory_limit_bytes: int | None,
    metric_direction: str = "maximize",
    worst_metric: float | None = None,
) -> tuple[float, float, float]:
    """Values for a trial that produced no measurement (out of memory, error, crash, timeout).

    The trial is also marked infeasible, so it never reaches the Pareto front; these values
    only need to be the worst of their kind: zero throughput, the worst metric, and the
    device's memory (or 0 when unknown) as the memory it would have needed at least. A
    maximized metric's worst is 0 (no accuracy); a minimized one (a loss) has no bound, so it
    is ``worst_metric``, the worst the study has measured (finite, so that samplers which
    standardize the objectives are not thrown off), or 0 before any measurement.
    """
    if metric_direction == "maximize":
        metric = 0.0
    else:
        metric = float(worst_metric) if worst_metric is not None else 0.0
    return 0.0, metric, float(memory_limit_bytes or 0)
