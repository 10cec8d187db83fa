"""Parameter importances per objective (Optuna's fANOVA evaluator on the feasible trials)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from autotune.study.objectives import OBJECTIVES, Objective
from autotune.study.report._points import FEASIBLE, classify

__all__ = ["param_importances"]


def _objective_value(index: int) -> Callable[[FrozenTrial], float]:
    """The target function reading objective ``index`` of a trial."""

    def target(trial: FrozenTrial) -> float:
        return float(trial.values[index])

    return target


def param_importances(
    trials: Sequence[FrozenTrial], *, seed: int = 0, objectives: Sequence[Objective] = OBJECTIVES
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Parameter importances per objective, from the feasible trials only.

    Uses Optuna's fANOVA evaluator (``FanovaImportanceEvaluator``, random forests, seeded)
    on an in-memory study holding copies of the feasible trials, so failed trials' placeholder
    values do not distort it. Knobs with a single value in the space are left out.

    Args:
        trials: finished trials of one study.
        seed: the evaluator's seed (same trials, same seed: same importances).
        objectives: the study's objectives (their names key the result).

    Returns:
        ``(importances, notes)``: per objective name, importance by parameter (largest first,
        summing to 1); and lines explaining what could not be computed.
    """
    feasible = [t for t in trials if t.state == TrialState.COMPLETE and classify(t)[0] == FEASIBLE]
    if len(feasible) < 2:
        return {}, [f"parameter importances need 2 or more feasible trials (have {len(feasible)})"]
    varying = [
        name
        for name in feasible[0].distributions
        if not feasible[0].distributions[name].single() and all(name in t.params for t in feasible)
    ]
    if not varying:
        return {}, ["parameter importances: no knob varies in this space"]
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        copy = optuna.create_study(
            directions=[StudyDirection[o.direction.upper()] for o in objectives]
        )
        copy.add_trials(feasible)
        result: dict[str, dict[str, float]] = {}
        notes: list[str] = []
        for index, objective in enumerate(objectives):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    raw = optuna.importance.get_param_importances(
                        copy,
                        evaluator=optuna.importance.FanovaImportanceEvaluator(seed=seed),
                        params=varying,
                        target=_objective_value(index),
                    )
            except (RuntimeError, ValueError) as e:
                notes.append(f"importances for {objective.name}: {e}")
                continue
            result[objective.name] = {
                name: float(value) for name, value in raw.items() if math.isfinite(float(value))
            }
        return result, notes
    finally:
        optuna.logging.set_verbosity(verbosity)
