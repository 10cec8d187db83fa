"""What a study costs, in the user's unit: full runs of the baseline.

One *full run* is the baseline trial's measured run: the user's own training over
``train.epochs``, process start and evaluation included (its wall seconds, the user attribute
``full_run_s``). Every trial records the wall seconds of all the runs it made (``run_s``:
the baseline's float64 twin, retries, re-timings and a full run after a diverged check
included), and every verification run its own (``VerificationRecord.run_s``); on the mock
device these are the simulated training seconds (SIMULATED). A study's cost is their sum over
one full run, by stage: the search and the verification.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from autotune.core.config import BudgetSettings
from autotune.study.trial_result import TrialResult

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

__all__ = [
    "CAPPED_FLOOR_VS_BASELINE",
    "KEEP_MODEL_SHARE",
    "BudgetStage",
    "SearchCost",
    "budget_stage",
    "floor_vs_baseline",
    "full_run_seconds",
    "projected_full_run_s",
    "search_cost",
]

#: The share of the search's budget (``budget.full_runs`` x ``advanced.budget.search_share``) after
#: which every trial keeps the baseline's model and global batch: the rest of the search's
#: budget goes to the changes that keep the computation (timed, seconds) and to the baseline
#: model's numerics (each precision trains its evidence once; its other configurations reuse it).
KEEP_MODEL_SHARE = 0.5
#: Under a cost cap, a search trial whose first two timed windows both run below this share
#: of the baseline's throughput stops there (``too_slow``;
#: :class:`~autotune.trial.measure.ThroughputFloor`), whatever
#: ``advanced.trial.min_throughput_vs_baseline`` says: it cannot be a faster answer, and
#: training it to the budget would spend the cap on the slow side of the front. 0.9, not 1.0:
#: one window's noise (about 9 % between fresh processes on a 2-core CPU) must not stop a
#: configuration as fast as the baseline.
CAPPED_FLOOR_VS_BASELINE = 0.9
#: What the cost cap lets the search do next: explore the whole space, keep the baseline's
#: model and global batch, or stop.
BudgetStage = Literal["explore", "keep_model", "stop"]


def projected_full_run_s(run_s: float, steps: int, budget_steps: int, step_time_s: float) -> float:
    """One full run's wall seconds, projected from a run that stopped at a share of the
    budget (short evidence): its own wall seconds (process start, compilation, warm-up,
    its ``steps`` and the evaluation) plus the ``budget_steps - steps`` steps it did not
    take, at its timed windows' median step time (``step_time_s``).

    Raises:
        ValueError: ``steps`` is below 1 or above ``budget_steps``, or a time is negative.
    """
    if not 1 <= steps <= budget_steps or run_s < 0 or step_time_s < 0:
        raise ValueError(
            "projected_full_run_s: `1 <= steps <= budget_steps` and non-negative times must "
            f"hold, but got steps={steps}, budget_steps={budget_steps}, run_s={run_s}, "
            f"step_time_s={step_time_s}"
        )
    return run_s + (budget_steps - steps) * step_time_s


def full_run_seconds(trials: Sequence[FrozenTrial]) -> float | None:
    """The wall seconds of one full run: the baseline trial's measured run; None before it
    ran (or when it failed without a figure)."""
    for trial in trials:
        result = TrialResult.from_trial(trial)
        if result.baseline and result.full_run_s:
            return result.full_run_s
    return None


@dataclass(frozen=True)
class SearchCost:
    """The search's cost so far.

    Attributes:
        full_run_s: one full run's wall seconds (None before the baseline ran).
        projected: ``full_run_s`` is projected from the baseline's short-evidence run
            (:func:`projected_full_run_s`), not measured.
        spent_s: the seconds of every trial's runs.
        trained: trials that trained the budget (their accuracy measured).
        timed: trials that ran timing only (their accuracy inherited).
    """

    full_run_s: float | None
    spent_s: float
    trained: int
    timed: int
    projected: bool = False

    @property
    def full_runs(self) -> float | None:
        """``spent_s`` in full runs (None before the baseline ran)."""
        return self.spent_s / self.full_run_s if self.full_run_s else None

    def counts_text(self) -> str:
        """``14 trials trained the budget, 34 were timed``; under short evidence (a
        projected full run) ``14 trials trained a share of the budget, ...``."""
        what = "a share of the budget" if self.projected else "the budget"
        return (
            f"{self.trained} trial{'s' if self.trained != 1 else ''} trained {what}, "
            f"{self.timed} {'was' if self.timed == 1 else 'were'} timed"
        )

    def text(self) -> str:
        """``12.3 full runs (1 full run = 8.7 s; 14 trials trained the budget, 34 were
        timed)``; ``41 s (no full run measured yet; ...)`` before the baseline ran."""
        counts = self.counts_text()
        if self.full_runs is None or self.full_run_s is None:
            return f"{self.spent_s:,.0f} s (no full run measured yet; {counts})"
        unit = (
            f"1 full run ~ {self.full_run_s:,.1f} s, projected from the baseline's short run"
            if self.projected
            else f"1 full run = {self.full_run_s:,.1f} s"
        )
        return f"{self.full_runs:,.1f} full runs ({unit}; {counts})"


def search_cost(trials: Sequence[FrozenTrial]) -> SearchCost:
    """The cost of a study's trials so far (any state: a failed run's seconds count).

    Args:
        trials: the study's trials.

    Returns:
        Their :class:`SearchCost`.
    """
    spent_s, trained, timed = 0.0, 0, 0
    for trial in trials:
        result = TrialResult.from_trial(trial)
        spent_s += result.run_s or 0.0
        if result.accuracy_source in ("inherited", "inherited_unchecked"):
            timed += 1
        elif result.accuracy_source == "measured":
            trained += 1
    projected = any(TrialResult.from_trial(t).full_run_projected for t in trials)
    return SearchCost(full_run_seconds(trials), spent_s, trained, timed, projected)


def budget_stage(spent_full_runs: float | None, budget: BudgetSettings) -> BudgetStage:
    """What the search may do next under ``budget.full_runs``: ``explore`` until it has spent
    :data:`KEEP_MODEL_SHARE` of its share (``advanced.budget.search_share`` of the cap), then
    ``keep_model`` (every trial keeps the baseline's model and global batch: a change of how it
    runs is timed, a change of precision trains its evidence once), then ``stop`` once its share is spent. Without a cap, or before the baseline
    ran (``spent_full_runs`` None), ``explore``.

    Args:
        spent_full_runs: the search's cost so far, in full runs.
        budget: the space's ``budget:``.
    """
    if budget.full_runs is None or spent_full_runs is None:
        return "explore"
    share = budget.search_share * budget.full_runs
    if spent_full_runs >= share:
        return "stop"
    if spent_full_runs >= KEEP_MODEL_SHARE * share:
        return "keep_model"
    return "explore"


def floor_vs_baseline(asked: float, budget: BudgetSettings) -> float:
    """The search's throughput floor, as a share of the baseline's throughput: ``asked``
    (``advanced.trial.min_throughput_vs_baseline``), raised to
    :data:`CAPPED_FLOOR_VS_BASELINE` under a cost cap (``budget.full_runs``)."""
    return max(asked, CAPPED_FLOOR_VS_BASELINE) if budget.full_runs is not None else asked
