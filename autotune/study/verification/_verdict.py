"""One configuration's verified figures (:class:`CandidateVerdict`), the knobs it changed, and
what both verdict modes share: which rows count as measured and which limits a verified
figure breaks. Used by the throughput verdicts (:mod:`._summary`) and the time-to-accuracy
ones (:mod:`._to_target`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from autotune.core.config import format_knob_value
from autotune.core.units import MIB
from autotune.study.objectives import Objective
from autotune.study.storage.records import Answer, VerificationPlan, VerificationRecord

__all__ = [
    "ANSWER_WORDS",
    "CandidateVerdict",
    "Stage",
    "changed_knobs",
    "constraint_violation",
    "invalid_figure",
    "measured_rows",
    "metric_versus",
    "rounds_text",
]

#: A verification's stage: ``race`` (A: baseline and finalists, picks one survivor) or
#: ``confirm`` (B: baseline and the survivor over fresh seeds; the only claim).
Stage = Literal["race", "confirm"]
#: Each answer in the words every output uses.
ANSWER_WORDS: dict[Answer, str] = {"same_model": "same model", "model_change": "model change"}


def invalid_figure(row: VerificationRecord, time_to_accuracy: bool) -> str | None:
    """Why a run without a failure still has no usable figure, or None when it has one: a
    throughput (or, in a time-to-accuracy run, a time to the target) that is not a finite
    number above 0, or a metric that is not finite. Such a run counts as a failure."""
    if row.failure is not None:
        return None
    if time_to_accuracy:
        seconds = row.time_to_accuracy_s if row.target_reached else row.train_s
        if seconds is None or not math.isfinite(seconds) or seconds <= 0:
            return f"invalid time ({seconds})"
    elif row.throughput_sps is None or not math.isfinite(row.throughput_sps):
        return f"invalid throughput ({row.throughput_sps})"
    elif row.throughput_sps <= 0:
        return f"invalid throughput ({row.throughput_sps:g} samples/s)"
    if row.val_metric is not None and not math.isfinite(row.val_metric):
        return f"invalid metric ({row.val_metric})"
    return None


def measured_rows(
    rows: Sequence[VerificationRecord], time_to_accuracy: bool
) -> tuple[list[VerificationRecord], tuple[str, ...]]:
    """A configuration's rows that measured a usable figure, and ``"round N: why"`` for each
    of the others: a failure, or a figure :func:`invalid_figure` refuses (both disqualify).

    Args:
        rows: its rows of one stage.
        time_to_accuracy: the rows are time-to-accuracy runs (their figure is a time).
    """
    measured: list[VerificationRecord] = []
    failures: list[str] = []
    for row in rows:
        why = row.failure or invalid_figure(row, time_to_accuracy)
        if why is None:
            measured.append(row)
        else:
            failures.append(f"round {row.round_index + 1}: {why}")
    return measured, tuple(failures)


def rounds_text(rows: Sequence[VerificationRecord]) -> str:
    """The 1-based round numbers of ``rows``: ``1, 3``."""
    return ", ".join(str(r.round_index + 1) for r in rows)


def constraint_violation(
    measured: Sequence[VerificationRecord],
    metric_mean: float | None,
    plan: VerificationPlan,
) -> str | None:
    """The first of the run's limits the verified figures break, in words, or None.

    ``constraints.max_memory_bytes`` is broken by any round's peak memory above it (a
    configuration that overflows once cannot be recommended); ``constraints.min_accuracy``
    by the mean metric over the rounds below it.
    """
    if plan.max_memory_bytes is not None:
        over = [
            r
            for r in measured
            if r.peak_memory_bytes is not None and r.peak_memory_bytes > plan.max_memory_bytes
        ]
        if over:
            worst = max(r.peak_memory_bytes or 0 for r in over)
            return (
                f"over constraints.max_memory_bytes: {worst / MIB:,.1f} MiB > "
                f"{plan.max_memory_bytes / MIB:,.1f} MiB in round {rounds_text(over)}"
            )
    if (
        plan.min_accuracy is not None
        and metric_mean is not None
        and (metric_mean < plan.min_accuracy)
    ):
        return f"under constraints.min_accuracy: mean {metric_mean:.4f} < {plan.min_accuracy:.4f}"
    return None


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
        qualifies: in the confirmation (``stage="confirm"``): it may be recommended (every
            round measured, the paired metric difference shown non-inferior, the run's
            limits kept, the speedup's interval above 1.0; in a time-to-accuracy
            verification the target reached in every round instead of the tolerance). In the
            race (``stage="race"``): it may survive (every round measured, the pooled metric
            through the screen, the limits kept, a speedup above 1.0); the survivor is the
            fastest of those.
        verdict: why it qualifies or not, in a few words.
        time_to_accuracy_s: time-to-accuracy verifications: seconds to the target, the
            geometric mean over the rounds, a round that missed the target counted at the
            seconds it trained (censored: its time is at least that). The same mean as
            ``speedup``'s: the defaults' ``time_to_accuracy_s`` over this one's is
            ``speedup`` when every round is paired. None in a throughput verification.
        time_to_accuracy_spread_s: ``(fastest, slowest)`` over the same rounds; None likewise.
        targets_missed: rounds in which it trained without failing but did not reach the
            target (0 in a throughput verification).
        stage: ``race`` or ``confirm`` (:data:`Stage`).
        metric_diff_mean: mean over rounds of its validation metric minus the same round's
            baseline's (paired); None for the baseline or without a paired round.
        metric_diff_ci95: Student's t 95 % interval of that mean; None with one round.
        non_inferior: the paired difference's 95 % interval lies entirely on the better side
            of the tolerance (:func:`~autotune.study.verification.is_non_inferior`), so "the same
            accuracy" is a measured claim; None for the baseline, the race, and a
            time-to-accuracy verification (its target is the bar).
        trade_off: confirmed verifiably faster, but not shown non-inferior: shown with its
            figures, never recommended.
        val_samples: validation samples per round (the fewest over the rounds).
        time_to_accuracy_mlperf_s: time-to-accuracy verifications: MLPerf Training's
            aggregate of the same per-round times
            (:func:`~autotune.study.verification.mlperf_time_to_accuracy_s`), for comparison with
            published figures.
        busy_runs: its rows of the stage measured on a busy machine (other processes above
            ``advanced.measure.max_other_cpu_share`` of the CPUs) after the re-runs were spent.
        answer: the answer it belongs to: ``same_model`` (only the tuner's knobs changed) or
            ``model_change`` (:attr:`~autotune.study.storage.VerificationPlan.model_changes`).
        evidence: for a candidate that inherits its accuracy (the plan's ``inherited``):
            ``identical computation`` or ``the same computation``, what its paired checks
            showed; None for a candidate whose metric was trained and measured.
        check_text: the rounds' paired checks in words
            (:func:`~autotune.study.verification._throughput.check_summary`); None likewise.
        end_to_end_speedup: the speedup over a whole run of the budget, compilation
            included (:func:`~autotune.study.verification._throughput.end_to_end`); None for the
            baseline or when unknown. ``speedup`` is the steady state's.
        end_to_end_ci95: its 95 % interval.
        futile: a trained candidate whose confirmation was not run, or stopped early: the
            spread of its paired metric difference, in the race
            (:func:`~autotune.study.verification.race_survivors`) or in the confirmation's
            first rounds (:func:`~autotune.study.verification.confirmation_stops`), says the
            confirmation's rounds could not show it non-inferior; ``verdict`` says by how
            much. It never qualifies.
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
    stage: Stage = "confirm"
    metric_diff_mean: float | None = None
    metric_diff_ci95: tuple[float, float] | None = None
    non_inferior: bool | None = None
    trade_off: bool = False
    val_samples: int | None = None
    time_to_accuracy_mlperf_s: float | None = None
    busy_runs: int = 0
    answer: Answer = "same_model"
    evidence: str | None = None
    check_text: str | None = None
    end_to_end_speedup: float | None = None
    end_to_end_ci95: tuple[float, float] | None = None
    futile: bool = False

    @property
    def inherits_accuracy(self) -> bool:
        """Its accuracy is the baseline's, inherited with its paired checks."""
        return self.evidence is not None

    def changes_text(self) -> str:
        """The changed knobs as ``precision fp32->bf16, batch_size 64->256``."""
        if not self.changed:
            return "no knob changed"
        return ", ".join(
            f"{name} {format_knob_value(old)}->{format_knob_value(new)}"
            for name, old, new in self.changed
        )


def metric_versus(metric: Objective, value: float, baseline_value: float) -> str:
    """A value against the baseline's: ``98.42 % vs 98.50 %`` (accuracy), ``1.234 vs 1.240``."""
    if metric.is_accuracy:
        return f"{100 * value:.2f} % vs {100 * baseline_value:.2f} %"
    return f"{metric.format(value, 1)} vs {metric.format(baseline_value, 1)}"
