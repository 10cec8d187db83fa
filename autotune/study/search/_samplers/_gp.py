"""The GP sampler autotune runs (:class:`LeanGPSampler`) and the machinery it adds to
Optuna's GPSampler: changed fits (prior means read at the GP's inputs) and the acquisition
that skips repeats.

This is the ONE module that reaches into Optuna's and torch's private names
(``optuna._gp.*``, ``optuna.samplers._gp.sampler``, ``GPSampler``'s private attributes and
methods, ``GPRegressor``'s internals, ``torch._C.DisableTorchFunction``); Optuna is pinned
(``optuna>=5.0,<5.1``) and tests/study/search/test_optuna_private_names.py fails loudly, naming the
name and the versions, when one of them moves. Every other sampler module uses public APIs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
import torch
from optuna._gp import acqf as acqf_module
from optuna._gp import gp as optuna_gp
from optuna._gp import search_space as gp_search_space
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.samplers._gp import sampler as _gp_sampler_module
from optuna.study import StudyDirection

from autotune.study.objectives import objectives_of_study
from autotune.study.search._samplers._design import GP_STARTUP_TRIALS
from autotune.study.search._samplers._values import (
    PriorMean,
    fixed_params,
    holds_value,
    is_measured,
)

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial

__all__ = [
    "LEAN_LOCAL_SEARCHES",
    "LEAN_PRELIMINARY_SAMPLES",
    "LEAN_QMC_SAMPLES_EHVI",
    "PRIOR_SLOPE_BOUNDS",
    "REPEAT_LOG_PENALTY",
    "LeanGPSampler",
]

#: What :class:`LeanGPSampler` subtracts from the log acquisition of a configuration the study
#: has already tried (or is trying): far below any untried one's (Optuna's LogEHVI lies within
#: tens of units of 0), so a repeat wins only once every candidate is one.
REPEAT_LOG_PENALTY = 1e4
#: Acquisition effort of :class:`LeanGPSampler` (Optuna 5.0.0's defaults: 2048, 10, 128): the
#: acquisition surface of 8 mostly categorical knobs is coarse, so 256 quasi-random starting
#: points and 3 local searches find its maximum, and 32 quasi-Monte Carlo samples estimate an
#: expected hypervolume improvement of 3 objectives well enough to rank candidates, at a
#: fraction of the seconds per proposal (docs/research/benchmarks.md, Table 2).
LEAN_PRELIMINARY_SAMPLES = 256
LEAN_LOCAL_SEARCHES = 3
LEAN_QMC_SAMPLES_EHVI = 32
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
    """How one objective's GP departs from Optuna's: a prior mean
    ``slope * (prior(x) - centre)`` in the standardized units Optuna fits (the GP models what
    the prior leaves unexplained).

    Attributes:
        prior: the prior on normalized inputs (:class:`_RowPrior`), or None.
        objective: the objective's name, as the prior names it.
        direction_sign: +1 to maximize, -1 to minimize (Optuna fits ``sign * value``).
        value_std: the standard deviation Optuna standardizes the objective by (ddof 0).
        measured: per training row (completed trial, in order), whether its value is a
            measurement, not imputed (:func:`modelled_values`); None: every row is.
    """

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
    """A fitted GP with a :class:`_FitChange`: its posterior mean and the Kriging-believer
    values of running trials (``append_running_data``) carry the prior mean, so every
    acquisition function reads the objective itself. Made from a GP fitted on the values less
    the prior mean (:func:`_fits_changed`), so its training kernel matrix and cached Cholesky
    factor stay exact."""

    _prior: Callable[[np.ndarray], np.ndarray] | None  # (n, d) -> (n,), standardized units

    def _prior_at(self, x: torch.Tensor) -> torch.Tensor:
        if self._prior is None:
            return torch.zeros(x.shape[:-1], dtype=torch.float64)
        flat = x.detach().reshape(-1, x.shape[-1]).cpu().numpy()
        return torch.from_numpy(self._prior(flat)).reshape(x.shape[:-1])

    def posterior(self, x: torch.Tensor, joint: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        mean, var = super().posterior(x, joint)
        return mean + self._prior_at(x), var

    def append_running_data(self, X_running: torch.Tensor, y_running: torch.Tensor) -> None:
        super().append_running_data(X_running, y_running - self._prior_at(X_running))


@contextmanager
def _fits_changed(changes: Mapping[int, _FitChange]) -> Iterator[None]:
    """While the block runs, GPSampler's GP of each objective index in ``changes`` is fitted
    on the values less its :class:`_FitChange`'s prior mean, and its predictions add the
    prior back (:class:`_ChangedGPRegressor`).

    Optuna 5.0.0's ``GPSampler._sample_relative_impl`` fits one GP per objective, in order,
    through the module global ``optuna.samplers._gp.sampler.gp.fit_kernel_params``, then the
    constraints' GPs; the call count tells them apart. The global is restored after the block
    (the study process samples one trial at a time). tests/study/search/test_optuna_private_names.py
    checks these private names.
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
            X = np.asarray(kwargs["X"], dtype=float)  # (n_trials, n_knobs), normalized
            prior = change.prior_mean(X, np.asarray(kwargs["Y"], dtype=float))
            if prior is None:
                return real.fit_kernel_params(**kwargs)
            fitted = real.fit_kernel_params(**{**kwargs, "Y": kwargs["Y"] - prior(X)})
            gpr = _ChangedGPRegressor.__new__(_ChangedGPRegressor)
            gpr.__dict__.update(vars(fitted))  # the fitted GP, as it is, adding the prior back
            gpr._prior = prior
            return gpr

    _gp_sampler_module.gp = _ChangedFit()  # type: ignore[assignment]
    try:
        yield
    finally:
        _gp_sampler_module.gp = real


class _UntriedAcquisition(acqf_module.BaseAcquisitionFunc):
    """An acquisition function less :data:`REPEAT_LOG_PENALTY` at the configurations the
    study has tried or is trying (``tried``: their normalized parameters, ``(n, d)``). With
    ``fixed`` (column index -> normalized value: the knobs a queued trial fixes, such as the
    baseline's model), a point is valued as the point with those columns set to the fixed
    values, i.e. as the configuration the trial will run: Optuna's optimizer searches every
    column, and a trial runs its fixed values whatever the proposal says.

    Optuna's GPSampler does not exclude evaluated points: its GP models noise, so re-measuring
    the best point keeps a little expected improvement, and in a small discrete space (a dozen
    configurations) it proposed one configuration five times in a row while others were
    untried. A study measures each configuration once (verification re-measures the
    finalists in fresh processes), so a repeat is a trial wasted. Discrete knobs are matched
    exactly (the optimizer evaluates the same normalized grid ``get_normalized_params``
    gives); a real-valued knob never repeats exactly, so it is not penalized."""

    def __init__(
        self,
        acqf: acqf_module.BaseAcquisitionFunc,
        tried: np.ndarray,
        fixed: Mapping[int, float] | None = None,
    ) -> None:
        self._acqf = acqf
        self._tried = torch.from_numpy(tried)
        self._fixed_columns = list((fixed or {}).keys())
        self._fixed_values = torch.tensor(list((fixed or {}).values()), dtype=torch.float64)
        super().__init__(acqf.length_scales, acqf.search_space)

    def eval_acqf(self, x: torch.Tensor) -> torch.Tensor:
        if self._fixed_columns:
            x = x.clone()
            x[..., self._fixed_columns] = self._fixed_values.to(x.dtype)
        value = self._acqf.eval_acqf(x)
        return torch.where(_is_tried(x, self._tried), value - REPEAT_LOG_PENALTY, value)


def _is_tried(x: torch.Tensor, tried: torch.Tensor) -> torch.Tensor:
    """Whether each normalized configuration of ``x`` (``(..., d)``) is one of ``tried``
    (``(n, d)``): equal on every column (the optimizer evaluates the grid
    ``get_normalized_params`` gives, so a discrete knob matches exactly). Returns ``(...)``
    booleans."""
    distance = torch.abs(x[..., None, :] - tried).amax(dim=-1)  # (..., n)
    return (distance < 1e-9).any(dim=-1)


class LeanGPSampler(optuna.samplers.GPSampler):
    """Optuna's GPSampler with less acquisition effort, prior means from what is known before
    a trial runs, and no proposal that repeats a configuration tried before.

    The one place autotune reaches into GPSampler's internals (Optuna 5.0.0, pinned
    ``optuna>=5.0,<5.1``; tests/study/search/test_optuna_private_names.py fails loudly if a private
    name changes):

    - ``_n_preliminary_samples``, ``_n_local_search``, ``_n_qmc_samples_ehvi`` are set to
      :data:`LEAN_PRELIMINARY_SAMPLES`, :data:`LEAN_LOCAL_SEARCHES`,
      :data:`LEAN_QMC_SAMPLES_EHVI`.
    - With a prior mean (:attr:`prior_mean`: a configuration's expected value of an
      objective before it runs, such as autotune's peak-memory estimate), that objective's GP
      models what the prior leaves unexplained: its mean is the prior, scaled by the
      least-squares slope of the observed values on it (held to
      :data:`PRIOR_SLOPE_BOUNDS`, so a prior that does not track the measurements drops
      out), and the GP fits the residual (:class:`_FitChange`, :func:`_fits_changed`). A
      zero-mean GP predicts the average away from its trials; the estimate knows that a
      width-64 model at batch 256 needs more memory than any configuration tried so far. It
      is what lets the GP start after a short design (:data:`GP_STARTUP_TRIALS`).
    - ``_optimize_acqf`` optimizes the acquisition less :data:`REPEAT_LOG_PENALTY` at the
      configurations already tried or running (:class:`_UntriedAcquisition`), so a proposal
      repeats one only when every candidate the optimizer finds is a repeat. A trial that
      fixes some knobs (Optuna's ``enqueue_trial`` with part of the parameters, such as the
      same-model trials) runs the proposal's other knobs with its fixed ones; where that
      configuration was tried, the acquisition is optimized again, read with the fixed knobs
      at their values, so the trial runs the best untried configuration it can run. (Reading
      it so for every such trial, not only for a repeat, moved the replays' and the mock's
      hypervolume by -0.004 to -0.014, intervals across zero: docs/research/sampler-features.md.)
    - ``_sample_relative_impl`` runs with torch functions off (torch's private
      ``torch._C.DisableTorchFunction``): ``GPSampler.sample_relative`` calls it under
      ``torch.device("cpu")``, a torch-function mode every torch call would pass through in
      Python.

    Args:
        seed: the sampler's seed.
        n_startup_trials: COMPLETE trials before the GP models the study.
        prior_mean: prior means of the study's objectives as this sampler sees them: its
            parameters (by name, the values it samples) -> modelled values by objective name
            (:class:`WarpedSampler` translates a prior in real knob values and units, see
            :meth:`using_prior_mean`); None: Optuna's constant mean for every objective.

    Attributes:
        prior_mean: the ``prior_mean`` in force.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        n_startup_trials: int = GP_STARTUP_TRIALS,
        prior_mean: PriorMean | None = None,
    ) -> None:
        super().__init__(seed=seed, n_startup_trials=n_startup_trials)
        self._n_preliminary_samples = LEAN_PRELIMINARY_SAMPLES
        self._n_local_search = LEAN_LOCAL_SEARCHES
        self._n_qmc_samples_ehvi = LEAN_QMC_SAMPLES_EHVI
        self.prior_mean = prior_mean
        # The last (prior, search space) and its rows, kept between proposals.
        self._row_prior: tuple[Any, _RowPrior] | None = None
        # The normalized configurations of the trials the proposal being made must not repeat.
        self._tried: np.ndarray | None = None
        # The knobs the trial being proposed for fixes (by name, its values), and their
        # normalized values by column of the GP's search space.
        self._fixed: dict[str, Any] = {}
        self._fixed_columns: dict[int, float] = {}

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

    def fit_changes(
        self,
        study: Study,
        completed_trials: Sequence[FrozenTrial],
        search_space: dict[str, BaseDistribution],
    ) -> dict[int, _FitChange]:
        """How each objective's GP departs from Optuna's (by objective index): the prior means
        of :attr:`prior_mean` for the objectives it names (``study``'s objective names,
        :func:`objectives_of_study`)."""
        changes: dict[int, _FitChange] = {}
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
        measured = np.array([is_measured(t) for t in completed_trials], dtype=bool)
        for index, objective in enumerate(objectives):
            if objective.name not in named:
                continue
            changes[index] = _FitChange(
                prior=prior,
                objective=objective.name,
                direction_sign=1.0 if study.directions[index] == StudyDirection.MAXIMIZE else -1.0,
                value_std=float(np.std(values[:, index])) if len(values) else 1.0,
                measured=measured,
            )
        return changes

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        fixed = fixed_params(trial)
        self._fixed = {name: fixed[name] for name in search_space if name in fixed}
        try:
            return super().sample_relative(study, trial, search_space)
        finally:
            self._fixed = {}

    def _optimize_acqf(
        self, acqf: acqf_module.BaseAcquisitionFunc, best_params: np.ndarray | None
    ) -> np.ndarray:
        tried = self._tried if self._tried is not None else np.empty((0, 0))
        if not len(tried):
            return super()._optimize_acqf(acqf, best_params)
        proposal = super()._optimize_acqf(_UntriedAcquisition(acqf, tried), best_params)
        if not self._fixed_columns:
            return proposal
        runs = proposal.copy()  # what the trial runs: the proposal with its fixed knobs
        runs[list(self._fixed_columns)] = list(self._fixed_columns.values())
        if not _is_tried(torch.from_numpy(runs), torch.from_numpy(tried)):
            return proposal
        # A repeat once fixed: the best of the configurations this trial can run instead.
        fixed = _UntriedAcquisition(acqf, tried, self._fixed_columns)
        return super()._optimize_acqf(fixed, best_params)

    def _sample_relative_impl(
        self,
        study: Study,
        completed_trials: list[FrozenTrial],
        running_trials: list[FrozenTrial],
        search_space: dict[str, BaseDistribution],
    ) -> dict[str, Any]:
        # GPSampler.sample_relative runs this under ``with torch.device("cpu")`` (so that a
        # global ``torch.set_default_device("cuda")`` does not move the GP), which
        # is a torch-function mode: every torch call of the fits and of the acquisition's
        # optimizer (about 15,000 a proposal at trial 50) then goes through Python first.
        # With torch functions disabled, tensors made without a device land on the CPU as
        # well (a global default device is the same kind of mode), and the calls skip that
        # detour (a proposal about a tenth faster).
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
        self._fixed_columns = _fixed_columns(internal_space, search_space, self._fixed, tried)
        changes = self.fit_changes(study, completed_trials, search_space)
        with _fits_changed(changes) if changes else nullcontext():
            return super()._sample_relative_impl(
                study, completed_trials, running_trials, search_space
            )


def _fixed_columns(
    internal_space: gp_search_space.SearchSpace,
    search_space: Mapping[str, BaseDistribution],
    fixed: Mapping[str, Any],
    trials: Sequence[FrozenTrial],
) -> dict[int, float]:
    """The normalized values of the ``fixed`` knobs (by name, their values), by column of
    ``internal_space`` (``search_space``'s order); a value its knob cannot take (a warm start
    over other choices) is left out. ``trials``: the study's trials the GP models (one is
    needed to normalize a row; none: no column is fixed)."""
    held = {
        name: value
        for name, value in fixed.items()
        if name in search_space and holds_value(search_space[name], value)
    }
    if not held or not trials:
        return {}
    # The fixed values, and any value of each other knob (its column is not read).
    row = {name: held.get(name, _some_value(d)) for name, d in search_space.items()}
    normalized = internal_space.get_normalized_params(list(trials[:1]), [row])[0]  # (d,)
    return {i: float(normalized[i]) for i, name in enumerate(search_space) if name in held}


def _some_value(distribution: BaseDistribution) -> Any:
    """A value ``distribution`` holds: its first choice, or its lower bound."""
    if isinstance(distribution, CategoricalDistribution):
        return distribution.choices[0]
    assert isinstance(distribution, (IntDistribution, FloatDistribution)), distribution
    return distribution.low
