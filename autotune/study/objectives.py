"""From a :class:`~autotune.trial.measure.Measurement` to objective and constraint values.

A study optimizes in one of two modes (``objective=``):

- ``throughput`` (the default): three objectives, in this order: throughput (samples/s,
  maximize), the workload's validation metric (``accuracy``, maximize, for the built-in
  workloads; a user's workload names its own, e.g. ``val_loss``, minimize), and peak memory
  (bytes, minimize), after a fixed budget of epochs.
- ``time_to_accuracy``: two objectives, the wall seconds to reach the target
  (``time_to_accuracy_s``, minimize) and peak memory (bytes, minimize), as MLPerf Training
  and DAWNBench score training. The metric is the target's, not an objective; the study's
  record (``study.user_attrs["autotune"]["target"]``) keeps its name, direction and value.

Optuna stores the objectives' names (``study.metric_names``) and directions with the study,
so every reader takes them from there (:func:`objectives_of_study`, :func:`study_metric`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from autotune.core.config import ObjectiveMode
from autotune.study.trial_result import StudyAttributes
from autotune.trial.measure import Measurement

if TYPE_CHECKING:
    pass

__all__ = [
    "METRIC_INDEX",
    "OBJECTIVES",
    "PEAK_MEMORY",
    "TIME_TO_ACCURACY",
    "Objective",
    "ObjectiveMode",
    "failed_values",
    "metric_objective",
    "objective_mode",
    "objective_values",
    "objectives_of_study",
    "seconds_text",
    "study_metric",
    "study_objectives",
    "study_target",
]

Direction = Literal["maximize", "minimize"]
#: The position of the validation metric among a throughput study's objectives.
METRIC_INDEX = 1


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

    @property
    def maximized(self) -> bool:
        """True when a larger value is better (``direction == "maximize"``)."""
        return self.direction == "maximize"

    @property
    def sign(self) -> float:
        """``1.0`` for a maximized objective, ``-1.0`` for a minimized one: ``sign * value``
        is larger the better the value."""
        return 1.0 if self.maximized else -1.0

    def gain(self, difference: float) -> float:
        """How much better a ``difference`` of two values (``a - b``, in the objective's
        units) makes ``a`` than ``b``: the difference itself for a maximized objective, its
        negative for a minimized one (a loss 0.02 lower is a gain of ``+0.02``)."""
        return self.sign * difference

    def format(self, value: float | None, digits: int = 2) -> str:
        """The value for display: ``98.42%`` for accuracy, ``1.234`` otherwise; ``n/a`` for
        None."""
        if value is None:
            return "n/a"
        if self.is_accuracy:
            return f"{100 * value:.{digits}f}%"
        return f"{value:.{digits + 2}g}" if abs(value) >= 1e4 else f"{value:.{digits + 2}f}"


def study_objectives(
    metric_name: str = "accuracy",
    metric_direction: str = "maximize",
    mode: ObjectiveMode = "throughput",
) -> tuple[Objective, ...]:
    """The objectives of a study whose workload's metric is ``metric_name``: three in the
    ``throughput`` mode, two (:data:`TIME_TO_ACCURACY`, memory) in ``time_to_accuracy``.

    Raises:
        ValueError: a direction other than ``maximize`` or ``minimize``, or an unknown mode.
    """
    if metric_direction not in ("maximize", "minimize"):
        raise ValueError(f"metric_direction must be maximize or minimize, got {metric_direction!r}")
    if mode == "time_to_accuracy":
        return (TIME_TO_ACCURACY, PEAK_MEMORY)
    if mode != "throughput":
        raise ValueError(f"objective must be throughput or time_to_accuracy, got {mode!r}")
    return (
        Objective("throughput_sps", "maximize", "throughput (samples/s)"),
        _metric(metric_name, metric_direction),
        PEAK_MEMORY,
    )


def _metric(name: str, direction: str) -> Objective:
    label = "validation accuracy" if name == "accuracy" else f"validation {name}"
    return Objective(name, "maximize" if direction == "maximize" else "minimize", label)


#: The last objective of every study: the trial's peak memory (bytes).
PEAK_MEMORY = Objective("peak_memory_bytes", "minimize", "peak memory (bytes)")
#: The first objective of a time-to-accuracy study: wall seconds to the quality target.
TIME_TO_ACCURACY = Objective("time_to_accuracy_s", "minimize", "time to target (s)")


def objective_mode(objectives: Sequence[Objective]) -> ObjectiveMode:
    """``time_to_accuracy`` when the first objective is :data:`TIME_TO_ACCURACY`, else
    ``throughput``."""
    return "time_to_accuracy" if objectives[0].name == TIME_TO_ACCURACY.name else "throughput"


def metric_objective(objectives: Sequence[Objective]) -> Objective | None:
    """The validation metric among ``objectives`` (throughput mode), None in a
    time-to-accuracy study (use :func:`study_metric`)."""
    return objectives[METRIC_INDEX] if objective_mode(objectives) == "throughput" else None


#: The objectives of a study on a built-in workload (metric: top-1 accuracy).
OBJECTIVES: tuple[Objective, ...] = study_objectives()


def objectives_of_study(study: Any) -> tuple[Objective, ...]:
    """The objectives an Optuna study was created with: names from ``study.metric_names``
    (``accuracy`` where the study has none), directions
    from ``study.directions``; a two-objective study whose first is ``time_to_accuracy_s`` is
    a time-to-accuracy study."""
    names: Sequence[str | None] = study.metric_names or [None] * len(study.directions)
    directions = [d.name.lower() for d in study.directions]
    if len(directions) == 2 and names[0] == TIME_TO_ACCURACY.name:
        return study_objectives(mode="time_to_accuracy")
    if len(directions) != len(OBJECTIVES):
        return OBJECTIVES
    return study_objectives(names[METRIC_INDEX] or "accuracy", directions[METRIC_INDEX])


def study_metric(study: Any) -> Objective:
    """The validation metric of a study: an objective in the throughput mode; in a
    time-to-accuracy study, the target's metric its record keeps (accuracy when it keeps
    none)."""
    metric = metric_objective(objectives_of_study(study))
    if metric is not None:
        return metric
    target = _target_record(study)
    return _metric(str(target.get("metric", "accuracy")), str(target.get("direction", "maximize")))


def study_target(study: Any) -> float | None:
    """The quality target of a time-to-accuracy study (``train.target_accuracy`` or
    ``target_metric``), None in a throughput study."""
    value = _target_record(study).get("value")
    return None if value is None else float(value)


def _target_record(study: Any) -> Mapping[str, Any]:
    return StudyAttributes.from_study(study).target


def objective_values(
    measurement: Measurement, mode: ObjectiveMode = "throughput"
) -> tuple[float, ...]:
    """The objective values in the objectives' order: ``(throughput_sps, val_metric,
    peak_memory_bytes)``, or ``(time_to_accuracy_s, peak_memory_bytes)``.

    A time-to-accuracy trial that did not reach its target has no time to accuracy: its first
    value is then the seconds it trained (a lower bound); the study also marks it infeasible
    and the sampler models it at the worst measured time (:mod:`autotune.study.search._samplers`).
    """
    if mode == "time_to_accuracy":
        seconds = measurement.time_to_accuracy_s
        return (
            float(seconds if seconds is not None else measurement.train_s),
            float(measurement.peak_memory_bytes),
        )
    return (
        measurement.throughput_sps,
        measurement.val_metric,
        float(measurement.peak_memory_bytes),
    )


def failed_values(
    memory_limit_bytes: int | None,
    metric_direction: str = "maximize",
    worst_metric: float | None = None,
    mode: ObjectiveMode = "throughput",
    worst_time_s: float | None = None,
) -> tuple[float, ...]:
    """Values for a trial that produced no measurement (out of memory, error, crash, timeout).

    The trial is also marked infeasible, so it never reaches the Pareto front; these values
    only need to be the worst of their kind: zero throughput, the worst metric, and the
    device's memory (or 0 when unknown) as the memory it would have needed at least. A
    maximized metric's worst is 0 (no accuracy); a minimized one (a loss) has no bound, so it
    is ``worst_metric``, the worst the study has measured (finite, so that samplers which
    standardize the objectives are not thrown off), or 0 before any measurement. A time to
    accuracy has no bound either: ``worst_time_s``, the longest the study has measured, or 0.
    """
    memory = float(memory_limit_bytes or 0)
    if mode == "time_to_accuracy":
        return (float(worst_time_s) if worst_time_s is not None else 0.0, memory)
    if metric_direction == "maximize":
        metric = 0.0
    else:
        metric = float(worst_metric) if worst_metric is not None else 0.0
    return 0.0, metric, memory


def seconds_text(seconds: float | None) -> str:
    """Seconds for display (a time to accuracy, compile or evaluation seconds) with two or
    three significant figures, without the unit: ``0.0289``, ``3.14``, ``12.4``, ``124``,
    ``1,234``; ``n/a`` for None. Every table and headline writes seconds with it."""
    if seconds is None:
        return "n/a"
    if abs(seconds) >= 100:
        return f"{seconds:,.0f}"
    if abs(seconds) >= 10:
        return f"{seconds:.1f}"
    if abs(seconds) >= 1:
        return f"{seconds:.2f}"
    return f"{seconds:.3g}"
