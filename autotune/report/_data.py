"""Data gathering for reports and the dashboard: finished trials in, small named tuples out.

Everything here is pure (no database, no Plotly) apart from :func:`param_importances`, which
runs Optuna's evaluator on an in-memory copy of the trials with a fixed seed. The figures and
pages are drawn from a :class:`ReportData` and nothing else; tests check the gathered data.
"""

from __future__ import annotations

import datetime as dt
import math
import shlex
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from autotune.baseline import BASELINE_ATTR, baseline_trial
from autotune.config import DEFAULT_STORAGE_URL, TUNER_KNOBS, format_knob_value
from autotune.exceptions import ConfigError
from autotune.objectives import (
    METRIC_INDEX,
    OBJECTIVES,
    Objective,
    objectives_of_study,
    study_objectives,
)
from autotune.storage import FINISHED_STATES, ResultsStore
from autotune.storage.records import KNOB_COLUMNS, HardwareFingerprint, StudyRecord
from autotune.verification import CandidateVerdict, VerificationSummary, load_verification

__all__ = [
    "FAILED",
    "FEASIBLE",
    "INFEASIBLE",
    "NOT_VERIFIED",
    "Baseline",
    "HypervolumePoint",
    "ParetoRow",
    "ReportData",
    "TrialPoint",
    "classify",
    "gather_from_trials",
    "gather_report",
    "hypervolume_history",
    "metric_column",
    "metric_spread",
    "model_knobs",
    "model_text",
    "not_verified_line",
    "param_importances",
    "pareto_numbers",
    "study_command",
    "verify_command",
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


class HypervolumePoint(NamedTuple):
    """The hypervolume of the feasible trials finished up to a trial.

    Attributes:
        number: the trial number (trials are counted in number order).
        hypervolume: the share in [0, 1] of the normalized objective box the feasible trials
            so far dominate (see :func:`hypervolume_history`).
    """

    number: int
    hypervolume: float


#: The first words of what every output says about a study without a finished verification.
NOT_VERIFIED = "not verified"


def model_knobs(params: Mapping[str, Any]) -> dict[str, Any]:
    """The model's knobs among a trial's parameters: all but the tuner's (:data:`TUNER_KNOBS`),
    in their order (``depth``, ``width`` for the built-ins; a workload's own names)."""
    return {name: value for name, value in params.items() if name not in TUNER_KNOBS}


def model_text(params: Mapping[str, Any]) -> str:
    """The model's knobs for a table cell: ``depth=2 width=16``, ``n_layer=4 n_embd=128``;
    ``-`` when the space has none."""
    knobs = model_knobs(params).items()
    return " ".join(f"{name}={format_knob_value(value)}" for name, value in knobs) or "-"


def metric_column(metric: Objective) -> str:
    """A table's header for the metric: ``val acc`` for accuracy, else its name."""
    return "val acc" if metric.is_accuracy else metric.name


def metric_spread(metric: Objective, mean: float, low: float | None, high: float | None) -> str:
    """A verified mean with its range over rounds: ``98.42% [98.10-98.70]`` for accuracy,
    ``1.2340 [1.2100-1.2500]`` otherwise."""
    if metric.is_accuracy:
        return f"{100 * mean:.2f}% [{100 * (low or 0):.2f}-{100 * (high or 0):.2f}]"
    return f"{metric.format(mean)} [{metric.format(low)}-{metric.format(high)}]"


def study_command(
    command: str, study_name: str, storage_url: str | None = None, *options: str
) -> str:
    """An ``autotune COMMAND STUDY [storage=URL] [OPTIONS]`` command line, shell-quoted; the
    storage is named unless it is the default."""
    storage = (
        f" storage={shlex.quote(storage_url)}"
        if storage_url and storage_url != DEFAULT_STORAGE_URL
        else ""
    )
    tail = "".join(f" {shlex.quote(o)}" for o in options)
    return f"autotune {command} {shlex.quote(study_name)}{storage}{tail}"


def verify_command(study_name: str, storage_url: str | None = None) -> str:
    """The ``autotune verify`` command line for a study (its storage named unless default)."""
    return study_command("verify", study_name, storage_url)


def not_verified_line(study_name: str, storage_url: str | None = None) -> str:
    """What every output says instead of a claim when a study has no finished verification.

    Args:
        study_name: the Optuna study name.
        storage_url: its storage URL (named in the command unless it is the default).
    """
    return (
        f"{NOT_VERIFIED}: run `{verify_command(study_name, storage_url)}` to re-measure the "
        "finalists; single-trial figures are not a claim"
    )


@dataclass(frozen=True)
class ReportData:
    """Everything a report or the dashboard shows about one study.

    The claim every output makes is :attr:`verification`'s (the newest finished verification
    of the study, :func:`autotune.verification.load_verification`), said by
    :meth:`verdict_line`. The points, the Pareto front and their speedups are single-trial
    figures from the search: they rank candidates and are never a headline.

    Attributes:
        study_name: the Optuna study name.
        space_name: the search space's name.
        device_name: the device the trials ran on.
        simulated: the mock device produced the figures (they are SIMULATED).
        generated_at: when the data was gathered (UTC).
        knob_names: the knobs, in the space's order.
        points: every finished trial, by number.
        pareto: the Pareto-optimal configurations, fastest first (single-trial figures).
        baseline: the baseline trial, or None when the study has none finished.
        hypervolume: the hypervolume after each finished trial.
        importances: per objective name, parameter importances (sum 1), largest first.
        hardware: ``(label, value)`` rows of the hardware fingerprint.
        objectives: the study's objectives (:func:`autotune.objectives.objectives_of_study`):
            throughput, the validation metric (its name, direction and format), peak memory.
        running: trials running now (the dashboard shows it).
        notes: lines worth saying (e.g. why importances are missing).
        configurations: every feasible, measured trial as a row, by trial number (single-trial
            figures; :attr:`pareto` is the Pareto-optimal part of them).
        verification: the newest finished verification, or None when there is none.
        storage_url: the study's storage URL ("" when unknown), for the commands it names.
    """

    study_name: str
    space_name: str
    device_name: str
    simulated: bool
    generated_at: dt.datetime
    knob_names: tuple[str, ...]
    points: tuple[TrialPoint, ...]
    pareto: tuple[ParetoRow, ...]
    baseline: Baseline | None
    hypervolume: tuple[HypervolumePoint, ...]
    importances: Mapping[str, Mapping[str, float]]
    hardware: tuple[tuple[str, str], ...]
    running: int = 0
    notes: tuple[str, ...] = ()
    configurations: tuple[ParetoRow, ...] = ()
    verification: VerificationSummary | None = None
    storage_url: str = ""
    objectives: tuple[Objective, ...] = OBJECTIVES

    @property
    def metric(self) -> Objective:
        """The study's validation metric (``accuracy``, ``val_loss``, ...)."""
        return self.objectives[METRIC_INDEX]

    def count(self, status: str) -> int:
        """Finished trials with this status."""
        return sum(p.status == status for p in self.points)

    @property
    def finished(self) -> int:
        """Finished trials (complete or never launched): what ``--trials`` counts."""
        return len(self.points)

    @property
    def recommended(self) -> CandidateVerdict | None:
        """The verified recommendation (None: not verified, or nothing qualifies)."""
        return self.verification.recommended if self.verification is not None else None

    def verdict_line(self) -> str:
        """The one line every output shows as its claim: the verification's verdict
        (:meth:`~autotune.verification.VerificationSummary.headline`: the recommendation with
        its rounds and 95 % interval, or that nothing qualifies), or :func:`not_verified_line`.
        """
        if self.verification is not None:
            return self.verification.headline()
        return not_verified_line(self.study_name, self.storage_url or None)

    def configuration(self, number: int) -> ParetoRow | None:
        """The row of feasible, measured trial ``number``, or None."""
        return next((r for r in self.configurations if r.number == number), None)


# --------------------------------------------------------------------------------------------
# Classification and the Pareto front


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


def _dominates(a: Sequence[float], b: Sequence[float], signs: Sequence[float]) -> bool:
    better_or_equal = all(s * x >= s * y for x, y, s in zip(a, b, signs, strict=True))
    return better_or_equal and any(s * x > s * y for x, y, s in zip(a, b, signs, strict=True))


def pareto_numbers(
    values: Mapping[int, Sequence[float]], objectives: Sequence[Objective] = OBJECTIVES
) -> set[int]:
    """Trial numbers not dominated by any other, in the objectives' order and directions.

    Args:
        values: objective values by trial number (feasible trials only).
        objectives: the study's objectives (default: a built-in workload's, accuracy
            maximized).
    """
    signs = [1.0 if o.direction == "maximize" else -1.0 for o in objectives]
    items = list(values.items())
    return {n for n, v in items if not any(_dominates(w, v, signs) for m, w in items if m != n)}


# --------------------------------------------------------------------------------------------
# Hypervolume


def _metric_scale(metric: Objective, values: Sequence[float]) -> tuple[float, float]:
    """``(worst reference, best)`` of the metric axis of the hypervolume: ``(0, 1)`` for
    accuracy; otherwise the best feasible value and a reference 10 % of the feasible range
    (or of the best value, or 1) past the worst."""
    if metric.is_accuracy:
        return 0.0, 1.0
    sign = 1.0 if metric.direction == "maximize" else -1.0
    best = max(values, key=lambda v: sign * v)
    worst = min(values, key=lambda v: sign * v)
    span = abs(best - worst) or abs(best) or 1.0
    return worst - sign * 0.1 * span, best


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
    points: Sequence[TrialPoint], metric: Objective = OBJECTIVES[METRIC_INDEX]
) -> tuple[HypervolumePoint, ...]:
    """Hypervolume of the feasible trials after each finished trial, in trial-number order.

    Each objective is normalized to [0, 1], larger is better: throughput over the study's best
    feasible throughput; accuracy as is (another metric linearly, from a reference 10 % of the
    feasible range past the worst feasible value, 0, to the best, 1, in the metric's
    direction); memory as ``1 - peak / (1.1 * largest feasible peak)``. The hypervolume is the volume these points dominate in the unit cube from the
    reference point (0, 0, 0) (Optuna's ``compute_hypervolume``, WFG algorithm), so 1.0 would
    be one configuration that is fastest, 100 % accurate and uses no memory.

    Args:
        points: finished trials (any order).
        metric: the study's validation metric (default: accuracy, maximized).

    Returns:
        One point per finished trial; empty when no trial is feasible.
    """
    from optuna._hypervolume import compute_hypervolume

    ordered = sorted(points, key=lambda p: p.number)
    feasible = [p for p in ordered if p.status == FEASIBLE]
    if not feasible:
        return ()
    throughput_max = max(p.throughput_sps or 0.0 for p in feasible) or 1.0
    memory_ref = 1.1 * max(p.peak_memory_bytes or 0.0 for p in feasible) or 1.0
    scale = _metric_scale(metric, [p.val_metric or 0.0 for p in feasible])
    history: list[HypervolumePoint] = []
    front: list[list[float]] = []
    volume = 0.0
    for point in ordered:
        if point.status == FEASIBLE:
            front.append(
                [
                    point.throughput_sps or 0.0,
                    point.val_metric or 0.0,
                    point.peak_memory_bytes or 0.0,
                ]
            )
            good = _goodness(np.asarray(front), memory_ref, throughput_max, scale)
            # compute_hypervolume minimizes: negate goodness, reference point at 0.
            volume = float(compute_hypervolume(-good, np.zeros(3)))
        history.append(HypervolumePoint(point.number, volume))
    return tuple(history)


# --------------------------------------------------------------------------------------------
# Parameter importances


def _objective_value(index: int) -> Callable[[FrozenTrial], float]:
    """The target function reading objective ``index`` of a trial."""

    def target(trial: FrozenTrial) -> float:
        return float(trial.values[index])

    return target


def param_importances(
    trials: Sequence[FrozenTrial], *, seed: int = 0, objectives: Sequence[Objective] = OBJECTIVES
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Parameter importances per objective, from the feasible trials only.

    Uses Optuna's fANOVA evaluator (``FanovaImportanceEvaluator``, random forests, seeded)
    on an in-memory study holding copies of the feasible trials, so failed trials' placeholder
    values do not distort it. Knobs with a single value in the space are left out.

    Args:
        trials: finished trials of one study.
        seed: the evaluator's seed (same trials, same seed: same importances).
        objectives: the study's objectives (their names key the result).

    Returns:
        ``(importances, notes)``: per objective name, importance by parameter (largest first,
        summing to 1); and lines explaining what could not be computed.
    """
    feasible = [t for t in trials if t.state == TrialState.COMPLETE and classify(t)[0] == FEASIBLE]
    if len(feasible) < 2:
        return {}, [f"parameter importances need 2 or more feasible trials (have {len(feasible)})"]
    varying = [
        name
        for name in feasible[0].distributions
        if not feasible[0].distributions[name].single() and all(name in t.params for t in feasible)
    ]
    if not varying:
        return {}, ["parameter importances: no knob varies in this space"]
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        copy = optuna.create_study(
            directions=[StudyDirection[o.direction.upper()] for o in objectives]
        )
        copy.add_trials(feasible)
        result: dict[str, dict[str, float]] = {}
        notes: list[str] = []
        for index, objective in enumerate(objectives):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    raw = optuna.importance.get_param_importances(
                        copy,
                        evaluator=optuna.importance.FanovaImportanceEvaluator(seed=seed),
                        params=varying,
                        target=_objective_value(index),
                    )
            except (RuntimeError, ValueError) as e:
                notes.append(f"importances for {objective.name}: {e}")
                continue
            result[objective.name] = {
                name: float(value) for name, value in raw.items() if math.isfinite(float(value))
            }
        return result, notes
    finally:
        optuna.logging.set_verbosity(verbosity)


# --------------------------------------------------------------------------------------------
# Gathering


def _speedup(throughput_sps: float | None, baseline_sps: float | None) -> float | None:
    if throughput_sps is None or not baseline_sps:
        return None
    return throughput_sps / baseline_sps


def _attr_float(trial: FrozenTrial, name: str) -> float | None:
    value = trial.user_attrs.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def gather_from_trials(
    study_name: str,
    trials: Sequence[FrozenTrial],
    *,
    space_name: str = "",
    device_name: str = "",
    simulated: bool | None = None,
    hardware: Sequence[tuple[str, str]] = (),
    knob_names: Sequence[str] | None = None,
    importances: bool = True,
    now: dt.datetime | None = None,
    verification: VerificationSummary | None = None,
    storage_url: str = "",
    objectives: Sequence[Objective] = OBJECTIVES,
) -> ReportData:
    """Gather what a report shows from a study's trials.

    Args:
        study_name: the Optuna study name.
        trials: all of the study's trials (unfinished ones are counted as running or ignored).
        space_name: the search space's name.
        device_name: the device the trials ran on.
        simulated: whether the figures are SIMULATED; None: any trial says so.
        hardware: ``(label, value)`` rows of the hardware fingerprint.
        knob_names: the knobs in display order (those absent from every trial are dropped);
            None: the model's knobs in the trials' order, then the tuner's.
        importances: compute parameter importances (the one step that is not instant).
        now: the time to stamp (default: now, UTC).
        verification: the study's newest finished verification (None: not verified).
        storage_url: the study's storage URL, for the commands the pages name.
        objectives: the study's objectives (default: a built-in workload's, accuracy
            maximized).

    Returns:
        The :class:`ReportData`.
    """
    finished = sorted((t for t in trials if t.state in FINISHED_STATES), key=lambda t: t.number)
    running = sum(t.state == TrialState.RUNNING for t in trials)
    base_trial = baseline_trial(finished)
    base_status = classify(base_trial) if base_trial is not None else None
    base_sps = (
        _attr_float(base_trial, "throughput_sps")
        if base_trial is not None and base_status is not None and base_status[1]
        else None
    )

    classified = {t.number: classify(t) for t in finished}
    feasible_values = {
        t.number: list(t.values) for t in finished if classified[t.number][0] == FEASIBLE
    }
    objectives = tuple(objectives)
    front = pareto_numbers(feasible_values, objectives)

    points: list[TrialPoint] = []
    for trial in finished:
        status, measured, reason = classified[trial.number]
        values: list[float | None] = list(trial.values) if measured else [None, None, None]
        points.append(
            TrialPoint(
                number=trial.number,
                status=status,
                measured=measured,
                pareto=trial.number in front,
                baseline=bool(trial.user_attrs.get(BASELINE_ATTR)),
                throughput_sps=values[0],
                val_metric=values[1],
                peak_memory_bytes=values[2],
                params=dict(trial.params),
                reason=reason,
                speedup=_speedup(values[0], base_sps),
            )
        )

    by_number = {t.number: t for t in finished}
    configurations = tuple(
        ParetoRow(
            number=p.number,
            throughput_sps=float(p.throughput_sps or 0.0),
            val_metric=float(p.val_metric or 0.0),
            peak_memory_bytes=float(p.peak_memory_bytes or 0.0),
            step_time_s=_attr_float(by_number[p.number], "step_time_s"),
            compile_s=_attr_float(by_number[p.number], "compile_s"),
            speedup=p.speedup,
            params=p.params,
            baseline=p.baseline,
        )
        for p in points
        if p.status == FEASIBLE and p.measured
    )
    front_numbers = {p.number for p in points if p.pareto}
    pareto_rows = sorted(
        (r for r in configurations if r.number in front_numbers),
        key=lambda r: (-r.throughput_sps, r.number),
    )

    notes: list[str] = []
    importance_values: dict[str, dict[str, float]] = {}
    if importances:
        importance_values, importance_notes = param_importances(finished, objectives=objectives)
        notes.extend(importance_notes)
    baseline = None
    if base_trial is not None and base_status is not None:
        baseline = Baseline(
            number=base_trial.number,
            status=base_status[0],
            throughput_sps=base_sps,
            params=dict(base_trial.params),
            reason=base_status[2],
        )
        if base_sps is None:
            notes.append(
                f"the baseline (trial {base_trial.number}) has no measurement: {base_status[2]}"
            )
    else:
        notes.append("this study has no finished baseline trial; speedups are not available")
    if simulated is None:
        simulated = any(t.user_attrs.get("simulated") for t in finished)
    if knob_names is None:
        model = {k: None for t in finished for k in model_knobs(t.params)}
        knob_names = [*model, *KNOB_COLUMNS]
    present = [k for k in knob_names if any(k in t.params for t in finished)]
    extra = sorted({k for t in finished for k in t.params} - set(present))
    return ReportData(
        study_name=study_name,
        space_name=space_name,
        device_name=device_name,
        simulated=bool(simulated),
        generated_at=now or dt.datetime.now(dt.timezone.utc),
        knob_names=tuple(present + extra),
        points=tuple(points),
        pareto=tuple(pareto_rows),
        baseline=baseline,
        hypervolume=hypervolume_history(points, objectives[METRIC_INDEX]),
        importances=importance_values,
        hardware=tuple(hardware),
        running=running,
        notes=tuple(notes),
        configurations=configurations,
        verification=verification,
        storage_url=storage_url,
        objectives=objectives,
    )


def _hardware_rows(
    record: StudyRecord | None, study_attrs: Mapping[str, Any]
) -> tuple[tuple[str, str], ...]:
    hardware: HardwareFingerprint | None = record.hardware if record is not None else None
    if hardware is not None:
        return tuple(hardware.rows())
    rows = [
        ("device", f"{study_attrs.get('device_kind', '?')}: {study_attrs.get('device_name', '?')}"),
        ("simulated", "yes: SIMULATED" if study_attrs.get("simulated") else "no"),
        ("fingerprint", "not recorded (study made before autotune's results tables)"),
    ]
    return tuple(rows)


def gather_report(
    study: optuna.Study,
    results: ResultsStore | None = None,
    *,
    trials: Sequence[FrozenTrial] | None = None,
    importances: bool = True,
) -> ReportData:
    """Gather a study's :class:`ReportData`: its trials, our record of it, and its newest
    finished verification (the claim every output makes).

    Args:
        study: the Optuna study.
        results: the results tables of its database (our record of the study, its
            verifications); None: neither (the study then reads as not verified).
        trials: the study's trials, if the caller already read them.
        importances: compute parameter importances.

    Raises:
        ConfigError: the study does not have autotune's three objectives.
        StorageError: the results tables cannot be read.
    """
    if len(study.directions) != len(OBJECTIVES):
        raise ConfigError(
            f"study={study.study_name}: not an autotune study (it has "
            f"{len(study.directions)} objectives; autotune's have {len(OBJECTIVES)})"
        )
    attrs: Mapping[str, Any] = study.user_attrs.get("autotune") or {}
    space = attrs.get("space") or {}
    if trials is None:
        trials = study.get_trials(deepcopy=False)
    record = results.study(study.study_name) if results is not None else None
    objectives = objectives_of_study(study)
    if study.metric_names is None and record is not None:  # our record names the metric
        objectives = study_objectives(record.metric_name, record.metric_direction)
    verification = load_verification(study, results) if results is not None else None
    simulated = record.simulated if record is not None else attrs.get("simulated")
    return gather_from_trials(
        study.study_name,
        trials,
        space_name=str(record.space_name if record else space.get("name", "")),
        device_name=str(
            record.hardware.device_name
            if record is not None and record.hardware is not None
            else attrs.get("device_name", "")
        ),
        simulated=None if simulated is None else bool(simulated),
        hardware=_hardware_rows(record, attrs),
        importances=importances,
        verification=verification,
        storage_url=results.url if results is not None else "",
        objectives=objectives,
    )
