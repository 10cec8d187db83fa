"""Samplers as the study process runs them: on one torch thread, and (the GP) seeing the
study on the scales its knobs and figures live on.

Optuna's GPSampler fits its Gaussian process with torch; on a small machine torch's default
of one thread per core oversubscribes the CPU and slows the fit several times (Optuna PR
#6753 reports 6-12x faster GP fitting with one torch thread). The study process trains
nothing (trials run in child processes with their own threads), so it can give the sampler
one thread; :class:`OneThreadSampler` does so around every call and restores the count after.

Optuna's GPSampler standardizes each objective (z-scores) and models it as it comes; it has
no output warping. Throughput and peak memory span orders of magnitude (tens to tens of
thousands of samples/s), and a few fast or large configurations would stretch their scale
until the GP sees every other configuration as alike. Practitioners judge both as ratios
("2x faster", "half the memory"), so :class:`WarpedSampler` lets the wrapped sampler model
their logarithms, and numeric choices (batch size, width) by their rank (output and input
warping, after Snoek et al., "Input Warping for Bayesian Optimization of Non-stationary
Functions", ICML 2014, in their simplest form). A trial that
failed (no measurement) carries placeholder values (zero throughput, zero accuracy); the
wrapped sampler sees the worst value measured so far on each objective instead, so the
placeholders do not squash the measured values' scale, while Optuna's constraints (the
``failed`` constraint) still mark the trial infeasible. The study itself stores the raw
figures, so optuna-dashboard, ``optuna.load_study`` and every report read samples/s and
bytes, and studies written before this change open as they are.
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import optuna
import torch
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.study import StudyDirection
from optuna.trial import TrialState

from autotune.exceptions import ConfigError
from autotune.objectives import objectives_of_study

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial

__all__ = [
    "GP_STARTUP_TRIALS",
    "LOG_SCALE_OBJECTIVES",
    "NSGA2_POPULATION",
    "OneThreadSampler",
    "WarpedSampler",
    "make_sampler",
    "modelled_values",
    "one_torch_thread",
]

#: NSGA-II population: small enough that a 50-trial study runs several generations.
NSGA2_POPULATION = 10
#: Trials in the study (the baseline and warm-start trials count) before GPSampler and
#: TPESampler model it; until then they sample at random. Chosen from Table 2
#: (docs/benchmarks.md).
GP_STARTUP_TRIALS = 10

#: Objectives the wrapped sampler of :class:`WarpedSampler` models as logarithms.
LOG_SCALE_OBJECTIVES = ("throughput_sps", "time_to_accuracy_s", "peak_memory_bytes")

T = TypeVar("T")


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(1)``; the previous count is restored."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class _DelegatingSampler(BaseSampler):
    """A sampler that hands every call to ``self.sampler``, unchanged; subclasses change
    only the calls they need to (Optuna's public ``BaseSampler`` interface)."""

    def __init__(self, sampler: BaseSampler) -> None:
        self.sampler = sampler

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.sampler.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.sampler.sample_relative(study, trial, search_space)

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self.sampler.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.sampler.before_trial(study, trial)

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self.sampler.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.sampler.reseed_rng()


class OneThreadSampler(_DelegatingSampler):
    """Wrap a sampler so that each of its calls runs on one torch thread.

    Only Optuna's public ``BaseSampler`` interface is used: every method delegates to the
    wrapped sampler, unchanged but for the thread count.

    Args:
        sampler: the sampler to wrap (``GPSampler``, ``TPESampler``, ...).

    Attributes:
        sampler: the wrapped sampler.
        fit_s: wall seconds spent in ``infer_relative_search_space``, ``sample_relative`` and
            ``sample_independent`` so far in this process (the sampler's cost per trial).
    """

    def __init__(self, sampler: BaseSampler) -> None:
        super().__init__(sampler)
        self.fit_s = 0.0

    def _timed(self, call: Callable[[], T]) -> T:
        started = time.perf_counter()
        with one_torch_thread():
            try:
                return call()
            finally:
                self.fit_s += time.perf_counter() - started

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self._timed(lambda: self.sampler.infer_relative_search_space(study, trial))

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self._timed(lambda: self.sampler.sample_relative(study, trial, search_space))

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._timed(
            lambda: self.sampler.sample_independent(study, trial, param_name, param_distribution)
        )


def _is_failed(trial: FrozenTrial) -> bool:
    """True for a trial whose values are placeholders: it has no measurement, or (time to
    accuracy) it missed its target, so its first value is only a lower bound."""
    return (
        "failure" in trial.user_attrs
        or trial.constraints.get("failed", 0.0) > 0
        or trial.user_attrs.get("target_reached") is False
    )


def _worst(values: Sequence[float], direction: StudyDirection) -> float:
    return min(values) if direction == StudyDirection.MAXIMIZE else max(values)


def modelled_values(
    study: Study, log_scale: Collection[str] = LOG_SCALE_OBJECTIVES
) -> dict[int, list[float]]:
    """The objective values a model of ``study`` should fit, by trial number (COMPLETE trials).

    Objectives named in ``log_scale`` (matched against the study's objective names, see
    :func:`autotune.objectives.objectives_of_study`) become natural logarithms (values below
    1 are read as 1: bytes and samples/s are never fractions that matter). A failed trial's
    values are replaced by the worst modelled value of the measured trials on each objective
    (unchanged while no trial has a measurement).
    """
    names = [o.name for o in objectives_of_study(study)]
    log_axes = [i for i, name in enumerate(names) if name in log_scale]
    modelled: dict[int, list[float]] = {}
    failed: list[int] = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if trial.values is None:
            continue
        values = list(trial.values)
        for i in log_axes:
            values[i] = math.log(max(values[i], 1.0))
        modelled[trial.number] = values
        if _is_failed(trial):
            failed.append(trial.number)
    measured = [v for number, v in modelled.items() if number not in failed]
    if measured and failed:
        worst = [
            _worst([v[i] for v in measured], direction)
            for i, direction in enumerate(study.directions)
        ]
        for number in failed:
            modelled[number] = list(worst)
    return modelled


def _is_ordinal(distribution: BaseDistribution) -> bool:
    """A categorical knob whose choices are all numbers (batch size, width, workers)."""
    return isinstance(distribution, CategoricalDistribution) and all(
        isinstance(c, (int, float)) and not isinstance(c, bool) for c in distribution.choices
    )


def _rank_distribution(distribution: CategoricalDistribution) -> IntDistribution:
    return IntDistribution(0, len(distribution.choices) - 1)


def _sorted_choices(distribution: CategoricalDistribution) -> list[float]:
    """An ordinal knob's choices in increasing order (:func:`_is_ordinal` holds)."""
    return sorted(float(c) for c in distribution.choices if isinstance(c, (int, float)))


def _choice_at(distribution: CategoricalDistribution, rank: int) -> Any:
    """The choice of rank ``rank`` among the sorted choices, as the knob holds it (64, not
    64.0)."""
    value = _sorted_choices(distribution)[rank]
    return next(c for c in distribution.choices if c == value)


class WarpedSampler(_DelegatingSampler):
    """Wrap a sampler that models objective values over its parameters (``GPSampler``) so
    that it models them on the scales the knobs and figures live on.

    - Output warping: throughput, time to accuracy and peak memory as logarithms, failed
      trials (and time-to-accuracy trials that missed the target) at the worst
      measured values (:func:`modelled_values`; the module docstring says why).
    - Input warping: a categorical knob whose choices are all numbers (batch size 16..256,
      width 8..64, DataLoader workers 0..2) is modelled as the rank of its value among the
      sorted choices, an integer. Optuna models a categorical knob with a Hamming kernel (any
      two choices equally unlike); batch 64 is nearer 128 than 16, and a rank on geometric
      choices is their logarithm.

    Relative sampling sees a copy of the study in an in-memory storage whose trials carry the
    warped values and ranks; the wrapped sampler's proposal is mapped back to the knobs'
    values. Every other call, and the study itself, are left as they are: the study stores
    the raw figures and the knobs' real values. Only public Optuna APIs build the copy
    (``create_study``, ``add_trials``, ``FrozenTrial``'s setters). A sampler that only ranks
    values (TPE, NSGA-II) gains little from output warping.

    Args:
        sampler: the sampler to wrap.
        log_scale: names of the objectives modelled as logarithms.
        ordinal: model numeric categorical knobs by rank (input warping).

    Attributes:
        sampler: the wrapped sampler.
    """

    def __init__(
        self,
        sampler: BaseSampler,
        log_scale: Collection[str] = LOG_SCALE_OBJECTIVES,
        ordinal: bool = True,
    ) -> None:
        super().__init__(sampler)
        self._log_scale = tuple(log_scale)
        self._ordinal = ordinal

    def _view(
        self,
        study: Study,
        trial: FrozenTrial,
        ordinal: dict[str, CategoricalDistribution],
    ) -> tuple[Study, FrozenTrial]:
        """An in-memory copy of ``study`` with modelled values and ranked ``ordinal`` knobs,
        and ``trial``'s copy in it.

        Every trial is copied, in number order, so numbers match (the storage numbers trials
        as it receives them). A knob is ranked in a trial only where the trial's distribution
        is the one searched (a warm-start trial over other choices keeps its own).
        """
        modelled = modelled_values(study, self._log_scale)
        view = optuna.create_study(
            storage=optuna.storages.InMemoryStorage(),
            directions=study.directions,
            sampler=optuna.samplers.RandomSampler(),  # never asked: the view runs no trial
        )
        copies = []
        for original in study.get_trials(deepcopy=False):
            duplicate = copy.copy(original)
            if original.number in modelled:
                duplicate.values = modelled[original.number]
            params, distributions = dict(original.params), dict(original.distributions)
            for name, distribution in ordinal.items():
                if distributions.get(name) == distribution:
                    params[name] = _sorted_choices(distribution).index(params[name])
                    distributions[name] = _rank_distribution(distribution)
            duplicate.params, duplicate.distributions = params, distributions
            copies.append(duplicate)
        view.add_trials(copies)
        return view, view.get_trials(deepcopy=False)[trial.number]

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        ordinal = {
            name: d
            for name, d in search_space.items()
            if self._ordinal and isinstance(d, CategoricalDistribution) and _is_ordinal(d)
        }
        view, view_trial = self._view(study, trial, ordinal)
        view_space = {
            name: _rank_distribution(ordinal[name]) if name in ordinal else d
            for name, d in search_space.items()
        }
        proposal = self.sampler.sample_relative(view, view_trial, view_space)
        return {
            name: _choice_at(ordinal[name], int(v)) if name in ordinal else v
            for name, v in proposal.items()
        }


def make_sampler(name: str, seed: int) -> OneThreadSampler:
    """The sampler for ``sampler=NAME``, seeded, on one torch thread while it samples
    (:class:`OneThreadSampler`). ``gp`` models the study through :class:`WarpedSampler`;
    the wrapped Optuna sampler is ``.sampler`` (``.sampler.sampler`` for ``gp``).

    Raises:
        ConfigError: for an unknown sampler name.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler: BaseSampler
        if name == "nsga2":
            sampler = optuna.samplers.NSGAIISampler(population_size=NSGA2_POPULATION, seed=seed)
        elif name == "tpe":
            sampler = optuna.samplers.TPESampler(
                seed=seed, multivariate=True, n_startup_trials=GP_STARTUP_TRIALS
            )
        elif name == "gp":
            sampler = WarpedSampler(
                optuna.samplers.GPSampler(seed=seed, n_startup_trials=GP_STARTUP_TRIALS)
            )
        elif name == "random":
            sampler = optuna.samplers.RandomSampler(seed=seed)
        else:
            raise ConfigError(f"sampler={name}: unknown sampler (known: nsga2, tpe, gp, random)")
    return OneThreadSampler(sampler)
