"""The records of a verification: its plan, its measurements and the run that holds both."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

__all__ = ["VerificationPlan", "VerificationRecord", "VerificationRun"]


@dataclass(frozen=True)
class VerificationPlan:
    """What one verification re-measures: the baseline and the finalists, R rounds, R seeds.

    Attributes:
        baseline_trial: the study's baseline trial number.
        candidates: the finalists' trial numbers, in the order they run within a round.
        seeds: the training seed of each round (``len(seeds)`` is the number of rounds).
        accuracy_tolerance_pt: how many accuracy points (0.5 = 0.005) below the baseline's
            mean a candidate may be and still qualify.
    """

    baseline_trial: int
    candidates: tuple[int, ...]
    seeds: tuple[int, ...]
    accuracy_tolerance_pt: float

    @property
    def rounds(self) -> int:
        """Verification rounds (one seed each)."""
        return len(self.seeds)

    def schedule(self) -> list[tuple[int, int]]:
        """``(round_index, trial_number)`` in run order, interleaved: baseline, c1..cK, then
        the next round's baseline, c1..cK, ... (so slow drifts of the machine hit every
        configuration alike). Empty without candidates: there is nothing to compare."""
        if not self.candidates:
            return []
        order = (self.baseline_trial, *self.candidates)
        return [(r, number) for r in range(self.rounds) for number in order]


@dataclass(frozen=True)
class VerificationRecord:
    """One configuration measured in one verification round.

    Attributes:
        round_index: the round (0-based).
        seed: the round's training seed.
        trial_number: the study trial whose configuration was re-run.
        is_baseline: it is the baseline.
        simulated: the mock device produced it.
        failure: ``oom``, ``error``, ``crash``, ``timeout`` or None when measured.
        failure_detail: the end of the error output.
        throughput_sps: global training samples/s (median of timed windows).
        throughput_iqr_sps: interquartile range of the window throughputs.
        step_time_s: median seconds per optimizer step.
        val_metric: validation metric (top-1 accuracy in [0, 1]).
        peak_memory_bytes: peak memory in bytes.
        train_s: wall seconds of the training loop.
        config_json: the full trial configuration that ran (seed included).
        time_to_accuracy_s: time-to-accuracy studies: wall seconds to the target (None when
            missed, and in throughput studies).
        target_reached: time-to-accuracy studies: whether the target was met; None in
            throughput studies and for a failed run.
        metric_curve_json: time-to-accuracy studies: the evaluations as a JSON list of
            ``[wall_s, step, metric]``.
    """

    round_index: int
    seed: int
    trial_number: int
    is_baseline: bool
    simulated: bool
    failure: str | None
    failure_detail: str | None
    throughput_sps: float | None
    throughput_iqr_sps: float | None
    step_time_s: float | None
    val_metric: float | None
    peak_memory_bytes: int | None
    train_s: float | None
    config_json: str
    time_to_accuracy_s: float | None = None
    target_reached: bool | None = None
    metric_curve_json: str | None = None


@dataclass(frozen=True)
class VerificationRun:
    """A verification of a study as stored: its number, plan, rows and state.

    Attributes:
        study_name: the Optuna study name.
        number: 1 for the study's first verification, 2 for the next, ...
        plan: what it re-measures.
        rows: the measurements so far, by round.
        started_at: when it was planned (UTC).
        completed_at: when its last round finished (UTC); None while rounds are missing.
    """

    study_name: str
    number: int
    plan: VerificationPlan
    rows: tuple[VerificationRecord, ...]
    started_at: dt.datetime | None
    completed_at: dt.datetime | None

    @property
    def complete(self) -> bool:
        """Every round of every configuration has a row."""
        return self.completed_at is not None

    def done(self) -> set[tuple[int, int]]:
        """``(round_index, trial_number)`` pairs that have a row."""
        return {(r.round_index, r.trial_number) for r in self.rows}
