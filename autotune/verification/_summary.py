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
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.config import format_knob_value
from autotune.objectives import Objective, ObjectiveMode
from autotune.storage.records import VerificationPlan, VerificationRecord, VerificationRun
from autotune.verification._metric import (
    ACCURACY,
    nothing_qualifies,
    tolerance_text,
    within_tolerance,
)
from autotune.verification._speedup import mlperf_time_to_accuracy_s, speedup_ci95

__all__ = [
    "CandidateVerdict",
    "VerificationSummary",
    "changed_knobs",
    "summarize_verification",
]


def changed_knobs(
    params: Mapping[str, Any], baseline_params: Mapping[str, Any]
) -> tuple[tuple[str, Any, Any], ...]:
    """``(knob, baseline value, new value)`` for every knob that differs from the baseline's,
    in the order of ``params``."""
    return tuple(
        (name, baseline_params.get(name), value)
        for name, value in params.items()
        if baseline_params.get(name) != value
    )


@dataclass(frozen=True)
class CandidateVerdict:
    """One configuration's verified figures, over the rounds of one verification.

    Attributes:
        trial_number: the study trial whose configuration was re-run.
        is_baseline: it is the baseline (PyTorch defaults).
        params: its knobs, by name.
        changed: ``(knob, baseline value, value)`` for the knobs that differ from the baseline.
        rounds_measured: rounds in which it produced a measurement.
        failures: ``"round N: kind"`` for every round in which it failed.
        throughput_median_sps: median over rounds of its throughput (samples/s).
        speedup: geometric mean over rounds of its throughput over the same round's baseline
            (None for the baseline itself, or without a paired round). In a time-to-accuracy
            verification: how many times sooner it reached the target, the geometric mean over
            rounds of the baseline's time to accuracy over its own in the same round.
        speedup_ci95: 95 % confidence interval of ``speedup`` (:func:`speedup_ci95`).
        val_metric_mean: mean validation metric over rounds (accuracy: in [0, 1]).
        val_metric_min: lowest over rounds.
        val_metric_max: highest over rounds.
        peak_memory_max_bytes: the highest peak memory over rounds.
        qualifies: it may be recommended (every round measured, metric within the tolerance,
            the interval above 1.0; in a time-to-accuracy verification, the target reached in
            every round instead of the tolerance).
        verdict: why it qualifies or not, in a few words.
        time_to_accuracy_s: time-to-accuracy verifications: seconds to the target, the
            MLPerf-style aggregate over the rounds that reached it
            (:func:`mlperf_time_to_accuracy_s`: with 5 rounds or more the mean without the
            fastest and slowest, with fewer the median); None when no round reached it, and
            in a throughput verification.
        time_to_accuracy_spread_s: ``(fastest, slowest)`` seconds to the target over those
            rounds; None likewise.
        targets_missed: rounds in which it trained without failing but did not reach the
            target (0 in a throughput verification).
    """

    trial_number: int
    is_baseline: bool
    params: Mapping[str, Any]
    changed: tuple[tuple[str, Any, Any], ...]
    rounds_measured: int
    failures: tuple[str, ...]
    throughput_median_sps: float | None
    speedup: float | None
    speedup_ci95: tuple[float, float] | None
    val_metric_mean: float | None
    val_metric_min: float | None
    val_metric_max: float | None
    peak_memory_max_bytes: int | None
    qualifies: bool
    verdict: str
    time_to_accuracy_s: float | None = None
    time_to_accuracy_spread_s: tuple[float, float] | None = None
    targets_missed: int = 0

    def changes_text(self) -> str:
        """The changed knobs as ``precision fp32->bf16, batch_size 64->256``."""
        if not self.changed:
            return "no knob changed"
        return ", ".join(
            f"{name} {format_knob_value(old)}->{format_knob_value(new)}"
            for name, old, new in self.changed
        )


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
            return prefix + self._tta_headline()
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

    def _tta_headline(self) -> str:
        """The headline of a complete time-to-accuracy verification (without the prefix)."""
        target = self.target_text()
        seeds = f"verified over {self.rounds} seed{'s' if self.rounds != 1 else ''}"
        rec, base = self.recommended, self.baseline
        if rec is not None:
            assert rec.time_to_accuracy_s is not None and rec.speedup is not None
            assert rec.speedup_ci95 is not None
            low, high = rec.speedup_ci95
            defaults = (
                f"; defaults {_seconds_text(base.time_to_accuracy_s)}"
                if base.time_to_accuracy_s is not None
                else ""
            )
            memory = (
                f", peak memory {rec.peak_memory_max_bytes / (1 << 20):,.0f} MiB"
                if rec.peak_memory_max_bytes is not None
                else ""
            )
            return (
                f"reaches {target} in {_seconds_text(rec.time_to_accuracy_s)}, "
                f"{rec.speedup:.2f}x sooner than your defaults (95 % CI {low:.2f}-{high:.2f}x; "
                f"{seeds}{defaults}){memory}: trial {rec.trial_number}, {rec.changes_text()}"
            )
        nothing = f"no configuration verifiably reaches {target} sooner than your defaults"
        if not self.candidates:
            searched = self.search_baseline_time_to_accuracy_s
            defaults = (
                f"the defaults reached it in {_seconds_text(searched)} in the search"
                if searched is not None
                else "the defaults did not reach it in the search"
            )
            return f"{nothing} ({defaults}, and no trial reached it sooner)"
        return f"{nothing} ({_baseline_tta_text(base, self.rounds)}; {seeds})"


def _seconds_text(seconds: float | None) -> str:
    """Seconds for a headline, with the unit, as the report's tables write them
    (``autotune.report.seconds_text``: three significant figures, thousands separated):
    ``12.4 s``, ``2.46 s``, ``0.0278 s``, ``1,234 s``; ``n/a`` for None."""
    if seconds is None:
        return "n/a"
    if abs(seconds) >= 100:
        return f"{seconds:,.0f} s"
    if abs(seconds) >= 10:
        return f"{seconds:.1f} s"
    if abs(seconds) >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds:.3g} s"


def _baseline_tta_text(base: CandidateVerdict, rounds: int) -> str:
    """The defaults' own verified time to accuracy, in words."""
    reached = rounds - base.targets_missed - len(base.failures)
    if base.time_to_accuracy_s is None:
        return "your defaults did not reach it in any round"
    text = f"your defaults: {_seconds_text(base.time_to_accuracy_s)}"
    if reached < rounds:
        text += f", reached in {reached} of {rounds} rounds"
    return text


def _rounds_text(rows: Sequence[VerificationRecord]) -> str:
    return ", ".join(str(r.round_index + 1) for r in rows)


def _tta_verdict(
    number: int,
    rows: Sequence[VerificationRecord],
    base_rows: Sequence[VerificationRecord],
    params: Mapping[str, Any],
    base_params: Mapping[str, Any],
    plan: VerificationPlan,
    complete: bool,
) -> CandidateVerdict:
    """One configuration's verdict in a time-to-accuracy verification."""
    is_base = number == plan.baseline_trial
    measured = [r for r in rows if r.failure is None]
    failures = tuple(f"round {r.round_index + 1}: {r.failure}" for r in rows if r.failure)
    reached = [r for r in measured if r.target_reached and r.time_to_accuracy_s is not None]
    missed = [r for r in measured if not (r.target_reached and r.time_to_accuracy_s is not None)]
    times = [float(r.time_to_accuracy_s) for r in reached if r.time_to_accuracy_s is not None]
    base_times = {
        r.round_index: float(r.time_to_accuracy_s)
        for r in base_rows
        if r.failure is None and r.target_reached and r.time_to_accuracy_s
    }
    ratios = [
        base_times[r.round_index] / float(r.time_to_accuracy_s)
        for r in reached
        if r.round_index in base_times and r.time_to_accuracy_s
    ]
    speedup, ci = speedup_ci95(ratios) if ratios and not is_base else (None, None)
    metrics = [r.val_metric for r in measured if r.val_metric is not None]
    memories = [r.peak_memory_bytes for r in measured if r.peak_memory_bytes is not None]
    throughputs = [r.throughput_sps for r in measured if r.throughput_sps]
    if is_base:
        qualifies, verdict = False, "the baseline"
    elif not complete:
        qualifies, verdict = False, "verification incomplete"
    elif failures:
        qualifies, verdict = False, f"failed ({'; '.join(failures)})"
    elif missed:
        qualifies, verdict = (
            False,
            f"missed the target in {len(missed)} of {plan.rounds} rounds "
            f"(round {_rounds_text(missed)})",
        )
    elif len(ratios) < plan.rounds:
        unpaired = [r for r in reached if r.round_index not in base_times]
        qualifies, verdict = (
            False,
            f"no paired time: the baseline failed or missed the target in round "
            f"{_rounds_text(unpaired)}",
        )
    elif ci is None or ci[0] <= 1.0:
        qualifies, verdict = False, "not verifiably sooner (95 % CI reaches 1.0x)"
    else:
        qualifies, verdict = (
            True,
            f"verified to reach the target sooner in all {plan.rounds} rounds",
        )
    return CandidateVerdict(
        trial_number=number,
        is_baseline=is_base,
        params=dict(params),
        changed=() if is_base else changed_knobs(params, base_params),
        rounds_measured=len(measured),
        failures=failures,
        throughput_median_sps=statistics.median(throughputs) if throughputs else None,
        speedup=speedup,
        speedup_ci95=ci,
        val_metric_mean=statistics.fmean(metrics) if metrics else None,
        val_metric_min=min(metrics) if metrics else None,
        val_metric_max=max(metrics) if metrics else None,
        peak_memory_max_bytes=max(memories) if memories else None,
        qualifies=qualifies,
        verdict=verdict,
        time_to_accuracy_s=mlperf_time_to_accuracy_s(times) if times else None,
        time_to_accuracy_spread_s=(min(times), max(times)) if times else None,
        targets_missed=len(missed),
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
            return _tta_verdict(
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
