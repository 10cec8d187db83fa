"""The warped view: the wrapped sampler models the study on the scales its knobs and figures
live on, and is asked again when the feasibility rules refuse its proposal
(:class:`WarpedSampler`, :func:`modelled_values`).

Optuna's GPSampler standardizes each objective (z-scores) and models it as it comes; it has
no output warping. Throughput and peak memory span orders of magnitude (tens to tens of
thousands of samples/s), and a few fast or large configurations would stretch their scale
until the GP sees every other configuration as alike. Practitioners judge both as ratios
("2x faster", "half the memory"), so :class:`WarpedSampler` lets the wrapped sampler model
their logarithms, and numeric choices (batch size, width) by their rank (output and input
warping, after Snoek et al., "Input Warping for Bayesian Optimization of Non-stationary
Functions", ICML 2014, in their simplest form). A trial that failed (no measurement) carries
placeholder values (zero throughput, zero accuracy); the wrapped sampler sees the median of
the values measured so far on each objective instead, so the placeholders do not squash the
measured values' scale, while Optuna's constraints (the ``failed`` constraint) still mark the
trial infeasible. The study itself stores the raw figures, so optuna-dashboard,
``optuna.load_study`` and every report read samples/s and bytes. Only public Optuna APIs are
used here.
"""

from __future__ import annotations

import copy
import math
import statistics
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.study import StudyDirection
from optuna.trial import TrialState

from autotune.study.objectives import objectives_of_study
from autotune.study.search._samplers._gp import LeanGPSampler
from autotune.study.search._samplers._values import (
    FIXED_PARAMS_ATTR,
    PriorMean,
    fixed_params,
    is_failed,
    is_measured,
    missed_target,
)
from autotune.study.search._samplers._wrappers import DelegatingSampler
from autotune.study.trial_result import TrialResult

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial

__all__ = [
    "LOG_SCALE_OBJECTIVES",
    "MAX_REFUSED_PROPOSALS",
    "WarpedSampler",
    "modelled_values",
]

#: Objectives the wrapped sampler of :class:`WarpedSampler` models as logarithms.
LOG_SCALE_OBJECTIVES = ("throughput_sps", "time_to_accuracy_s", "peak_memory_bytes")

#: The most proposals :class:`WarpedSampler` refuses for one trial (the feasibility rules
#: refuse them) before it hands one on; each costs one more fit and acquisition.
MAX_REFUSED_PROPOSALS = 5


def _worst(values: Sequence[float], direction: StudyDirection) -> float:
    return min(values) if direction == StudyDirection.MAXIMIZE else max(values)


def modelled_values(
    study: Study, log_scale: Collection[str] = LOG_SCALE_OBJECTIVES
) -> dict[int, list[float]]:
    """The objective values a model of ``study`` should fit, by trial number (COMPLETE trials).

    Objectives named in ``log_scale`` (matched against the study's objective names, see
    :func:`autotune.study.objectives.objectives_of_study`) become natural logarithms (values below
    1 are read as 1: bytes and samples/s are never fractions that matter). A failed trial's
    values (no measurement) are replaced by the median modelled value of the measured trials
    on each objective (a trial stopped as ``too_slow`` keeps the throughput and memory it
    measured; only its metric is imputed), and a time-to-accuracy trial that missed its
    target reads as the worst (its time is a lower bound); both are left as they are while no
    trial has a measurement.

    The median, not the worst: at the worst value one failure would teach the model that a
    whole region is bad (a failing level would never be tried again, whatever it is combined
    with), while the ``failed`` constraint already tells the sampler where trials fail.
    """
    names = [o.name for o in objectives_of_study(study)]
    log_axes = [i for i, name in enumerate(names) if name in log_scale]
    modelled: dict[int, list[float]] = {}
    failed: list[int] = []
    missed: list[int] = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if trial.values is None:
            continue
        values = list(trial.values)
        for i in log_axes:
            values[i] = math.log(max(values[i], 1.0))
        modelled[trial.number] = values
        if is_failed(trial):
            failed.append(trial.number)
        elif missed_target(trial):
            missed.append(trial.number)
    measured = [v for number, v in modelled.items() if number not in failed + missed]
    if not measured:
        return modelled
    axes = range(len(study.directions))
    median = [statistics.median(v[i] for v in measured) for i in axes]
    worst = [_worst([v[i] for v in measured], study.directions[i]) for i in axes]
    trials = {t.number: t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))}
    for number in failed:
        kept = _measured_axes(trials[number], names)
        modelled[number] = [v if i in kept else median[i] for i, v in enumerate(modelled[number])]
    for number in missed:
        modelled[number] = list(worst)
    return modelled


def _measured_axes(trial: FrozenTrial, names: Sequence[str]) -> set[int]:
    """The objectives a failed trial did measure: throughput and memory of a trial stopped
    as ``too_slow`` after its first windows (its metric was never evaluated); none for any
    other failure."""
    if TrialResult.from_trial(trial).failure_kind != "too_slow":
        return set()
    return {i for i, name in enumerate(names) if name in ("throughput_sps", "peak_memory_bytes")}


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


def _ranked_fixed(
    fixed: Mapping[str, Any], ordinal: Mapping[str, CategoricalDistribution]
) -> dict[str, Any]:
    """A queued trial's fixed knobs with each ``ordinal`` knob's value as its rank among the
    sorted choices; one whose value is not a choice is left out."""
    ranked: dict[str, Any] = {}
    for name, value in fixed.items():
        if name not in ordinal:
            ranked[name] = value
        elif value in ordinal[name].choices:
            ranked[name] = _sorted_choices(ordinal[name]).index(float(value))
    return ranked


class WarpedSampler(DelegatingSampler):
    """Wrap a sampler that models objective values over its parameters (``GPSampler``) so
    that it models them on the scales the knobs and figures live on.

    - Output warping: throughput, time to accuracy and peak memory as logarithms, failed
      trials (and time-to-accuracy trials that missed the target) at the median of the
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

    Known constraints: with ``feasible`` (the study's feasibility rules, which refuse a
    configuration before it runs), a relative proposal the rules refuse is not handed to
    the study: it is added to the copy as a failed trial (the ``failed`` constraint set, the
    median values above) and the wrapped sampler asked again, up to ``max_refused`` times;
    the last proposal is returned even if refused (the study then records it as refused).
    The rules are known before a trial runs, so a trial spent on a configuration they refuse
    is wasted. Constraints known in advance can be checked before an
    evaluation instead of modelled from failures (the distinction of Gelbart, Snoek and
    Adams, "Bayesian Optimization with Unknown Constraints", UAI 2014). The copy
    is rebuilt for every trial, so the refused points are not stored: the study holds only
    trials that ran or were refused as proposed.

    Prior means: with ``prior_mean`` (in the knobs' values and the objectives' units) and a
    :class:`LeanGPSampler` wrapped, the GP samples with the prior on the copy's scales
    (ranks read back as values, log-scaled objectives as logarithms; :meth:`_view_prior`).

    Args:
        sampler: the sampler to wrap.
        log_scale: names of the objectives modelled as logarithms.
        ordinal: model numeric categorical knobs by rank (input warping).
        feasible: whether a proposal (every searched knob's value, by parameter name)
            passes the feasibility rules; None: every proposal is handed on.
        max_refused: the most proposals refused for one trial before one is handed on.
        prior_mean: what is known of a configuration's objectives before it runs
            (:data:`PriorMean`), for a wrapped :class:`LeanGPSampler`; None: nothing.

    Attributes:
        sampler: the wrapped sampler.
        feasible: the ``feasible`` given.
        prior_mean: the ``prior_mean`` given.
        refused_proposals: the proposals refused so far (by this sampler instance).
    """

    def __init__(
        self,
        sampler: BaseSampler,
        log_scale: Collection[str] = LOG_SCALE_OBJECTIVES,
        ordinal: bool = True,
        feasible: Callable[[Mapping[str, Any]], bool] | None = None,
        max_refused: int = MAX_REFUSED_PROPOSALS,
        prior_mean: PriorMean | None = None,
    ) -> None:
        super().__init__(sampler)
        self._log_scale = tuple(log_scale)
        self._ordinal = ordinal
        self.feasible = feasible
        self.prior_mean = prior_mean
        self._view_priors: dict[tuple[Any, ...], PriorMean] = {}
        self._max_refused = max_refused
        self.refused_proposals = 0

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
        is the one searched (a warm-start trial over other choices keeps its own); a knob a
        queued trial fixes (``fixed_params``) is ranked too, or left unfixed in the copy when
        its value is not one of the choices searched.
        """
        modelled = modelled_values(study, self._log_scale)
        view = optuna.create_study(
            storage=optuna.storages.InMemoryStorage(),
            directions=study.directions,
            sampler=optuna.samplers.RandomSampler(),  # never asked: the view runs no trial
        )
        if study.metric_names is not None:  # which objective is the metric (LeanGPSampler)
            with warnings.catch_warnings():  # set_metric_names is "experimental" since 3.2
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                view.set_metric_names(study.metric_names)
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
            fixed = fixed_params(original)
            if fixed and ordinal:  # a queued trial's fixed knobs, ranked as its params are
                duplicate.system_attrs = {
                    **original.system_attrs,
                    FIXED_PARAMS_ATTR: _ranked_fixed(fixed, ordinal),
                }
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
        for attempt in range(self._max_refused + 1):
            if isinstance(self.sampler, LeanGPSampler) and self.prior_mean is not None:
                with self.sampler.using_prior_mean(self._view_prior(ordinal)):
                    proposal = self.sampler.sample_relative(view, view_trial, view_space)
            else:
                proposal = self.sampler.sample_relative(view, view_trial, view_space)
            params = {
                name: _choice_at(ordinal[name], int(v)) if name in ordinal else v
                for name, v in proposal.items()
            }
            if (
                self.feasible is None
                or attempt == self._max_refused
                or set(params) != set(search_space)  # the start-up phase: nothing proposed
                or self.feasible(params)
                or not _add_refused(view, proposal, view_space)
            ):
                return params
            self.refused_proposals += 1
        raise AssertionError("unreachable: the last attempt returns")

    def _view_prior(self, ordinal: Mapping[str, CategoricalDistribution]) -> PriorMean:
        """:attr:`prior_mean` (set) on the copy's scales: ranked knobs read back as their
        values, and the objectives of ``log_scale`` as logarithms (values below 1 read as 1,
        as :func:`modelled_values` reads them). The same function for the same ranked knobs,
        so the GP's cache of priced rows lasts from one proposal to the next."""
        prior_mean = self.prior_mean
        assert prior_mean is not None, "only called with a prior mean"
        key = (prior_mean, tuple(sorted(ordinal.items())))
        if key not in self._view_priors:
            self._view_priors = {key: self._make_view_prior(prior_mean, dict(ordinal))}
        return self._view_priors[key]

    def _make_view_prior(
        self, prior_mean: PriorMean, ordinal: Mapping[str, CategoricalDistribution]
    ) -> PriorMean:
        log_scale = frozenset(self._log_scale)

        def view_prior(params: Mapping[str, Any]) -> dict[str, float]:
            knobs = {
                name: _choice_at(ordinal[name], int(v)) if name in ordinal else v
                for name, v in params.items()
            }
            return {
                name: math.log(max(value, 1.0)) if name in log_scale else value
                for name, value in prior_mean(knobs).items()
            }

        return view_prior


def _add_refused(
    view: Study, params: dict[str, Any], distributions: dict[str, BaseDistribution]
) -> bool:
    """Add a proposal the feasibility rules refuse to ``view`` (a :class:`WarpedSampler`
    copy, values already modelled) as a failed trial: the median modelled values of the
    measured trials (those :func:`modelled_values` takes its median over: neither failed nor
    a missed time-to-accuracy target), the ``failed`` constraint 1 and every other
    constraint 0. Returns False (nothing added) when the copy's trials carry no ``failed``
    constraint or no measured trial gives a median."""
    completed = view.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    keys = list(completed[0].constraints) if completed else []
    measured = [t.values for t in completed if t.values is not None and is_measured(t)]
    if "failed" not in keys or not measured:
        return False
    median = [statistics.median(v[i] for v in measured) for i in range(len(view.directions))]
    view.add_trial(
        optuna.trial.create_trial(
            params=params,
            distributions=distributions,
            values=median,
            constraints={key: 1.0 if key == "failed" else 0.0 for key in keys},
            user_attrs={"failure": "infeasible"},
        )
    )
    return True
