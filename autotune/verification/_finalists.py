"""Planning a verification: the finalists to re-measure and the training seed of each round."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from optuna.trial import FrozenTrial

from autotune.baseline import baseline_trial
from autotune.exceptions import VerificationError
from autotune.objectives import Objective, ObjectiveMode
from autotune.storage.records import is_feasible
from autotune.verification._metric import ACCURACY, trial_metric, within_tolerance

__all__ = ["SEED_STRIDE", "round_seeds", "select_finalists"]

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


def _measured(trial: FrozenTrial) -> bool:
    return (
        trial.user_attrs.get("throughput_sps") is not None
        and "failure" not in trial.user_attrs
        and trial_metric(trial) is not None
    )


def _ran_to_target(trial: FrozenTrial) -> bool:
    """A time-to-accuracy trial that trained (reached its target or not) without failing."""
    attrs = trial.user_attrs
    return (
        "failure" not in attrs
        and isinstance(attrs.get("target_reached"), bool)
        and (attrs.get("time_to_accuracy_s") is not None or attrs.get("train_s") is not None)
    )


def _seconds_to_beat(trial: FrozenTrial) -> float:
    """The baseline's time to accuracy; where it missed the target, the seconds it trained
    (a lower bound of its time: whatever reached the target sooner is faster)."""
    attrs = trial.user_attrs
    seconds = attrs.get("time_to_accuracy_s")
    return float(seconds if seconds is not None else attrs["train_s"])


def _measured_baseline(
    trials: Sequence[FrozenTrial], measured: Callable[[FrozenTrial], bool]
) -> FrozenTrial:
    """The study's baseline trial, where ``measured`` accepts it.

    Raises:
        VerificationError: the study has no baseline trial, or its baseline produced no
            measurement.
    """
    base = baseline_trial(trials)
    if base is None or not measured(base):
        why = (
            "has no baseline trial"
            if base is None
            else (
                f"baseline trial {base.number} produced no measurement "
                f"({base.user_attrs.get('failure', 'not measured')})"
            )
        )
        raise VerificationError(f"the study {why}; there is nothing to compare against")
    return base


def _select_tta_finalists(
    trials: Sequence[FrozenTrial], pareto_numbers: set[int], candidates: int
) -> tuple[int, tuple[int, ...]]:
    """:func:`select_finalists` of a time-to-accuracy study."""
    base = _measured_baseline(trials, _ran_to_target)
    base_s = _seconds_to_beat(base)
    eligible = [
        t
        for t in trials
        if t.number != base.number
        and is_feasible(t)
        and _ran_to_target(t)
        and t.user_attrs.get("target_reached") is True
        and t.user_attrs.get("time_to_accuracy_s") is not None
        and float(t.user_attrs["time_to_accuracy_s"]) < base_s
    ]
    # Pareto-optimal first (False sorts before True), then soonest first, then lower number.
    eligible.sort(
        key=lambda t: (
            t.number not in pareto_numbers,
            float(t.user_attrs["time_to_accuracy_s"]),
            t.number,
        )
    )
    return base.number, _distinct(eligible, base, candidates)


def _distinct(
    eligible: Sequence[FrozenTrial], base: FrozenTrial, candidates: int
) -> tuple[int, ...]:
    """The first ``candidates`` of ``eligible`` whose knobs differ from the baseline's and
    from every earlier one's (a warm start, a retried trial)."""
    chosen: list[FrozenTrial] = []
    for t in eligible:
        if t.params != base.params and all(t.params != c.params for c in chosen):
            chosen.append(t)
        if len(chosen) == candidates:
            break
    return tuple(t.number for t in chosen)


def select_finalists(
    trials: Sequence[FrozenTrial],
    pareto_numbers: set[int],
    candidates: int,
    accuracy_tolerance_pt: float,
    metric: Objective = ACCURACY,
    objective: ObjectiveMode = "throughput",
) -> tuple[int, tuple[int, ...]]:
    """The baseline and the finalists to verify, from a study's finished trials.

    In a time-to-accuracy study (``objective="time_to_accuracy"``), finalists are feasible
    trials (the target reached) whose ``time_to_accuracy_s`` is below the baseline's: first
    the Pareto-optimal ones (time, memory), soonest first, then the next soonest of the rest.
    A baseline that trained but missed the target is beaten by any trial that reached it in
    fewer seconds than the baseline trained. The tolerance does not apply: the target is the
    quality bar.

    In a throughput study, finalists are feasible trials faster than the baseline whose metric is within the
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
        objective: the study's mode, ``throughput`` or ``time_to_accuracy``
            (:func:`autotune.objectives.objective_mode`).

    Returns:
        ``(baseline trial number, finalist trial numbers in run order)``; the tuple is empty
        when no trial qualifies.

    Raises:
        VerificationError: the study has no measured baseline trial.
    """
    if objective == "time_to_accuracy":
        return _select_tta_finalists(trials, pareto_numbers, candidates)
    base = _measured_baseline(trials, _measured)
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
    return base.number, _distinct(eligible, base, candidates)
