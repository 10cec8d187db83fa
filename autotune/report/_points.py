"""A finished trial as the outputs see it: its status (feasible, infeasible, failed), its row
of single-trial figures, and the Pareto front of the feasible trials.

The front is computed by ``moocore.is_nondominated`` (López-Ibáñez's C library); where a study
is at hand, Optuna's ``study.best_trials`` gives the same trials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import moocore
import numpy as np
from optuna.trial import FrozenTrial, TrialState

from autotune.baseline import BASELINE_ATTR
from autotune.objectives import OBJECTIVES, Objective
from autotune.storage import FINISHED_STATES

__all__ = [
    "FAILED",
    "FEASIBLE",
    "INFEASIBLE",
    "Baseline",
    "ParetoRow",
    "TrialPoint",
    "attr_float",
    "classify",
    "pareto_numbers",
    "pareto_row",
    "speedup",
]

#: Measured and within every constraint.
FEASIBLE = "feasible"
#: Measured but breaking a constraint (``max_memory_bytes``, ``min_accuracy``), or never
#: launched because the configuration breaks a feasibility rule of the device.
INFEASIBLE = "infeasible"
#: Launched but produced no measurement: out of memory, error, crash or timeout.
FAILED = "failed"


class TrialPoint(NamedTuple):
    """One finished trial as the plots see it.

    Attributes:
        number: Optuna's trial number.
        status: :data:`FEASIBLE`, :data:`INFEASIBLE` or :data:`FAILED`.
        measured: True when the objectives below are real figures (None otherwise).
        pareto: on the Pareto front of the feasible trials (all three objectives).
        baseline: the study's baseline trial (PyTorch defaults).
        throughput_sps: training samples/s.
        val_metric: the study's validation metric (accuracy: in [0, 1]).
        peak_memory_bytes: peak memory in bytes.
        params: the knobs, by Optuna parameter name.
        reason: why the trial is infeasible or failed ("" when feasible).
        speedup: throughput over the baseline's, when both were measured.
    """

    number: int
    status: str
    measured: bool
    pareto: bool
    baseline: bool
    throughput_sps: float | None
    val_metric: float | None
    peak_memory_bytes: float | None
    params: Mapping[str, Any]
    reason: str
    speedup: float | None


class ParetoRow(NamedTuple):
    """A feasible, measured configuration (Pareto-optimal in :attr:`ReportData.pareto`) with
    the figures of its single search trial.

    Attributes:
        number: Optuna's trial number.
        throughput_sps: training samples/s.
        val_metric: the study's validation metric (accuracy: in [0, 1]).
        peak_memory_bytes: peak memory in bytes.
        step_time_s: median seconds per optimizer step (None if not recorded).
        compile_s: seconds torch.compile added (None if not recorded).
        speedup: throughput over the baseline's (None without a measured baseline).
        params: the knobs.
        baseline: this row is the baseline itself.
    """

    number: int
    throughput_sps: float
    val_metric: float
    peak_memory_bytes: float
    step_time_s: float | None
    compile_s: float | None
    speedup: float | None
    params: Mapping[str, Any]
    baseline: bool


class Baseline(NamedTuple):
    """The study's baseline trial.

    Attributes:
        number: Optuna's trial number.
        status: :data:`FEASIBLE`, :data:`INFEASIBLE` or :data:`FAILED`.
        throughput_sps: its samples/s, None when it produced no measurement.
        params: its knobs.
        reason: why it is infeasible or failed ("" otherwise).
    """

    number: int
    status: str
    throughput_sps: float | None
    params: Mapping[str, Any]
    reason: str


def classify(trial: FrozenTrial) -> tuple[str, bool, str]:
    """``(status, measured, reason)`` of a finished trial.

    Raises:
        ValueError: the trial is not finished (COMPLETE or PRUNED).
    """
    if trial.state not in FINISHED_STATES:
        raise ValueError(f"trial {trial.number} is {trial.state.name}, not finished")
    attrs = trial.user_attrs
    failure = attrs.get("failure")
    detail = str(attrs.get("failure_detail", "")).strip()
    last_line = detail.splitlines()[-1] if detail else ""
    if trial.state == TrialState.PRUNED or failure == "infeasible":
        return INFEASIBLE, False, f"not launched: {last_line or failure or 'pruned'}"
    if failure is not None:
        return FAILED, False, f"{failure}: {last_line}" if last_line else str(failure)
    broken = [name for name, value in sorted(trial.constraints.items()) if value > 0]
    if broken:
        return INFEASIBLE, True, "breaks " + ", ".join(broken)
    return FEASIBLE, True, ""


def pareto_numbers(
    values: Mapping[int, Sequence[float]], objectives: Sequence[Objective] = OBJECTIVES
) -> set[int]:
    """Trial numbers not dominated by any other, in the objectives' order and directions
    (``moocore.is_nondominated``; equal points are all kept, none dominates another).

    Args:
        values: objective values by trial number (feasible trials only), one value per
            objective.
        objectives: the study's objectives (default: a built-in workload's, accuracy
            maximized).
    """
    if not values:
        return set()
    numbers = list(values)
    points = np.asarray([values[n] for n in numbers], dtype=float)  # (trials, objectives)
    maximise = [o.direction == "maximize" for o in objectives]
    keep = moocore.is_nondominated(points, maximise=maximise, keep_weakly=True)
    return {n for n, kept in zip(numbers, keep, strict=True) if kept}


def speedup(throughput_sps: float | None, baseline_sps: float | None) -> float | None:
    """Throughput over the baseline's; None when either is missing (or the baseline's is 0)."""
    if throughput_sps is None or not baseline_sps:
        return None
    return throughput_sps / baseline_sps


def attr_float(trial: FrozenTrial, name: str) -> float | None:
    """A trial's numeric user attribute as a float; None when absent or not a number."""
    value = trial.user_attrs.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def pareto_row(trial: FrozenTrial, baseline_sps: float | None = None) -> ParetoRow:
    """The row of a feasible, measured trial: its objective values (throughput, metric, peak
    memory), step and compile seconds from its attributes, and its speedup.

    Args:
        trial: a trial with three objective values.
        baseline_sps: the baseline's throughput in samples/s (None: no speedup).
    """
    throughput_sps, val_metric, peak_memory_bytes = (float(v) for v in trial.values)
    return ParetoRow(
        number=trial.number,
        throughput_sps=throughput_sps,
        val_metric=val_metric,
        peak_memory_bytes=peak_memory_bytes,
        step_time_s=attr_float(trial, "step_time_s"),
        compile_s=attr_float(trial, "compile_s"),
        speedup=speedup(throughput_sps, baseline_sps),
        params=dict(trial.params),
        baseline=bool(trial.user_attrs.get(BASELINE_ATTR)),
    )
