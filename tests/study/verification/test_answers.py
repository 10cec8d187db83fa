"""Non-inferiority and the two answers (autotune/study/verification/_metric.py is_non_inferior,
_finalists.py, _summary.py; the plan's answers in autotune/study/storage/records/_verification.py):
the same-model answer and the model-change answer each race and confirm; the headline is the
faster non-inferior one, and a faster model change that is not non-inferior is a trade-off."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from autotune.study.storage import VerificationPlan, VerificationRecord, VerificationRun
from autotune.study.verification import (
    ACCURACY,
    is_non_inferior,
    model_change_finalists,
    race_survivors,
    select_finalists,
    summarize_verification,
)
from autotune.study.verification._finalists import (
    changes_model,
)
from tests.study.verification.metrics import VAL_LOSS

# --------------------------------------------------------------------------------------------
# the non-inferiority rule, at its edge


def test_an_interval_ending_exactly_at_minus_the_tolerance_is_non_inferior() -> None:
    # 0.5 pt of accuracy is 0.005: the lower end at -0.005 is on the margin, which counts.
    assert is_non_inferior(ACCURACY, (-0.005, 0.004), 0.985, 0.5)
    assert not is_non_inferior(ACCURACY, (-0.00501, 0.004), 0.985, 0.5)
    # Only the worse end matters: a high upper end does not save a low lower end.
    assert not is_non_inferior(ACCURACY, (-0.006, 0.05), 0.985, 0.5)


def test_for_a_loss_the_interval_must_end_at_or_below_plus_the_tolerance() -> None:
    # 0.5 % of a baseline loss of 2.0 is 0.01: the upper end may reach +0.01, not beyond.
    assert is_non_inferior(VAL_LOSS, (-0.02, 0.01), 2.0, 0.5)
    assert not is_non_inferior(VAL_LOSS, (-0.02, 0.01001), 2.0, 0.5)
    # A loss far lower (better) is non-inferior whatever its lower end.
    assert is_non_inferior(VAL_LOSS, (-1.0, -0.5), 2.0, 0.5)


def test_no_interval_or_a_non_finite_one_is_never_non_inferior() -> None:
    assert not is_non_inferior(ACCURACY, None, 0.985, 0.5)
    assert not is_non_inferior(ACCURACY, (math.nan, 0.0), 0.985, 0.5)
    assert not is_non_inferior(ACCURACY, (-math.inf, 0.0), 0.985, 0.5)


# --------------------------------------------------------------------------------------------
# which answer a configuration belongs to


def test_only_a_knob_outside_the_tuners_changes_the_model() -> None:
    base = {"depth": 3, "width": 16, "batch_size": 64, "precision": "fp32"}
    assert not changes_model({**base, "batch_size": 256, "precision": "bf16"}, base)
    assert changes_model({**base, "depth": 2}, base)
    # A space without model knobs has one answer.
    assert not changes_model({"batch_size": 128}, {"batch_size": 64})
    params = {0: base, 1: {**base, "precision": "bf16"}, 2: {**base, "width": 8}}
    assert model_change_finalists((1, 2), params, 0) == (2,)


def _trial(number: int, depth: int, precision: str, sps: float, acc: float) -> FrozenTrial:
    return optuna.trial.create_trial(
        state=TrialState.COMPLETE,
        values=[sps, acc, 1.0],
        params={"depth": depth, "precision": precision},
        distributions={
            "depth": CategoricalDistribution([2, 3, 4]),
            "precision": CategoricalDistribution(["fp32", "bf16"]),
        },
        user_attrs={
            "throughput_sps": sps,
            "val_metric": acc,
            "val_samples": 2000,
            **({"baseline": True} if number == 0 else {}),
        },
        system_attrs={"constraints": [0.0]},
    )


def test_the_screen_picks_finalists_for_each_answer_apart() -> None:
    trials = [
        _trial(0, 3, "fp32", 1000.0, 0.985),
        _trial(1, 2, "bf16", 3000.0, 0.984),  # model change, fastest
        _trial(2, 2, "fp32", 2500.0, 0.985),  # model change
        _trial(3, 3, "bf16", 2000.0, 0.985),  # same model
        _trial(4, 4, "bf16", 1500.0, 0.985),  # model change, slowest
    ]
    for number, trial in enumerate(trials):
        trial.number = number

    base, finalists = select_finalists(trials, set(), 2, 0.5)

    assert base == 0
    # Up to 2 per answer: the same-model one first, then the two fastest model changes.
    assert finalists == (3, 1, 2)
    params = {t.number: t.params for t in trials}
    assert model_change_finalists(finalists, params, base) == (1, 2)


# --------------------------------------------------------------------------------------------
# race and confirmation of two answers

#: Trial 1 and 2 keep the model (same model), 3 and 4 change it; a 2-round race, 3 rounds.
PLAN = VerificationPlan(
    0, (1, 2, 3, 4), (20, 21, 22), 0.5, race_seeds=(10, 11), screen_z=1.645, model_changes=(3, 4)
)
PARAMS: Mapping[int, Mapping[str, Any]] = {
    0: {"depth": 3, "precision": "fp32", "memory_format": "contiguous"},
    1: {"depth": 3, "precision": "bf16", "memory_format": "contiguous"},
    2: {"depth": 3, "precision": "bf16", "memory_format": "channels_last"},
    3: {"depth": 2, "precision": "bf16", "memory_format": "channels_last"},
    4: {"depth": 4, "precision": "bf16", "memory_format": "contiguous"},
}


def _row(round_index: int, trial: int, sps: float, acc: float) -> VerificationRecord:
    return VerificationRecord(
        round_index=round_index,
        seed=PLAN.seed(round_index),
        trial_number=trial,
        is_baseline=trial == 0,
        simulated=False,
        failure=None,
        failure_detail=None,
        throughput_sps=sps,
        throughput_iqr_sps=1.0,
        step_time_s=0.01,
        val_metric=acc,
        peak_memory_bytes=1 << 20,
        train_s=1.0,
        config_json="{}",
        val_samples=2000,
    )


def _rows(
    race: Mapping[int, float], confirm: Mapping[int, Sequence[tuple[float, float]]]
) -> list[VerificationRecord]:
    """The race at ``race[n]`` x the baseline's 1,000 samples/s (all at 98.5 %), then the
    confirmation: per round, each confirmed trial's ``(speedup, accuracy)``."""
    rows = []
    for r in range(PLAN.race_rounds):
        rows.append(_row(r, 0, 1000.0, 0.985))
        rows += [_row(r, n, speedup * 1000.0, 0.985) for n, speedup in race.items()]
    for i in range(PLAN.rounds):
        r = PLAN.race_rounds + i
        rows.append(_row(r, 0, 1000.0 + i, 0.985))
        rows += [
            _row(r, n, figures[i][0] * (1000.0 + i), figures[i][1])
            for n, figures in confirm.items()
        ]
    return rows


def _run(rows: Sequence[VerificationRecord]) -> VerificationRun:
    return VerificationRun(
        study_name="s",
        number=1,
        plan=PLAN,
        rows=tuple(rows),
        started_at=dt.datetime(2026, 11, 26),
        completed_at=dt.datetime(2026, 11, 26),
    )


RACE = {1: 1.6, 2: 1.7, 3: 2.2, 4: 1.3}


def test_each_answer_keeps_its_own_survivor_and_both_are_confirmed() -> None:
    verdicts, survivors = race_survivors(PLAN, _rows(RACE, {}), PARAMS)

    assert survivors == {("same_model", "trained"): 2, ("model_change", "trained"): 3}
    labels = {v.trial_number: v.verdict for v in verdicts}
    assert labels[2] == "survivor (same model): the fastest in the race"
    assert labels[3] == "survivor (model change): the fastest in the race"
    assert labels[1] == "passed, slower than trial 2 (same model) in the race"
    assert PLAN.confirmed(survivors) == (2, 3)
    # Each round pairs both survivors with one baseline run.
    assert PLAN.confirm_schedule(survivors)[:3] == [(2, 0), (2, 2), (2, 3)]
    assert PLAN.provisional_survivors() == {
        ("same_model", "trained"): 1,
        ("model_change", "trained"): 3,
    }


def test_a_faster_model_change_that_is_less_accurate_is_a_trade_off_not_the_headline() -> None:
    same = [(1.66, 0.984), (1.70, 0.985), (1.64, 0.984)]  # -0.07 pt, a tight interval
    smaller = [(2.17, 0.980), (2.20, 0.981), (2.15, 0.980)]  # -0.47 pt, interval past -0.5
    summary = summarize_verification(
        _run(_rows(RACE, {2: same, 3: smaller})), PARAMS, simulated=False
    )

    rec = summary.recommended
    assert rec is not None and rec.trial_number == 2 and rec.answer == "same_model"
    assert summary.answer("model_change") is not None
    trade = summary.answer("model_change")
    assert trade is not None and trade.trade_off and trade.non_inferior is False
    assert summary.trade_offs == (trade,)
    line = summary.headline()
    assert line.startswith("1.67x faster than PyTorch's defaults (95 % CI ")
    assert (
        ": same model, trial 2, precision fp32->bf16, memory_format contiguous->channels_last"
        in line
    )
    assert (
        "; trade-off, not recommended: a model change (depth 3->2, precision fp32->bf16, " in line
    )
    block = summary.verdict_block()
    assert block[0] == "verified: same model answer, trial 2"
    assert block[1] == "change    precision fp32->bf16, memory_format contiguous->channels_last"
    assert block[2].startswith("speed     1.67x faster than PyTorch's defaults (95 % CI ")
    assert block[3].startswith("accuracy  the same (non-inferior within 0.5 pt): 98.43 % vs ")
    assert block[4] == "memory    peak 1 MiB (baseline 1 MiB)"
    assert block[5].startswith("trade-off a model change (depth 3->2, ")
    assert " at -0.47 pt (" in block[5] and block[5].endswith(", trial 3")
    assert len(block) == 6


def test_the_headline_is_the_faster_of_two_non_inferior_answers() -> None:
    same = [(1.66, 0.985), (1.70, 0.985), (1.64, 0.985)]
    smaller = [(2.17, 0.985), (2.20, 0.986), (2.15, 0.985)]
    summary = summarize_verification(
        _run(_rows(RACE, {2: same, 3: smaller})), PARAMS, simulated=False
    )

    rec = summary.recommended
    assert rec is not None and rec.trial_number == 3 and rec.answer == "model_change"
    assert summary.trade_offs == ()
    assert ": model change, trial 3, depth 3->2" in summary.headline()
    # The same-model answer is shown too, with its own verdict.
    assert summary.verdict_block()[-1].startswith(
        "same model: trial 2 (precision fp32->bf16, memory_format contiguous->channels_last): "
        "verified faster at the same accuracy (non-inferior)"
    )


def test_with_no_non_inferior_answer_the_ending_is_not_faster_with_the_trade_off() -> None:
    slow = [(1.02, 0.985), (0.97, 0.985), (1.05, 0.985)]
    smaller = [(2.17, 0.980), (2.20, 0.981), (2.15, 0.980)]
    summary = summarize_verification(
        _run(_rows(RACE, {2: slow, 3: smaller})), PARAMS, simulated=False
    )

    assert summary.recommended is None and summary.ending == "not_faster"
    line = summary.headline()
    assert line.startswith("verified: not faster than PyTorch's defaults at the same accuracy (")
    assert (
        "race survivor trial 2 (same model)" in line
        and "race survivor trial 3 (model change)" in line
    )
    assert "; trade-off, not recommended: a model change (depth 3->2" in line
    assert summary.accuracy_text() == ""


@pytest.mark.parametrize("words", ["your baseline", "PyTorch's defaults"])
def test_the_baseline_is_named_as_the_space_gave_it(words: str) -> None:
    same = [(1.66, 0.985), (1.70, 0.985), (1.64, 0.985)]
    summary = summarize_verification(
        _run(_rows(RACE, {2: same, 3: same})), PARAMS, simulated=False, baseline_words=words
    )

    assert f"faster than {words} (95 % CI" in summary.headline()


def test_a_space_without_model_knobs_has_one_answer() -> None:
    def trial(number: int, batch: int, sps: float) -> FrozenTrial:
        t = optuna.trial.create_trial(
            state=TrialState.COMPLETE,
            values=[sps, 0.985, 1.0],
            params={"batch_size": batch},
            distributions={"batch_size": CategoricalDistribution([32, 64, 128, 256])},
            user_attrs={
                "throughput_sps": sps,
                "val_metric": 0.985,
                "val_samples": 2000,
                **({"baseline": True} if number == 0 else {}),
            },
            system_attrs={"constraints": [0.0]},
        )
        t.number = number
        return t

    trials = [trial(0, 64, 1000.0), trial(1, 128, 1500.0), trial(2, 256, 1800.0)]

    base, finalists = select_finalists(trials, set(), 3, 0.5)

    assert (base, finalists) == (0, (2, 1))
    assert model_change_finalists(finalists, {t.number: t.params for t in trials}, base) == ()
    plan = VerificationPlan(0, finalists, (20, 21, 22), 0.5, race_seeds=(10, 11))
    assert plan.provisional_survivors() == {("same_model", "trained"): 2}
