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
wrapped sampler sees the median of the values measured so far on each objective instead, so
the placeholders do not squash the measured values' scale, while Optuna's constraints (the
``failed`` constraint) still mark the trial infeasible. The study itself stores the raw
figures, so optuna-dashboard, ``optuna.load_study`` and every report read samples/s and
bytes, and studies written before this change open as they are.
"""

from __future__ import annotations

import copy
import itertools
import math
import statistics
import time
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import optuna
import torch
from optuna._gp import acqf as acqf_module
from optuna._gp import gp as optuna_gp
from optuna._gp import search_space as gp_search_space
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.samplers._gp import sampler as _gp_sampler_module
from optuna.study import StudyDirection
from optuna.trial import TrialState
from scipy.stats import qmc

from autotune.baseline import BASELINE_ATTR
from autotune.config import (
    COST_AWARE_AFTER_TRIALS,
    SPEED_KNOBS,
    CategoricalParam,
    FloatParam,
    ModelKnob,
)
from autotune.exceptions import ConfigError
from autotune.objectives import attr_float, metric_objective, objectives_of_study

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial

__all__ = [
    "COST_FREE_QUANTILE",
    "GP_STARTUP_TRIALS",
    "LEAN_LOCAL_SEARCHES",
    "LEAN_PRELIMINARY_SAMPLES",
    "LEAN_QMC_SAMPLES_EHVI",
    "LOG_SCALE_OBJECTIVES",
    "MAX_REFUSED_PROPOSALS",
    "NSGA2_POPULATION",
    "PRIOR_SLOPE_BOUNDS",
    "REPEAT_LOG_PENALTY",
    "STARTUP_DESIGN_SAMPLERS",
    "WARM_START_ATTR",
    "DesignSampler",
    "LeanGPSampler",
    "OneThreadSampler",
    "PriorMean",
    "WarpedSampler",
    "covering_design",
    "design_levels",
    "make_sampler",
    "modelled_values",
    "one_torch_thread",
]

#: NSGA-II population: small enough that a 50-trial study runs several generations.
NSGA2_POPULATION = 10
#: Trials in the study (the baseline and warm-start trials count) before GPSampler and
#: TPESampler model it. The start-up design fills them (:func:`covering_design`, at least one
#: row per level of the knob with the most levels), so on ``cnn_small`` (batch size: 5 levels)
#: the GP starts right after the baseline and the smallest covering design. Chosen from Table 2
#: (docs/benchmarks.md, notes of issue 24's fifth session): with the memory estimate as the
#: GP's prior mean, 6 instead of 10 raised the default's median hypervolume at 25 trials from
#: 0.838 to 0.869 on seeds 0-9 and from 0.789 to 0.854 on seeds 10-19 (50 trials: 0.927 to
#: 0.927, 0.915 to 0.921). Without the prior, 6 reached only 0.796: the prior is what lets
#: the GP start early. (Before the design and the prior, 5 random start-up trials did worse
#: than 10.)
GP_STARTUP_TRIALS = 6

#: Objectives the wrapped sampler of :class:`WarpedSampler` models as logarithms.
LOG_SCALE_OBJECTIVES = ("throughput_sps", "time_to_accuracy_s", "peak_memory_bytes")

#: The most proposals :class:`WarpedSampler` refuses for one trial (the feasibility rules
#: refuse them) before it hands one on; each costs one more fit and acquisition.
MAX_REFUSED_PROPOSALS = 5

#: What is known of a configuration's objectives before it runs: knob values (by Optuna
#: parameter name) -> expected values by objective name, each in its objective's unit (e.g.
#: ``{"peak_memory_bytes": 5.2e7}``, autotune's memory estimate); an objective left out has
#: no prior. :class:`LeanGPSampler` uses it as its GPs' prior mean.
PriorMean = Callable[[Mapping[str, Any]], Mapping[str, float]]

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
    """True for a trial without a measurement: its values are placeholders."""
    return "failure" in trial.user_attrs or trial.constraints.get("failed", 0.0) > 0


def _missed_target(trial: FrozenTrial) -> bool:
    """True for a time-to-accuracy trial that missed its target: its time is only a lower
    bound (the time limit it was stopped at)."""
    return trial.user_attrs.get("target_reached") is False


def _is_measured(trial: FrozenTrial) -> bool:
    """True for a trial whose values are all measurements: it neither failed nor missed its
    time-to-accuracy target (the trials a median of measured values is taken over)."""
    return not _is_failed(trial) and not _missed_target(trial)


def _worst(values: Sequence[float], direction: StudyDirection) -> float:
    return min(values) if direction == StudyDirection.MAXIMIZE else max(values)


def modelled_values(
    study: Study, log_scale: Collection[str] = LOG_SCALE_OBJECTIVES
) -> dict[int, list[float]]:
    """The objective values a model of ``study`` should fit, by trial number (COMPLETE trials).

    Objectives named in ``log_scale`` (matched against the study's objective names, see
    :func:`autotune.objectives.objectives_of_study`) become natural logarithms (values below
    1 are read as 1: bytes and samples/s are never fractions that matter). A failed trial's
    values (no measurement) are replaced by the median modelled value of the measured trials
    on each objective (a trial stopped as ``too_slow`` keeps the throughput and memory it
    measured; only its metric is imputed), and a time-to-accuracy trial that missed its
    target reads as the worst (its time is a lower bound); both are left as they are while no
    trial has a measurement.

    The median, not the worst: a failure at the worst value taught the GP that a whole region
    was bad after one failure there (a failing level such as bf16, or two DataLoader workers,
    was never tried again, whatever it was combined with), while the ``failed`` constraint
    already tells the sampler where trials fail (issue 24).
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
        if _is_failed(trial):
            failed.append(trial.number)
        elif _missed_target(trial):
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
    as ``too_slow`` after its first window (its metric was never evaluated); none for any
    other failure."""
    if trial.user_attrs.get("failure") != "too_slow":
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


class WarpedSampler(_DelegatingSampler):
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
    the last proposal is returned even if refused (the study then records it as refused, as
    before). The rules are known before a trial runs, so a trial spent on a configuration
    they refuse is wasted (on Table 2's mock space, 6 of seed 5's first 50 trials were such
    proposals before this). Constraints known in advance can be checked before an
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
        is the one searched (a warm-start trial over other choices keeps its own).
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
    measured = [t.values for t in completed if t.values is not None and _is_measured(t)]
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


#: The samplers whose start-up trials come from :func:`covering_design` (those with a random
#: start-up phase of :data:`GP_STARTUP_TRIALS`); NSGA-II breeds from its own first population
#: and ``random`` stays the random reference of Table 2.
STARTUP_DESIGN_SAMPLERS = ("gp", "tpe")
#: The user attribute of a trial queued from another study's Pareto front (``warm_start=``).
WARM_START_ATTR = "warm_start_from"
#: What :class:`LeanGPSampler` subtracts from the log acquisition of a configuration the study
#: has already tried (or is trying): far below any untried one's (Optuna's LogEHVI lies within
#: tens of units of 0), so a repeat wins only once every candidate is one.
REPEAT_LOG_PENALTY = 1e4
#: Acquisition effort of :class:`LeanGPSampler` (Optuna 5.0.0's defaults: 2048, 10, 128), the
#: settings issue 24's exploratory run chose: the acquisition surface of 8 mostly categorical
#: knobs is coarse, so 256 quasi-random starting points and 3 local searches find its maximum,
#: and 32 quasi-Monte Carlo samples estimate an expected hypervolume improvement of 3
#: objectives well enough to rank candidates. On the mock space of Table 2, with the machine
#: quiet, the sampler's median seconds at trials 45-50 went from 1.04 s (seeds 0-2, Optuna's
#: defaults) to 0.16 s (seeds 0-9) with the other changes of issue 24; the GP fits (3
#: objectives and the ``failed`` constraint) are then about half of what is left.
LEAN_PRELIMINARY_SAMPLES = 256
LEAN_LOCAL_SEARCHES = 3
LEAN_QMC_SAMPLES_EHVI = 32
#: The quantile of the completed trials' modelled seconds under which a proposal pays no
#: penalty (:class:`_CompileCost`): the cheaper quarter of what the study has tried is
#: "cheap"; above it, each doubling of the predicted seconds halves the acquisition. In issue
#: 24's sixth session (a penalty on predicted total seconds, Table 2, seeds 0-9) the 10th
#: percentile bought mostly eager trials (0.906 within the seconds), the median 0.933, the
#: 25th percentile 0.942.
COST_FREE_QUANTILE = 0.25


def design_levels(
    knobs: Mapping[str, ModelKnob | CategoricalParam[Any]], n_rows: int
) -> dict[str, list[Any]]:
    """The levels a start-up design covers, by knob: a discrete knob's values, and for a
    real range (:class:`~autotune.config.FloatParam`) the centres of ``n_rows`` equal strata
    (on a log scale for ``log: true``; rounded to ``step`` if it has one, duplicates
    dropped)."""
    levels: dict[str, list[Any]] = {}
    for name, knob in knobs.items():
        if not isinstance(knob, FloatParam):
            levels[name] = list(knob.values())
            continue
        centres = [(i + 0.5) / n_rows for i in range(n_rows)]
        if knob.log:
            lo, hi = math.log(knob.low), math.log(knob.high)
            values = [math.exp(lo + u * (hi - lo)) for u in centres]
        else:
            values = [knob.low + u * (knob.high - knob.low) for u in centres]
        if knob.step is not None:
            step = knob.step
            values = [
                min(knob.low + round((v - knob.low) / step) * step, knob.high) for v in values
            ]
        levels[name] = list(dict.fromkeys(values))
    return levels


def covering_design(
    levels: Mapping[str, Sequence[Any]],
    n_rows: int,
    seed: int,
    feasible: Callable[[dict[str, Any]], bool] = lambda row: True,
    preferred: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """A start-up design of ``n_rows`` rows over ``levels`` in which every level of every knob
    appears at least once (when ``n_rows`` is at least the most levels any knob has), and
    every row is ``feasible`` and, where the coverage allows, ``preferred``.

    The construction is scipy's Latin hypercube (``scipy.stats.qmc.LatinHypercube``,
    ``scramble=False``: each of the ``n_rows`` points sits at the centre of its stratum on
    every axis; ``optimization="random-cd"``: columns permuted to lower the centred
    discrepancy, so pairs of knobs are spread too), each axis cut into as many equal
    intervals as the knob has levels. An interval of width ``1/L >= 1/n_rows`` always holds
    a stratum centre, so every level appears, about ``n_rows / L`` times each. An orthogonal
    array (``strength=2``) would also balance pairs, but needs ``n_rows = p**2`` (p prime) and
    at most ``p + 1`` knobs: 9 rows allow 4 knobs, and a space has 8.

    A row the rules refuse is repaired by swapping one knob's level with another row (a swap
    keeps every column's levels, hence the coverage) when both rows are then feasible, or,
    failing that, replaced by a feasible random row that keeps the levels only it held (or
    else restores the most levels lost); a row no candidate can replace is dropped. Last, a
    level still missing goes into a row where it fits and whose own level another row also
    holds. A level no feasible row can hold stays missing.

    With ``preferred`` (a stricter test, e.g. "fits in memory with a margin"), the repairs
    and the filling above read a row as feasible only when it is also preferred; a row no
    repair makes preferred is repaired to be feasible only, and a level no preferred row
    can hold then goes into a row that is only feasible (the same filling), so the coverage
    never depends on the stricter test.

    Args:
        levels: the levels of each knob (:func:`design_levels`), in a fixed order.
        n_rows: the rows wanted (>= 1).
        seed: the design's seed; the same seed gives the same design.
        feasible: whether a row (knob values by name) can run (the feasibility rules).
        preferred: whether a feasible row is also one the design would rather have; None:
            every feasible row is.

    Returns:
        Up to ``n_rows`` rows, each a value per knob of ``levels``; empty when no knob has
        more than one level.
    """
    names = [name for name, values in levels.items() if len(values) > 1]
    fixed = {name: values[0] for name, values in levels.items() if len(values) == 1}
    if not names or n_rows < 1:
        return []
    rng = np.random.default_rng(seed)
    points = qmc.LatinHypercube(
        len(names), scramble=False, optimization="random-cd", rng=rng
    ).random(n_rows)  # (n_rows, len(names)), stratum centres
    counts = np.array([len(levels[name]) for name in names])
    index = np.minimum((points * counts).astype(int), counts - 1)  # (n_rows, len(names))

    def row_of(indices: np.ndarray) -> dict[str, Any]:
        chosen = {name: levels[name][int(i)] for name, i in zip(names, indices, strict=True)}
        return {name: chosen.get(name, fixed.get(name)) for name in levels}

    known: dict[tuple[int, ...], bool] = {}
    known_preferred: dict[tuple[int, ...], bool] = {}

    def ok(indices: np.ndarray) -> bool:
        key = tuple(int(i) for i in indices)
        if key not in known:
            known[key] = feasible(row_of(indices))
        return known[key]

    def ok_preferred(indices: np.ndarray) -> bool:
        if preferred is None or not ok(indices):
            return ok(indices)
        key = tuple(int(i) for i in indices)
        if key not in known_preferred:
            known_preferred[key] = preferred(row_of(indices))
        return known_preferred[key]

    for r in range(n_rows):
        for test in (ok_preferred, ok) if preferred is not None else (ok,):
            if test(index[r]) or _swap_repair(index, r, test, rng):
                break
            if _replace(index, r, counts, test, rng):
                break
    _fill_uncovered(index, counts, ok_preferred)
    if preferred is not None:
        _fill_uncovered(index, counts, ok)  # levels no preferred row can hold
    return [row_of(index[r]) for r in range(n_rows) if ok(index[r])]


def _swap_repair(
    index: np.ndarray, r: int, ok: Callable[[np.ndarray], bool], rng: np.random.Generator
) -> bool:
    """Make row ``r`` feasible by swapping one knob's level with another row, in place; a
    swap is kept when row ``r`` is then feasible and the other row is too (or was not
    before). Returns whether a swap was kept."""
    n_rows, n_knobs = index.shape
    for c in rng.permutation(n_knobs):
        for s in rng.permutation(n_rows):
            if s == r or index[s, c] == index[r, c]:
                continue
            other_was_ok = ok(index[s])
            index[[r, s], c] = index[[s, r], c]
            if ok(index[r]) and (ok(index[s]) or not other_was_ok):
                return True
            index[[r, s], c] = index[[s, r], c]
    return False


def _unique_columns(index: np.ndarray, r: int) -> np.ndarray:
    """The knobs (columns) whose level in row ``r`` no other row holds."""
    others = np.delete(index, r, axis=0)
    return np.array([not np.any(others[:, c] == index[r, c]) for c in range(index.shape[1])])


def _replace(
    index: np.ndarray,
    r: int,
    counts: np.ndarray,
    ok: Callable[[np.ndarray], bool],
    rng: np.random.Generator,
    candidates: int = 256,
) -> bool:
    """Replace row ``r`` in place by a feasible random row: first one that keeps the levels
    only row ``r`` holds (its other knobs drawn at random), else the one that covers the most
    (knob, level) pairs the other rows lack; leave it (infeasible, then dropped) if no
    candidate is feasible. Returns whether it was replaced."""
    unique = _unique_columns(index, r)
    for _ in range(candidates):
        candidate = np.where(unique, index[r], rng.integers(0, counts))
        if ok(candidate):
            index[r] = candidate
            return True
    others = np.delete(index, r, axis=0)
    best, best_gain = None, -1
    for _ in range(candidates):
        candidate = rng.integers(0, counts)
        if not ok(candidate):
            continue
        gain = sum(int(not np.any(others[:, c] == candidate[c])) for c in range(index.shape[1]))
        if gain > best_gain:
            best, best_gain = candidate, gain
    if best is None:
        return False
    index[r] = best
    return True


def _fill_uncovered(
    index: np.ndarray, counts: np.ndarray, ok: Callable[[np.ndarray], bool]
) -> None:
    """Put each level no feasible row holds into a feasible row, in place, where that row's
    level of the knob is held by another row too and the row stays feasible."""
    rows = [r for r in range(len(index)) if ok(index[r])]
    for c, count in enumerate(counts):
        for level in range(count):
            if any(index[r, c] == level for r in rows):
                continue
            for r in rows:
                if np.sum(index[rows, c] == index[r, c]) < 2:
                    continue  # the row's level would be lost
                before = index[r, c]
                index[r, c] = level
                if ok(index[r]):
                    break
                index[r, c] = before


def _is_queued(trial: FrozenTrial) -> bool:
    """A trial whose configuration was queued, not proposed: the baseline or a warm start."""
    return bool(trial.user_attrs.get(BASELINE_ATTR)) or WARM_START_ATTR in trial.user_attrs


def _contains(distribution: BaseDistribution, value: Any) -> bool:
    if isinstance(distribution, CategoricalDistribution):
        return value in distribution.choices
    low, high = getattr(distribution, "low", None), getattr(distribution, "high", None)
    return low is not None and high is not None and low <= value <= high


def _params_key(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


class DesignSampler(_DelegatingSampler):
    """Propose the rows of a start-up design (:func:`covering_design`) before the wrapped
    sampler proposes anything.

    The trials the study proposes (every trial but the queued ones: the baseline and warm
    starts, see :func:`_is_queued`) take the design's rows in trial-number order: the trial
    with ``k`` proposed trials numbered below it gets row ``k`` while ``k`` is below the
    design's length. The storage numbers trials atomically, so many workers sharing one study
    each get different rows, and a resumed study goes on where it stopped (it never restarts
    its design). A row whose trial was interrupted (FAIL, the row's values set) is proposed
    again once by the first trial after the design, so the design's coverage survives a
    Ctrl-C. Later trials, and every knob a row does not name, go to the wrapped sampler.

    Only Optuna's public sampler interface is used: during the design the relative search
    space is empty, so Optuna asks :meth:`sample_independent` for each knob, which answers
    from the row.

    Args:
        sampler: the sampler for every trial after the design.
        design: the rows, each a value per knob (Optuna parameter name).

    Attributes:
        sampler: the wrapped sampler.
        design: the rows.
    """

    def __init__(self, sampler: BaseSampler, design: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(sampler)
        self.design = [dict(row) for row in design]
        self._rows: dict[tuple[int, int], dict[str, Any] | None] = {}

    def row(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        """The design row for ``trial``, or None when the wrapped sampler proposes it."""
        key = (id(study), trial.number)
        if key not in self._rows:
            self._rows[key] = self._find_row(study, trial)
        return self._rows[key]

    def _find_row(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        if not self.design or _is_queued(trial):
            return None
        trials = study.get_trials(deepcopy=False)
        proposed = [t for t in trials if t.number < trial.number and not _is_queued(t)]
        if len(proposed) < len(self.design):
            return self.design[len(proposed)]
        tried = {_params_key(t.params) for t in trials if t.state != TrialState.FAIL}
        for row, t in zip(self.design, proposed, strict=False):
            key = _params_key(row)
            if t.state == TrialState.FAIL and _params_key(t.params) == key and key not in tried:
                return row
        return None

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        if self.row(study, trial) is not None:
            return {}
        return self.sampler.infer_relative_search_space(study, trial)

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        row = self.row(study, trial)
        if row is not None and param_name in row and _contains(param_distribution, row[param_name]):
            return row[param_name]
        return self.sampler.sample_independent(study, trial, param_name, param_distribution)


#: The prior-mean slope's bounds (:class:`_FitChange`): 0 (the prior says nothing) to 2 (the
#: objective grows twice as fast as its prior, on the modelled scale).
PRIOR_SLOPE_BOUNDS = (0.0, 2.0)


#: Rows a :class:`_RowPrior` keeps (then it starts again): every configuration of a discrete
#: space of this size, and a bound on memory where a real-valued knob makes every row new.
_ROW_PRIOR_CACHE_ROWS = 1 << 16


class _RowPrior:
    """A prior mean (:data:`PriorMean`, on the values the GP models) read at normalized GP
    inputs: ``(n, d)`` rows -> ``(n,)`` prior values of one objective, NaN where the prior
    has none. Rows are decoded through Optuna's search space (``get_unnormalized_param``) and
    cached by their bytes (up to :data:`_ROW_PRIOR_CACHE_ROWS`), so each configuration is
    decoded and priced once, whichever objectives and proposals read it."""

    def __init__(self, space: gp_search_space.SearchSpace, prior_mean: PriorMean) -> None:
        self._space = space
        self._prior_mean = prior_mean
        self._cache: dict[bytes, Mapping[str, float]] = {}

    def __call__(self, X: np.ndarray, objective: str) -> np.ndarray:
        out = np.empty(len(X))
        for r, row in enumerate(np.asarray(X, dtype=np.float64)):
            key = row.tobytes()
            if key not in self._cache:
                if len(self._cache) >= _ROW_PRIOR_CACHE_ROWS:
                    self._cache.clear()
                self._cache[key] = self._prior_mean(self._space.get_unnormalized_param(row))
            out[r] = float(self._cache[key].get(objective, math.nan))
        return out


@dataclass
class _FitChange:
    """How one objective's GP departs from Optuna's: inputs held at 0 on masked knobs (the
    GP ignores them), and a prior mean ``slope * (prior(x) - centre)`` in the standardized
    units Optuna fits (the GP models what the prior leaves unexplained).

    Attributes:
        mask: per knob, whether the GP ignores it; None: it sees every knob.
        prior: the prior on normalized inputs (:class:`_RowPrior`), or None.
        objective: the objective's name, as the prior names it.
        direction_sign: +1 to maximize, -1 to minimize (Optuna fits ``sign * value``).
        value_std: the standard deviation Optuna standardizes the objective by (ddof 0).
        measured: per training row (completed trial, in order), whether its value is a
            measurement, not imputed (:func:`modelled_values`); None: every row is.
    """

    mask: np.ndarray | None = None
    prior: _RowPrior | None = None
    objective: str = ""
    direction_sign: float = 1.0
    value_std: float = 1.0
    measured: np.ndarray | None = None

    def prior_mean(self, X: np.ndarray, Y: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
        """The prior mean for training inputs ``X`` ``(n, d)`` and standardized values ``Y``
        ``(n,)``: ``x -> slope * (prior(x) - centre)``, standardized units, where ``slope``
        is the least-squares slope of the measured values on the prior, on the modelled
        scale, held to :data:`PRIOR_SLOPE_BOUNDS`, and ``centre`` their mean prior (universal
        kriging's regression mean, fitted before the GP as its two-stage approximation;
        Rasmussen and Williams, "Gaussian Processes for Machine Learning", 2006, section
        2.7). Imputed values (failed trials at the median) and rows without a prior (the
        prior does not know the configuration) are left out of the fit: the first would pull
        the slope towards 0; the second, and any input the prior does not know, get the
        centre (no prior). None when no prior is given or fewer than 2 distinct priors of
        measured rows give a slope."""
        if self.prior is None:
            return None
        h = self.prior(X, self.objective)
        measured = self.measured
        rows = np.isfinite(h)
        if measured is not None and len(measured) == len(h):
            rows &= measured
        if rows.sum() < 2 or np.ptp(h[rows]) == 0:
            return None
        # Y = sign * (value - mean) / std, so d value / d prior = sign * std * d Y / d prior.
        scale = self.direction_sign * max(self.value_std, 1e-10)
        slope = float(np.polyfit(h[rows], Y[rows], 1)[0]) * scale
        standardized_slope = float(np.clip(slope, *PRIOR_SLOPE_BOUNDS)) / scale
        centre = float(h[rows].mean())
        prior, objective = self.prior, self.objective

        def mean(x: np.ndarray) -> np.ndarray:
            values = prior(x, objective)
            return standardized_slope * (np.where(np.isfinite(values), values, centre) - centre)

        return mean


class _ChangedGPRegressor(optuna_gp.GPRegressor):
    """A fitted GP with a :class:`_FitChange`: it reads its inputs with the masked knobs held
    at 0 (its kernel, hence its posterior, does not depend on them), and its posterior mean
    and the Kriging-believer values of running trials (``append_running_data``) carry the
    prior mean, so every acquisition function reads the objective itself. Made from a GP
    fitted on masked inputs and on the values less the prior mean (:func:`_fits_changed`),
    so its training kernel matrix and cached Cholesky factor stay exact."""

    _keep: torch.Tensor | None  # (n_knobs,): 1.0 for a knob the GP sees, 0.0 for one it ignores
    _prior: Callable[[np.ndarray], np.ndarray] | None  # (n, d) -> (n,), standardized units

    def _prior_at(self, x: torch.Tensor) -> torch.Tensor:
        if self._prior is None:
            return torch.zeros(x.shape[:-1], dtype=torch.float64)
        flat = x.detach().reshape(-1, x.shape[-1]).cpu().numpy()
        return torch.from_numpy(self._prior(flat)).reshape(x.shape[:-1])

    def kernel(self, X1: torch.Tensor | None = None, X2: torch.Tensor | None = None) -> Any:
        if self._keep is None:
            return super().kernel(X1, X2)
        return super().kernel(
            None if X1 is None else X1 * self._keep, None if X2 is None else X2 * self._keep
        )

    def posterior(self, x: torch.Tensor, joint: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        mean, var = super().posterior(x, joint)
        return mean + self._prior_at(x), var

    def append_running_data(self, X_running: torch.Tensor, y_running: torch.Tensor) -> None:
        super().append_running_data(X_running, y_running - self._prior_at(X_running))


@contextmanager
def _fits_changed(changes: Mapping[int, _FitChange]) -> Iterator[None]:
    """While the block runs, GPSampler's GP of each objective index in ``changes`` is fitted
    as its :class:`_FitChange` says (masked knobs held at 0, the values less the prior mean)
    and reads every later input the same way (:class:`_ChangedGPRegressor`).

    Optuna 5.0.0's ``GPSampler._sample_relative_impl`` fits one GP per objective, in order,
    through the module global ``optuna.samplers._gp.sampler.gp.fit_kernel_params``, then the
    constraints' GPs; the call count tells them apart. Ignored knobs keep the lengthscales
    their prior gives them (finite: the acquisition's optimizer scales its steps by the GPs'
    mean lengthscales), which no prediction reads. The global is restored after the block
    (the study process samples one trial at a time). tests/study/test_samplers.py checks
    these private names.
    """
    real = _gp_sampler_module.gp
    calls = itertools.count()

    class _ChangedFit:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def fit_kernel_params(self, **kwargs: Any) -> Any:
            change = changes.get(next(calls))
            if change is None:
                return real.fit_kernel_params(**kwargs)
            X = np.array(kwargs["X"], dtype=float, copy=True)  # (n_trials, n_knobs), normalized
            prior = change.prior_mean(X, np.asarray(kwargs["Y"], dtype=float))
            Y = kwargs["Y"] if prior is None else kwargs["Y"] - prior(X)
            if change.mask is not None:
                X[:, change.mask] = 0.0
            fitted = real.fit_kernel_params(**{**kwargs, "X": X, "Y": Y})
            gpr = _ChangedGPRegressor.__new__(_ChangedGPRegressor)
            gpr.__dict__.update(vars(fitted))  # the fitted GP, as it is, reading changed inputs
            gpr._keep = None if change.mask is None else torch.from_numpy((~change.mask) * 1.0)
            gpr._prior = prior
            return gpr

    _gp_sampler_module.gp = _ChangedFit()  # type: ignore[assignment]
    try:
        yield
    finally:
        _gp_sampler_module.gp = real


class _UntriedAcquisition(acqf_module.BaseAcquisitionFunc):
    """An acquisition function less :data:`REPEAT_LOG_PENALTY` at the configurations the
    study has tried or is trying (``tried``: their normalized parameters, ``(n, d)``).

    Optuna's GPSampler does not exclude evaluated points: its GP models noise, so re-measuring
    the best point keeps a little expected improvement, and in a small discrete space (a dozen
    configurations) it proposed one configuration five times in a row while others were
    untried. A study measures each configuration once (verification re-measures the
    finalists in fresh processes), so a repeat is a trial wasted. Discrete knobs are matched
    exactly (the optimizer evaluates the same normalized grid ``get_normalized_params``
    gives); a real-valued knob never repeats exactly, so it is not penalized."""

    def __init__(self, acqf: acqf_module.BaseAcquisitionFunc, tried: np.ndarray) -> None:
        self._acqf = acqf
        self._tried = torch.from_numpy(tried)
        super().__init__(acqf.length_scales, acqf.search_space)

    def eval_acqf(self, x: torch.Tensor) -> torch.Tensor:
        value = self._acqf.eval_acqf(x)
        distance = torch.abs(x[..., None, :] - self._tried).amax(dim=-1)  # (..., n)
        repeat = (distance < 1e-9).any(dim=-1)
        return torch.where(repeat, value - REPEAT_LOG_PENALTY, value)


def _modelled_seconds(trials: Sequence[FrozenTrial]) -> np.ndarray:
    """Per trial ``(n,)``: the seconds :class:`_CompileCost` models, ``compile_s`` plus the
    median over the trials of the seconds besides compilation (``train_s - compile_s``); NaN
    for a trial without both figures (refused before it ran, failed, or a warm-start trial
    from a study that did not store them)."""
    compile_s = np.array([attr_float(t, "compile_s") for t in trials], dtype=float)
    train_s = np.array([attr_float(t, "train_s") for t in trials], dtype=float)
    rest_s = train_s - compile_s
    known = np.isfinite(rest_s) & np.isfinite(compile_s)
    if not known.any():
        return np.full(len(trials), math.nan)
    typical_rest_s = float(np.median(np.maximum(rest_s[known], 0.0)))
    return np.where(known, compile_s + typical_rest_s, math.nan)


@dataclass
class _CompileCost:
    """What a configuration is expected to cost, as the acquisition weighs it: a GP of the
    logarithm of :func:`_modelled_seconds` (compilation seconds plus the study's typical
    seconds besides) over the normalized knobs, and the log seconds under which a proposal
    pays nothing (:data:`COST_FREE_QUANTILE` of the completed trials').

    Expected improvement per second (Snoek, Larochelle and Adams, "Practical Bayesian
    Optimization of Machine Learning Algorithms", NeurIPS 2012, section 3.2) divides the
    acquisition by the predicted seconds; on a log acquisition that is a subtraction. Only
    the seconds above the free level count, so proposals among the cheaper configurations
    are ranked by improvement alone. Only compilation varies: on a real device a trial's
    seconds are mostly its training, which buys its accuracy, and weighing those would
    steer the search from the slow, accurate end of the front; compilation buys no accuracy
    (torch.compile changes how fast a model trains, not what it learns), and on the mock
    space of Table 2 it was most of the budget (about 39 of the default's 50 trials compiled
    with ``reduce-overhead`` at about 31 simulated seconds, 26 % of the seconds went to
    ``max-autotune``). Adding the typical seconds besides compilation makes a compile cost in
    proportion to what the study's trials cost anyway: 30 s of compilation doubles a
    30-second trial and hardly moves a 10-minute one.

    Attributes:
        gpr: Optuna's GP fitted on the standardized log seconds.
        mean_log_s: the log seconds' mean (the standardization's centre).
        std_log_s: their standard deviation (its scale).
        free_log_s: log seconds under which a proposal pays nothing.
        data_key: the bytes of the rows and log seconds it was fitted on.
    """

    gpr: optuna_gp.GPRegressor
    mean_log_s: float
    std_log_s: float
    free_log_s: float
    data_key: bytes = b""

    @classmethod
    def fit(
        cls,
        sampler: optuna.samplers.GPSampler,
        trials: Sequence[FrozenTrial],
        normalized_params: np.ndarray,
        is_categorical: np.ndarray,
        previous: _CompileCost | None = None,
    ) -> _CompileCost | None:
        """Fit on ``trials`` (completed, ``(n, d)`` normalized parameters in the same order)
        with the sampler's kernel prior and noise floor, starting from ``previous``' kernel
        parameters where it has as many knobs (as Optuna starts its objectives' fits from the
        last ones), or ``previous`` itself when its rows and seconds are these (a proposal the
        feasibility rules refused adds a failed trial without seconds, and
        :class:`WarpedSampler` asks again); None when fewer than 2 trials have seconds or
        every one cost the same (nothing to weigh)."""
        log_s = np.log(np.maximum(_modelled_seconds(trials), 1e-3))
        known = np.isfinite(log_s)
        if known.sum() < 2 or np.ptp(log_s[known]) == 0:
            return None
        y = log_s[known]
        data_key = normalized_params[known].tobytes() + y.tobytes()
        if previous is not None and previous.data_key == data_key:
            return previous
        mean, std = float(y.mean()), float(y.std())
        gpr = optuna_gp.fit_kernel_params(
            X=normalized_params[known],
            Y=(y - mean) / std,
            is_categorical=is_categorical,
            log_prior=sampler._log_prior,
            minimum_noise=sampler._minimum_noise,
            deterministic_objective=False,
            gpr_cache=(
                previous.gpr
                if previous is not None
                and len(previous.gpr.inverse_squared_lengthscales) == normalized_params.shape[1]
                else None
            ),
        )
        return cls(gpr, mean, std, float(np.quantile(y, COST_FREE_QUANTILE)), data_key)

    def excess_log_s(self, x: torch.Tensor) -> torch.Tensor:
        """Predicted log seconds above the free level (0 below it) at normalized inputs
        ``x`` ``(..., d)`` -> ``(...)``."""
        mean, _ = self.gpr.posterior(x)
        return torch.clamp(mean * self.std_log_s + self.mean_log_s - self.free_log_s, min=0.0)


class _CostAwareAcquisition(acqf_module.BaseAcquisitionFunc):
    """A log acquisition function less the predicted log seconds above the free level
    (:class:`_CompileCost`): improvement per second, counted from the cheap configurations'
    seconds."""

    def __init__(self, acqf: acqf_module.BaseAcquisitionFunc, cost: _CompileCost) -> None:
        self._acqf = acqf
        self._cost = cost
        super().__init__(acqf.length_scales, acqf.search_space)

    def eval_acqf(self, x: torch.Tensor) -> torch.Tensor:
        return self._acqf.eval_acqf(x) - self._cost.excess_log_s(x)


class LeanGPSampler(optuna.samplers.GPSampler):
    """Optuna's GPSampler with less acquisition effort, the validation metric modelled on the
    knobs that change it, prior means from what is known before a trial runs, and no
    proposal that repeats a configuration tried before.

    The one place autotune reaches into GPSampler's internals (Optuna 5.0.0, pinned
    ``optuna>=5.0,<5.1``; tests/study/test_samplers.py fails loudly if a private name changes):

    - ``_n_preliminary_samples``, ``_n_local_search``, ``_n_qmc_samples_ehvi`` are set to
      :data:`LEAN_PRELIMINARY_SAMPLES`, :data:`LEAN_LOCAL_SEARCHES`,
      :data:`LEAN_QMC_SAMPLES_EHVI`.
    - ``_sample_relative_impl`` fits the metric's GP with the knobs outside ``metric_knobs``
      held constant and ignored (:func:`_fits_changed`): memory format, compile mode and
      DataLoader workers change how fast a trial trains, not what it learns, so the metric's
      GP no longer spends its few trials learning that they do not matter (and no longer
      reads the measurement noise of two such trials as their effect). Throughput, memory
      and the constraints see every knob. Only in a throughput study (the metric is an
      objective), with the objectives named (``study.metric_names``, or none for autotune's
      default three).
    - With a prior mean (:attr:`prior_mean`: a configuration's expected value of an
      objective before it runs, such as autotune's peak-memory estimate), that objective's GP
      models what the prior leaves unexplained: its mean is the prior, scaled by the
      least-squares slope of the observed values on it (held to
      :data:`PRIOR_SLOPE_BOUNDS`, so a prior that does not track the measurements drops
      out), and the GP fits the residual (:class:`_FitChange`). A zero-mean GP predicts the
      average away from its trials; the estimate knows that a width-64 model at batch 256
      needs more memory than any configuration tried so far. On Table 2's mock space
      (docs/benchmarks.md, 10 seeds) the memory estimate as prior mean moved the median
      hypervolume at 50 trials from 0.918 to 0.927 (higher on 7 seeds of 10; a paired
      difference of +0.010 against a spread of 0.032 between seeds, so not yet shown) and at
      25 trials from 0.842 to 0.838. Even that is an upper bound: the mock's memory is the
      estimate times a per-configuration factor of 1.0-1.5, so the estimate nearly is its
      memory model.
    - ``_optimize_acqf`` optimizes the acquisition less :data:`REPEAT_LOG_PENALTY` at the
      configurations already tried or running (:class:`_UntriedAcquisition`), so a proposal
      repeats one only when every candidate the optimizer finds is a repeat.
    - ``_sample_relative_impl`` runs with torch functions off (torch's private
      ``torch._C.DisableTorchFunction``): ``GPSampler.sample_relative`` calls it under
      ``torch.device("cpu")``, a torch-function mode every torch call would pass through in
      Python.

    Args:
        seed: the sampler's seed.
        n_startup_trials: COMPLETE trials before the GP models the study.
        metric_knobs: the knobs the metric's GP sees (Optuna parameter names); None: every
            knob but :data:`autotune.config.SPEED_KNOBS`.
        prior_mean: prior means of the study's objectives as this sampler sees them: its
            parameters (by name, the values it samples) -> modelled values by objective name
            (:class:`WarpedSampler` translates a prior in real knob values and units, see
            :meth:`using_prior_mean`); None: Optuna's constant mean for every objective.

    Attributes:
        metric_knobs: the ``metric_knobs`` given, as a frozenset (or None).
        prior_mean: the ``prior_mean`` in force.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        n_startup_trials: int = GP_STARTUP_TRIALS,
        metric_knobs: Collection[str] | None = None,
        prior_mean: PriorMean | None = None,
        cost_aware_after_trials: int | None = COST_AWARE_AFTER_TRIALS,
    ) -> None:
        super().__init__(seed=seed, n_startup_trials=n_startup_trials)
        self._n_preliminary_samples = LEAN_PRELIMINARY_SAMPLES
        self._n_local_search = LEAN_LOCAL_SEARCHES
        self._n_qmc_samples_ehvi = LEAN_QMC_SAMPLES_EHVI
        self.metric_knobs = None if metric_knobs is None else frozenset(metric_knobs)
        self.prior_mean = prior_mean
        # The last (prior, search space) and its rows, kept between proposals.
        self._row_prior: tuple[Any, _RowPrior] | None = None
        # The normalized configurations of the trials the proposal being made must not repeat.
        self._tried: np.ndarray | None = None
        self.cost_aware_after_trials = cost_aware_after_trials
        # The cost model the proposal being made weighs its acquisition by (None: none).
        self._cost: _CompileCost | None = None

    @contextmanager
    def using_prior_mean(self, prior_mean: PriorMean | None) -> Iterator[None]:
        """Sample with ``prior_mean`` while the block runs (a sampler that models a copy of
        the study, :class:`WarpedSampler`, passes the prior on its copy's scales); the one
        given at construction is restored after."""
        before = self.prior_mean
        self.prior_mean = prior_mean
        try:
            yield
        finally:
            self.prior_mean = before

    def metric_mask(
        self, study: Study, search_space: Mapping[str, BaseDistribution]
    ) -> tuple[int, np.ndarray] | None:
        """``(objective index, mask)``: the metric's position among ``study``'s objectives and,
        per knob of ``search_space`` in order, whether its GP ignores it; None when it sees
        every knob (no metric objective, or every searched knob changes the metric)."""
        objectives = objectives_of_study(study)
        if len(objectives) != len(study.directions):
            return None
        metric = metric_objective(objectives)
        if metric is None:
            return None
        mask = np.array(
            [
                name not in self.metric_knobs
                if self.metric_knobs is not None
                else name in SPEED_KNOBS
                for name in search_space
            ],
            dtype=bool,
        )
        return (objectives.index(metric), mask) if mask.any() else None

    def fit_changes(
        self,
        study: Study,
        completed_trials: Sequence[FrozenTrial],
        search_space: dict[str, BaseDistribution],
    ) -> dict[int, _FitChange]:
        """How each objective's GP departs from Optuna's (by objective index): the metric's
        mask (:meth:`metric_mask`) and the prior means of :attr:`prior_mean` for the
        objectives it names (``study``'s objective names, :func:`objectives_of_study`)."""
        changes: dict[int, _FitChange] = {}
        found = self.metric_mask(study, search_space)
        if found is not None:
            changes[found[0]] = _FitChange(mask=found[1])
        objectives = objectives_of_study(study)
        if self.prior_mean is None or len(objectives) != len(study.directions):
            return changes
        named = {name for t in completed_trials for name in self.prior_mean(t.params)}
        key = (self.prior_mean, tuple(search_space.items()))
        if self._row_prior is None or self._row_prior[0] != key:
            space = gp_search_space.SearchSpace(search_space)
            self._row_prior = (key, _RowPrior(space, self.prior_mean))
        prior = self._row_prior[1]
        values = np.array([t.values for t in completed_trials], dtype=float)
        measured = np.array([_is_measured(t) for t in completed_trials], dtype=bool)
        for index, objective in enumerate(objectives):
            if objective.name not in named:
                continue
            change = changes.setdefault(index, _FitChange())
            change.prior, change.objective = prior, objective.name
            change.direction_sign = (
                1.0 if study.directions[index] == StudyDirection.MAXIMIZE else -1.0
            )
            change.value_std = float(np.std(values[:, index])) if len(values) else 1.0
            change.measured = measured
        return changes

    def _optimize_acqf(
        self, acqf: acqf_module.BaseAcquisitionFunc, best_params: np.ndarray | None
    ) -> np.ndarray:
        if self._cost is not None:
            acqf = _CostAwareAcquisition(acqf, self._cost)
        if self._tried is not None and len(self._tried):
            acqf = _UntriedAcquisition(acqf, self._tried)
        return super()._optimize_acqf(acqf, best_params)

    def _sample_relative_impl(
        self,
        study: Study,
        completed_trials: list[FrozenTrial],
        running_trials: list[FrozenTrial],
        search_space: dict[str, BaseDistribution],
    ) -> dict[str, Any]:
        # GPSampler.sample_relative runs this under ``with torch.device("cpu")`` (Optuna issue
        # #6113: a global ``torch.set_default_device("cuda")`` must not move the GP), which
        # is a torch-function mode: every torch call of the fits and of the acquisition's
        # optimizer (about 15,000 a proposal at trial 50) then goes through Python first.
        # With torch functions disabled, tensors made without a device land on the CPU as
        # well (a global default device is the same kind of mode), and the calls skip that
        # detour: at trial 50 of the README's study, replayed from its database on a 2-core
        # Xeon, a proposal took 0.19-0.20 s instead of 0.22-0.23 s (docs/benchmarks-notes.md).
        with torch._C.DisableTorchFunction():
            return self._sample_on_cpu(study, completed_trials, running_trials, search_space)

    def _sample_on_cpu(
        self,
        study: Study,
        completed_trials: list[FrozenTrial],
        running_trials: list[FrozenTrial],
        search_space: dict[str, BaseDistribution],
    ) -> dict[str, Any]:
        tried = completed_trials + running_trials
        internal_space = gp_search_space.SearchSpace(search_space)
        self._tried = internal_space.get_normalized_params(
            tried, [_gp_sampler_module._get_params(t) for t in tried]
        )
        previous, self._cost = self._cost, None
        after = self.cost_aware_after_trials
        if after is not None and len(completed_trials) >= after:
            self._cost = _CompileCost.fit(
                self,
                completed_trials,
                self._tried[: len(completed_trials)],
                internal_space.is_categorical,
                previous,
            )
        changes = self.fit_changes(study, completed_trials, search_space)
        if not changes:
            return super()._sample_relative_impl(
                study, completed_trials, running_trials, search_space
            )
        with _fits_changed(changes):
            return super()._sample_relative_impl(
                study, completed_trials, running_trials, search_space
            )


def make_sampler(
    name: str,
    seed: int,
    *,
    design: Sequence[Mapping[str, Any]] | None = None,
    metric_knobs: Collection[str] | None = None,
    feasible: Callable[[Mapping[str, Any]], bool] | None = None,
    prior_mean: PriorMean | None = None,
    cost_aware_after_trials: int | None = COST_AWARE_AFTER_TRIALS,
) -> OneThreadSampler:
    """The sampler for ``sampler=NAME``, seeded, on one torch thread while it samples
    (:class:`OneThreadSampler`). ``gp`` is a :class:`LeanGPSampler` that models the study
    through :class:`WarpedSampler`. With a ``design`` (:func:`covering_design`), the
    samplers of :data:`STARTUP_DESIGN_SAMPLERS` propose its rows first
    (:class:`DesignSampler`); the others ignore it. The wrapped Optuna sampler is
    ``.sampler``, below the design and warping wrappers where there are any.

    Args:
        name: ``gp``, ``tpe``, ``nsga2`` or ``random``.
        seed: the sampler's seed.
        design: the start-up rows, each a value per knob.
        metric_knobs: the knobs the metric's model sees (``gp``; None: its default).
        feasible: the feasibility rules on a proposal (``gp``: a proposal they refuse is
            asked again, see :class:`WarpedSampler`; None: none is refused).
        prior_mean: what is known of a configuration's objectives before it runs (``gp``:
            its GPs' prior means, see :class:`LeanGPSampler`; None: nothing).
        cost_aware_after_trials: completed trials after which ``gp`` weighs a proposal's
            acquisition by its predicted compilation seconds (:class:`LeanGPSampler`); None:
            never.

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
                LeanGPSampler(
                    seed=seed,
                    n_startup_trials=GP_STARTUP_TRIALS,
                    metric_knobs=metric_knobs,
                    cost_aware_after_trials=cost_aware_after_trials,
                ),
                feasible=feasible,
                prior_mean=prior_mean,
            )
        elif name == "random":
            sampler = optuna.samplers.RandomSampler(seed=seed)
        else:
            raise ConfigError(f"sampler={name}: unknown sampler (known: nsga2, tpe, gp, random)")
    if design and name in STARTUP_DESIGN_SAMPLERS:
        sampler = DesignSampler(sampler, design)
    return OneThreadSampler(sampler)
