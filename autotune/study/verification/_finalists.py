"""Planning a verification: the screen that picks the finalists, the trial that came closest
when none passed, and the training seed of each round."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from optuna.trial import FrozenTrial

from autotune.core.config import SYSTEM_KNOBS
from autotune.core.exceptions import VerificationError
from autotune.study.baseline import baseline_trial
from autotune.study.evidence import INHERITING_CLASSES
from autotune.study.objectives import Objective, ObjectiveMode
from autotune.study.trial_result import TrialResult
from autotune.study.verification._metric import (
    ACCURACY,
    DEFAULT_SCREEN_Z,
    passes_screen,
    screen_allowance,
)
from autotune.study.verification._speedup import is_valid_figure

__all__ = [
    "SEED_STRIDE",
    "changes_model",
    "closest_trial",
    "inherits_accuracy",
    "likeliest_finalist",
    "model_change_finalists",
    "ranking_sps",
    "round_seeds",
    "select_finalists",
]

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


def _results(trials: Sequence[FrozenTrial]) -> list[TrialResult]:
    return [TrialResult.from_trial(t) for t in trials]


def _measured(trial: TrialResult) -> bool:
    """A throughput trial with a valid throughput (finite, > 0) and a finite metric."""
    value = trial.val_metric
    return (
        is_valid_figure(trial.throughput_sps)
        and not trial.failed
        and value is not None
        and math.isfinite(value)
    )


def _ran_to_target(trial: TrialResult) -> bool:
    """A time-to-accuracy trial that trained (reached its target or not) without failing."""
    return (
        not trial.failed
        and trial.target_reached is not None
        and trial.seconds_trained_to_target is not None
    )


def _seconds_to_beat(trial: TrialResult) -> float:
    """The baseline's time to accuracy; where it missed the target, the seconds it trained
    (a lower bound of its time: whatever reached the target sooner is faster)."""
    seconds = trial.seconds_trained_to_target
    assert seconds is not None  # _ran_to_target
    return seconds


def _measured_baseline(
    trials: Sequence[FrozenTrial], measured: Callable[[TrialResult], bool]
) -> TrialResult:
    """The study's baseline trial, where ``measured`` accepts it.

    Raises:
        VerificationError: the study has no baseline trial, or its baseline produced no
            measurement.
    """
    found = baseline_trial(trials)
    base = TrialResult.from_trial(found) if found is not None else None
    if base is None or not measured(base):
        why = (
            "has no baseline trial"
            if base is None
            else (
                f"baseline trial {base.number} produced no measurement "
                f"({base.failure_kind or 'not measured'})"
            )
        )
        raise VerificationError(f"the study {why}; there is nothing to compare against")
    return base


def _select_tta_finalists(
    trials: Sequence[FrozenTrial], pareto_numbers: set[int], candidates: int
) -> tuple[int, tuple[int, ...]]:
    """:func:`select_finalists` of a time-to-accuracy study."""
    base = _measured_baseline(trials, _ran_to_target)
    results = _results(trials)
    base_s = _seconds_to_beat(base)
    eligible = [
        t
        for t in results
        if t.number != base.number
        and t.feasible
        and _ran_to_target(t)
        and t.target_reached is True
        and t.time_to_accuracy_s is not None
        and is_valid_figure(t.time_to_accuracy_s)
        and t.time_to_accuracy_s < base_s
    ]
    # Pareto-optimal first (False sorts before True), then soonest first, then lower number.
    eligible.sort(
        key=lambda t: (
            t.number not in pareto_numbers,
            t.time_to_accuracy_s or 0.0,
            t.number,
        )
    )
    return base.number, _distinct(eligible, base, candidates)


def changes_model(params: Mapping[str, Any], baseline_params: Mapping[str, Any]) -> bool:
    """Whether a configuration changes the model: any knob outside the tuner's own
    (:data:`~autotune.core.config.SYSTEM_KNOBS`: batch size, precision, memory format, compile mode,
    workers, GPU count) differs from the baseline's. Such a configuration belongs to the
    ``model_change`` answer; one that changes only the tuner's knobs, to ``same_model``."""
    names = (set(params) | set(baseline_params)) - set(SYSTEM_KNOBS)
    return any(params.get(name) != baseline_params.get(name) for name in names)


def model_change_finalists(
    finalists: Sequence[int],
    params_by_trial: Mapping[int, Mapping[str, Any]],
    baseline: int,
) -> tuple[int, ...]:
    """The finalists that change the model (:func:`changes_model`), in their order: the
    ``model_change`` answer's (:attr:`~autotune.study.storage.VerificationPlan.model_changes`)."""
    base = params_by_trial.get(baseline, {})
    return tuple(n for n in finalists if changes_model(params_by_trial.get(n, {}), base))


def _distinct(
    eligible: Sequence[TrialResult], base: TrialResult, candidates: int
) -> tuple[int, ...]:
    """The first ``candidates`` of ``eligible`` whose knobs differ from the baseline's and
    from every earlier one's (a warm start, a retried trial), for each answer apart: up to
    ``candidates`` that keep the baseline's model (:func:`changes_model`), then up to
    ``candidates`` that change it. Where an answer's picks all train (numerics, batch or
    model changes), its fastest eligible trial whose accuracy is inherited with a passed
    paired check (the same computation as the baseline: :func:`inherits_accuracy`) is
    added after them: the race keeps a survivor per lane (trained, inherited), and that
    lane's is verified by timing in seconds, where the faster trained ones may need more
    learning evidence than a cost cap buys."""
    picked: list[int] = []
    for model_change in (False, True):
        chosen: list[TrialResult] = []
        answer = [t for t in eligible if changes_model(t.params, base.params) == model_change]
        for t in answer:
            if _new_knobs(t, base, chosen):
                chosen.append(t)
            if len(chosen) == candidates:
                break
        if chosen and not any(inherits_accuracy(t) for t in chosen):
            timed = next(
                (t for t in answer if inherits_accuracy(t) and _new_knobs(t, base, chosen)), None
            )
            if timed is not None:
                chosen.append(timed)
        picked.extend(t.number for t in chosen)
    return tuple(picked)


def _new_knobs(trial: TrialResult, base: TrialResult, chosen: Sequence[TrialResult]) -> bool:
    """The trial's knobs are neither the baseline's nor any chosen finalist's."""
    return trial.params != base.params and all(trial.params != c.params for c in chosen)


def inherits_accuracy(trial: TrialResult) -> bool:
    """The search inherited the trial's accuracy from the baseline with a passed paired check
    (``accuracy_source == "inherited"``, identical or the same computation: its verification
    runs are timed, not trained)."""
    return trial.accuracy_source == "inherited" and trial.evidence_class in INHERITING_CLASSES


def _passes(
    trial: TrialResult,
    base: TrialResult,
    metric: Objective,
    tolerance_pt: float,
    screen_z: float,
) -> bool:
    """The screen's accuracy rule for one measured trial against the measured baseline."""
    value, base_value = trial.val_metric, base.val_metric
    assert value is not None and base_value is not None  # _measured
    return passes_screen(
        metric,
        value,
        trial.val_samples,
        base_value,
        base.val_samples,
        tolerance_pt,
        screen_z,
    )


def select_finalists(
    trials: Sequence[FrozenTrial],
    pareto_numbers: set[int],
    candidates: int,
    accuracy_tolerance_pt: float,
    metric: Objective = ACCURACY,
    objective: ObjectiveMode = "throughput",
    screen_z: float = DEFAULT_SCREEN_Z,
) -> tuple[int, tuple[int, ...]]:
    """The baseline and the finalists to verify, from a study's finished trials: the screen.

    In a throughput study a trial passes the screen when it is feasible, its throughput is
    above the baseline trial's, and its metric is not below the baseline's by more than the
    tolerance plus ``screen_z`` standard errors of the difference
    (:func:`~autotune.study.verification._metric.screen_allowance`: for accuracy, Agresti-Caffo on the two
    trials' ``val_samples``; for another metric, 3 x the tolerance). One search trial's
    accuracy on a few hundred validation images moves by more than the 0.5 pt tolerance from
    seed to seed alone, so a tolerance without the noise would drop candidates for their luck.
    Finalists are chosen for each answer apart (:func:`changes_model`): the Pareto-optimal
    trials that pass, fastest first (a global-batch change under short evidence by its
    goodput, :func:`ranking_sps`), then the next fastest of the rest, until ``candidates``
    are chosen that keep the baseline's model, and as many that change it. Trials with the same knobs as the baseline
    or an earlier finalist (a warm start, a retried trial) are skipped.

    In a time-to-accuracy study (``objective="time_to_accuracy"``), finalists are feasible
    trials (the target reached) whose ``time_to_accuracy_s`` is below the baseline's: first
    the Pareto-optimal ones (time, memory), soonest first, then the next soonest of the rest.
    A baseline that trained but missed the target is beaten by any trial that reached it in
    fewer seconds than the baseline trained. No tolerance applies: the target is the bar.

    Args:
        trials: the study's trials (any states; only finished, measured ones are considered).
        pareto_numbers: numbers of the Pareto-optimal feasible trials (Optuna's
            ``study.best_trials``).
        candidates: how many finalists at most for each answer (K >= 1).
        accuracy_tolerance_pt: accuracy points (0.5 = 0.005) a finalist may give up; for
            another metric, percent of the baseline's value (:func:`metric_allowance`).
        metric: the study's validation metric (default: accuracy, maximized).
        objective: the study's mode, ``throughput`` or ``time_to_accuracy``
            (:func:`autotune.study.objectives.objective_mode`).
        screen_z: standard errors of the difference added to the tolerance
            (``advanced.verify.screen_z``, default 1.645).

    Returns:
        ``(baseline trial number, finalist trial numbers in run order)``, the same-model
        answer's first (:func:`model_change_finalists` tells them apart); the tuple is empty
        when no trial passes the screen (:func:`closest_trial` says which came closest).

    Raises:
        VerificationError: the study has no measured baseline trial.
    """
    if objective == "time_to_accuracy":
        return _select_tta_finalists(trials, pareto_numbers, candidates)
    base = _measured_baseline(trials, _measured)
    results = _results(trials)
    base_sps = base.throughput_sps or 0.0
    eligible = [
        t
        for t in results
        if t.number != base.number
        and t.feasible
        and _measured(t)
        and (t.throughput_sps or 0.0) > base_sps
        and _passes(t, base, metric, accuracy_tolerance_pt, screen_z)
    ]
    # Pareto-optimal first (False sorts before True), then the highest ranking figure first (a
    # predicted global-batch change's throughput x E(B); the throughput of any other), then
    # lower number.
    eligible.sort(
        key=lambda t: (
            t.number not in pareto_numbers,
            -ranking_sps(t),
            t.number,
        )
    )
    return base.number, _distinct(eligible, base, candidates)


def likeliest_finalist(
    trials: Sequence[FrozenTrial],
    baseline: int,
    finalists: Sequence[int],
    accuracy_tolerance_pt: float,
    metric: Objective = ACCURACY,
) -> int | None:
    """The finalist a verification the cost cap cannot afford in full keeps to the last
    (:func:`autotune.study.verification.fit_budget`'s ``fastest``): the first in the screen's
    order whose single-trial metric is within the tolerance of the baseline's on its own
    (the screen's noise allowance left out, ``screen_z`` 0), else the screen's first; None
    without finalists.

    The screen lets a trial through on the noise of one measurement, so that a candidate is
    not dropped for its luck; but where the cap leaves one finalist's confirmation, the one
    whose own figure already meets the tolerance is the likelier verified answer. On the
    main job's AVX-512 EPYC the screen's first was bf16 + channels_last at batch 256 (98.0 %
    against the baseline's 98.7 %: within the allowance of 1.1 pt on 2,000 images, not the
    0.5 pt tolerance); kept alone, it verified as a trade-off (-0.65 pt, -0.87 to -0.43), and
    the same change at batch 128 (98.6 %) was left out.

    Args:
        trials: the study's trials.
        baseline: the baseline trial's number.
        finalists: the screen's finalists, in its order.
        accuracy_tolerance_pt: ``verify.accuracy_tolerance_pt``.
        metric: the study's validation metric.
    """
    if not finalists:
        return None
    by_number = {r.number: r for r in _results(trials)}
    base = by_number.get(baseline)
    if base is None or not _measured(base):
        return finalists[0]
    for number in finalists:
        trial = by_number.get(number)
        if (
            trial is not None
            and _measured(trial)
            and _passes(trial, base, metric, accuracy_tolerance_pt, screen_z=0.0)
        ):
            return number
    return finalists[0]


def ranking_sps(trial: TrialResult) -> float:
    """The figure the screen ranks a throughput trial by, samples/s: a global-batch change's
    goodput (throughput x E(B) against the baseline's noise scale, :mod:`autotune.core.goodput`:
    the samples/s of the baseline's batch it is worth, Pollux's rule) while its learning is
    predicted (short evidence: it stopped at a share of the budget); the throughput of any
    other trial (E(B) = 1 at the baseline's batch), of a batch change whose baseline
    resolved no noise scale, and of one that trained the whole budget and was evaluated: its
    metric, measured after the same samples as the baseline's, already shows what the batch
    costs in learning over the user's budget, which E(B) only predicts (and the screen holds
    it to the tolerance). On the main job's AVX-512 EPYC, bf16 + channels_last at batch 128
    trained the budget to 98.6 % against the baseline's 98.7 % at 10,407 samples/s; its
    goodput (E(B) 0.70) ranked it below the same change at batch 64 (7,482)."""
    predicted = trial.accuracy_source != "measured" or trial.budget_steps is not None
    if trial.goodput_sps is not None and predicted:
        return trial.goodput_sps
    return trial.throughput_sps or 0.0


def closest_trial(
    trials: Sequence[FrozenTrial],
    accuracy_tolerance_pt: float,
    metric: Objective = ACCURACY,
    screen_z: float = DEFAULT_SCREEN_Z,
) -> str | None:
    """The search trial that came closest to the screen of a throughput study, in words, for
    the "nothing to verify" ending: among feasible measured trials faster than the baseline,
    the one whose metric fell short of the screen by the least; where none was faster, the
    fastest. None without a measured baseline or any other measured trial.

    Example: ``trial 15: 1.19x the baseline's throughput in the search at 98.89 % accuracy;
    the screen asked for at least 99.02 % (defaults 99.72 %, n=359)``.
    """
    found = baseline_trial(trials)
    base = TrialResult.from_trial(found) if found is not None else None
    if base is None or not _measured(base):
        return None
    base_sps = base.throughput_sps or 0.0
    base_value = base.val_metric
    assert base_value is not None
    others = [
        t for t in _results(trials) if t.number != base.number and t.feasible and _measured(t)
    ]
    if not others:
        return None
    faster = [t for t in others if (t.throughput_sps or 0.0) > base_sps]

    def bar(t: TrialResult) -> float:
        """The worst metric the screen lets through for ``t``."""
        value = t.val_metric
        assert value is not None
        allowance = screen_allowance(
            metric,
            value,
            t.val_samples,
            base_value,
            base.val_samples,
            accuracy_tolerance_pt,
            screen_z,
        )
        return base_value - metric.sign * allowance

    def shortfall(t: TrialResult) -> float:
        value = t.val_metric
        assert value is not None
        return metric.gain(bar(t) - value)

    pick = (
        min(faster, key=lambda t: (shortfall(t), t.number))
        if faster
        else max(others, key=lambda t: (t.throughput_sps or 0.0, -t.number))
    )
    value = pick.val_metric
    assert value is not None
    ratio = (pick.throughput_sps or 0.0) / base_sps
    n = base.val_samples
    at_n = f", n={n:,}" if n else ""
    head = (
        f"trial {pick.number}: {ratio:.2f}x the baseline's throughput in the search at "
        f"{_metric_words(metric, value)}"
    )
    if not faster:
        return f"{head}; no trial was faster than the baseline"
    least = "at least" if metric.maximized else "at most"
    return (
        f"{head}; the screen asked for {least} {_metric_words(metric, bar(pick), bare=True)} "
        f"(baseline {_metric_words(metric, base_value, bare=True)}{at_n})"
    )


def _metric_words(metric: Objective, value: float, *, bare: bool = False) -> str:
    """``98.89 % accuracy`` (``98.89 %`` when ``bare``), ``val_loss 1.234``."""
    if metric.is_accuracy:
        return f"{100 * value:.2f} %" + ("" if bare else " accuracy")
    return f"{metric.name} {metric.format(value, 1)}"
