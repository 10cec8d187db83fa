"""``autotune ls``: every study in a database with its trial counts, hardware and verdict."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import optuna

from autotune.core.exceptions import ConfigError
from autotune.study.report import FEASIBLE, gather_report
from autotune.study.storage import ResultsStore, open_existing_storage, study_names
from autotune.study.verification import ENDING_WORDS

__all__ = ["StudySummary", "list_studies"]


@dataclass(frozen=True)
class StudySummary:
    """One line of ``autotune ls``.

    Attributes:
        study_name: the Optuna study name.
        space_name: the search space's name ("" when unknown).
        hardware: the device name (with "(simulated)" for the mock device).
        simulated: the figures are SIMULATED.
        finished: finished trials (complete or never launched).
        total: every trial, running and failed-interrupted ones included.
        feasible: feasible trials.
        pareto: Pareto-optimal trials.
        best_throughput_sps: the best feasible throughput of a single trial (None without
            one).
        verified_speedup: the verified recommendation's speedup over the baseline (None: not
            verified, or no recommendation).
        recommended_trial: the verified recommendation's trial number, or None.
        accuracy: the recommendation's accuracy verdict
            (:meth:`~autotune.study.verification.VerificationSummary.accuracy_text`), "" without
            one.
        verification: the ending (:data:`autotune.study.verification.ENDING_WORDS`:
            ``"recommended"``, ``"verified: not faster"``, ``"nothing to verify"``,
            ``"incomplete"``) or ``"not verified"``.
        created: when the study was created (its first trial started), or None.
        metric: the validation metric and its direction (``accuracy (max)``,
            ``val_loss (min)``); a time-to-accuracy study's says its target
            (``time to accuracy >= 95.0%``).
        objective: ``throughput`` or ``time_to_accuracy`` (the study's objective mode).
        best_time_to_accuracy_s: time-to-accuracy studies: the shortest single-trial time to
            the target of a feasible trial (None without one, and in throughput studies).
        target: time-to-accuracy studies: the target as shown (``95.0%``), "" otherwise.
    """

    study_name: str
    space_name: str
    hardware: str
    simulated: bool
    finished: int
    total: int
    feasible: int
    pareto: int
    best_throughput_sps: float | None
    verified_speedup: float | None
    recommended_trial: int | None
    verification: str
    created: dt.datetime | None
    metric: str = ""
    objective: str = "throughput"
    best_time_to_accuracy_s: float | None = None
    target: str = ""
    accuracy: str = ""


def list_studies(storage: str) -> list[StudySummary]:
    """Every study in the database with its trial counts and hardware, oldest first.

    Raises:
        StorageError: the database does not exist or cannot be read.
    """
    rdb = open_existing_storage(storage)
    summaries: list[StudySummary] = []
    with ResultsStore.open(storage, create=False) as results:
        for name in study_names(rdb):
            study = optuna.load_study(study_name=name, storage=rdb)
            trials = study.get_trials(deepcopy=False)
            starts = [t.datetime_start for t in trials if t.datetime_start is not None]
            try:
                data = gather_report(study, results, trials=trials, importances=False)
            except ConfigError:  # another tool's study in the same database
                summaries.append(
                    StudySummary(
                        study_name=name,
                        space_name="(not an autotune study)",
                        hardware="",
                        simulated=False,
                        finished=sum(t.state.is_finished() for t in trials),
                        total=len(trials),
                        feasible=0,
                        pareto=0,
                        best_throughput_sps=None,
                        verified_speedup=None,
                        recommended_trial=None,
                        verification="not verified",
                        created=min(starts) if starts else None,
                    )
                )
                continue
            feasible = [p.throughput_sps for p in data.points if p.status == FEASIBLE]
            times = [
                p.time_to_accuracy_s
                for p in data.points
                if p.status == FEASIBLE and p.time_to_accuracy_s is not None
            ]
            tta = data.time_to_accuracy
            target = data.metric.format(data.target, 1) if tta and data.target is not None else ""
            metric = f"{data.metric.name} ({data.metric.direction[:3]})"
            if tta:
                better = ">=" if data.metric.maximized else "<="
                metric = f"time to {data.metric.name} {better} {target}".rstrip()
            rec = data.recommended
            summaries.append(
                StudySummary(
                    study_name=name,
                    space_name=data.space_name,
                    hardware=data.device_name or "unknown",
                    simulated=data.simulated,
                    finished=data.finished,
                    total=len(trials),
                    feasible=len(feasible),
                    pareto=len(data.pareto),
                    best_throughput_sps=max((v for v in feasible if v is not None), default=None),
                    verified_speedup=rec.speedup if rec is not None else None,
                    recommended_trial=rec.trial_number if rec is not None else None,
                    verification=(
                        "not verified"
                        if data.verification is None
                        else ENDING_WORDS[data.verification.ending]
                    ),
                    created=min(starts) if starts else None,
                    metric=metric,
                    objective=data.objective_mode,
                    best_time_to_accuracy_s=min(times, default=None),
                    target=target,
                    accuracy=(
                        data.verification.accuracy_text() if data.verification is not None else ""
                    ),
                )
            )
    rdb.remove_session()
    return summaries
