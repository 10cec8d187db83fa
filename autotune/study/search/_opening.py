"""Opening the study: create or resume it (the study record a resumed study must match), warm
start, and the sampler it runs (:func:`study_sampler`: the start-up design's feasible rows,
:func:`startup_design`; the feasibility rules on a proposal, :func:`feasibility_test`; what is
known of a configuration before it runs, :func:`prior_mean`).
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.storages import RDBStorage
from sqlalchemy.exc import SQLAlchemyError

from autotune.core.config import (
    FloatParam,
    MockFault,
    RunConfig,
    SearchSpace,
    TrialConfig,
    display_url,
)
from autotune.core.exceptions import ConfigError, StorageError
from autotune.core.hardware import DeviceCapabilities, PrecisionScreen
from autotune.study.baseline import trial_train_settings
from autotune.study.feasibility import (
    estimate_trial_memory_or_none,
    fits_memory_with_margin,
    trial_infeasibility_reason,
)
from autotune.study.objectives import (
    OBJECTIVES,
    PEAK_MEMORY,
    Objective,
    objective_mode,
)
from autotune.study.search._machine import check_study_hardware
from autotune.study.search._samplers import (
    GP_STARTUP_TRIALS,
    STARTUP_DESIGN_SAMPLERS,
    WARM_START_ATTR,
    OneThreadSampler,
    PriorMean,
    covering_design,
    design_levels,
    make_sampler,
)
from autotune.study.storage import FINISHED_STATES, error_reason, storage_location, study_exists
from autotune.study.trial_result import STUDY_RECORD_ATTR, StudyAttributes, TrialResult

__all__ = [
    "PRIOR_PROFILE_BUDGET_S",
    "STUDY_RECORD_ATTR",
    "check_warm_start",
    "count_finished",
    "feasibility_test",
    "knob_trial_config",
    "open_study",
    "prior_mean",
    "startup_design",
    "study_sampler",
]


def check_warm_start(config: RunConfig) -> None:
    """Check that ``warm_start=NAME`` names another study that exists; writes nothing.

    Run before anything is created or printed (:func:`autotune.study.api.prepare_run`).

    Raises:
        ConfigError: the study is the one being run, or there is no such study in the storage.
        StorageError: the database cannot be read.
    """
    name = config.warm_start
    if name is None:
        return
    if name == config.study:
        raise ConfigError(f"warm_start={name}: must name another study than study={config.study}")
    if not study_exists(config.storage, name):
        raise ConfigError(
            f"warm_start={name}: no such study in storage={storage_location(config.storage)}"
        )


def _study_record(
    config: RunConfig,
    space: SearchSpace,
    caps: DeviceCapabilities,
    objectives: tuple[Objective, ...],
    metric: Objective | None,
    screen: PrecisionScreen | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        # Defaults left out: a field added in a later autotune version (with a default that
        # keeps the old behaviour) must not make existing studies impossible to resume.
        "space": space.study_record(),
        "space_source": config.space_source,
        "device_kind": caps.kind,
        "device_name": caps.name,
        "simulated": caps.simulated,
        "objectives": [o.name for o in objectives],
    }
    if screen is not None:
        # Which precisions the device's peaks screened out, with the peaks and the ratio: a
        # resumed study keeps this screen (autotune.core.hardware.study_precision_screen).
        record["precision_screen"] = screen.to_record()
    if objective_mode(objectives) == "time_to_accuracy":
        # The metric is not an objective here: the record keeps what the target is.
        record["objective"] = "time_to_accuracy"
        record["target"] = {
            "metric": metric.name if metric is not None else "accuracy",
            "direction": metric.direction if metric is not None else "maximize",
            "value": space.train.target,
        }
    return record


def count_finished(study: optuna.Study) -> int:
    """Trials that count towards ``--trials`` (:data:`autotune.study.storage.FINISHED_STATES`)."""
    return len(study.get_trials(deepcopy=False, states=FINISHED_STATES))


def open_study(
    config: RunConfig,
    space: SearchSpace,
    caps: DeviceCapabilities,
    storage: RDBStorage,
    seed_offset: int = 0,
    objectives: tuple[Objective, ...] = OBJECTIVES,
    metric: Objective | None = None,
    screen: PrecisionScreen | None = None,
) -> optuna.Study:
    """Create the study, or load it to resume; refuse to mix spaces, device kinds or
    objective modes.

    A new study's record (user attribute ``autotune``) keeps ``space`` (restricted to what the
    device runs, screened precisions removed) and ``screen``, the precision screen
    (:func:`autotune.core.hardware.screen_precisions`), which a resumed study keeps.

    ``objectives`` are the study's (:func:`autotune.study.objectives.study_objectives` of the
    workload's metric and ``objective=``); Optuna keeps their names and directions with the
    study. ``metric`` is the workload's validation metric, which a time-to-accuracy study's
    record keeps with its target (it is not among the objectives there).

    The sampler's seed is ``seed + number of trials already in the study + seed_offset``, so a
    resumed study does not replay the first proposals while staying reproducible, and workers
    (each with its own ``seed_offset``) propose different configurations. The start-up design
    (:func:`startup_design`, ``gp`` and ``tpe``) depends on ``seed`` alone: every worker and
    every resumption holds the same one, and its rows go to trials by number
    (:class:`autotune.study.search._samplers.DesignSampler`).

    Raises:
        ConfigError: the existing study was made with another space or another device kind.
        StorageError: the database failed.
    """
    record = _study_record(config, space, caps, objectives, metric, screen)
    try:
        warm_start = _warm_start_trials(config, space, storage) if config.warm_start else []
        study = optuna.create_study(
            storage=storage,
            study_name=config.study,
            directions=[o.direction for o in objectives],
            load_if_exists=True,
        )
        # Another machine first: it also explains a space restricted differently.
        check_study_hardware(study, caps.fingerprint, allow_change=config.allow_hardware_change)
        stored = StudyAttributes.from_study(study)
        if not stored.record:
            with warnings.catch_warnings():  # set_metric_names is "experimental" since 3.2
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names([o.name for o in objectives])
            study.set_user_attr(STUDY_RECORD_ATTR, record)
            for params, source in warm_start:
                study.enqueue_trial(params, user_attrs={WARM_START_ATTR: source})
        else:
            mode = stored.objective
            if mode != record.get("objective", "throughput"):
                raise ConfigError(
                    f"study={config.study}: it was created with objective={mode}; choose a new "
                    "study name (study=NAME) or the original objective"
                )
            existing = stored.record
            compared = (
                ("space", "search space", existing.get("space_source")),
                ("device_kind", "device", existing.get("device_kind")),
                # The workload's metric names an objective: another one would mix two metrics.
                ("objectives", "metric", ", ".join(map(str, existing.get("objectives") or ()))),
            )
            for key, what, shown in compared:
                if json.dumps(existing.get(key), sort_keys=True) != json.dumps(
                    record[key], sort_keys=True
                ):
                    raise ConfigError(
                        f"study={config.study}: it was created with another {what} ({shown}); "
                        "choose a new study name (study=NAME) or the original settings"
                    )
        warm = sum(
            TrialResult.from_trial(t).warm_start_from is not None
            for t in study.get_trials(deepcopy=False)
        )
        study.sampler = study_sampler(
            config, space, caps, config.seed + len(study.trials) + seed_offset, n_queued=1 + warm
        )
        return study
    except SQLAlchemyError as e:
        raise StorageError(
            f"storage={display_url(config.storage)}: database error: "
            f"{error_reason(e, config.storage)}"
        ) from None


def startup_design(
    config: RunConfig, space: SearchSpace, caps: DeviceCapabilities, n_queued: int = 1
) -> list[dict[str, Any]]:
    """The study's start-up trials after the queued ones: a covering design of the space
    (:func:`autotune.study.search._samplers.covering_design`, seeded with ``config.seed``) whose rows
    the device's feasibility rules accept (:func:`autotune.study.feasibility.trial_infeasibility_reason`,
    memory estimate included) and, wherever the coverage allows, fit in memory even if the
    estimate is its tolerance too low (:func:`autotune.study.feasibility.fits_memory_with_margin`): a
    start-up trial that runs out of memory teaches the model only where trials fail.

    Args:
        config: the run (its seed, device settings and objective).
        space: the space restricted to what the device can run (screened precisions out).
        caps: the device's capabilities.
        n_queued: trials queued before the design (the baseline and warm starts); they count
            towards :data:`autotune.study.search.GP_STARTUP_TRIALS`.

    Returns:
        ``max(GP_STARTUP_TRIALS - n_queued, most levels of a knob)`` rows (fewer if a row
        could not be made feasible), each a value per knob.
    """
    knobs = space.knobs()
    most_levels = max(
        (len(k.values()) for k in knobs.values() if not isinstance(k, FloatParam)), default=1
    )
    n_rows = max(GP_STARTUP_TRIALS - n_queued, most_levels)

    def fits_with_margin(row: Mapping[str, Any]) -> bool:
        return fits_memory_with_margin(knob_trial_config(config, space, caps, row), caps)

    return covering_design(
        design_levels(knobs, n_rows),
        n_rows,
        config.seed,
        feasibility_test(config, space, caps),
        preferred=fits_with_margin,
    )


def feasibility_test(
    config: RunConfig, space: SearchSpace, caps: DeviceCapabilities
) -> Callable[[Mapping[str, Any]], bool]:
    """The device's feasibility rules (:func:`autotune.study.feasibility.trial_infeasibility_reason`,
    memory estimate included) as a test of a trial's knob values (by Optuna parameter name):
    what the start-up design's rows must pass, and what the GP sampler checks its proposals
    against (:class:`autotune.study.search.WarpedSampler`). Values no trial configuration can
    hold pass: the trial itself then reports them."""

    def feasible(knobs: Mapping[str, Any]) -> bool:
        try:
            trial = knob_trial_config(config, space, caps, knobs)
        except ValueError:  # pydantic's ValidationError: the objective reports it
            return True
        return trial_infeasibility_reason(trial, caps) is None

    return feasible


#: Configurations whose prior :func:`prior_mean` keeps per study process (a few MB at most).
_PRIOR_CACHE_SIZE = 1 << 16
#: Seconds :func:`prior_mean` may spend per study process profiling models for the memory
#: estimate (``workloads.profile_workload`` traces each model and precision once: 36 models of
#: ``cnn_small`` in 0.4 s, the 288 of examples/char_gpt in 2.3 s on a 2-core CPU).
PRIOR_PROFILE_BUDGET_S = 10.0


def prior_mean(
    config: RunConfig,
    space: SearchSpace,
    caps: DeviceCapabilities,
    profile_budget_s: float = PRIOR_PROFILE_BUDGET_S,
    clock: Callable[[], float] = time.perf_counter,
) -> PriorMean:
    """What the study knows of a configuration's objectives before it runs, for the GP's
    prior means (:class:`autotune.study.search.LeanGPSampler`): its peak memory as
    :func:`autotune.study.feasibility.estimate_trial_memory` estimates it (the estimate the
    feasibility rules already read), by objective name (``{"peak_memory_bytes": bytes}``).

    The sampler asks for hundreds of configurations per proposal, and the estimate of a
    model not seen before traces it (:func:`autotune.trial.workloads.profile_workload`, cached per
    process by model and precision). Tracing stops once this prior has spent ``profile_budget_s`` on it in
    the process (a space of large models, or a real-valued model knob, which makes every
    candidate a new model): a configuration whose model it has not traced by then gets no
    prior (``{}``), as do knob values no trial configuration can hold and a workload that
    cannot be traced (its trial reports the error). Answers are kept for the last
    :data:`_PRIOR_CACHE_SIZE` configurations (about 0.1 ms each once the model is traced).

    Args:
        config: the run (its seed, device settings and objective).
        space: the space restricted to what the device can run.
        caps: the device's capabilities.
        profile_budget_s: seconds of model tracing allowed, per process.
        clock: seconds, for the budget (tests inject one).
    """
    traced: set[tuple[str, str]] = set()  # (model knobs as JSON, precision) traced here
    spent_s = [0.0]

    @functools.lru_cache(maxsize=_PRIOR_CACHE_SIZE)
    def known(key: tuple[tuple[str, Any], ...]) -> dict[str, float]:
        try:
            trial = knob_trial_config(config, space, caps, dict(key))
        except ValueError:  # pydantic's ValidationError: no trial holds these values
            return {}
        model = (json.dumps(trial.model, sort_keys=True), trial.precision)
        if model not in traced and spent_s[0] >= profile_budget_s:
            return {}
        started = clock()
        estimate = estimate_trial_memory_or_none(trial, caps)  # None: the workload raised
        if model not in traced:
            spent_s[0] += clock() - started
            traced.add(model)
        return {} if estimate is None else {PEAK_MEMORY.name: float(estimate.total_bytes)}

    def prior(knobs: Mapping[str, Any]) -> dict[str, float]:
        return known(tuple(sorted(knobs.items())))

    return prior


def study_sampler(
    config: RunConfig,
    space: SearchSpace,
    caps: DeviceCapabilities,
    seed: int,
    n_queued: int = 1,
) -> OneThreadSampler:
    """The sampler a study of ``config`` runs (:func:`autotune.study.search.make_sampler`): the
    start-up design of :func:`startup_design` for the samplers that take one, proposals
    checked against :func:`feasibility_test`, and the memory estimate as the GP's prior mean of peak memory
    (:func:`prior_mean`).

    Args:
        config: the run (its sampler, seed and device settings).
        space: the space restricted to what the device can run.
        caps: the device's capabilities.
        seed: the sampler's seed (:func:`open_study` says how it is chosen).
        n_queued: trials queued before the design (the baseline and warm starts).
    """
    design = None
    if config.sampler in STARTUP_DESIGN_SAMPLERS:
        design = startup_design(config, space, caps, n_queued=n_queued)
    return make_sampler(
        config.sampler,
        seed,
        design=design,
        feasible=feasibility_test(config, space, caps),
        prior_mean=prior_mean(config, space, caps),
    )


def knob_trial_config(
    config: RunConfig,
    space: SearchSpace,
    caps: DeviceCapabilities,
    knobs: Mapping[str, Any],
    mock_fault: MockFault = "none",
) -> TrialConfig:
    """The complete configuration of a trial of this run with these knob values (by Optuna
    parameter name): the study's seed, the training settings of
    :func:`autotune.study.baseline.trial_train_settings`, the device and the mock's settings.

    Raises:
        pydantic.ValidationError: a value of the wrong type or out of range.
    """
    return TrialConfig.from_knobs(
        knobs,
        space,
        device=caps.kind,
        seed=config.seed,
        train=trial_train_settings(space),
        mock_fault=mock_fault,
        mock_profile=config.mock.profile,
        objective=config.objective,
        timeout_s=config.trial.timeout_s,
    )


def _warm_start_trials(
    config: RunConfig, space: SearchSpace, storage: RDBStorage
) -> list[tuple[dict[str, Any], str]]:
    """The Pareto-optimal configurations of study ``config.warm_start`` (same storage), as
    ``(params, "study#trial")``; a value ``space`` does not allow (e.g. bf16 on a Volta GPU)
    is left out, for the sampler to choose. A new study enqueues them before sampling.

    ``config.warm_start`` was checked once, before the run (:func:`check_warm_start`, called
    by :func:`autotune.study.api.prepare_run`).
    """
    other = optuna.load_study(study_name=config.warm_start, storage=storage)
    knobs = space.knobs()
    trials: list[tuple[dict[str, Any], str]] = []
    for t in sorted(other.best_trials, key=lambda t: t.number):
        params = {k: v for k, v in t.params.items() if k in knobs and knobs[k].contains(v)}
        if params and all(params != p for p, _ in trials):
            trials.append((params, f"{config.warm_start}#{t.number}"))
    return trials
