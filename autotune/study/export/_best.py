"""The Pareto-optimal configurations of a study, ranked by one objective (``autotune best``),
with the full configuration of each feasible trial and the study's verified verdict.

What it claims is the newest finished verification's recommendation, the same one the report
and the dashboard show (:attr:`autotune.study.report.ReportData.verification`); the Pareto rows are
single-trial figures.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna

from autotune.core.exceptions import ConfigError
from autotune.study.objectives import Objective, ObjectiveMode
from autotune.study.report import Baseline, ParetoRow, gather_report
from autotune.study.storage import ResultsStore, TrialRecord, load_existing_study
from autotune.study.trial_result import TrialResult
from autotune.study.verification import ACCURACY, VerificationSummary

__all__ = [
    "LOADER_HOME_ATTR",
    "OBJECTIVE_CHOICES",
    "BestConfigs",
    "best_configurations",
    "sort_pareto",
]

#: ``--objective`` choices and the figure each ranks by (and whether larger is better).
#: ``accuracy`` (or ``metric``) is the study's validation metric, whatever its name; it ranks
#: in the metric's own direction (a ``val_loss``: lower first), see :func:`sort_pareto`.
#: ``time`` (time to target, shortest first) is for time-to-accuracy studies only, and their
#: default; there ``accuracy`` ranks by the metric reached and ``throughput`` by the
#: throughput each trial recorded (an extra figure, not an objective). ``goodput`` ranks a
#: global-batch change by throughput x E(B) and any other row by its throughput
#: (:attr:`autotune.study.report.ParetoRow.goodput_sps`).
OBJECTIVE_CHOICES: dict[str, tuple[str, bool]] = {
    "throughput": ("throughput_sps", True),
    "goodput": ("goodput_sps", True),
    "accuracy": ("val_metric", True),
    "metric": ("val_metric", True),
    "memory": ("peak_memory_bytes", False),
    "time": ("time_to_accuracy_s", False),
}


#: The user attribute in which the Lightning door records the class whose ``train_dataloader``
#: built the training loader (``LightningDataModule`` or ``LightningModule``).
LOADER_HOME_ATTR = "train_loader_in"


@dataclass(frozen=True)
class BestConfigs:
    """A study's verified verdict and its Pareto-optimal configurations, ranked by one
    objective.

    Attributes:
        study_name: the Optuna study name.
        storage: the storage URL.
        objective: ``throughput``, ``accuracy`` (the study's metric), ``memory`` or, in a
            time-to-accuracy study, ``time`` (orders :attr:`rows` only).
        simulated: the figures come from the mock device (SIMULATED).
        device_name: the device the trials ran on.
        rows: the Pareto-optimal configurations, best first by ``objective`` (single-trial
            figures).
        baseline: the study's baseline, or None.
        configs: the full trial configuration by trial number (knobs, training, data), for
            every feasible, measured trial.
        hardware: ``(label, value)`` rows of the hardware fingerprint.
        verification: the newest finished verification (None: not verified).
        verdict: the one-line verdict every output shows
            (:meth:`autotune.study.report.ReportData.verdict_line`).
        configurations: every feasible, measured trial by number (single-trial figures).
        metric: the study's validation metric (name, direction, display format).
        objective_mode: ``throughput`` or ``time_to_accuracy`` (the study's objectives).
        target: a time-to-accuracy study's target value of :attr:`metric`, None otherwise.
        lr_scales: by trial number, the factor a door's trial multiplied the user's own
            learning rate by (its ``lr_scale`` attribute; the loop, Hugging Face and Lightning
            doors), for :func:`~autotune.study.export.export_diff`.
        loader_homes: by trial number, where a Lightning script's training loader lives
            (:data:`LOADER_HOME_ATTR`), for the same.
    """

    study_name: str
    storage: str
    objective: str
    simulated: bool
    device_name: str
    rows: tuple[ParetoRow, ...]
    baseline: Baseline | None
    configs: Mapping[int, Mapping[str, Any]]
    hardware: tuple[tuple[str, str], ...]
    verification: VerificationSummary | None = None
    verdict: str = ""
    configurations: Mapping[int, ParetoRow] = dataclasses.field(default_factory=dict)
    metric: Objective = ACCURACY
    objective_mode: ObjectiveMode = "throughput"
    target: float | None = None
    lr_scales: Mapping[int, float] = field(default_factory=dict)
    loader_homes: Mapping[int, str] = field(default_factory=dict)

    @property
    def recommended_trial(self) -> int | None:
        """The verified recommendation's trial number, or None."""
        rec = self.verification.recommended if self.verification is not None else None
        return rec.trial_number if rec is not None else None


def _check_objective(objective: str) -> tuple[str, bool]:
    if objective not in OBJECTIVE_CHOICES:
        raise ConfigError(
            f"--objective {objective}: unknown objective (known: {', '.join(OBJECTIVE_CHOICES)})"
        )
    return OBJECTIVE_CHOICES[objective]


def sort_pareto(
    rows: Sequence[ParetoRow], objective: str, metric: Objective = ACCURACY
) -> list[ParetoRow]:
    """Pareto rows best first by ``objective`` (ties: faster, or sooner to the target in a
    time-to-accuracy study, then lower trial number).

    Args:
        rows: the rows to sort.
        objective: an :data:`OBJECTIVE_CHOICES` key.
        metric: the study's validation metric: ``accuracy``/``metric`` rank in its direction
            (default: accuracy, higher first).

    Raises:
        ConfigError: an unknown objective.
    """
    name, larger_is_better = _check_objective(objective)
    if name == "val_metric":
        larger_is_better = metric.maximized
    sign = -1.0 if larger_is_better else 1.0

    def key(row: ParetoRow) -> tuple[float, float, int]:
        value = getattr(row, name)
        first = sign * value if value is not None else math.inf  # no time to target: last
        if row.time_to_accuracy_s is not None:  # ties: sooner to the target
            return first, row.time_to_accuracy_s, row.number
        return first, -row.throughput_sps, row.number

    return sorted(rows, key=key)


def _full_configs(
    study: optuna.Study, records: Sequence[TrialRecord], numbers: set[int]
) -> dict[int, dict[str, Any]]:
    """Full configurations from the results rows; where a trial has no row (its study's
    callback did not write one), the configuration it stored as it ran
    (:data:`~autotune.study.trial_result.TRIAL_CONFIG_ATTR`)."""
    configs = {
        r.trial_number: json.loads(r.config_json) for r in records if r.trial_number in numbers
    }
    for trial in study.get_trials(deepcopy=False):
        if trial.number in numbers and trial.number not in configs:
            stored = TrialResult.from_trial(trial).trial_config  # the trial's own record
            if stored is not None:
                configs[trial.number] = dict(stored)
    return configs


def best_configurations(study_name: str, storage: str, objective: str | None = None) -> BestConfigs:
    """The verified verdict of ``study_name`` and its Pareto-optimal configurations, best
    first by ``objective``.

    Args:
        study_name: the Optuna study name.
        storage: the storage URL.
        objective: an :data:`OBJECTIVE_CHOICES` key; None: ``time`` (time to target) in a
            time-to-accuracy study, ``throughput`` otherwise.

    Raises:
        ConfigError: an unknown objective, or ``time`` for a throughput study.
        StudyNotFoundError: no such study.
        StorageError: the database cannot be read.
    """
    if objective is not None:
        _check_objective(objective)
    study = load_existing_study(study_name, storage)
    with ResultsStore.open(storage, create=False) as results:
        data = gather_report(study, results, importances=False)
        records = results.trials(study_name)
    if objective is None:
        objective = "time" if data.time_to_accuracy else "throughput"
    if objective == "time" and not data.time_to_accuracy:
        raise ConfigError(
            f"--objective time: study={study_name} is a throughput study (no time to target); "
            "use throughput, accuracy or memory"
        )
    rows = sort_pareto(data.pareto, objective, data.metric)
    configurations = {r.number: r for r in data.configurations}
    return BestConfigs(
        study_name=study_name,
        storage=storage,
        objective=objective,
        simulated=data.simulated,
        device_name=data.device_name,
        rows=tuple(rows),
        baseline=data.baseline,
        configs=_full_configs(study, records, set(configurations)),
        hardware=data.hardware,
        verification=data.verification,
        verdict=data.verdict_line(),
        configurations=configurations,
        metric=data.metric,
        objective_mode=data.objective_mode,
        target=data.target,
        lr_scales={
            result.number: result.lr_scale
            for result in map(TrialResult.from_trial, study.get_trials(deepcopy=False))
            if result.lr_scale is not None
        },
        loader_homes={
            t.number: str(t.user_attrs[LOADER_HOME_ATTR])
            for t in study.get_trials(deepcopy=False)
            if LOADER_HOME_ATTR in t.user_attrs
        },
    )
