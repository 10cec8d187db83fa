"""Verified verdicts: which finalists to re-measure, and what their re-measurement says.

A search ranks configurations by single trials, whose figures are noisier than many of the
differences they rank (one configuration measured in five fresh processes spanned 9.4k-12.0k
samples/s on a 2-core CPU). So no single trial makes a claim to the user. When a study
reaches its trials, the baseline and up to K finalists are re-run in R *rounds* of fresh
processes, interleaved (baseline, c1..cK, baseline, c1..cK, ...), each round with its own
training seed: SMAC's intensification and MLPerf's repeated runs, in small. The
*recommendation* is the fastest verified candidate whose mean validation metric is within the
tolerance of the baseline's and whose speedup's 95 % confidence interval lies above 1.0.

The metric is the study's (:func:`autotune.objectives.objectives_of_study`): top-1 accuracy
(maximized) for the built-in workloads, or a user workload's own, e.g. ``val_loss``
(minimized). The tolerance is ``verify.accuracy_tolerance_pt`` (:func:`within_tolerance`): for
accuracy, points below the baseline (0.5 = 0.005); for any other metric, a share of the
baseline's value in percent, in the metric's worse direction (0.5: a ``val_loss`` at most
0.5 % above the baseline's; an ``f1`` at most 0.5 % below it).

Everything here is pure: the runs happen in :func:`autotune.api.verify_study`, the rows live in
the results tables (:mod:`autotune.storage`), and every output (terminal, report, dashboard,
``best``, export) reads the same :class:`VerificationSummary`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial
from scipy import stats

from autotune.baseline import baseline_trial
from autotune.config import format_knob_value
from autotune.exceptions import VerificationError
from autotune.objectives import METRIC_INDEX, OBJECTIVES, Objective, objectives_of_study
from autotune.storage import ResultsStore
from autotune.storage.records import (
    VerificationPlan,
    VerificationRecord,
    VerificationRun,
    is_feasible,
)

__all__ = [
    "ACCURACY",
    "NOTHING_QUALIFIES",
    "CandidateVerdict",
    "VerificationSummary",
    "changed_knobs",
    "load_verification",
    "metric_allowance",
    "nothing_qualifies",
    "round_seeds",
    "select_finalists",
    "speedup_ci95",
    "study_metric",
    "summarize_for_study",
    "summarize_verification",
    "tolerance_text",
    "trial_metric",
    "within_tolerance",
]

#: The validation metric of studies on the built-in workloads: top-1 accuracy, maximized.
ACCURACY: Objective = OBJECTIVES[METRIC_INDEX]
#: What every output says when no candidate passes verification (an accuracy study; see
#: :func:`nothing_qualifies` for any metric).
NOTHING_QUALIFIES = "no configuration is verifiably faster than your defaults at the same accuracy"
#: Training seeds of verification ``n`` start at ``study seed + SEED_STRIDE * n``, so they never
#: repeat the search's seed (common to every trial) nor another verification's.
SEED_STRIDE = 1000


def round_seeds(study_seed: int, verification_number: int, rounds: int) -> tuple[int, ...]:
    """The training seed of each round of verification ``verification_number`` (1, 2, ...).

    The search trains every trial with ``study_seed`` (common random numbers); verification
    rounds use other seeds, so the verified accuracy is not the one the search selected on.
    """
    start = study_seed + SEED_STRIDE * verification_number
    return tuple(start + r for r in range(rounds))


def nothing_qualifies(metric: Objective = ACCURACY) -> str:
    """What every output says when no candidate passes verification, for the study's metric:
    :data:`NOTHING_QUALIFIES` for accuracy, ``... at the same val_loss`` otherwise."""
    if metric.is_accuracy:
        return NOTHING_QUALIFIES
    return NOTHING_QUALIFIES.removesuffix("accuracy") + metric.name


def metric_allowance(metric: Objective, baseline_value: float, tolerance_pt: float) -> float:
    """How much worse than the baseline's a candidate's metric may be, in the metric's units.

    Args:
        metric: the study's validation metric.
        baseline_value: the baseline's value of it.
        tolerance_pt: ``verify.accuracy_tolerance_pt``. For accuracy (in [0, 1]) it is in
            points: 0.5 allows 0.005. For any other metric, whose scale autotune cannot know,
            it is relative to the baseline: 0.5 allows 0.5 % of ``|baseline_value|``.
    """
    if metric.is_accuracy:
        return tolerance_pt / 100.0
    return abs(baseline_value) * tolerance_pt / 100.0


def within_tolerance(
    metric: Objective, value: float, baseline_value: float, tolerance_pt: float
) -> bool:
    """Whether ``value`` is at most :func:`metric_allowance` worse than ``baseline_value``:
    for a maximized metric ``value >= baseline - allowance``, for a minimized one
    ``value <= baseline + allowance``."""
    allowance = metric_allowance(metric, baseline_value, tolerance_pt)
    if metric.direction == "maximize":
        return value >= baseline_value - allowance
    return value <= baseline_value + allowance


def tolerance_text(metric: Objective, tolerance_pt: float) -> str:
    """The tolerance in words: ``0.5 pt`` (accuracy), ``0.5 % of the baseline's val_loss``."""
    if metric.is_accuracy:
        return f"{tolerance_pt:g} pt"
    return f"{tolerance_pt:g} % of the baseline's {metric.name}"


def trial_metric(trial: FrozenTrial) -> float | None:
    """A search trial's validation metric (``val_accuracy`` in studies written before
    workloads), None when it has none."""
    attrs = trial.user_attrs
    value = attrs.get("val_metric")
    if value is None:
        value = attrs.get("val_accuracy")
    return None if value is None else float(value)


def _measured(trial: FrozenTrial) -> bool:
    return (
        trial.user_attrs.get("throughput_sps") is not None
        and "failure" not in trial.user_attrs
        and trial_metric(trial) is not None
    )


def select_finalists(
    trials: Sequence[FrozenTrial],
    pareto_numbers: set[int],
    candidates: int,
    accuracy_tolerance_pt: float,
    metric: Objective = ACCURACY,
) -> tuple[int, tuple[int, ...]]:
    """The baseline and the finalists to verify, from a study's finished trials.

    Finalists are feasible trials faster than the baseline whose metric is within the
    tolerance of the baseline's (:func:`within_tolerance`: for accuracy, at most
    ``accuracy_tolerance_pt`` points below it): first the Pareto-optimal ones,
    fastest first, then the next fastest of the rest, until ``candidates`` are chosen. Trials
    with the same knobs as an earlier finalist (a warm start, a retried trial) are skipped.

    Args:
        trials: the study's trials (any states; only finished, measured ones are considered).
        pareto_numbers: numbers of the Pareto-optimal feasible trials (Optuna's
            ``study.best_trials``).
        candidates: how many finalists at most (K >= 1).
        accuracy_tolerance_pt: accuracy points (0.5 = 0.005) a finalist may give up; for
            another metric, percent of the baseline's value (:func:`metric_allowance`).
        metric: the study's validation metric (default: accuracy, maximized).

    Returns:
        ``(baseline trial number, finalist trial numbers in run order)``; the tuple is empty
        when no trial qualifies.

    Raises:
        VerificationError: the study has no measured baseline trial.
    """
    base = baseline_trial(trials)
    if base is None or not _measured(base):
        why = (
            "has no baseline trial"
            if base is None
            else (
                f"baseline trial {base.number} produced no measurement "
                f"({base.user_attrs.get('failure', 'not measured')})"
            )
        )
        raise VerificationError(f"the study {why}; there is nothing to compare against")
    base_metric = trial_metric(base)
    assert base_metric is not None  # _measured
    base_sps = float(base.user_attrs["throughput_sps"])
    eligible = [
        t
        for t in trials
        if t.number != base.number
        and is_feasible(t)
        and _measured(t)
        and within_tolerance(metric, trial_metric(t) or 0.0, base_metric, accuracy_tolerance_pt)
        and float(t.user_attrs["throughput_sps"]) > base_sps
    ]
    # Pareto-optimal first (False sorts before True), then fastest first, then lower number.
    eligible.sort(
        key=lambda t: (
            t.number not in pareto_numbers,
            -float(t.user_attrs["throughput_sps"]),
            t.number,
        )
    )
    chosen: list[FrozenTrial] = []
    for t in eligible:
        if t.params != base.params and all(t.params != c.params for c in chosen):
            chosen.append(t)
        if len(chosen) == candidates:
            break
    return base.number, tuple(t.number for t in chosen)


def speedup_ci95(ratios: Sequence[float]) -> tuple[float, tuple[float, float] | None]:
    """Speedup and its 95 % confidence interval from paired per-round throughput ratios.

    Each ratio is a candidate's throughput over the baseline's *in the same round* (a paired
    design: both ran minutes apart on the same machine state). Ratios are multiplicative, so
    the interval is Student's t interval of the mean log ratio, exponentiated: a confidence
    interval for the geometric-mean speedup. The t distribution (not the normal) because a
    verification has few rounds (3 by default: t(0.975, 2) = 4.30, against 1.96); a bootstrap
    needs far more than 3 samples to say anything. This is the log-scale interval for a ratio
    of means recommended for benchmark comparisons by Kalibera & Jones, "Rigorous Benchmarking
    in Reasonable Time" (ISMM 2013), in its simplest, single-level form.

    Args:
        ratios: candidate / baseline throughput per round (> 0), one per round.

    Returns:
        ``(geometric-mean speedup, (low, high))``; the interval is None for fewer than two
        ratios, and collapses to the point when all ratios are equal.

    Raises:
        ValueError: an empty sequence or a ratio <= 0.
    """
    if not ratios:
        raise ValueError("speedup_ci95 needs at least one ratio")
    if min(ratios) <= 0:
        raise ValueError(f"throughput ratios must be > 0, but got {min(ratios)}")
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    point = math.exp(mean)
    if len(logs) < 2:
        return point, None
    half = float(stats.t.ppf(0.975, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return point, (math.exp(mean - half), math.exp(mean + half))


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
            (None for the baseline itself, or without a paired round).
        speedup_ci95: 95 % confidence interval of ``speedup`` (:func:`speedup_ci95`).
        val_metric_mean: mean validation metric over rounds (accuracy: in [0, 1]).
        val_metric_min: lowest over rounds.
        val_metric_max: highest over rounds.
        peak_memory_max_bytes: the highest peak memory over rounds.
        qualifies: it may be recommended (every round measured, metric within the tolerance,
            the interval above 1.0).
        verdict: why it qualifies or not, in a few words.
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
        recommended: the fastest qualifying candidate, or None.
        metric: the study's validation metric (name, direction, display format).
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
) -> VerificationSummary:
    """Summarize a stored verification: per configuration, then the recommendation.

    Args:
        run: the verification with its rows (:meth:`autotune.storage.ResultsStore.latest_verification`).
        params_by_trial: the knobs of each trial number in the plan (Optuna's ``trial.params``).
        simulated: the study ran on the mock device.
        metric: the study's validation metric (default: accuracy, maximized); a candidate
            qualifies when its mean is within the tolerance of the baseline's in the metric's
            direction (:func:`within_tolerance`).

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
    )


def load_verification(study: optuna.Study, results: ResultsStore) -> VerificationSummary | None:
    """The newest finished verification of ``study``, summarized; None when it has none.

    This is what every output (report, dashboard, ``best``, export) shows as its claim.

    Raises:
        StorageError: the results tables cannot be read.
    """
    run = results.latest_verification(study.study_name, complete=True)
    return summarize_for_study(study, run) if run is not None else None


def study_metric(study: optuna.Study) -> Objective:
    """The validation metric a study was created with (its name, direction and format)."""
    return objectives_of_study(study)[METRIC_INDEX]


def summarize_for_study(study: optuna.Study, run: VerificationRun) -> VerificationSummary:
    """:func:`summarize_verification` of ``run`` with the study's knobs, simulated flag and
    validation metric (:func:`autotune.objectives.objectives_of_study`)."""
    simulated = bool((study.user_attrs.get("autotune") or {}).get("simulated", False))
    params = {t.number: t.params for t in study.get_trials(deepcopy=False)}
    return summarize_verification(run, params, simulated=simulated, metric=study_metric(study))
