"""One configuration's verified figures (:class:`CandidateVerdict`) and the knobs it changed,
shared by the throughput verdicts (:mod:`._summary`) and the time-to-accuracy ones
(:mod:`._to_target`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.config import format_knob_value

__all__ = ["CandidateVerdict", "changed_knobs"]


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
