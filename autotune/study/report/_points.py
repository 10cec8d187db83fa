"""A finished trial as the outputs see it: its status (feasible, infeasible, failed), its row
of single-trial figures, and the Pareto front of the feasible trials.

A study optimizes in one of two modes (:mod:`autotune.study.objectives`): ``throughput`` (three
objectives: throughput, the validation metric, peak memory) or ``time_to_accuracy`` (two:
``time_to_accuracy_s`` and peak memory; a trial that missed the target is infeasible and
never on the front). Points and rows carry the figures of both; those of the other mode are
user attributes of the trial (a time-to-accuracy trial's throughput) or None.

The front is computed by ``moocore.is_nondominated`` (López-Ibáñez's C library); where a study
is at hand, Optuna's ``study.best_trials`` gives the same trials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import moocore
import numpy as np
from optuna.trial import FrozenTrial, TrialState

from autotune.study.objectives import OBJECTIVES, Objective, ObjectiveMode
from autotune.study.report._text import cpu_share_text
from autotune.study.storage import FINISHED_STATES
from autotune.study.trial_result import TrialResult

__all__ = [
    "FAILED",
    "FEASIBLE",
    "INFEASIBLE",
    "Baseline",
    "ParetoRow",
    "TrialPoint",
    "classify",
    "pareto_numbers",
    "pareto_row",
    "speedup",
    "times_sooner",
    "trial_mode",
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
        pareto: on the Pareto front of the feasible trials (all of the study's objectives).
        baseline: the study's baseline trial (PyTorch defaults).
        throughput_sps: training samples/s.
        val_metric: the study's validation metric (accuracy: in [0, 1]).
        peak_memory_bytes: peak memory in bytes.
        params: the knobs, by Optuna parameter name.
        reason: why the trial is infeasible or failed ("" when feasible).
        speedup: throughput over the baseline's, when both were measured; in a
            time-to-accuracy study, the baseline's time to target over this trial's (how many
            times sooner it reached the target), when both reached it.
        time_to_accuracy_s: time-to-accuracy studies: wall seconds to the target; None when
            the target was missed, without a measurement, and in throughput studies.
        target_reached: time-to-accuracy studies: whether the trial met the target (None
            without a measurement and in throughput studies).
        curve: time-to-accuracy studies: the evaluations, ``(wall_s, step, metric)`` each, in
            order (empty otherwise).
        trained_s: time-to-accuracy studies: the wall seconds the trial trained (its first
            objective value: the time to target, or a lower bound of it when missed).
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
    time_to_accuracy_s: float | None = None
    target_reached: bool | None = None
    curve: tuple[tuple[float, int, float], ...] = ()
    trained_s: float | None = None


class ParetoRow(NamedTuple):
    """A feasible, measured configuration (Pareto-optimal in :attr:`ReportData.pareto`) with
    the figures of its single search trial: the objectives and the speedup as the row shows
    them; every other figure is read from the trial's
    :class:`~autotune.study.trial_result.TrialResult`, the one declaration of what a trial
    recorded (the properties below, and the registry's columns,
    :data:`autotune.study.trial_result.FIGURE_COLUMNS`).

    Attributes:
        number: Optuna's trial number.
        throughput_sps: training samples/s.
        val_metric: the study's validation metric (accuracy: in [0, 1]).
        peak_memory_bytes: peak memory in bytes.
        speedup: throughput over the baseline's (None without a measured baseline); in a
            time-to-accuracy study, the baseline's time to target over this trial's.
        result: everything the trial recorded.
        time_to_accuracy_s: time-to-accuracy studies: wall seconds to the target (None in
            throughput studies); ``val_metric`` is then the metric it reached and
            ``throughput_sps`` an extra figure from its attributes.
    """

    number: int
    throughput_sps: float
    val_metric: float
    peak_memory_bytes: float
    speedup: float | None
    result: TrialResult
    time_to_accuracy_s: float | None = None

    @property
    def params(self) -> Mapping[str, Any]:
        """The knobs."""
        return self.result.params

    @property
    def baseline(self) -> bool:
        """This row is the baseline itself."""
        return self.result.baseline

    @property
    def step_time_s(self) -> float | None:
        """Median seconds per optimizer step (None if not recorded)."""
        return self.result.step_time_s

    @property
    def compile_s(self) -> float | None:
        """Seconds torch.compile added (None if not recorded)."""
        return self.result.compile_s

    @property
    def eval_s(self) -> float | None:
        """Time-to-accuracy studies: seconds spent evaluating, inside the time to target
        (None in throughput studies)."""
        return self.result.eval_s if self.time_to_accuracy else None

    @property
    def other_cpu_share(self) -> float | None:
        """The share of the trial's CPUs other processes used over its timed windows (None:
        not measured, e.g. on the mock device)."""
        return self.result.other_cpu_share

    @property
    def busy(self) -> bool:
        """Measured on a busy machine (the trial's ``busy_machine`` attribute)."""
        return self.result.busy

    @property
    def simulated(self) -> bool:
        """The mock device produced it (its CPU share is "not measured (mock)")."""
        return self.result.simulated

    @property
    def compile_cache(self) -> str | None:
        """Whether torch.compile found the graphs in its cache (``cold``, ``warm``,
        ``partly warm``), None when not compiled or not known."""
        return self.result.compile_cache

    @property
    def metric_from_trial(self) -> int | None:
        """The trial whose metric (and steps to the target) this one reused, the math being
        the same (``advanced.search.reuse_metric``); None when it trained in full."""
        return self.result.metric_from_trial

    @property
    def time_to_accuracy(self) -> bool:
        """A row of a time-to-accuracy study."""
        return self.time_to_accuracy_s is not None

    @property
    def goodput_sps(self) -> float:
        """The samples/s of the baseline's batch this row is worth: a global-batch change's
        goodput (throughput x E(B), :mod:`autotune.core.goodput`), the throughput of any other
        row (E(B) = 1 at the baseline's batch)."""
        if self.result.goodput_sps is not None:
            return self.result.goodput_sps
        return self.throughput_sps

    @property
    def cpu_text(self) -> str:
        """The ``other CPU`` cell of the Pareto tables: ``3 %``, ``48 % BUSY``, ``not measured
        (mock)`` or ``n/a`` (:func:`autotune.study.report.cpu_share_text`)."""
        text = cpu_share_text(self.other_cpu_share, simulated=self.simulated)
        return f"{text} BUSY" if self.busy else text


class Baseline(NamedTuple):
    """The study's baseline trial.

    Attributes:
        number: Optuna's trial number.
        status: :data:`FEASIBLE`, :data:`INFEASIBLE` or :data:`FAILED`.
        throughput_sps: its samples/s, None when it produced no measurement.
        params: its knobs.
        reason: why it is infeasible or failed ("" otherwise).
        time_to_accuracy_s: time-to-accuracy studies: its seconds to the target, None when
            it missed it or produced no measurement (then no trial has a speedup).
    """

    number: int
    status: str
    throughput_sps: float | None
    params: Mapping[str, Any]
    reason: str
    time_to_accuracy_s: float | None = None


def classify(trial: FrozenTrial | TrialResult) -> tuple[str, bool, str]:
    """``(status, measured, reason)`` of a finished trial.

    Raises:
        ValueError: the trial is not finished (COMPLETE or PRUNED).
    """
    result = _result(trial)
    if result.state not in FINISHED_STATES:
        raise ValueError(f"trial {result.number} is {result.state.name}, not finished")
    failure = result.failure_kind
    last_line = result.last_failure_line
    if result.state == TrialState.PRUNED or failure == "infeasible":
        return INFEASIBLE, False, f"not launched: {last_line or failure or 'pruned'}"
    if failure == "too_slow":  # two timed windows, no evaluation: not a full measurement
        return INFEASIBLE, False, f"too slow: {last_line}" if last_line else "too slow"
    if failure is not None:
        return FAILED, False, f"{failure}: {last_line}" if last_line else str(failure)
    broken = [name for name, value in sorted(result.constraints.items()) if value > 0]
    if result.target_reached is False and "target_not_reached" not in broken:
        broken.append("target_not_reached")
    if broken:
        missed = "target_not_reached" in broken
        others = [name for name in broken if name != "target_not_reached"]
        words = (["missed the target"] if missed else []) + (
            ["breaks " + ", ".join(others)] if others else []
        )
        return INFEASIBLE, True, "; ".join(words)
    return FEASIBLE, True, ""


def _result(trial: FrozenTrial | TrialResult) -> TrialResult:
    """``trial``'s result (itself, when already read)."""
    return trial if isinstance(trial, TrialResult) else TrialResult.from_trial(trial)


def trial_mode(trial: FrozenTrial | TrialResult) -> ObjectiveMode:
    """``time_to_accuracy`` for a trial of a time-to-accuracy study (two objective values
    whose first is a time, or the ``target_reached`` attribute), else ``throughput``."""
    result = _result(trial)
    if result.time_to_accuracy:
        return "time_to_accuracy"
    return "time_to_accuracy" if len(result.values or ()) == 2 else "throughput"


def pareto_numbers(
    values: Mapping[int, Sequence[float]], objectives: Sequence[Objective] = OBJECTIVES
) -> set[int]:
    """Trial numbers not dominated by any other, in the objectives' order and directions
    (``moocore.is_nondominated``; equal points are all kept, none dominates another).

    Args:
        values: objective values by trial number (feasible trials only), one value per
            objective (a time-to-accuracy study's two: seconds to target, peak memory).
        objectives: the study's objectives (default: a built-in workload's, accuracy
            maximized).
    """
    if not values:
        return set()
    numbers = list(values)
    points = np.asarray([values[n] for n in numbers], dtype=float)  # (trials, objectives)
    maximise = [o.maximized for o in objectives]
    keep = moocore.is_nondominated(points, maximise=maximise, keep_weakly=True)
    return {n for n, kept in zip(numbers, keep, strict=True) if kept}


def speedup(throughput_sps: float | None, baseline_sps: float | None) -> float | None:
    """Throughput over the baseline's; None when either is missing (or the baseline's is 0)."""
    if throughput_sps is None or not baseline_sps:
        return None
    return throughput_sps / baseline_sps


def times_sooner(time_s: float | None, baseline_time_s: float | None) -> float | None:
    """The baseline's time to target over this one (2.0: reached it in half the time); None
    when either is missing (or this one is 0)."""
    if time_s is None or baseline_time_s is None or time_s <= 0:
        return None
    return baseline_time_s / time_s


def pareto_row(
    trial: FrozenTrial | TrialResult,
    baseline_sps: float | None = None,
    *,
    baseline_time_s: float | None = None,
) -> ParetoRow:
    """The row of a feasible, measured trial: its objective values, step and compile seconds
    from its attributes, and its speedup.

    In a throughput study (three objective values) the row holds throughput, metric and peak
    memory from the values; in a time-to-accuracy study (two: seconds to target, peak memory;
    :func:`trial_mode`) it holds the time to target and memory from the values, and the metric
    it reached and its throughput from its attributes.

    Args:
        trial: a feasible, measured trial.
        baseline_sps: the baseline's throughput in samples/s (None: no speedup).
        baseline_time_s: time-to-accuracy studies: the baseline's seconds to target (None: no
            speedup).

    Raises:
        ValueError: the trial has no objective values.
    """
    result = _result(trial)
    if result.values is None:
        raise ValueError(f"trial {result.number} has no objective values")
    if trial_mode(result) == "time_to_accuracy":
        time_s, peak_memory_bytes = (float(v) for v in result.values)
        return ParetoRow(
            number=result.number,
            throughput_sps=result.throughput_sps or 0.0,
            val_metric=result.val_metric or 0.0,
            peak_memory_bytes=peak_memory_bytes,
            speedup=times_sooner(time_s, baseline_time_s),
            result=result,
            time_to_accuracy_s=time_s,
        )
    throughput_sps, val_metric, peak_memory_bytes = (float(v) for v in result.values)
    return ParetoRow(
        number=result.number,
        throughput_sps=throughput_sps,
        val_metric=val_metric,
        peak_memory_bytes=peak_memory_bytes,
        speedup=speedup(throughput_sps, baseline_sps),
        result=result,
    )
