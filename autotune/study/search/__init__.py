"""The study process: the Optuna study and its objective, the samplers, the trial processes
it starts, and where Ctrl-C may land.

- :mod:`._opening`: opening the study (resume, warm start, the study record) and the sampler
  it runs (:func:`study_sampler`: the start-up design's feasible rows, :func:`startup_design`;
  what is known of a configuration before it runs, :func:`prior_mean`).
- :mod:`._objective`: the Optuna objective (:class:`TrialObjective`: retries, constraints,
  surplus, reuse, re-timing on a busy machine), its policies as small functions.
- :mod:`._samplers`: :func:`make_sampler` and the samplers it builds, one module per job
  (wrappers, the warped view, the start-up design, the lean GP, the factory).
- :mod:`._launcher`: :func:`run_trial`, one trial in child processes (forkserver, one per DDP
  rank), its timeout and failure kinds; the ranks' environment and compile caches.
- :mod:`._interrupts`: :func:`sigint_deferred`, :func:`sigint_allowed`.

This face holds what the other layers, the benchmarks and the docs use; tests import the
private modules for the rest.
"""

from __future__ import annotations

from autotune.study.search._interrupts import sigint_allowed, sigint_deferred
from autotune.study.search._launcher import (
    run_trial,
    study_compile_cache,
    study_processes,
    trial_devices,
    trial_environment,
)
from autotune.study.search._machine import check_study_hardware
from autotune.study.search._objective import RunTrialFn, SurplusTrial, TrialObjective
from autotune.study.search._opening import (
    STUDY_RECORD_ATTR,
    check_warm_start,
    count_finished,
    open_study,
    prior_mean,
    startup_design,
    study_sampler,
)
from autotune.study.search._samplers import (
    GP_STARTUP_TRIALS,
    LeanGPSampler,
    WarpedSampler,
    make_sampler,
)

__all__ = [
    "GP_STARTUP_TRIALS",
    "STUDY_RECORD_ATTR",
    "LeanGPSampler",
    "RunTrialFn",
    "SurplusTrial",
    "TrialObjective",
    "WarpedSampler",
    "check_study_hardware",
    "check_warm_start",
    "count_finished",
    "make_sampler",
    "open_study",
    "prior_mean",
    "run_trial",
    "sigint_allowed",
    "sigint_deferred",
    "startup_design",
    "study_compile_cache",
    "study_processes",
    "study_sampler",
    "trial_devices",
    "trial_environment",
]
