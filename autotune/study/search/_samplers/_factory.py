"""The factory: the sampler for ``sampler=NAME`` (:func:`make_sampler`), built from the
wrappers, the start-up design, the warped view and the lean GP."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from optuna.samplers import BaseSampler

from autotune.core.exceptions import ConfigError
from autotune.study.search._samplers._design import (
    GP_STARTUP_TRIALS,
    STARTUP_DESIGN_SAMPLERS,
    DesignSampler,
)
from autotune.study.search._samplers._gp import LeanGPSampler
from autotune.study.search._samplers._values import PriorMean
from autotune.study.search._samplers._warped import WarpedSampler
from autotune.study.search._samplers._wrappers import OneThreadSampler

__all__ = ["NSGA2_POPULATION", "make_sampler"]

#: NSGA-II population: small enough that a 50-trial study runs several generations.
NSGA2_POPULATION = 10


def make_sampler(
    name: str,
    seed: int,
    *,
    design: Sequence[Mapping[str, Any]] | None = None,
    feasible: Callable[[Mapping[str, Any]], bool] | None = None,
    prior_mean: PriorMean | None = None,
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
        feasible: the feasibility rules on a proposal (``gp``: a proposal they refuse is
            asked again, see :class:`WarpedSampler`; with a design, an untried configuration
            the start-up proposes passes them, see :class:`DesignSampler`; None: none is
            refused).
        prior_mean: what is known of a configuration's objectives before it runs (``gp``:
            its GPs' prior means, see :class:`LeanGPSampler`; None: nothing).

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
                ),
                feasible=feasible,
                prior_mean=prior_mean,
            )
        elif name == "random":
            sampler = optuna.samplers.RandomSampler(seed=seed)
        else:
            raise ConfigError(f"sampler={name}: unknown sampler (known: nsga2, tpe, gp, random)")
    if design and name in STARTUP_DESIGN_SAMPLERS:
        sampler = DesignSampler(sampler, design, feasible=feasible, seed=seed)
    return OneThreadSampler(sampler)
