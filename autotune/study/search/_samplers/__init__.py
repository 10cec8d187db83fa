"""Samplers as the study process runs them, one module per job:

- :mod:`._wrappers`: :class:`OneThreadSampler` (each call on one torch thread, timed) and the
  delegating base the other wrappers build on.
- :mod:`._warped`: :class:`WarpedSampler`, the study as the model sees it (log throughput and
  memory, failed trials at the median, numeric choices by rank: :func:`modelled_values`),
  asked again when the feasibility rules refuse its proposal.
- :mod:`._design`: the start-up design (:func:`covering_design` over :func:`design_levels`,
  with its repairs) and :class:`DesignSampler`, which proposes its rows first.
- :mod:`._gp`: :class:`LeanGPSampler`, Optuna's GPSampler with less acquisition effort,
  prior means and an acquisition that skips repeats; the ONE module that touches
  Optuna's and torch's private names.
- :mod:`._factory`: :func:`make_sampler`, the sampler for ``sampler=NAME``.
- :mod:`._values`: how a trial's values are read (measured, failed, missed target) and
  :data:`PriorMean`.
"""

from __future__ import annotations

from autotune.study.search._samplers._design import (
    GP_STARTUP_TRIALS,
    STARTUP_DESIGN_SAMPLERS,
    WARM_START_ATTR,
    DesignSampler,
    covering_design,
    design_levels,
)
from autotune.study.search._samplers._factory import make_sampler
from autotune.study.search._samplers._gp import (
    LEAN_LOCAL_SEARCHES,
    LEAN_PRELIMINARY_SAMPLES,
    LEAN_QMC_SAMPLES_EHVI,
    PRIOR_SLOPE_BOUNDS,
    REPEAT_LOG_PENALTY,
    LeanGPSampler,
)
from autotune.study.search._samplers._values import PriorMean
from autotune.study.search._samplers._warped import (
    LOG_SCALE_OBJECTIVES,
    MAX_REFUSED_PROPOSALS,
    WarpedSampler,
    modelled_values,
)
from autotune.study.search._samplers._wrappers import OneThreadSampler, one_torch_thread

__all__ = [
    "GP_STARTUP_TRIALS",
    "LEAN_LOCAL_SEARCHES",
    "LEAN_PRELIMINARY_SAMPLES",
    "LEAN_QMC_SAMPLES_EHVI",
    "LOG_SCALE_OBJECTIVES",
    "MAX_REFUSED_PROPOSALS",
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
