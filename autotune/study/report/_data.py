"""Gathering a study's report data: finished trials in, one :class:`ReportData` out.

Everything here is pure (no database, no Plotly) apart from the parameter importances
(:func:`~autotune.study.report._importances.param_importances`), which run Optuna's evaluator on an in-memory copy
of the trials with a fixed seed. The figures and pages are drawn from a :class:`ReportData` and
nothing else; tests check the gathered data. The parts live beside it: trial points, rows and
the Pareto front (``_points``), the hypervolume (``_hypervolume``), importances
(``_importances``) and the shared words (``_text``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.core.exceptions import ConfigError
from autotune.study.baseline import baseline_trial
from autotune.study.objectives import (
    METRIC_INDEX,
    OBJECTIVES,
    TIME_TO_ACCURACY,
    Objective,
    ObjectiveMode,
    objective_mode,
    objectives_of_study,
    study_metric,
    study_objectives,
    study_target,
)
from autotune.study.report._hypervolume import HypervolumePoint, hypervolume_history
from autotune.study.report._importances import param_importances
from autotune.study.report._points import (
    FEASIBLE,
    Baseline,
    ParetoRow,
    TrialPoint,
    classify,
    pareto_numbers,
    pareto_row,
    speedup,
    times_sooner,
)
from autotune.study.report._text import model_knobs, not_verified_line
from autotune.study.storage import FINISHED_STATES, ResultsStore
from autotune.study.storage.records import KNOB_COLUMNS, HardwareFingerprint, StudyRecord
from autotune.study.trial_result import StudyAttributes, TrialResult
from autotune.study.verification import CandidateVerdict, VerificationSummary, load_verification

__all__ = ["ReportData", "gather_from_trials", "gather_report"]


@dataclass(frozen=True)
class ReportData:
    """Everything a report or the dashboard shows about one study.

    The claim every output makes is :attr:`verification`'s (the newest finished verification
    of the study, :func:`autotune.study.verification.load_verification`), said by
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
        pareto: the Pareto-optimal configurations, fastest first (single-trial figures; in a
            time-to-accuracy study, soonest to the target first).
        baseline: the baseline trial, or None when the study has none finished.
        hypervolume: the hypervolume after each finished trial.
        importances: per objective name, parameter importances (sum 1), largest first.
        hardware: ``(label, value)`` rows of the hardware fingerprint.
        objectives: the study's objectives (:func:`autotune.study.objectives.objectives_of_study`):
            throughput, the validation metric (its name, direction and format), peak memory;
            or, in a time-to-accuracy study, the time to target and peak memory.
        running: trials running now (the dashboard shows it).
        notes: lines worth saying (e.g. why importances are missing).
        configurations: every feasible, measured trial as a row, by trial number (single-trial
            figures; :attr:`pareto` is the Pareto-optimal part of them).
        verification: the newest finished verification, or None when there is none.
        storage_url: the study's storage URL ("" when unknown), for the commands it names.
        study_metric: the study's validation metric when it is not an objective (a
            time-to-accuracy study's target metric; :func:`autotune.study.objectives.study_metric`);
            None in a throughput study (:attr:`metric` is then the objective).
        target: a time-to-accuracy study's target value of :attr:`metric` (accuracy in
            [0, 1]); None in a throughput study.
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
    study_metric: Objective | None = None
    target: float | None = None

    @property
    def objective_mode(self) -> ObjectiveMode:
        """``throughput`` or ``time_to_accuracy`` (:func:`autotune.study.objectives.objective_mode`)."""
        return objective_mode(self.objectives)

    @property
    def time_to_accuracy(self) -> bool:
        """A time-to-accuracy study (objectives: time to target, peak memory)."""
        return self.objective_mode == "time_to_accuracy"

    @property
    def metric(self) -> Objective:
        """The study's validation metric (``accuracy``, ``val_loss``, ...): an objective in a
        throughput study, the target's metric in a time-to-accuracy study."""
        if not self.time_to_accuracy:
            return self.objectives[METRIC_INDEX]
        return self.study_metric or study_objectives()[METRIC_INDEX]

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
        (:meth:`~autotune.study.verification.VerificationSummary.headline`: the recommendation with
        its rounds and 95 % interval, or that nothing qualifies), or :func:`not_verified_line`.
        """
        if self.verification is not None:
            return self.verification.headline()
        return not_verified_line(self.study_name, self.storage_url or None)

    def configuration(self, number: int) -> ParetoRow | None:
        """The row of feasible, measured trial ``number``, or None."""
        return next((r for r in self.configurations if r.number == number), None)


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
    metric: Objective | None = None,
    target: float | None = None,
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
            maximized); two whose first is ``time_to_accuracy_s`` make a time-to-accuracy
            study's data.
        metric: a time-to-accuracy study's target metric (default: accuracy, maximized).
        target: a time-to-accuracy study's target value.

    Returns:
        The :class:`ReportData`.
    """
    finished = sorted((t for t in trials if t.state in FINISHED_STATES), key=lambda t: t.number)
    running = sum(t.state == TrialState.RUNNING for t in trials)
    objectives = tuple(objectives)
    tta = objective_mode(objectives) == "time_to_accuracy"
    base_trial = baseline_trial(finished)
    results = {t.number: TrialResult.from_trial(t) for t in finished}
    base = results[base_trial.number] if base_trial is not None else None
    base_status = classify(base) if base is not None else None
    base_measured = base is not None and base_status is not None and base_status[1]
    base_sps = base.throughput_sps if base_measured and base else None
    base_time_s = base.time_to_accuracy_s if tta and base_measured and base else None

    classified = {number: classify(result) for number, result in results.items()}
    feasible_values = {
        t.number: list(t.values) for t in finished if classified[t.number][0] == FEASIBLE
    }
    front = pareto_numbers(feasible_values, objectives)

    points = [
        _point(results[n], classified[n], n in front, tta, base_sps, base_time_s) for n in results
    ]

    configurations = tuple(
        pareto_row(results[n], base_sps, baseline_time_s=base_time_s)
        for n in results
        if classified[n][0] == FEASIBLE and classified[n][1]
    )
    front_numbers = {p.number for p in points if p.pareto}
    pareto_rows = sorted(
        (r for r in configurations if r.number in front_numbers),
        key=(
            (lambda r: (r.time_to_accuracy_s or 0.0, r.peak_memory_bytes, r.number))
            if tta
            else (lambda r: (-r.throughput_sps, r.number))
        ),
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
            time_to_accuracy_s=base_time_s,
        )
        if base_sps is None:
            notes.append(
                f"the baseline (trial {base_trial.number}) has no measurement: {base_status[2]}"
            )
        elif tta and base_time_s is None:
            notes.append(
                f"the baseline (trial {base_trial.number}) did not reach the target: "
                "times sooner than the baseline are not available"
            )
    else:
        notes.append("this study has no finished baseline trial; speedups are not available")
    if simulated is None:
        simulated = any(result.simulated for result in results.values())
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
        hypervolume=hypervolume_history(
            points, objectives[METRIC_INDEX] if not tta else None, objective_mode(objectives)
        ),
        importances=importance_values,
        hardware=tuple(hardware),
        running=running,
        notes=tuple(notes),
        configurations=configurations,
        verification=verification,
        storage_url=storage_url,
        objectives=objectives,
        study_metric=metric if tta else None,
        target=target if tta else None,
    )


def _point(
    trial: TrialResult,
    classified: tuple[str, bool, str],
    pareto: bool,
    tta: bool,
    base_sps: float | None,
    base_time_s: float | None,
) -> TrialPoint:
    """A finished trial's :class:`TrialPoint`: its objective values when measured (in a
    time-to-accuracy study, also its attributes' throughput, metric and learning curve)."""
    status, measured, reason = classified
    point = TrialPoint(
        number=trial.number,
        status=status,
        measured=measured,
        pareto=pareto,
        baseline=trial.baseline,
        throughput_sps=None,
        val_metric=None,
        peak_memory_bytes=None,
        params=dict(trial.params),
        reason=reason,
        speedup=None,
    )
    if not measured or trial.values is None:
        return point
    if not tta:
        throughput_sps, val_metric, peak_memory_bytes = (float(v) for v in trial.values)
        return point._replace(
            throughput_sps=throughput_sps,
            val_metric=val_metric,
            peak_memory_bytes=peak_memory_bytes,
            speedup=speedup(throughput_sps, base_sps),
        )
    reached = trial.target_reached
    time_s = trial.time_to_accuracy_s if reached is not False else None
    if time_s is None and reached is True:
        time_s = float(trial.values[0])
    return point._replace(
        throughput_sps=trial.throughput_sps,
        val_metric=trial.val_metric,
        peak_memory_bytes=float(trial.values[1]),
        speedup=times_sooner(time_s, base_time_s),
        time_to_accuracy_s=time_s,
        target_reached=reached,
        curve=trial.metric_curve,
        trained_s=float(trial.values[0]),
    )


def _hardware_rows(
    record: StudyRecord | None, study_attrs: StudyAttributes
) -> tuple[tuple[str, str], ...]:
    hardware: HardwareFingerprint | None = record.hardware if record is not None else None
    if hardware is not None:
        return tuple(hardware.rows())
    rows = [
        ("device", f"{study_attrs.device_kind or '?'}: {study_attrs.device_name or '?'}"),
        ("simulated", "yes: SIMULATED" if study_attrs.simulated else "no"),
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
        ConfigError: the study does not have autotune's objectives (three, or the two of a
            time-to-accuracy study: ``time_to_accuracy_s`` and peak memory).
        StorageError: the results tables cannot be read.
    """
    names = list(study.metric_names or [])
    tta = len(study.directions) == 2 and names[:1] == [TIME_TO_ACCURACY.name]
    if len(study.directions) != len(OBJECTIVES) and not tta:
        raise ConfigError(
            f"study={study.study_name}: not an autotune study (it has "
            f"{len(study.directions)} objectives; autotune's have {len(OBJECTIVES)}, or 2 "
            "in a time-to-accuracy study: time_to_accuracy_s and peak_memory_bytes)"
        )
    attrs = StudyAttributes.from_study(study)
    if trials is None:
        trials = study.get_trials(deepcopy=False)
    record = results.study(study.study_name) if results is not None else None
    objectives = objectives_of_study(study)
    if not tta and study.metric_names is None and record is not None:  # our record names it
        objectives = study_objectives(record.metric_name, record.metric_direction)
    verification = load_verification(study, results) if results is not None else None
    simulated = record.simulated if record is not None else attrs.simulated
    return gather_from_trials(
        study.study_name,
        trials,
        space_name=str(record.space_name if record else attrs.space.get("name", "")),
        device_name=str(
            record.hardware.device_name
            if record is not None and record.hardware is not None
            else attrs.device_name or ""
        ),
        simulated=None if simulated is None else bool(simulated),
        hardware=_hardware_rows(record, attrs),
        importances=importances,
        verification=verification,
        storage_url=results.url if results is not None else "",
        objectives=objectives,
        metric=study_metric(study) if tta else None,
        target=study_target(study) if tta else None,
    )
