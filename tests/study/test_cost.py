"""A study's cost in full runs of the baseline, and the cap's stages (autotune/study/cost.py)."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from autotune.core.config import BudgetSettings
from autotune.study.cost import KEEP_MODEL_SHARE, budget_stage, full_run_seconds, search_cost


def _trial(number: int, **attrs: Any) -> optuna.trial.FrozenTrial:
    return optuna.trial.create_trial(
        state=TrialState.COMPLETE, values=[1.0, 0.9, 1.0], user_attrs=attrs
    )


def test_the_cost_counts_every_run_over_the_baselines_measured_run() -> None:
    trials = [
        _trial(0, baseline=True, full_run_s=10.0, run_s=13.0, accuracy_source="measured"),
        _trial(1, run_s=25.0, accuracy_source="measured"),
        _trial(2, run_s=2.0, accuracy_source="inherited"),
        _trial(3, run_s=1.0, failure="infeasible"),
    ]
    cost = search_cost(trials)
    assert full_run_seconds(trials) == 10.0
    assert cost.spent_s == 41.0
    assert cost.full_runs == pytest.approx(4.1)
    assert (cost.trained, cost.timed) == (2, 1)
    assert cost.text() == (
        "4.1 full runs (1 full run = 10.0 s; 2 trials trained the budget, 1 was timed)"
    )


def test_before_the_baseline_ran_the_cost_is_in_seconds() -> None:
    cost = search_cost([_trial(1, run_s=4.0, accuracy_source="measured")])
    assert cost.full_runs is None
    assert cost.text().startswith("4 s (no full run measured yet")


@pytest.mark.parametrize(
    ("spent", "stage"),
    [(None, "explore"), (0.0, "explore"), (2.9, "explore"), (3.0, "keep_model"), (6.0, "stop")],
)
def test_the_cap_explores_then_keeps_the_math_then_stops(spent: float | None, stage: str) -> None:
    budget = BudgetSettings(full_runs=10.0, search_share=0.6)  # the search's share: 6
    assert KEEP_MODEL_SHARE == 0.5
    assert budget_stage(spent, budget) == stage


def test_without_a_cap_the_search_explores() -> None:
    assert budget_stage(1e9, BudgetSettings()) == "explore"


def test_a_short_run_projects_the_full_run_over_the_steps_it_did_not_take() -> None:
    from autotune.study.cost import projected_full_run_s

    # 30 s for 50 of 1,000 steps at 0.2 s a step: 30 + 950 x 0.2.
    assert projected_full_run_s(30.0, 50, 1000, 0.2) == pytest.approx(220.0)
    assert projected_full_run_s(30.0, 1000, 1000, 0.2) == 30.0
    with pytest.raises(ValueError, match="projected_full_run_s"):
        projected_full_run_s(30.0, 1001, 1000, 0.2)


def test_a_projected_full_run_says_so() -> None:
    trials = [
        _trial(
            0,
            baseline=True,
            full_run_s=200.0,
            full_run_projected=True,
            run_s=40.0,
            accuracy_source="measured",
        ),
        _trial(1, run_s=10.0, accuracy_source="inherited"),
    ]
    cost = search_cost(trials)
    assert cost.projected and cost.full_runs == pytest.approx(0.25)
    assert "projected from the baseline's short run" in cost.text()
    assert "trained a share of the budget" in cost.text()
