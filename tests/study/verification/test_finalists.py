"""Planning a verification (autotune/study/verification/_finalists.py): the finalists and the
round seeds, on hand-built trials."""

from __future__ import annotations

import math
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from autotune.core.exceptions import VerificationError
from autotune.study.trial_result import TrialResult
from autotune.study.verification import (
    inherits_accuracy,
    round_seeds,
    select_finalists,
)
from autotune.study.verification._finalists import (
    closest_trial,
    ranking_sps,
)
from autotune.study.verification._metric import (
    ACCURACY,
    agresti_caffo_se,
    screen_allowance,
)
from tests.study.verification.metrics import VAL_LOSS


def _trial(
    number: int,
    batch_size: int,
    throughput_sps: float | None,
    val_metric: float | None,
    *,
    baseline: bool = False,
    failure: str | None = None,
    constraint: float = 0.0,
    val_samples: int | None = None,
) -> FrozenTrial:
    attrs: dict[str, Any] = {"baseline": True} if baseline else {}
    if throughput_sps is not None:
        attrs.update(throughput_sps=throughput_sps, val_metric=val_metric)
    if val_samples is not None:
        attrs["val_samples"] = val_samples
    if failure is not None:
        attrs["failure"] = failure
    trial = optuna.trial.create_trial(
        state=TrialState.COMPLETE,
        # Optuna refuses a NaN objective value; the user attribute keeps the figure.
        values=[
            throughput_sps if throughput_sps and math.isfinite(throughput_sps) else 0.0,
            val_metric or 0.0,
            1.0,
        ],
        params={"batch_size": batch_size},
        distributions={"batch_size": CategoricalDistribution([16, 32, 64, 128, 256, 512])},
        user_attrs=attrs,
        system_attrs={"constraints": [constraint]},
    )
    trial.number = number
    return trial


def test_round_seeds_never_repeat_the_search_seed_nor_another_verification() -> None:
    first, second = round_seeds(7, 1, 3), round_seeds(7, 2, 3)

    assert len(first) == len(set(first)) == 3
    assert 7 not in first + second
    assert not set(first) & set(second)


# --------------------------------------------------------------------------------------------
# select_finalists


def test_finalists_are_pareto_first_then_fastest_within_the_tolerance() -> None:
    trials = [
        _trial(0, 64, 1000.0, 0.950, baseline=True),
        _trial(1, 128, 1800.0, 0.948),  # faster, 0.2 pt lower: eligible (not Pareto)
        _trial(2, 256, 2500.0, 0.930),  # 2 pt lower: too inaccurate
        _trial(3, 32, 1500.0, 0.952),  # Pareto
        _trial(4, 16, 900.0, 0.960),  # slower than the baseline
        _trial(5, 512, 3000.0, 0.949, constraint=1.0),  # infeasible
        _trial(6, 128, 1700.0, 0.951),  # same knobs as trial 1
        _trial(7, 512, 2000.0, 0.947, failure="oom"),  # failed
    ]

    baseline, finalists = select_finalists(trials, {3}, candidates=4, accuracy_tolerance_pt=0.5)

    assert baseline == 0
    assert finalists == (3, 1)


def test_a_batch_change_is_ranked_by_its_goodput_not_its_throughput() -> None:
    # Trial 1 doubles the batch: 1.5x the baseline's throughput, but E(B) = 0.6 makes it worth
    # 900 samples/s of the baseline's batch; trial 2 (its batch without an E(B): ranked by its
    # throughput) runs 1.2x. Goodput puts trial 2 first although trial 1 is faster in samples/s.
    trials = [
        _trial(0, 64, 1000.0, 0.95, baseline=True),
        _trial(1, 128, 1500.0, 0.95),
        _trial(2, 32, 1200.0, 0.95),
    ]
    trials[1].user_attrs.update(statistical_efficiency=0.6, goodput_sps=900.0)

    _, finalists = select_finalists(trials, set(), candidates=2, accuracy_tolerance_pt=0.5)

    assert finalists == (2, 1)
    assert [ranking_sps(TrialResult.from_trial(t)) for t in trials[1:]] == [900.0, 1200.0]


def test_a_batch_change_that_trained_the_budget_is_ranked_by_its_throughput() -> None:
    # The same trials, trial 1 trained the whole budget and was evaluated (no budget_steps):
    # its accuracy after the baseline's samples is measured, so E(B) predicts nothing left.
    # Under short evidence (it stopped at a share of the budget) goodput still ranks it.
    trials = [
        _trial(0, 64, 1000.0, 0.95, baseline=True),
        _trial(1, 128, 1500.0, 0.95),
        _trial(2, 32, 1200.0, 0.95),
    ]
    trials[1].user_attrs.update(
        statistical_efficiency=0.6, goodput_sps=900.0, accuracy_source="measured"
    )

    _, finalists = select_finalists(trials, set(), candidates=2, accuracy_tolerance_pt=0.5)

    assert finalists == (1, 2)
    assert ranking_sps(TrialResult.from_trial(trials[1])) == 1500.0
    trials[1].user_attrs.update(budget_steps=6000, steps=300)  # short evidence: predicted
    assert ranking_sps(TrialResult.from_trial(trials[1])) == 900.0


def test_the_likeliest_finalist_is_the_first_whose_own_metric_meets_the_tolerance() -> None:
    from autotune.study.verification import likeliest_finalist

    # Trial 1 passes the screen on the noise of 2,000 images (0.7 pt lower, the allowance
    # about 1.1 pt), trial 2 on its own figure (0.1 pt lower): a cap that keeps one keeps 2.
    trials = [
        _trial(0, 64, 1000.0, 0.987, baseline=True, val_samples=2000),
        _trial(1, 256, 2200.0, 0.980, val_samples=2000),
        _trial(2, 128, 2000.0, 0.986, val_samples=2000),
    ]
    _, finalists = select_finalists(trials, {1, 2}, candidates=3, accuracy_tolerance_pt=0.5)
    assert finalists == (1, 2)  # the screen ranks the faster first
    assert likeliest_finalist(trials, 0, finalists, 0.5) == 2
    # None within the tolerance alone: the screen's first; no finalists: None.
    assert likeliest_finalist(trials, 0, (1,), 0.5) == 1
    assert likeliest_finalist(trials, 0, (), 0.5) is None


def test_finalists_stop_at_k() -> None:
    trials = [_trial(0, 64, 1000.0, 0.9, baseline=True)] + [
        _trial(n, 16 * 2 ** (n % 6), 1000.0 + 100 * n, 0.9) for n in range(1, 6)
    ]

    _, finalists = select_finalists(trials, set(), candidates=2, accuracy_tolerance_pt=0.5)

    assert finalists == (5, 4)


def _inherited(trial: FrozenTrial) -> FrozenTrial:
    """The trial with its accuracy inherited from the baseline with a passed paired check
    (the same computation: its verification runs are timed)."""
    trial.set_user_attr("accuracy_source", "inherited")
    trial.set_user_attr("evidence_class", "same_computation")
    return trial


def test_a_timed_trial_gets_a_finalist_slot_when_the_faster_picks_all_train() -> None:
    """Three trained trials (bf16, say) fill the K=2 slots by speed; the fastest trial whose
    accuracy is inherited (channels_last) is added after them, so the race has a survivor to
    verify by timing when the trained ones' learning evidence cannot be bought."""
    trials = [
        _trial(0, 64, 1000.0, 0.9, baseline=True),
        _trial(1, 128, 2000.0, 0.9),
        _trial(2, 256, 1900.0, 0.9),
        _trial(3, 512, 1800.0, 0.9),
        _inherited(_trial(4, 16, 1200.0, 0.9)),
        _inherited(_trial(5, 32, 1100.0, 0.9)),
    ]

    _, finalists = select_finalists(trials, set(), candidates=2, accuracy_tolerance_pt=0.5)

    assert finalists == (1, 2, 4)
    assert inherits_accuracy(TrialResult.from_trial(trials[4]))
    assert not inherits_accuracy(TrialResult.from_trial(trials[1]))


def test_no_slot_is_added_when_a_pick_already_inherits_its_accuracy() -> None:
    trials = [
        _trial(0, 64, 1000.0, 0.9, baseline=True),
        _trial(1, 128, 2000.0, 0.9),
        _inherited(_trial(2, 256, 1900.0, 0.9)),
        _inherited(_trial(3, 16, 1200.0, 0.9)),
    ]

    _, finalists = select_finalists(trials, set(), candidates=2, accuracy_tolerance_pt=0.5)

    assert finalists == (1, 2)


def test_no_eligible_trial_gives_no_finalist() -> None:
    trials = [_trial(0, 64, 1000.0, 0.9, baseline=True), _trial(1, 128, 800.0, 0.9)]

    assert select_finalists(trials, {1}, 4, 0.5) == (0, ())


def test_finalists_of_a_minimized_metric_are_within_the_tolerance_above_it() -> None:
    trials = [
        _trial(0, 64, 1000.0, 2.000, baseline=True),
        _trial(1, 128, 1800.0, 2.008),  # faster, 0.4 % higher loss: eligible
        _trial(2, 256, 2500.0, 2.035),  # 1.75 % higher loss: past the screen's 3 x 0.5 %
        _trial(3, 32, 1500.0, 1.500),  # faster and a lower loss
        _trial(4, 16, 900.0, 1.000),  # slower than the baseline
        _trial(5, 512, 2000.0, 2.025),  # 1.25 % higher: within the screen (3 x the tolerance)
    ]

    assert select_finalists(trials, {3}, 4, 0.5, VAL_LOSS) == (0, (3, 5, 1))
    # Read as accuracy (maximized), the same figures would pick the higher losses.
    assert select_finalists(trials, set(), 4, 0.5) == (0, (2, 5, 1))


@pytest.mark.parametrize(
    ("trials", "why"),
    [
        ([_trial(1, 128, 800.0, 0.9)], "no baseline trial"),
        ([_trial(0, 64, None, None, baseline=True, failure="oom")], "produced no measurement"),
    ],
)
def test_a_study_without_a_measured_baseline_cannot_be_verified(
    trials: list[FrozenTrial], why: str
) -> None:
    with pytest.raises(VerificationError, match=why):
        select_finalists(trials, set(), 4, 0.5)


# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# select_finalists of a time-to-accuracy study


def _tta_trial(
    number: int,
    batch_size: int,
    seconds: float | None,
    *,
    baseline: bool = False,
    train_s: float = 100.0,
    failure: str | None = None,
) -> FrozenTrial:
    """A time-to-accuracy trial that reached the target in ``seconds``, or trained
    ``train_s`` and missed it (None: infeasible, as the study marks it), or failed."""
    attrs: dict[str, Any] = {"baseline": True} if baseline else {}
    reached = seconds is not None
    if failure is not None:
        attrs["failure"] = failure
    else:
        attrs.update(
            time_to_accuracy_s=seconds,
            target_reached=reached,
            train_s=seconds if reached else train_s,
            throughput_sps=1000.0,
            val_metric=0.98 if reached else 0.9,
        )
    trial = optuna.trial.create_trial(
        state=TrialState.COMPLETE,
        values=[seconds if seconds is not None else train_s, 1.0],
        params={"batch_size": batch_size},
        distributions={"batch_size": CategoricalDistribution([16, 32, 64, 128, 256, 512])},
        user_attrs=attrs,
        system_attrs={"constraints": [0.0 if reached and failure is None else 1.0]},
    )
    trial.number = number
    return trial


def test_tta_finalists_reached_the_target_sooner_pareto_first_then_soonest() -> None:
    trials = [
        _tta_trial(0, 64, 30.0, baseline=True),
        _tta_trial(1, 128, 20.0),  # sooner, not Pareto
        _tta_trial(2, 256, 25.0),  # sooner, Pareto (less memory, say)
        _tta_trial(3, 512, 10.0),  # soonest, not Pareto
        _tta_trial(4, 32, 35.0),  # later than the baseline
        _tta_trial(5, 16, None, train_s=5.0),  # missed the target: never a finalist
        _tta_trial(6, 256, 8.0),  # same knobs as trial 2: a repeat
    ]

    baseline, finalists = select_finalists(trials, {2, 6}, 3, 0.5, objective="time_to_accuracy")

    assert baseline == 0
    assert finalists == (6, 3, 1)  # Pareto (6 sooner than its twin 2), then 3, then 1


def test_tta_finalists_beat_a_baseline_that_missed_the_target_in_fewer_seconds() -> None:
    trials = [
        _tta_trial(0, 64, None, baseline=True, train_s=40.0),
        _tta_trial(1, 128, 39.0),
        _tta_trial(2, 256, 41.0),  # reached it, but after the baseline had trained 40 s
    ]

    assert select_finalists(trials, set(), 2, 0.5, objective="time_to_accuracy") == (0, (1,))


def test_tta_finalists_need_a_baseline_that_trained() -> None:
    trials = [_tta_trial(0, 64, None, baseline=True, failure="oom"), _tta_trial(1, 128, 5.0)]

    with pytest.raises(
        VerificationError, match=r"baseline trial 0 produced no measurement \(oom\)"
    ):
        select_finalists(trials, set(), 2, 0.5, objective="time_to_accuracy")


# --------------------------------------------------------------------------------------------
# the screen: as wide as the noise


def test_agresti_caffo_standard_error_of_two_accuracies() -> None:
    # 357 of 359 against 355 of 359: p~ = 358/361 and 356/361.
    q1, q2 = 358 / 361, 356 / 361
    expected = (q1 * (1 - q1) / 361 + q2 * (1 - q2) / 361) ** 0.5
    assert agresti_caffo_se(357 / 359, 359, 355 / 359, 359) == pytest.approx(expected)
    # At 100 % the plain Wald error is 0; the adjusted one is not.
    assert agresti_caffo_se(1.0, 359, 1.0, 359) > 0.003
    with pytest.raises(ValueError, match="n1=0"):
        agresti_caffo_se(0.9, 0, 0.9, 10)


def test_the_screen_widens_the_tolerance_by_z_standard_errors() -> None:
    se = agresti_caffo_se(0.989, 359, 0.997, 359)
    assert screen_allowance(ACCURACY, 0.989, 359, 0.997, 359, 0.5, 1.645) == pytest.approx(
        0.005 + 1.645 * se
    )
    # Without validation sizes (trials stored before val_samples): the tolerance alone.
    assert screen_allowance(ACCURACY, 0.989, None, 0.997, 359, 0.5, 1.645) == 0.005
    # A loss has no standard error from one value: 3 x the tolerance.
    assert screen_allowance(VAL_LOSS, 2.0, 359, 2.0, 359, 0.5, 1.645) == pytest.approx(0.03)


def test_a_trial_one_noisy_run_below_the_baseline_on_359_images_passes_the_screen() -> None:
    """The issue's case: trial 15 (1.19x, 98.9 %) against the baseline's 99.7 % on digits'
    359 validation images was dropped by a 0.5 pt tolerance below one run's noise."""
    trials = [
        _trial(0, 64, 1000.0, 358 / 359, baseline=True, val_samples=359),
        _trial(15, 128, 1190.0, 355 / 359, val_samples=359),
    ]

    assert select_finalists(trials, set(), 4, 0.5, screen_z=0.0) == (0, ())
    assert select_finalists(trials, set(), 4, 0.5) == (0, (15,))


def test_the_screen_still_drops_a_clear_loss_of_accuracy_on_a_large_split() -> None:
    trials = [
        _trial(0, 64, 1000.0, 0.985, baseline=True, val_samples=2000),
        _trial(1, 128, 1500.0, 0.970, val_samples=2000),  # 1.5 pt lower on 2,000 images
    ]

    assert select_finalists(trials, set(), 4, 0.5) == (0, ())
    closest = closest_trial(trials, 0.5)
    assert closest is not None
    assert closest.startswith("trial 1: 1.50x the baseline's throughput in the search at 97.00 %")
    assert (
        "the screen asked for at least 97." in closest and "(baseline 98.50 %, n=2,000)" in closest
    )


def test_the_closest_trial_without_any_faster_one_is_the_fastest() -> None:
    trials = [
        _trial(0, 64, 1000.0, 0.985, baseline=True, val_samples=2000),
        _trial(1, 128, 900.0, 0.99, val_samples=2000),
        _trial(2, 32, 950.0, 0.99, val_samples=2000),
    ]

    assert closest_trial(trials, 0.5) == (
        "trial 2: 0.95x the baseline's throughput in the search at 99.00 % accuracy; no trial "
        "was faster than the baseline"
    )


@pytest.mark.parametrize("bad", [float("nan"), 0.0, float("inf")])
def test_a_nan_or_zero_throughput_is_never_a_finalist_nor_a_baseline(bad: float) -> None:
    trials = [_trial(0, 64, 1000.0, 0.95, baseline=True), _trial(1, 128, bad, 0.95)]
    assert select_finalists(trials, set(), 4, 0.5) == (0, ())

    broken = [_trial(0, 64, bad, 0.95, baseline=True), _trial(1, 128, 1500.0, 0.95)]
    with pytest.raises(VerificationError, match="produced no measurement"):
        select_finalists(broken, set(), 4, 0.5)
