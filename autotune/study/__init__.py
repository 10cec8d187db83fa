"""The study process: the Optuna study and its objective, the samplers, the trial processes
it starts, and where Ctrl-C may land.

- :mod:`._study`: opening the study (resume, warm start, the study record, the start-up
  design's feasible rows: :func:`startup_design`; the sampler a study runs:
  :func:`study_sampler`; what is known of a configuration before it runs: :func:`prior_mean`) and the Optuna objective
  (:class:`TrialObjective`: retries, constraints, surplus).
- :mod:`._samplers`: :func:`make_sampler` and the samplers it builds.
- :mod:`._launcher`: :func:`run_trial`, one trial in child processes (forkserver, one per DDP
  rank), its timeout and failure kinds; the ranks' environment and compile caches.
- :mod:`._interrupts`: :func:`sigint_deferred`, :func:`sigint_allowed`.
"""

from __future__ import annotations

from autotune.study._interrupts import (
    sigint_allowed,
    sigint_deferred,
)
from autotune.study._launcher import (
    COMPILE_CACHE_VARIABLES,
    compile_cache_environment,
    run_trial,
    study_compile_cache,
    study_compile_cache_dir,
    study_processes,
    trial_devices,
    trial_environment,
)
from autotune.study._samplers import (
    GP_STARTUP_TRIALS,
    LEAN_LOCAL_SEARCHES,
    LEAN_PRELIMINARY_SAMPLES,
    LEAN_QMC_SAMPLES_EHVI,
    LOG_SCALE_OBJECTIVES,
    MAX_REFUSED_PROPOSALS,
    NSGA2_POPULATION,
    PRIOR_SLOPE_BOUNDS,
    REPEAT_LOG_PENALTY,
    STARTUP_DESIGN_SAMPLERS,
    WARM_START_ATTR,
    DesignSampler,
    LeanGPSampler,
    OneThreadSampler,
    PriorMean,
    WarpedSampler,
    covering_design,
    design_levels,
    make_sampler,
    modelled_values,
    one_torch_thread,
)
from autotune.study._study import (
    MATH_KEY_ATTR,
    METRIC_FROM_TRIAL_ATTR,
    PRIOR_PROFILE_BUDGET_S,
    STUDY_RECORD_ATTR,
    RunTrialFn,
    SurplusTrial,
    TrialObjective,
    check_warm_start,
    count_finished,
    feasibility_test,
    knob_trial_config,
    open_study,
    prior_mean,
    startup_design,
    study_sampler,
)

__all__ = [
    "COMPILE_CACHE_VARIABLES",
    "GP_STARTUP_TRIALS",
    "LEAN_LOCAL_SEARCHES",
    "LEAN_PRELIMINARY_SAMPLES",
    "LEAN_QMC_SAMPLES_EHVI",
    "LOG_SCALE_OBJECTIVES",
    "MATH_KEY_ATTR",
    "MAX_REFUSED_PROPOSALS",
    "METRIC_FROM_TRIAL_ATTR",
    "NSGA2_POPULATION",
    "PRIOR_PROFILE_BUDGET_S",
    "PRIOR_SLOPE_BOUNDS",
    "REPEAT_LOG_PENALTY",
    "STARTUP_DESIGN_SAMPLERS",
    "STUDY_RECORD_ATTR",
    "WARM_START_ATTR",
    "DesignSampler",
    "LeanGPSampler",
    "OneThreadSampler",
    "PriorMean",
    "RunTrialFn",
    "SurplusTrial",
    "TrialObjective",
    "WarpedSampler",
    "check_warm_start",
    "compile_cache_environment",
    "count_finished",
    "covering_design",
    "design_levels",
    "feasibility_test",
    "knob_trial_config",
    "make_sampler",
    "modelled_values",
    "one_torch_thread",
    "open_study",
    "prior_mean",
    "run_trial",
    "sigint_allowed",
    "sigint_deferred",
    "startup_design",
    "study_compile_cache",
    "study_compile_cache_dir",
    "study_processes",
    "study_sampler",
    "trial_devices",
    "trial_environment",
]
