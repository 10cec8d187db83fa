"""How the samplers read a trial's values: measured, placeholders of a failed trial, or the
lower bound of a missed time-to-accuracy target; and what is known of a configuration's
values before it runs (:data:`PriorMean`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from optuna.distributions import BaseDistribution, CategoricalDistribution

from autotune.study.trial_result import TrialResult

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

__all__ = [
    "FIXED_PARAMS_ATTR",
    "PriorMean",
    "fixed_params",
    "holds_value",
    "is_failed",
    "is_measured",
    "missed_target",
]

#: The system attribute in which Optuna's ``Study.enqueue_trial`` keeps the values a queued
#: trial fixes (Optuna's own name, not a documented one:
#: tests/study/search/test_optuna_private_names.py checks it).
FIXED_PARAMS_ATTR = "fixed_params"

#: What is known of a configuration's objectives before it runs: knob values (by Optuna
#: parameter name) -> expected values by objective name, each in its objective's unit (e.g.
#: ``{"peak_memory_bytes": 5.2e7}``, autotune's memory estimate); an objective left out has
#: no prior. :class:`LeanGPSampler` uses it as its GPs' prior mean.
PriorMean = Callable[[Mapping[str, Any]], Mapping[str, float]]


def _failed(result: TrialResult) -> bool:
    return result.failed or result.constraints.get("failed", 0.0) > 0


def is_failed(trial: FrozenTrial) -> bool:
    """True for a trial without a measurement: its values are placeholders."""
    return _failed(TrialResult.from_trial(trial))


def missed_target(trial: FrozenTrial) -> bool:
    """True for a time-to-accuracy trial that missed its target: its time is only a lower
    bound (the time limit it was stopped at)."""
    return TrialResult.from_trial(trial).target_reached is False


def is_measured(trial: FrozenTrial) -> bool:
    """True for a trial whose values are all measurements: it neither failed nor missed its
    time-to-accuracy target (the trials a median of measured values is taken over). Reads the
    trial once: the samplers ask it of every trial at every proposal."""
    result = TrialResult.from_trial(trial)
    return not _failed(result) and result.target_reached is not False


def holds_value(distribution: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` is one a knob of ``distribution`` can take: one of a categorical's
    choices, or within a numeric range's bounds."""
    if isinstance(distribution, CategoricalDistribution):
        return value in distribution.choices
    low, high = getattr(distribution, "low", None), getattr(distribution, "high", None)
    return low is not None and high is not None and low <= value <= high


def fixed_params(trial: FrozenTrial) -> dict[str, Any]:
    """The knob values a queued trial fixes (``Study.enqueue_trial``), by parameter name;
    empty for a trial the sampler proposes in full."""
    return dict(trial.system_attrs.get(FIXED_PARAMS_ATTR) or {})
