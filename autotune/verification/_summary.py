"""The verdict: each configuration's verified figures over the rounds, and the recommendation.

Two modes, as the study's (:func:`autotune.objectives.objective_mode`):

- ``throughput``: a candidate qualifies when every round measured it, its mean validation
  metric is within the tolerance of the baseline's, and the 95 % confidence interval of its
  paired speedup (throughput over the same round's baseline) lies above 1.0.
- ``time_to_accuracy``: a candidate qualifies when every round measured it *and* it reached
  the target in every round (the target is the quality bar: no tolerance applies), and the
  95 % confidence interval of how many times sooner it got there (the baseline's time to
  accuracy over its own, per round) lies above 1.0. Its time is the MLPerf-style aggregate
  over rounds (:func:`autotune.verification.mlperf_time_to_accuracy_s`).

The time-to-accuracy verdicts and headline are in :mod:`._to_target`; both modes' verdicts are
:class:`CandidateVerdict` (:mod:`._verdict`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.objectives import Objective, ObjectiveMode
from autotune.storage.records import VerificationPlan, VerificationRecord, VerificationRun
from autotune.verification._metric import (
    ACCURACY,
    nothing_qualifies,
    tolerance_text,
    within_tolerance,
)
from autotune.verification._speedup import speedup_ci95
from autotune.verification._to_target import to_target_headline, to_target_verdict
from autotune.verification._verdict import CandidateVerdict, changed_knobs

__all__ = ["VerificationSummary", "summarize_verification"]


@dataclass(frozen=True)
class VerificationSummary:
    """What one verification of a study found; every output shows this and nothing else as
    its claim.

    Attributes:
        study_name: the Optuna study name.
        number: the verification's number within the study (1, 2, ...).
        rounds: rounds planned.
        seeds: the training seed of each round.
        accuracy_tolerance_pt: accuracy points a candidate may give up (for another metric,
            percent of the baseline's value: :func:`metric_allowance`).
        complete: every planned run has a row.
        runs_done: planned runs with a row.
        runs_planned: (1 + candidates) x rounds.
        simulated: the figures come from the mock device (SIMULATED).
        baseline: the baseline's verified figures.
        candidates: every finalist's verdict, in run order.
        recommended: the fastest qualifying candidate (in a time-to-accuracy verification:
            the one with the highest ``speedup``, i.e. verifiably soonest), or None.
        metric: the study's validation metric (name, direction, display format).
        objective: the study's mode, ``throughput`` or ``time_to_accuracy``.
        target: the quality target of a time-to-accuracy study (a value of ``metric``);
            None in a throughput study.
        search_baseline_time_to_accuracy_s: the baseline trial's time to accuracy in the
            search (time-to-accuracy studies), what the headline states when no finalist was
            re-run; None when unknown or missed.
    """

    study_name: str
    number: int
    rounds: int
    seeds: tuple[int, ...]
    accuracy_tolerance_pt: float
    complete: bool
    runs_done: int
    runs_planned: int
    simulated: bool
    baseline: CandidateVerdict
    candidates: tuple[CandidateVerdict, ...]
    recommended: CandidateVerdict | None
    metric: Objective = ACCURACY
    objective: ObjectiveMode = "throughput"
    target: float | None = None
    search_baseline_time_to_accuracy_s: float | None = None

    @property
    def is_time_to_accuracy(self) -> bool:
        """A time-to-accuracy verification (``objective == "time_to_accuracy"``)."""
        return self.objective == "time_to_accuracy"

    def target_text(self) -> str:
        """The target as the headline says it: ``98.0 %`` for accuracy, ``val_loss 1.2``
        otherwise; ``the target`` when the study recorded none."""
        if self.target is None:
            return "the target"
        if self.metric.is_accuracy:
            return f"{100 * self.target:.1f} %"
        return f"{self.metric.name} {self.metric.format(self.target, 1)}"

    def tolerance_text(self) -> str:
        """The tolerance in words (``0.5 pt``; ``0.5 % of the baseline's val_loss``)."""
        return tolerance_text(self.metric, self.accuracy_tolerance_pt)

    def metric_text(self, value: float) -> str:
        """A verified metric value as the headline says it: ``98.42 % accuracy`` for
        accuracy, ``val_loss 1.234`` otherwise."""
        if self.metric.is_accuracy:
            return f"{100 * value:.2f} % accuracy"
        return f"{self.metric.name} {self.metric.format(value, 1)}"

    def headline(self) -> str:
        """The one-line verdict: the recommendation, or why there is none."""
        prefix = "SIMULATED (mock device): " if self.simulated else ""
        if not self.complete:
            return (
                f"{prefix}verification {self.number} is incomplete ({self.runs_done} of "
                f"{self.runs_planned} runs); `autotune verify {self.study_name}` finishes it"
            )
        if self.is_time_to_accuracy:
            return prefix + to_target_headline(
                self.target_text(),
                self.rounds,
                self.baseline,
                self.recommended,
                candidates_run=bool(self.candidates),
                searched=self.search_baseline_time_to_accuracy_s,
            )
        rec = self.recommended
        nothing = nothing_qualifies(self.metric)
        if rec is None and not self.candidates:
            within = (
                f"{self.accuracy_tolerance_pt:g} pt of their accuracy"
                if self.metric.is_accuracy
                else f"{self.accuracy_tolerance_pt:g} % of their {self.metric.name}"
            )
            return (
                f"{prefix}{nothing} (no trial of the search was faster than the "
                f"defaults within {within})"
            )
        if rec is None:
            return f"{prefix}{nothing} (verified over {self.rounds} rounds)"
        assert rec.speedup is not None and rec.speedup_ci95 is not None
        assert rec.val_metric_mean is not None and self.baseline.val_metric_mean is not None
        low, high = rec.speedup_ci95
        memory = (
            f", peak memory {rec.peak_memory_max_bytes / (1 << 20):,.0f} MiB"
            if rec.peak_memory_max_bytes is not None
            else ""
        )
        base = self.baseline.val_metric_mean
        defaults = f"{100 * base:.2f} %" if self.metric.is_accuracy else self.metric.format(base, 1)
        return (
            f"{prefix}{rec.speedup:.2f}x faster than your defaults (verified over "
            f"{self.rounds} rounds, 95 % CI {low:.2f}-{high:.2f}x) at "
            f"{self.metric_text(rec.val_metric_mean)} (defaults {defaults}){memory}: trial "
            f"{rec.trial_number}, {rec.changes_text()}"
        )


def _verdict(
    number: int,
    rows: Sequence[VerificationRecord],
    base_rows: Mapping[int, VerificationRecord],
    params: Mapping[str, Any],
    base_params: Mapping[str, Any],
    base_metric_mean: float | None,
    plan: VerificationPlan,
    complete: bool,
    metric: Objective,
) -> CandidateVerdict:
    is_base = number == plan.baseline_trial
    measured = [r for r in rows if r.failure is None and r.throughput_sps is not None]
    failures = tuple(f"round {r.round_index + 1}: {r.failure}" for r in rows if r.failure)
    metrics = [r.val_metric for r in measured if r.val_metric is not None]
    memories = [r.peak_memory_bytes for r in measured if r.peak_memory_bytes is not None]
    ratios = [
        r.throughput_sps / base.throughput_sps
        for r in measured
        if r.throughput_sps is not None
        and (base := base_rows.get(r.round_index)) is not None
        and base.throughput_sps
    ]
    speedup, ci = speedup_ci95(ratios) if ratios and not is_base else (None, None)
    metric_mean = statistics.fmean(metrics) if metrics else None
    tolerance = plan.accuracy_tolerance_pt
    if is_base:
        qualifies, verdict = False, "the baseline"
    elif not complete:
        qualifies, verdict = False, "verification incomplete"
    elif failures:
        qualifies, verdict = False, f"failed ({'; '.join(failures)})"
    elif len(ratios) < plan.rounds:
        qualifies, verdict = False, "the baseline failed in a round"
    elif (
        metric_mean is None
        or base_metric_mean is None
        or not within_tolerance(metric, metric_mean, base_metric_mean, tolerance)
    ):
        worse = (
            f"accuracy more than {tolerance:g} pt lower"
            if metric.is_accuracy
            else f"{metric.name} more than {tolerance:g} % "
            f"{'lower' if metric.direction == 'maximize' else 'higher'} than the baseline's"
        )
        qualifies, verdict = False, worse
    elif ci is None or ci[0] <= 1.0:
        qualifies, verdict = False, "not verifiably faster (95 % CI reaches 1.0x)"
    else:
        same = "accuracy" if metric.is_accuracy else metric.name
        qualifies, verdict = True, f"verified faster at the same {same}"
    return CandidateVerdict(
        trial_number=number,
        is_baseline=is_base,
        params=dict(params),
        changed=() if is_base else changed_knobs(params, base_params),
        rounds_measured=len(measured),
        failures=failures,
        throughput_median_sps=(
            statistics.median([r.throughput_sps for r in measured if r.throughput_sps])
            if measured
            else None
        ),
        speedup=speedup,
        speedup_ci95=ci,
        val_metric_mean=metric_mean,
        val_metric_min=min(metrics) if metrics else None,
        val_metric_max=max(metrics) if metrics else None,
        peak_memory_max_bytes=max(memories) if memories else None,
        qualifies=qualifies,
        verdict=verdict,
    )


def summarize_verification(
    run: VerificationRun,
    params_by_trial: Mapping[int, Mapping[str, Any]],
    *,
    simulated: bool,
    metric: Objective = ACCURACY,
    objective: ObjectiveMode = "throughput",
    target: float | None = None,
    search_baseline_time_to_accuracy_s: float | None = None,
) -> VerificationSummary:
    """Summarize a stored verification: per configuration, then the recommendation.

    Args:
        run: the verification with its rows (:meth:`autotune.storage.ResultsStore.latest_verification`).
        params_by_trial: the knobs of each trial number in the plan (Optuna's ``trial.params``).
        simulated: the study ran on the mock device.
        metric: the study's validation metric (default: accuracy, maximized); a candidate
            qualifies when its mean is within the tolerance of the baseline's in the metric's
            direction (:func:`within_tolerance`). In a time-to-accuracy verification, the
            target's metric.
        objective: the study's mode (:func:`autotune.objectives.objective_mode`); in
            ``time_to_accuracy`` the verdicts compare times to the target (module docstring).
        target: the target's value (time-to-accuracy studies; for the headline).
        search_baseline_time_to_accuracy_s: the baseline trial's time to accuracy in the
            search (for the headline when no finalist was re-run).

    Returns:
        The summary; ``recommended`` is the qualifying candidate with the highest speedup
        (ties: the lower trial number), None when none qualifies or rounds are missing.
    """
    plan = run.plan
    by_trial: dict[int, list[VerificationRecord]] = {}
    for row in run.rows:
        by_trial.setdefault(row.trial_number, []).append(row)
    base_rows = {
        r.round_index: r
        for r in by_trial.get(plan.baseline_trial, [])
        if r.failure is None and r.throughput_sps is not None
    }
    base_params = params_by_trial.get(plan.baseline_trial, {})
    base_values = [r.val_metric for r in base_rows.values() if r.val_metric is not None]
    base_metric_mean = statistics.fmean(base_values) if base_values else None
    planned = len(plan.schedule())
    done = len(run.done() & set(plan.schedule()))
    complete = run.complete or done == planned

    def verdict(number: int) -> CandidateVerdict:
        if objective == "time_to_accuracy":
            return to_target_verdict(
                number,
                by_trial.get(number, []),
                by_trial.get(plan.baseline_trial, []),
                params_by_trial.get(number, {}),
                base_params,
                plan,
                complete,
            )
        return _verdict(
            number,
            by_trial.get(number, []),
            base_rows,
            params_by_trial.get(number, {}),
            base_params,
            base_metric_mean,
            plan,
            complete,
            metric,
        )

    candidates = tuple(verdict(n) for n in plan.candidates)
    qualifying = [c for c in candidates if c.qualifies]
    recommended = max(qualifying, key=lambda c: (c.speedup or 0.0, -c.trial_number), default=None)
    return VerificationSummary(
        study_name=run.study_name,
        number=run.number,
        rounds=plan.rounds,
        seeds=plan.seeds,
        accuracy_tolerance_pt=plan.accuracy_tolerance_pt,
        complete=complete,
        runs_done=done,
        runs_planned=planned,
        simulated=simulated or any(r.simulated for r in run.rows),
        baseline=verdict(plan.baseline_trial),
        candidates=candidates,
        recommended=recommended,
        metric=metric,
        objective=objective,
        target=target,
        search_baseline_time_to_accuracy_s=search_baseline_time_to_accuracy_s,
    )
