"""A verification planned within what is left of the study's cost cap (``budget.full_runs``).

Every run of a verification costs about what its trial cost in the search: a finalist that
inherits its accuracy is timed (seconds), any other trains the budget (about one full run).
:func:`fit_budget` keeps the plan within the full runs left: fewer confirmation rounds first
(down to ``min_rounds``), then it leaves out the finalists that train the budget, the
model-change answer's first, and says which and why; the timed ones stay, since they cost
seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["MIN_ROUNDS", "BudgetedPlan", "fit_budget", "projected_full_runs"]

#: The fewest confirmation rounds a capped verification keeps: Student's t with 2 degrees of
#: freedom (4.30) is the widest interval that still claims anything.
MIN_ROUNDS = 3


@dataclass(frozen=True)
class BudgetedPlan:
    """What a capped verification re-runs.

    Attributes:
        finalists: the finalists kept, in their order.
        rounds: confirmation rounds.
        race_rounds: race rounds (0 when no answer keeps more than one finalist).
        projected_full_runs: its projected cost, in full runs of the baseline.
        notes: what the cap changed, one line each.
    """

    finalists: tuple[int, ...]
    rounds: int
    race_rounds: int
    projected_full_runs: float
    notes: tuple[str, ...] = ()


def projected_full_runs(
    costs: Mapping[int, float],
    baseline: int,
    finalists: Sequence[int],
    model_changes: Sequence[int],
    rounds: int,
    race_rounds: int,
) -> float:
    """The projected cost of a plan, in full runs: one discarded warm-up run, the race
    (the baseline and every finalist each round) and the confirmation (the baseline and the
    dearest finalist of each answer each round).

    Args:
        costs: each trial's cost of one run, in full runs (the baseline's included).
        baseline: the baseline trial.
        finalists: the finalists.
        model_changes: those of the model-change answer.
        rounds: confirmation rounds.
        race_rounds: race rounds.
    """
    same = [costs[n] for n in finalists if n not in model_changes]
    change = [costs[n] for n in finalists if n in model_changes]
    base = costs[baseline]
    warmup = max([base, *same, *change])
    race = race_rounds * (base + sum(same) + sum(change))
    confirm = rounds * (base + max(same, default=0.0) + max(change, default=0.0))
    return warmup + race + confirm


def fit_budget(
    costs: Mapping[int, float],
    baseline: int,
    finalists: tuple[int, ...],
    model_changes: tuple[int, ...],
    trained: frozenset[int],
    rounds: int,
    race_rounds: int,
    left_full_runs: float | None,
    min_rounds: int = MIN_ROUNDS,
) -> BudgetedPlan:
    """Fit a verification within ``left_full_runs`` full runs.

    Args:
        costs: each trial's cost of one run, in full runs (the baseline's included).
        baseline: the baseline trial.
        finalists: the screen's finalists.
        model_changes: those of the model-change answer.
        trained: those that train the budget (not timed only).
        rounds: the confirmation rounds asked for.
        race_rounds: the race rounds asked for (used while an answer has several finalists).
        left_full_runs: what the cap leaves; None: no cap.
        min_rounds: the fewest confirmation rounds to keep before leaving finalists out.

    Returns:
        The plan (:class:`BudgetedPlan`).

    Raises:
        ValueError: ``min_rounds`` is below 2.
    """
    if min_rounds < 2:
        raise ValueError(f"fit_budget: min_rounds >= 2 must hold, but got {min_rounds}")

    def race_of(kept: tuple[int, ...]) -> int:
        sizes = (
            sum(n not in model_changes for n in kept),
            sum(n in model_changes for n in kept),
        )
        return race_rounds if max(sizes, default=0) > 1 else 0

    def cost(kept: tuple[int, ...], r: int) -> float:
        # With no finalist that trains, the baseline is timed too: as cheap as theirs.
        timed_only = bool(kept) and not set(kept) & trained
        base = min(costs[n] for n in kept) if timed_only else costs[baseline]
        plan_costs = {**costs, baseline: base}
        return projected_full_runs(plan_costs, baseline, kept, model_changes, r, race_of(kept))

    def most_rounds(kept: tuple[int, ...]) -> int | None:
        """The most rounds (at most ``rounds``, at least ``min_rounds``) that fit."""
        assert left_full_runs is not None  # only called under a cap
        for r in range(rounds, min_rounds - 1, -1):
            if cost(kept, r) <= left_full_runs:
                return r
        return None

    kept = finalists
    if left_full_runs is None or cost(kept, rounds) <= left_full_runs:
        return BudgetedPlan(kept, rounds, race_of(kept), cost(kept, rounds))
    notes: list[str] = []
    fewer = most_rounds(kept)
    # Then leave out what trains the budget, the model change's finalists first: a timed
    # finalist costs seconds, so the rounds come back.
    for group, words in (
        (tuple(n for n in kept if n in model_changes and n in trained), "a model change"),
        (tuple(n for n in kept if n not in model_changes and n in trained), "the same model"),
    ):
        if fewer is not None or not group:
            continue
        dropped_cost = cost(kept, min_rounds)
        kept = tuple(n for n in kept if n not in group)
        numbers = ", ".join(str(n) for n in group)
        notes.append(
            f"budget.full_runs: not verified: trial{'s' if len(group) > 1 else ''} {numbers} "
            f"({words}, trained to the budget): verifying with them would cost at least "
            f"{dropped_cost:.1f} full runs, and the cap leaves {left_full_runs:.1f}; their "
            "figures are single trials, unverified"
        )
        fewer = most_rounds(kept) if kept else rounds
    if fewer is None:
        fewer = min_rounds
        notes.append(
            f"budget.full_runs: the verification's {cost(kept, fewer):.1f} projected full "
            f"runs pass the {left_full_runs:.1f} the cap leaves ({fewer} rounds are the "
            "fewest that claim)"
        )
    elif fewer < rounds:
        notes.insert(
            0,
            f"budget.full_runs: {fewer} confirmation rounds instead of {rounds}, to stay "
            f"within the {left_full_runs:.1f} full runs the cap leaves",
        )
    final = cost(kept, fewer) if kept else 0.0
    return BudgetedPlan(kept, fewer, race_of(kept), final, tuple(notes))
