"""The verdict of a stored study: its newest finished verification, summarized with the
study's knobs, simulated flag and metric."""

from __future__ import annotations

from dataclasses import replace

import optuna

from autotune.study.objectives import objective_mode, objectives_of_study, study_target
from autotune.study.storage import FINISHED_STATES, ResultsStore
from autotune.study.storage.records import VerificationRun
from autotune.study.trial_result import StudyAttributes, TrialResult
from autotune.study.verification._finalists import closest_trial
from autotune.study.verification._metric import DEFAULT_SCREEN_Z, study_metric
from autotune.study.verification._summary import (
    DEFAULTS_WORDS,
    YOUR_BASELINE_WORDS,
    VerificationSummary,
    summarize_verification,
)

__all__ = ["load_verification", "summarize_for_study"]


def load_verification(study: optuna.Study, results: ResultsStore) -> VerificationSummary | None:
    """The newest finished verification of ``study``, summarized; None when it has none.

    This is what every output (report, dashboard, ``best``, export) shows as its claim.

    Raises:
        StorageError: the results tables cannot be read.
    """
    run = results.latest_verification(study.study_name, complete=True)
    return summarize_for_study(study, run) if run is not None else None


def summarize_for_study(study: optuna.Study, run: VerificationRun) -> VerificationSummary:
    """:func:`summarize_verification` of ``run`` with the study's knobs, simulated flag,
    validation metric (:func:`autotune.study.objectives.objectives_of_study`) and, in a
    time-to-accuracy study, its mode, target and the baseline trial's time to accuracy; with
    no finalist, the search trial that came closest to the screen. The baseline is "your
    baseline" where the study's space named one (``baseline:``), else "PyTorch's defaults"."""
    recorded = StudyAttributes.from_study(study)
    simulated = bool(recorded.simulated)
    named = recorded.names_baseline
    trials = study.get_trials(deepcopy=False)
    metric = study_metric(study)
    params = {t.number: t.params for t in trials}
    objective = objective_mode(objectives_of_study(study))
    base = next(
        (TrialResult.from_trial(t) for t in trials if t.number == run.plan.baseline_trial),
        None,
    )
    searched = base.time_to_accuracy_s if base is not None else None
    closest = (
        closest_trial(
            [t for t in trials if t.state in FINISHED_STATES],
            run.plan.accuracy_tolerance_pt,
            metric,
            run.plan.screen_z if run.plan.screen_z is not None else DEFAULT_SCREEN_Z,
        )
        if objective == "throughput" and not run.plan.candidates
        else None
    )
    summary = summarize_verification(
        run,
        params,
        simulated=simulated,
        metric=metric,
        closest=closest,
        baseline_words=YOUR_BASELINE_WORDS if named else DEFAULTS_WORDS,
        objective=objective,
        target=study_target(study),
        search_baseline_time_to_accuracy_s=(
            float(searched) if objective == "time_to_accuracy" and searched is not None else None
        ),
    )
    # Short evidence: every trained run stopped where the baseline trial did.
    short = base.evidence_steps_text if base is not None else ""
    return replace(summary, short_evidence=short) if short else summary
