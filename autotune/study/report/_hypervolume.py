"""The hypervolume history of a study: how much of the normalized objective box the feasible
trials dominate after each finished trial (``moocore.hypervolume``): a 3-D box in a
throughput study, a 2-D one (time to target, peak memory) in a time-to-accuracy study."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import moocore
import numpy as np

from autotune.study.objectives import METRIC_INDEX, OBJECTIVES, Objective, ObjectiveMode
from autotune.study.report._points import FEASIBLE, TrialPoint

__all__ = ["HypervolumePoint", "hypervolume_history"]


class HypervolumePoint(NamedTuple):
    """The hypervolume of the feasible trials finished up to a trial.

    Attributes:
        number: the trial number (trials are counted in number order).
        hypervolume: the share in [0, 1] of the normalized objective box the feasible trials
            so far dominate (see :func:`hypervolume_history`).
    """

    number: int
    hypervolume: float


def _metric_scale(metric: Objective, values: Sequence[float]) -> tuple[float, float]:
    """``(worst reference, best)`` of the metric axis of the hypervolume: ``(0, 1)`` for
    accuracy; otherwise the best feasible value and a reference 10 % of the feasible range
    (or of the best value, or 1) past the worst."""
    if metric.is_accuracy:
        return 0.0, 1.0
    best = max(values, key=metric.gain)
    worst = min(values, key=metric.gain)
    span = abs(best - worst) or abs(best) or 1.0
    return worst - metric.sign * 0.1 * span, best


def _goodness(
    values: np.ndarray,
    memory_ref_bytes: float,
    throughput_max_sps: float,
    metric_scale: tuple[float, float] = (0.0, 1.0),
) -> np.ndarray:
    """Map (throughput, metric, memory) rows to [0, 1] per objective, larger = better."""
    out = np.empty_like(values, dtype=float)
    out[:, 0] = values[:, 0] / throughput_max_sps
    worst, best = metric_scale
    out[:, 1] = (values[:, 1] - worst) / (best - worst)
    out[:, 2] = 1.0 - values[:, 2] / memory_ref_bytes
    return np.clip(out, 0.0, 1.0)


def hypervolume_history(
    points: Sequence[TrialPoint],
    metric: Objective | None = OBJECTIVES[METRIC_INDEX],
    mode: ObjectiveMode = "throughput",
) -> tuple[HypervolumePoint, ...]:
    """Hypervolume of the feasible trials after each finished trial, in trial-number order.

    Each objective is normalized to [0, 1], larger is better: throughput over the study's best
    feasible throughput; accuracy as is (another metric linearly, from a reference 10 % of the
    feasible range past the worst feasible value, 0, to the best, 1, in the metric's
    direction); memory as ``1 - peak / (1.1 * largest feasible peak)``. The hypervolume is
    the volume these points dominate in the unit cube from the reference point (0, 0, 0)
    (``moocore.hypervolume``, maximising), so 1.0 would be one configuration that is fastest,
    100 % accurate and uses no memory.

    In a time-to-accuracy study (``mode``) the box is 2-D: time to target as
    ``1 - seconds / (1.1 * longest feasible time)`` and memory as above, from the reference
    point (0, 0); 1.0 would be a configuration that reaches the target at once in no memory.

    Args:
        points: finished trials (any order).
        metric: the study's validation metric (default: accuracy, maximized); unused in a
            time-to-accuracy study.
        mode: ``throughput`` (three objectives) or ``time_to_accuracy`` (two).

    Returns:
        One point per finished trial; empty when no trial is feasible.
    """
    ordered = sorted(points, key=lambda p: p.number)
    feasible = [p for p in ordered if p.status == FEASIBLE]
    if not feasible:
        return ()
    if mode == "time_to_accuracy":
        return _history_2d(ordered, feasible)
    metric = metric if metric is not None else OBJECTIVES[METRIC_INDEX]
    throughput_max = max(p.throughput_sps or 0.0 for p in feasible) or 1.0
    memory_ref = 1.1 * max(p.peak_memory_bytes or 0.0 for p in feasible) or 1.0
    scale = _metric_scale(metric, [p.val_metric or 0.0 for p in feasible])
    return _cumulative(
        ordered,
        lambda p: [p.throughput_sps or 0.0, p.val_metric or 0.0, p.peak_memory_bytes or 0.0],
        lambda front: _goodness(front, memory_ref, throughput_max, scale),
    )


def _history_2d(
    ordered: Sequence[TrialPoint], feasible: Sequence[TrialPoint]
) -> tuple[HypervolumePoint, ...]:
    """:func:`hypervolume_history` of a time-to-accuracy study: (time to target, memory)."""
    time_ref = 1.1 * max(p.time_to_accuracy_s or 0.0 for p in feasible) or 1.0
    memory_ref = 1.1 * max(p.peak_memory_bytes or 0.0 for p in feasible) or 1.0
    return _cumulative(
        ordered,
        lambda p: [
            1.0 - (p.time_to_accuracy_s or 0.0) / time_ref,
            1.0 - (p.peak_memory_bytes or 0.0) / memory_ref,
        ],
        lambda front: np.clip(front, 0.0, 1.0),
    )


def _cumulative(
    ordered: Sequence[TrialPoint],
    objectives: Callable[[TrialPoint], list[float]],
    goodness: Callable[[np.ndarray], np.ndarray],
) -> tuple[HypervolumePoint, ...]:
    """The hypervolume after each trial of ``ordered``: the feasible trials so far, each
    ``objectives(point)``, mapped by ``goodness`` to ``(trials, D)`` values in [0, 1]
    (larger is better), measured from the origin (``moocore.hypervolume``, maximising)."""
    history: list[HypervolumePoint] = []
    front: list[list[float]] = []
    volume = 0.0
    for point in ordered:
        if point.status == FEASIBLE:
            front.append(objectives(point))
            good = goodness(np.asarray(front))
            volume = float(moocore.hypervolume(good, ref=np.zeros(good.shape[1]), maximise=True))
        history.append(HypervolumePoint(point.number, volume))
    return tuple(history)
