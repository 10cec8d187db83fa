"""A verification planned within what is left of the study's cost cap (``budget.full_runs``).

Every run of a verification costs about what its trial cost in the search: a finalist that
inherits its accuracy is timed (seconds), any other trains the budget (about one full run).
:func:`fit_budget` keeps the plan within the full runs left. It leaves out the dearest
finalists first (those that train the budget, the model-change answer's first, then the
costliest timed ones: a compiled configuration pays its compile in every fresh process), the
screen's fastest last where it alone fits, while more than one is left, so that the rest
keep the rounds that make a claim; then it confirms over fewer rounds (down to
``min_rounds``); and it says which and why.

Under short evidence (``pilot``) a plan with a finalist that trains races even where every
lane has one finalist: the race is that finalist's *pilot* for futility. At a few % of the
budget the seeds' spread of the metric is wide (on the long run's ResNet, the baseline alone
spans 79-98 % over seeds after 600 of 12,000 steps), so the confirmation of a trained
finalist is often futile; two pilot rounds tell which before its eight are spent
(:func:`autotune.study.verification.race_survivors`). The pilot is priced in the plan: where
the finalist's confirmation goes ahead, the pilot's rounds are spent on top of it.
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
        race_rounds: race rounds (0 when no lane keeps more than one finalist and no
            trained finalist is piloted).
        projected_full_runs: its projected cost, in full runs of the baseline.
        notes: what the cap changed, one line each.
    """

    finalists: tuple[int, ...]
    rounds: int
    race_rounds: int
    projected_full_runs: float
    notes: tuple[str, ...] = ()


def _lane(
    finalist: int, model_changes: Sequence[int], trained: frozenset[int] | None
) -> tuple[bool, bool]:
    """A finalist's race lane before there is a plan, as ``(changes the model, trains)``
    (:meth:`~autotune.study.storage.VerificationPlan.lane_of` once there is one); ``trained``
    None: every finalist trains."""
    return finalist in model_changes, trained is None or finalist in trained


def projected_full_runs(
    costs: Mapping[int, float],
    baseline: int,
    finalists: Sequence[int],
    model_changes: Sequence[int],
    rounds: int,
    race_rounds: int,
    trained: frozenset[int] | None = None,
) -> float:
    """The projected cost of a plan, in full runs: one discarded warm-up run, the race
    (the baseline and every finalist each round) and the confirmation (the baseline and the
    dearest finalist of each lane each round: a lane is an answer, trained or timed;
    :data:`~autotune.study.storage.records.Lane`).

    Args:
        costs: each trial's cost of one run, in full runs (the baseline's included).
        baseline: the baseline trial.
        finalists: the finalists.
        model_changes: those of the model-change answer.
        rounds: confirmation rounds.
        race_rounds: race rounds.
        trained: the finalists that train (the others are timed); None: every one trains.
    """
    lanes: dict[tuple[bool, bool], list[float]] = {}
    for n in finalists:
        lanes.setdefault(_lane(n, model_changes, trained), []).append(costs[n])
    base = costs[baseline]
    warmup = max([base, *(costs[n] for n in finalists)])
    race = race_rounds * (base + sum(costs[n] for n in finalists))
    confirm = rounds * (base + sum(max(lane) for lane in lanes.values()))
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
    fastest: int | None = None,
    pilot: bool = False,
) -> BudgetedPlan:
    """Fit a verification within ``left_full_runs`` full runs.

    Args:
        costs: each trial's cost of one run, in full runs (the baseline's included).
        baseline: the baseline trial.
        finalists: the screen's finalists.
        model_changes: those of the model-change answer.
        trained: those that train the budget (not timed only).
        rounds: the confirmation rounds asked for.
        race_rounds: the race rounds asked for (used while a lane has several finalists, or
            with ``pilot`` while a finalist trains).
        left_full_runs: what the cap leaves; None: no cap.
        min_rounds: the fewest confirmation rounds to keep before leaving finalists out.
        fastest: the finalist to keep to the last (the answer the user most wants verified:
            :func:`~autotune.study.verification.likeliest_finalist`, the screen's first whose
            own metric meets the tolerance): left out last, where it alone fits at
            ``min_rounds``; a dearer answer confirmed over fewer rounds beats a cheaper,
            slower one confirmed over more.
        pilot: race wherever a kept finalist trains, as its futility pilot (short evidence:
            the module's docstring says why).

    Returns:
        The plan (:class:`BudgetedPlan`).

    Raises:
        ValueError: ``min_rounds`` is below 2.
    """
    if min_rounds < 2:
        raise ValueError(f"fit_budget: min_rounds >= 2 must hold, but got {min_rounds}")

    def race_of(kept: tuple[int, ...]) -> int:
        """A race where a lane keeps several finalists, or, with ``pilot``, a kept finalist
        trains (the race is its futility pilot)."""
        lanes = [_lane(n, model_changes, trained) for n in kept]
        piloted = pilot and bool(set(kept) & trained)
        return race_rounds if piloted or len(set(lanes)) < len(lanes) else 0

    def cost(kept: tuple[int, ...], r: int) -> float:
        # With no finalist that trains, the baseline is timed too: as cheap as theirs.
        timed_only = bool(kept) and not set(kept) & trained
        base = min(costs[n] for n in kept) if timed_only else costs[baseline]
        plan_costs = {**costs, baseline: base}
        return projected_full_runs(
            plan_costs, baseline, kept, model_changes, r, race_of(kept), trained
        )

    kept = finalists
    if left_full_runs is None or cost(kept, rounds) <= left_full_runs:
        return BudgetedPlan(kept, rounds, race_of(kept), cost(kept, rounds))
    notes: list[str] = []
    # First leave out the dearest finalists, those that train the budget and the model
    # change's first, while more than one is left: fewer finalists keep the rounds that
    # make a claim; then fewer rounds, down to min_rounds.
    protect = (
        fastest if fastest in kept and cost((fastest,), min_rounds) <= left_full_runs else None
    )
    by_price = sorted(
        kept,
        key=lambda n: (n != protect, n in trained, n in model_changes, costs[n]),
        reverse=True,
    )
    for number in by_price:
        if len(kept) == 1 or cost(kept, rounds) <= left_full_runs:
            break
        before = cost(kept, rounds)
        kept = tuple(n for n in kept if n != number)
        words = "a model change" if number in model_changes else "the same model"
        how = "trained" if number in trained else "timed"
        notes.append(
            f"budget.full_runs: not verified: trial {number} ({words}, {how}, about "
            f"{costs[number]:.2g} full runs a run): verifying with it would cost about "
            f"{before:.1f} full runs, and the cap leaves {left_full_runs:.1f}; its figures "
            "are a single trial's, unverified"
        )
    fewer = rounds
    while fewer > min_rounds and cost(kept, fewer) > left_full_runs:
        fewer -= 1
    if fewer < rounds:
        notes.append(
            f"budget.full_runs: {fewer} confirmation rounds instead of {rounds}, to stay "
            f"within the {left_full_runs:.1f} full runs the cap leaves"
        )
    final = cost(kept, fewer)
    if final > left_full_runs:
        notes.append(
            f"budget.full_runs: the verification's {final:.1f} projected full runs pass the "
            f"{left_full_runs:.1f} the cap leaves ({fewer} rounds are the fewest that claim)"
        )
    return BudgetedPlan(kept, fewer, race_of(kept), final, tuple(notes))
