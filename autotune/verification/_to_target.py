"""The verdicts of a time-to-accuracy verification and its headline.

A candidate qualifies when every round measured it *and* it reached the target in every round
(the target is the quality bar: no tolerance applies), and the 95 % confidence interval of how
many times sooner it got there (the baseline's time to accuracy over its own, per round) lies
above 1.0. Its time is the MLPerf-style aggregate over rounds
(:func:`autotune.verification.mlperf_time_to_accuracy_s`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from autotune.objectives import seconds_text
from autotune.storage.records import VerificationPlan, VerificationRecord
from autotune.verification._speedup import mlperf_time_to_accuracy_s, speedup_ci95
from autotune.verification._verdict import CandidateVerdict, changed_knobs

__all__ = ["to_target_headline", "to_target_verdict"]


def to_target_headline(
    target: str,
    rounds: int,
    baseline: CandidateVerdict,
    recommended: CandidateVerdict | None,
    *,
    candidates_run: bool,
    searched: float | None,
) -> str:
    """The headline of a complete time-to-accuracy verification, without the SIMULATED prefix
    (:meth:`autotune.verification.VerificationSummary.headline`).

    Args:
        target: the target in words (:meth:`~autotune.verification.VerificationSummary.target_text`).
        rounds: rounds planned.
        baseline: the baseline's verdict.
        recommended: the recommendation, or None.
        candidates_run: any finalist was re-run.
        searched: the baseline trial's time to accuracy in the search (seconds), stated when
            no finalist was re-run; None when unknown or missed.
    """
    seeds = f"verified over {rounds} seed{'s' if rounds != 1 else ''}"
    rec, base = recommended, baseline
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
    if not candidates_run:
        defaults = (
            f"the defaults reached it in {_seconds_text(searched)} in the search"
            if searched is not None
            else "the defaults did not reach it in the search"
        )
        return f"{nothing} ({defaults}, and no trial reached it sooner)"
    return f"{nothing} ({_baseline_tta_text(base, rounds)}; {seeds})"


def _seconds_text(seconds: float | None) -> str:
    """Seconds for a headline, with the unit (:func:`autotune.objectives.seconds_text`):
    ``12.4 s``, ``0.0278 s``; ``n/a`` for None."""
    return "n/a" if seconds is None else f"{seconds_text(seconds)} s"


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


def to_target_verdict(
    number: int,
    rows: Sequence[VerificationRecord],
    base_rows: Sequence[VerificationRecord],
    params: Mapping[str, Any],
    base_params: Mapping[str, Any],
    plan: VerificationPlan,
    complete: bool,
) -> CandidateVerdict:
    """One configuration's verdict in a time-to-accuracy verification: ``rows`` and
    ``base_rows`` are its and the baseline's rows, ``complete`` says every planned run has one."""
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
