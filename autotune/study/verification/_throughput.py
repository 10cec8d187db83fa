"""The verdicts of a throughput verification (``objective=throughput``).

In the race a finalist passes when it measured in every race round, kept the run's limits,
its metric pooled over the rounds passed the screen against the baseline's pooled metric,
and it beat the baseline (speedup above 1.0). In the confirmation a survivor is recommended
when every round measured it, the run's limits hold on the verified figures, the 95 %
confidence interval of its paired speedup lies above 1.0 (finite), and its accuracy is shown
*non-inferior*: the 95 % interval of its paired metric difference (its metric minus the same
round's baseline's) lies entirely above -tolerance (for a loss: below +tolerance;
:func:`~autotune.study.verification.is_non_inferior`). A survivor that is verifiably faster but not
shown non-inferior is a *trade-off*: its figures are shown, it is never the recommendation.

A finalist that inherits its accuracy (the plan's ``inherited``: identical or the same
computation in the search) is timed, not trained to the budget: in each round its paired
K-step check against the same round's baseline (the same seed) stands for the accuracy
(:func:`autotune.study.evidence.check_equivalence`, with the study's floor and margin). It passes a
stage when every round's check holds (and, in the race, it beat the baseline); in the
confirmation it is recommended when the check held in every round and its speedup's interval
lies above 1.0.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from autotune.study.evidence import CheckFloor, EquivalenceCheck, check_equivalence
from autotune.study.objectives import Objective
from autotune.study.storage.records import VerificationPlan, VerificationRecord
from autotune.study.verification._metric import (
    DEFAULT_SCREEN_Z,
    difference_number,
    difference_unit,
    is_non_inferior,
    passes_screen,
    tolerance_text,
)
from autotune.study.verification._speedup import mean_difference_ci95, speedup_ci95
from autotune.study.verification._verdict import (
    CandidateVerdict,
    Stage,
    changed_knobs,
    constraint_violation,
    measured_rows,
    metric_versus,
    rounds_text,
)

__all__ = [
    "check_summary",
    "end_to_end",
    "end_to_end_seconds",
    "plan_floor",
    "throughput_verdict",
]


def _pooled(rows: Sequence[VerificationRecord]) -> tuple[float | None, int | None]:
    """A configuration's metric pooled over rounds: for counts (every row with its
    ``val_samples``) the correct predictions over the samples, else the mean; and the
    samples behind it (None when unknown)."""
    values = [(r.val_metric, r.val_samples) for r in rows if r.val_metric is not None]
    if not values:
        return None, None
    if all(n for _, n in values):
        total = sum(int(n or 0) for _, n in values)
        correct = sum(round(v * int(n or 0)) for v, n in values)
        return correct / total, total
    return statistics.fmean(v for v, _ in values), None


def throughput_verdict(
    number: int,
    rows: Sequence[VerificationRecord],
    base_rows: Sequence[VerificationRecord],
    params: Mapping[str, Any],
    base_params: Mapping[str, Any],
    plan: VerificationPlan,
    complete: bool,
    metric: Objective,
    stage: Stage,
) -> CandidateVerdict:
    """One configuration's verdict in one stage of a throughput verification: ``rows`` and
    ``base_rows`` are its and the baseline's rows of that stage, ``complete`` says every run
    of the stage has one."""
    is_base = number == plan.baseline_trial
    measured, failures = measured_rows(rows, False)
    base_by_round = {r.round_index: r for r in measured_rows(base_rows, False)[0]}
    paired = [(r, base_by_round[r.round_index]) for r in measured if r.round_index in base_by_round]
    ratios = [float(r.throughput_sps or 0) / float(b.throughput_sps or 1) for r, b in paired]
    speedup, ci = speedup_ci95(ratios) if ratios and not is_base else (None, None)
    e2e, e2e_ci = end_to_end(paired, plan.budget_steps) if not is_base else (None, None)
    # A finalist that inherits its accuracy: its paired check in every round stands for a
    # trained metric (its timed rows carry none).
    inherited = number in plan.inherited and not is_base
    checks, missing = _round_checks(paired, plan) if inherited else ([], [])
    diverged = [(i, c) for i, c in checks if not c.passed]
    identical = bool(checks) and all(c.verdict == "identical" for _, c in checks)
    evidence = (
        ("identical computation" if identical else "the same computation") if inherited else None
    )
    check_text = check_summary([c for _, c in checks]) if inherited else None
    metrics = [r.val_metric for r in measured if r.val_metric is not None]
    metric_mean = statistics.fmean(metrics) if metrics else None
    diffs = [
        r.val_metric - b.val_metric
        for r, b in paired
        if r.val_metric is not None and b.val_metric is not None
    ]
    diff_mean, diff_ci = mean_difference_ci95(diffs) if diffs and not is_base else (None, None)
    base_values = [b.val_metric for b in base_by_round.values() if b.val_metric is not None]
    base_mean = statistics.fmean(base_values) if base_values else None
    samples = [r.val_samples for r in measured if r.val_samples]
    rounds = plan.race_rounds if stage == "race" else plan.rounds
    non_inferior: bool | None = None
    if stage == "confirm" and not is_base and base_mean is not None and diffs:
        non_inferior = is_non_inferior(metric, diff_ci, base_mean, plan.accuracy_tolerance_pt)
    violation = constraint_violation(measured, metric_mean, plan)
    same = "accuracy" if metric.is_accuracy else metric.name
    faster = ci is not None and all(math.isfinite(x) for x in ci) and ci[0] > 1.0
    trade_off = False
    if is_base:
        qualifies, verdict = False, "the baseline"
    elif not complete:
        qualifies, verdict = False, "verification incomplete"
    elif failures:
        qualifies, verdict = False, f"failed ({'; '.join(failures)})"
    elif len(ratios) < rounds:
        unpaired = [r for r in measured if r.round_index not in base_by_round]
        qualifies, verdict = False, f"the baseline failed in round {rounds_text(unpaired)}"
    elif missing:
        rounds_missing = ", ".join(str(i + 1) for i in missing)
        qualifies, verdict = False, f"no paired check in round {rounds_missing}"
    elif diverged:
        index, check = diverged[0]
        qualifies = False
        verdict = f"the paired check {check.detail} in round {index + 1}: not the same computation"
    elif violation is not None:
        qualifies, verdict = False, violation
    elif stage == "race" and inherited:
        qualifies = speedup is not None and speedup > 1.0
        verdict = (
            "passed the race"
            if qualifies
            else f"not faster than the baseline in the race ({speedup or 0.0:.2f}x)"
        )
    elif stage == "race":
        qualifies, verdict = _race_rules(measured, base_by_round, plan, metric, speedup)
    elif inherited and not faster:
        qualifies, verdict = False, "not verifiably faster (95 % CI reaches 1.0x)"
    elif inherited:
        qualifies, verdict = True, f"verified faster, {evidence} ({check_text})"
    elif diff_mean is None or base_mean is None:
        qualifies, verdict = False, f"no paired {metric.name} to compare"
    elif not faster:
        qualifies, verdict = False, "not verifiably faster (95 % CI reaches 1.0x)"
    elif not non_inferior:
        tolerance = tolerance_text(metric, plan.accuracy_tolerance_pt)
        bound = min(diff_ci or (diff_mean, diff_mean), key=metric.gain)  # the worse end
        bound_text = f"{difference_number(metric, bound)}{difference_unit(metric)}"
        qualifies, trade_off = False, True
        verdict = (
            f"a trade-off: verified faster, {same} not shown non-inferior (the difference's "
            f"95 % CI reaches {bound_text}, past the {tolerance} tolerance, over {rounds} rounds)"
        )
    else:
        qualifies, verdict = True, f"verified faster at the same {same} (non-inferior)"
    return CandidateVerdict(
        trial_number=number,
        is_baseline=is_base,
        params=dict(params),
        changed=() if is_base else changed_knobs(params, base_params),
        rounds_measured=len(measured),
        failures=failures,
        throughput_median_sps=(
            statistics.median([float(r.throughput_sps or 0) for r in measured])
            if measured
            else None
        ),
        speedup=speedup,
        speedup_ci95=ci,
        val_metric_mean=metric_mean,
        val_metric_min=min(metrics) if metrics else None,
        val_metric_max=max(metrics) if metrics else None,
        peak_memory_max_bytes=max(
            (r.peak_memory_bytes for r in measured if r.peak_memory_bytes is not None),
            default=None,
        ),
        qualifies=qualifies,
        verdict=verdict,
        stage=stage,
        metric_diff_mean=diff_mean,
        metric_diff_ci95=diff_ci,
        non_inferior=non_inferior,
        trade_off=trade_off,
        val_samples=min(samples) if samples else None,
        evidence=evidence,
        check_text=check_text,
        end_to_end_speedup=e2e,
        end_to_end_ci95=e2e_ci,
    )


def _race_rules(
    rows: Sequence[VerificationRecord],
    base_by_round: Mapping[int, VerificationRecord],
    plan: VerificationPlan,
    metric: Objective,
    speedup: float | None,
) -> tuple[bool, str]:
    """The race's rules for a measured, paired candidate: its pooled metric through the
    screen against the baseline's pooled metric, and a speedup above 1.0."""
    value, samples = _pooled(rows)
    base_value, base_samples = _pooled(list(base_by_round.values()))
    z = plan.screen_z if plan.screen_z is not None else DEFAULT_SCREEN_Z
    if value is None or base_value is None:
        return False, "no metric measured"
    if not passes_screen(
        metric, value, samples, base_value, base_samples, plan.accuracy_tolerance_pt, z
    ):
        return (
            False,
            f"pooled {metric.name} failed the screen ({metric_versus(metric, value, base_value)})",
        )
    if speedup is None or not speedup > 1.0:
        return False, f"not faster than the baseline in the race ({speedup or 0.0:.2f}x)"
    return True, "passed the race"


def plan_floor(plan: VerificationPlan) -> tuple[CheckFloor, float] | None:
    """The paired check's floor and margin a plan stored (``check_floor_json``); None when
    it holds none."""
    if not plan.check_floor_json:
        return None
    stored = json.loads(plan.check_floor_json)
    floor = CheckFloor(float(stored["first"]), float(stored["trajectory"]), str(stored["source"]))
    return floor, float(stored["margin"])


def _round_checks(
    paired: Sequence[tuple[VerificationRecord, VerificationRecord]], plan: VerificationPlan
) -> tuple[list[tuple[int, EquivalenceCheck]], list[int]]:
    """Each paired round's check (``(round_index, check)``), and the rounds without one (a
    run that recorded no losses, or a plan without a floor)."""
    floor = plan_floor(plan)
    checks: list[tuple[int, EquivalenceCheck]] = []
    missing: list[int] = []
    for row, base in paired:
        if floor is None or not row.check_losses or not base.check_losses:
            missing.append(row.round_index)
            continue
        checks.append(
            (row.round_index, check_equivalence(row.check_losses, base.check_losses, *floor))
        )
    return checks, missing


def check_summary(checks: Sequence[EquivalenceCheck]) -> str:
    """What the rounds' checks showed, in words: ``the same losses bit for bit over 20 steps
    in each of 10 rounds``; ``the paired check over 20 steps held in each of 10 rounds
    (first-step divergence at most 2.0e-06, bound 1.2e-05; the largest 8.1e-03, bound
    1.7e-01)``."""
    if not checks:
        return "no paired check"
    steps = min(c.steps for c in checks)
    rounds = f"{len(checks)} round{'s' if len(checks) != 1 else ''}"
    if all(c.verdict == "identical" for c in checks):
        return f"the same losses bit for bit over {steps} steps in each of {rounds}"
    first = max(c.first_divergence for c in checks)
    worst = max(c.max_divergence for c in checks)
    return (
        f"the paired check over {steps} steps held in each of {rounds} (first-step divergence "
        f"at most {first:.1e}, the largest over the steps {worst:.1e})"
    )


def end_to_end_seconds(row: VerificationRecord, budget_steps: int | None) -> float | None:
    """A run's seconds over one full run of the budget, compilation included: a run that
    trained the budget, its training loop's wall seconds (``train_s``); a timed run, its
    compile seconds plus ``budget_steps`` at its median step time (projected). None when
    unknown."""
    if _trained(row):  # trained and evaluated: the whole loop
        return row.train_s
    return _projected_s(row, budget_steps)


def _trained(row: VerificationRecord) -> bool:
    """The run trained (and was evaluated), rather than timed only."""
    return row.val_metric is not None and bool(row.train_s)


def _projected_s(row: VerificationRecord, budget_steps: int | None) -> float | None:
    """A run's compile seconds plus ``budget_steps`` at its median step time; None when
    unknown."""
    if budget_steps is None or row.step_time_s is None:
        return None
    return (row.compile_s or 0.0) + budget_steps * row.step_time_s


def end_to_end(
    paired: Sequence[tuple[VerificationRecord, VerificationRecord]], budget_steps: int | None
) -> tuple[float | None, tuple[float, float] | None]:
    """The speedup over a whole run of the budget, compilation included: the geometric mean
    over paired rounds of the baseline's end-to-end seconds over the candidate's
    (:func:`end_to_end_seconds`; a timed candidate against a trained baseline: both
    projected from compile and step seconds), with Student's t 95 % interval on the log
    ratios; the
    steady-state speedup leaves compilation out, which a short budget may not pay back
    (torch.compile max-autotune ran 1.39x the baseline's steps and 0.83x its 3-epoch runs on a
    2-core CPU: docs/research/evidence.md)."""
    ratios = []
    for row, base in paired:
        if _trained(row) != _trained(base):
            # A timed finalist (the same computation, so the baseline's batch and steps)
            # against a trained baseline: both projected over the budget from their compile
            # and step seconds. The baseline's loop may cover a share of the budget only
            # (short evidence: 600 of 12,000 steps), and its seconds would then read as a
            # run 20 times shorter than the finalist's projection.
            mine, theirs = _projected_s(row, budget_steps), _projected_s(base, budget_steps)
        else:
            mine = end_to_end_seconds(row, budget_steps)
            theirs = end_to_end_seconds(base, budget_steps)
        if mine and theirs:
            ratios.append(theirs / mine)
    if not ratios:
        return None, None
    return speedup_ci95(ratios)
