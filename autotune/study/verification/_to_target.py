"""The verdicts of a time-to-accuracy verification and its headline.

Each run trains to the study's target. A round that misses it is *censored*: its time counts
as the seconds it trained (its true time is at least that), not dropped, as MLPerf Training
counts a run that does not converge among the slowest. For the baseline that is a
conservative bound (the defaults' true time is at least that, so the "x sooner" computed from
it can only understate the speedup), so a baseline miss no longer disqualifies every
candidate; a candidate that misses the target in any round is not recommended.

A configuration's time is the geometric mean of its per-round times, the same mean as the
speedup's: the speedup is the geometric mean over rounds of the baseline's time over the
candidate's in the same round, so with every round paired it equals the defaults' time over
the candidate's, and the figures printed beside it agree with it. MLPerf's own aggregate
(:func:`autotune.study.verification.mlperf_time_to_accuracy_s`) is kept beside it for comparison
with published results.

In the race a finalist passes when it reached the target in every round and got there
sooner than the baseline; in the confirmation it is recommended when it reached the target
in every round, kept the run's limits, and the 95 % interval of how many times sooner lies
above 1.0.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from autotune.core.units import MIB
from autotune.study.objectives import seconds_text
from autotune.study.storage.records import VerificationPlan, VerificationRecord
from autotune.study.verification._speedup import mlperf_time_to_accuracy_s, speedup_ci95
from autotune.study.verification._verdict import (
    CandidateVerdict,
    Stage,
    changed_knobs,
    constraint_violation,
    measured_rows,
    rounds_text,
)

__all__ = ["censored_time_s", "to_target_headline", "to_target_verdict"]


def censored_time_s(row: VerificationRecord) -> float | None:
    """A run's time to the target, censored: its ``time_to_accuracy_s`` when it reached the
    target, else the seconds it trained (``train_s``, a lower bound of its time); None for
    a failed run."""
    if row.failure is not None:
        return None
    if row.target_reached and row.time_to_accuracy_s is not None:
        return float(row.time_to_accuracy_s)
    return float(row.train_s) if row.train_s is not None else None


def to_target_headline(
    target: str,
    rounds: int,
    baseline: CandidateVerdict,
    recommended: CandidateVerdict | None,
    *,
    candidates_run: bool,
    searched: float | None,
    stages: str | None = None,
    not_faster: str | None = None,
    baseline_words: str = "PyTorch's defaults",
) -> str:
    """The headline of a complete time-to-accuracy verification, without the SIMULATED prefix
    (:meth:`autotune.study.verification.VerificationSummary.headline`).

    Args:
        target: the target in words (:meth:`~autotune.study.verification.VerificationSummary.target_text`).
        rounds: confirmation rounds planned.
        baseline: the baseline's verdict.
        recommended: the recommendation, or None.
        candidates_run: any finalist was re-run.
        searched: the baseline trial's time to accuracy in the search (seconds), stated when
            no finalist was re-run; None when unknown or missed.
        stages: how the claim was measured (``confirmed over 5 rounds after a 2-round race
            of 4 finalists``); default ``verified over N seeds``.
        not_faster: why nothing is recommended (the survivor's confirmation, or the race).
        baseline_words: what the baseline is called (``your baseline``, ``PyTorch's
            defaults``).
    """
    how = stages or f"verified over {rounds} seed{'s' if rounds != 1 else ''}"
    rec, base = recommended, baseline
    if rec is not None:
        assert rec.time_to_accuracy_s is not None and rec.speedup is not None
        assert rec.speedup_ci95 is not None
        low, high = rec.speedup_ci95
        defaults = (
            f" ({_seconds_text(base.time_to_accuracy_s)})"
            if base.time_to_accuracy_s is not None
            else ""
        )
        memory = (
            f", peak memory {rec.peak_memory_max_bytes / MIB:,.0f} MiB"
            if rec.peak_memory_max_bytes is not None
            else ""
        )
        return (
            f"reaches {target} in {_seconds_text(rec.time_to_accuracy_s)}, "
            f"{rec.speedup:.2f}x sooner than {baseline_words}{defaults} (95 % CI "
            f"{low:.2f}-{high:.2f}x, {how}; times are geometric means over the rounds)"
            f"{memory}: trial {rec.trial_number}, {rec.changes_text()}"
        )
    if not candidates_run:
        defaults = (
            f"the baseline reached it in {_seconds_text(searched)} in the search"
            if searched is not None
            else "the baseline did not reach it in the search"
        )
        return (
            f"nothing to verify: no trial of the search reached {target} sooner than "
            f"{baseline_words} ({defaults})"
        )
    reason = not_faster or how
    return (
        f"verified: not sooner than {baseline_words} to {target} "
        f"({_baseline_tta_text(base, rounds)}; {reason})"
    )


def _seconds_text(seconds: float | None) -> str:
    """Seconds for a headline, with the unit (:func:`autotune.study.objectives.seconds_text`):
    ``12.4 s``, ``0.0278 s``; ``n/a`` for None."""
    return "n/a" if seconds is None else f"{seconds_text(seconds)} s"


def _baseline_tta_text(base: CandidateVerdict, rounds: int) -> str:
    """The defaults' own verified time to accuracy, in words."""
    if base.time_to_accuracy_s is None:
        return "the baseline was not measured"
    text = f"the baseline: {_seconds_text(base.time_to_accuracy_s)}"
    if base.targets_missed:
        text += (
            f", missed the target in {base.targets_missed} of {rounds} rounds "
            "(counted at the seconds trained)"
        )
    return text


def to_target_verdict(
    number: int,
    rows: Sequence[VerificationRecord],
    base_rows: Sequence[VerificationRecord],
    params: Mapping[str, Any],
    base_params: Mapping[str, Any],
    plan: VerificationPlan,
    complete: bool,
    stage: Stage = "confirm",
) -> CandidateVerdict:
    """One configuration's verdict in one stage of a time-to-accuracy verification: ``rows``
    and ``base_rows`` are its and the baseline's rows of that stage, ``complete`` says every
    run of the stage has one (module docstring: censoring, the mean, the rules)."""
    is_base = number == plan.baseline_trial
    measured, failures = measured_rows(rows, True)
    missed = [r for r in measured if not (r.target_reached and r.time_to_accuracy_s)]
    times = {r.round_index: censored_time_s(r) for r in measured}
    base_times = {r.round_index: censored_time_s(r) for r in measured_rows(base_rows, True)[0]}
    ratios = [
        float(base_times[i] or 0) / float(t or 1)
        for i, t in times.items()
        if i in base_times and t and base_times[i]
    ]
    speedup, ci = speedup_ci95(ratios) if ratios and not is_base else (None, None)
    seconds = [float(t) for t in times.values() if t]
    metrics = [r.val_metric for r in measured if r.val_metric is not None]
    memories = [r.peak_memory_bytes for r in measured if r.peak_memory_bytes is not None]
    throughputs = [r.throughput_sps for r in measured if r.throughput_sps]
    rounds = plan.race_rounds if stage == "race" else plan.rounds
    violation = constraint_violation(measured, statistics.fmean(metrics) if metrics else None, plan)
    if is_base:
        qualifies, verdict = False, "the baseline"
        if missed:
            verdict += (
                f" (missed the target in round {rounds_text(missed)}: counted at the seconds "
                "it trained, a lower bound)"
            )
    elif not complete:
        qualifies, verdict = False, "verification incomplete"
    elif failures:
        qualifies, verdict = False, f"failed ({'; '.join(failures)})"
    elif missed:
        qualifies, verdict = (
            False,
            f"missed the target in {len(missed)} of {rounds} rounds "
            f"(round {rounds_text(missed)}; counted at the seconds it trained)",
        )
    elif len(ratios) < rounds:
        unpaired = [r for r in measured if r.round_index not in base_times]
        qualifies, verdict = (
            False,
            f"no paired time: the baseline failed in round {rounds_text(unpaired)}",
        )
    elif violation is not None:
        qualifies, verdict = False, violation
    elif stage == "race":
        qualifies = speedup is not None and speedup > 1.0
        verdict = (
            "passed the race"
            if qualifies
            else f"not sooner than the baseline in the race ({speedup or 0.0:.2f}x)"
        )
    elif ci is None or not all(math.isfinite(x) for x in ci) or not ci[0] > 1.0:
        qualifies, verdict = False, "not verifiably sooner (95 % CI reaches 1.0x)"
    else:
        qualifies, verdict = (
            True,
            f"verified to reach the target sooner in all {rounds} rounds",
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
        time_to_accuracy_s=statistics.geometric_mean(seconds) if seconds else None,
        time_to_accuracy_spread_s=(min(seconds), max(seconds)) if seconds else None,
        targets_missed=len(missed),
        stage=stage,
        val_samples=min((r.val_samples for r in measured if r.val_samples), default=None),
        time_to_accuracy_mlperf_s=mlperf_time_to_accuracy_s(seconds) if seconds else None,
    )
