"""The Optuna study: opening it (resume, warm start, study record) and the objective that
runs its trials.

The objective turns the sampler's parameters into a frozen :class:`TrialConfig`, checks it
against the device's feasibility rules, runs it in a child process, and stores every figure
as a trial user attribute (units in the names). A trial that fails (out of memory, error,
crash, timeout) is still a data point: it completes with the worst objective values, its
``failure`` attribute says why, and it is marked infeasible through Optuna's constraints so
samplers learn the boundary and it never reaches the Pareto front. A configuration the
device cannot run at all is never launched, but it is reported to the sampler the same way
(``failure=infeasible``): a pruned trial would teach the sampler nothing, and Optuna's GP
sampler was seen proposing such configurations again and again (30 of 50 trials on the mock
device with seed 0) when they were pruned.
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import optuna
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.exc import SQLAlchemyError

from autotune.baseline import BASELINE_ATTR, baseline_trial, trial_train_settings
from autotune.config import (
    FloatParam,
    MockFault,
    ReusedMetric,
    RunConfig,
    SearchSpace,
    TrialConfig,
    display_url,
    math_key,
    upgrade_space_record,
)
from autotune.exceptions import ConfigError, StorageError, SurplusTrial, TrialError
from autotune.hardware import (
    DeviceCapabilities,
    PrecisionScreen,
    check_study_hardware,
    estimate_trial_memory_or_none,
    fits_memory_with_margin,
    trial_infeasibility_reason,
)
from autotune.measure import BUSY_ATTR, Measurement
from autotune.objectives import (
    OBJECTIVES,
    PEAK_MEMORY,
    Objective,
    failed_values,
    metric_objective,
    objective_mode,
    objective_values,
)
from autotune.storage import FINISHED_STATES, error_reason, storage_location, study_exists
from autotune.study._samplers import (
    GP_STARTUP_TRIALS,
    STARTUP_DESIGN_SAMPLERS,
    WARM_START_ATTR,
    OneThreadSampler,
    PriorMean,
    covering_design,
    design_levels,
    make_sampler,
)

__all__ = [
    "MATH_KEY_ATTR",
    "METRIC_FROM_TRIAL_ATTR",
    "PRIOR_PROFILE_BUDGET_S",
    "STUDY_RECORD_ATTR",
    "SurplusTrial",
    "TrialObjective",
    "check_warm_start",
    "count_finished",
    "feasibility_test",
    "knob_trial_config",
    "open_study",
    "prior_mean",
    "startup_design",
    "study_sampler",
]

#: The study user attribute holding the study record: its space, device, objectives and
#: precision screen (what a resumed study must match).
STUDY_RECORD_ATTR = "autotune"
#: The trial user attribute holding its configuration's math key (:func:`autotune.config.math_key`).
MATH_KEY_ATTR = "math_key"
#: The trial user attribute naming the trial whose metric a trial reused (its number).
METRIC_FROM_TRIAL_ATTR = "metric_from_trial"
#: States that hold one of the study's ``--trials`` slots: finished, running or queued.
_CLAIMING_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
#: Failures worth one more try (a flaky crash); out of memory and timeouts would repeat.
_RETRIED_FAILURES = ("error", "crash")
RunTrialFn = Callable[[TrialConfig, float], Measurement]


#: A time-to-accuracy study without a cadence of its own evaluates every this share of the
#: baseline's time to the target (:meth:`TrialObjective._warm_baseline`).
EVAL_EVERY_SHARE = 0.1


def check_warm_start(config: RunConfig) -> None:
    """Check that ``warm_start=NAME`` names another study that exists; writes nothing.

    Run before anything is created or printed (:func:`autotune.api.prepare_run`).

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
        # resumed study keeps this screen (autotune.hardware.study_precision_screen).
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
    """Trials that count towards ``--trials`` (:data:`autotune.storage.FINISHED_STATES`)."""
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
    (:func:`autotune.hardware.screen_precisions`), which a resumed study keeps.

    ``objectives`` are the study's (:func:`autotune.objectives.study_objectives` of the
    workload's metric and ``objective=``); Optuna keeps their names and directions with the
    study. ``metric`` is the workload's validation metric, which a time-to-accuracy study's
    record keeps with its target (it is not among the objectives there).

    The sampler's seed is ``seed + number of trials already in the study + seed_offset``, so a
    resumed study does not replay the first proposals while staying reproducible, and workers
    (each with its own ``seed_offset``) propose different configurations. The start-up design
    (:func:`startup_design`, ``gp`` and ``tpe``) depends on ``seed`` alone: every worker and
    every resumption holds the same one, and its rows go to trials by number
    (:class:`autotune.study.DesignSampler`). The metric is modelled on
    ``space.metric_knobs()``.

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
        existing = study.user_attrs.get(STUDY_RECORD_ATTR)
        if existing is None:
            with warnings.catch_warnings():  # set_metric_names is "experimental" since 3.2
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names([o.name for o in objectives])
            study.set_user_attr(STUDY_RECORD_ATTR, record)
            for params, source in warm_start:
                study.enqueue_trial(params, user_attrs={WARM_START_ATTR: source})
        else:
            mode = existing.get("objective", "throughput")
            if mode != record.get("objective", "throughput"):
                raise ConfigError(
                    f"study={config.study}: it was created with objective={mode}; choose a new "
                    "study name (study=NAME) or the original objective"
                )
            # A study stored before advanced.* compares in this release's shape.
            existing = {**existing, "space": upgrade_space_record(existing.get("space"))}
            for key, what in (("space", "search space"), ("device_kind", "device")):
                if json.dumps(existing.get(key), sort_keys=True) != json.dumps(
                    record[key], sort_keys=True
                ):
                    raise ConfigError(
                        f"study={config.study}: it was created with another {what} "
                        f"({existing.get('space_source') if key == 'space' else existing.get(key)}); "
                        "choose a new study name (study=NAME) or the original settings"
                    )
        warm = sum(WARM_START_ATTR in t.user_attrs for t in study.get_trials(deepcopy=False))
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
    (:func:`autotune.study.covering_design`, seeded with ``config.seed``) whose rows the
    device's feasibility rules accept (:func:`autotune.hardware.trial_infeasibility_reason`,
    memory estimate included) and, wherever the coverage allows, fit in memory even if the
    estimate is its tolerance too low (:func:`autotune.hardware.fits_memory_with_margin`): a
    start-up trial that runs out of memory teaches the model only where trials fail. (On the
    mock space of Table 2, seeds 0-9, the rules alone let 1-5 of the 9 rows a design then
    had run out of memory on every seed, and the design's hypervolume at 10 trials rose from
    0.355 to 0.465 with the margin.)

    Args:
        config: the run (its seed, device settings and objective).
        space: the space restricted to what the device can run (screened precisions out).
        caps: the device's capabilities.
        n_queued: trials queued before the design (the baseline and warm starts); they count
            towards :data:`autotune.study.GP_STARTUP_TRIALS`.

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
    """The device's feasibility rules (:func:`autotune.hardware.trial_infeasibility_reason`,
    memory estimate included) as a test of a trial's knob values (by Optuna parameter name):
    what the start-up design's rows must pass, and what the GP sampler checks its proposals
    against (:class:`autotune.study.WarpedSampler`). Values no trial configuration can
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
#: estimate (``profile_model`` traces each model and precision once: 36 models of
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
    prior means (:class:`autotune.study.LeanGPSampler`): its peak memory as
    :func:`autotune.hardware.estimate_trial_memory` estimates it (the estimate the
    feasibility rules already read), by objective name (``{"peak_memory_bytes": bytes}``).

    The sampler asks for hundreds of configurations per proposal, and the estimate of a
    model not seen before traces it (:func:`autotune.flops.profile_model`, once per model
    and precision). Tracing stops once this prior has spent ``profile_budget_s`` on it in
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
    """The sampler a study of ``config`` runs (:func:`autotune.study.make_sampler`): the
    start-up design of :func:`startup_design` for the samplers that take one, the metric
    modelled on ``space.metric_knobs()``, proposals checked against
    :func:`feasibility_test`, and the memory estimate as the GP's prior mean of peak memory
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
        metric_knobs=space.metric_knobs(),
        feasible=feasibility_test(config, space, caps),
        prior_mean=prior_mean(config, space, caps),
        cost_aware_after_trials=space.advanced.search.cost_aware_after_trials,
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
    :func:`autotune.baseline.trial_train_settings`, the device and the mock's settings.

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
    )


def _warm_start_trials(
    config: RunConfig, space: SearchSpace, storage: RDBStorage
) -> list[tuple[dict[str, Any], str]]:
    """The Pareto-optimal configurations of study ``config.warm_start`` (same storage), as
    ``(params, "study#trial")``; a value ``space`` does not allow (e.g. bf16 on a Volta GPU)
    is left out, for the sampler to choose. A new study enqueues them before sampling.

    Raises:
        ConfigError: the study does not exist, or is the study being run.
    """
    name = config.warm_start
    if name == config.study:
        raise ConfigError(f"warm_start={name}: must name another study than study={config.study}")
    try:
        other = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise ConfigError(
            f"warm_start={name}: no such study in storage={storage_location(config.storage)}"
        ) from None
    knobs = space.knobs()
    trials: list[tuple[dict[str, Any], str]] = []
    for t in sorted(other.best_trials, key=lambda t: t.number):
        params = {k: v for k, v in t.params.items() if k in knobs and knobs[k].contains(v)}
        if params and all(params != p for p, _ in trials):
            trials.append((params, f"{name}#{t.number}"))
    return trials


def _reused_metric(source: int, attrs: Mapping[str, Any], tta: bool) -> ReusedMetric:
    """What a trial takes from trial ``source``, measured in full, whose figures are
    ``attrs`` (its user attributes, :meth:`Measurement.as_user_attrs`): its validation
    metric, training loss and steps, and in a time-to-accuracy study (``tta``) its
    evaluations up to the target.

    Raises:
        KeyError: ``attrs`` lacks ``val_metric`` or ``steps``.
    """
    return ReusedMetric(
        from_trial=source,
        val_metric=float(attrs["val_metric"]),
        train_loss=float(attrs.get("train_loss", float("nan"))),
        steps=int(attrs["steps"]),
        evaluations=len(attrs.get("metric_curve") or []) if tta else 0,
    )


class TrialObjective:
    """The function Optuna calls per trial: sample, check, run in isolation, record.

    Args:
        config: the run (seed, timeout, device).
        space: the space restricted to what the device can run.
        caps: the device's capabilities.
        run_trial: runs a :class:`TrialConfig` with a timeout and returns its measurement
            (``autotune.study.run_trial``; tests inject fakes).
        n_trials: the study's target; a trial beyond it (several workers asked at once) is not
            run but stopped as :class:`SurplusTrial`.

    Returns (when called):
        ``(throughput_sps, val_metric, peak_memory_bytes)``, or ``(time_to_accuracy_s,
        peak_memory_bytes)`` with ``objective=time_to_accuracy``
        (:func:`autotune.objectives.objective_values`).

    A configuration the device's feasibility rules refuse is not launched; it completes with
    the failed values and ``failure=infeasible``, like a trial that ran out of memory.

    Raises (when called):
        SurplusTrial: the study already holds or is running ``n_trials`` trials.
    """

    def __init__(
        self,
        config: RunConfig,
        space: SearchSpace,
        caps: DeviceCapabilities,
        run_trial: RunTrialFn,
        n_trials: int | None = None,
        objectives: tuple[Objective, ...] = OBJECTIVES,
    ) -> None:
        self._objectives = objectives
        self._sampler_s_seen = 0.0  # the sampler's seconds already attributed to a trial
        self._config = config
        self._space = space
        self._caps = caps
        self._run_trial = run_trial
        self._n_trials = n_trials

    def trial_config(self, trial: optuna.Trial) -> TrialConfig:
        """Ask the sampler for every knob and freeze the complete configuration.

        Every trial trains with the study's seed (common random numbers: the same
        initialization and data order, so that accuracy differences come from the knobs, not
        from luck); only verification rounds use other seeds. The learning rate's reference
        batch is the baseline's global batch unless the space sets one
        (:func:`autotune.baseline.trial_train_settings`).
        """
        knobs = {name: param.suggest(trial, name) for name, param in self._space.knobs().items()}
        # Validated here: the sampler's values and the device kind are checked by the model.
        return knob_trial_config(
            self._config, self._space, self._caps, knobs, self._mock_fault(trial.number)
        )

    def _with_baseline_settings(self, trial: optuna.Trial, config: TrialConfig) -> TrialConfig:
        """What later trials take from the baseline trial. In a throughput study: the floor
        of :meth:`_with_throughput_floor`. In a time-to-accuracy study: the
        evaluation cadence it derived (user attribute ``eval_every_s``, see
        :meth:`_warm_baseline`) where the space sets none, and a stop at
        ``advanced.train.max_time_vs_baseline`` times its time to accuracy (or ``train.max_time_s``,
        the smaller), recorded as the user attribute ``time_limit_s``. Without a baseline
        that reached the target (the baseline itself, or a baseline that missed it), the
        limit is ``train.max_time_s`` alone."""
        train = config.train
        base = baseline_trial(trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
        if base is None or base.number == trial.number:
            return config
        if config.objective != "time_to_accuracy":
            return self._with_throughput_floor(trial, config, base)
        every_s = base.user_attrs.get("eval_every_s")
        if every_s:
            train = train.with_default_cadence(float(every_s))
        base_s = base.user_attrs.get("time_to_accuracy_s")
        if train.max_time_vs_baseline is not None and base_s:
            limit_s = train.max_time_vs_baseline * float(base_s)
            if train.max_time_s is not None:
                limit_s = min(limit_s, train.max_time_s)
            trial.set_user_attr("time_limit_s", limit_s)
            train = train.model_copy(update={"max_time_s": limit_s})
        return config.model_copy(update={"train": train})

    def _with_throughput_floor(
        self, trial: optuna.Trial, config: TrialConfig, base: FrozenTrial
    ) -> TrialConfig:
        """A throughput trial stops after its first timed window when that window runs
        below ``advanced.trial.min_throughput_vs_baseline`` times the baseline trial's measured
        throughput (``config.min_throughput_sps``, also the user attribute
        ``min_throughput_sps``). On the 2-core Xeon of issue 22, 16 fp16 trials at
        10-4,000 samples/s against fp32's ~30,000 took 72 % of a study's trial seconds;
        stopped after one window, such a trial still teaches the sampler its throughput.
        Without a measured baseline (it failed), or with the ratio 0, there is no floor."""
        ratio = self._config.advanced.trial.min_throughput_vs_baseline
        base_sps = base.user_attrs.get("throughput_sps")
        if not ratio or "failure" in base.user_attrs or not base_sps:
            return config
        floor_sps = ratio * float(base_sps)
        trial.set_user_attr("min_throughput_sps", floor_sps)
        return config.model_copy(update={"min_throughput_sps": floor_sps})

    def _warm_baseline(self, trial: optuna.Trial, config: TrialConfig) -> TrialConfig:
        """Run the baseline trial's configuration once and discard it, so that the figure
        every later trial is compared with is measured warm.

        The study's first trial process pays for cold caches (the forkserver's first fork,
        the page cache, the CPU's clock): in a time-to-accuracy study on a 2-core CPU the
        baseline's first run read 13.3 s where its verified median was 8.20 s, which made
        every comparison with it 1.6x too kind. The discarded run's figures are kept as
        ``cold_throughput_sps`` (and ``cold_time_to_accuracy_s``).

        In a time-to-accuracy study whose space sets no evaluation cadence, the discarded
        run also sets it: the measured run and every later trial evaluate every
        :data:`EVAL_EVERY_SHARE` (10 %) of the discarded run's time to the target (user
        attribute ``eval_every_s``), so that the clock's resolution is finer than the
        differences it ranks (once per epoch, one validation image decided between 9.8 and
        13.3 s). A discarded run that failed or missed the target leaves the cadence as it is.
        """
        if not trial.user_attrs.get(BASELINE_ATTR):
            return config
        try:
            cold = self._run_trial(config, self._config.trial.timeout_s)
        except TrialError:
            return config  # the measured run will fail too, and record why
        trial.set_user_attr("cold_throughput_sps", cold.throughput_sps)
        if config.objective != "time_to_accuracy":
            return config
        trial.set_user_attr("cold_time_to_accuracy_s", cold.time_to_accuracy_s)
        train = config.train
        if train.has_eval_cadence or not cold.target_reached or not cold.time_to_accuracy_s:
            return config
        every_s = EVAL_EVERY_SHARE * cold.time_to_accuracy_s
        trial.set_user_attr("eval_every_s", every_s)
        return config.model_copy(update={"train": train.with_default_cadence(every_s)})

    def _with_reuse(self, trial: optuna.Trial, config: TrialConfig, key: str) -> TrialConfig:
        """The configuration with ``reuse`` set when ``advanced.search.reuse_metric`` is on and a
        finished trial with the same math key (``key``) was measured in full: the earliest
        such trial that completed without failure (in a time-to-accuracy study, one that
        reached the target) and did not itself reuse a metric. Its validation metric and
        training loss, and its steps and evaluations to the target, go with the trial, which
        then runs only its warm-up and timed windows (:mod:`autotune.training`). The baseline
        trial always trains in full (it is what every speedup is measured against), and so
        does every verification run (its configuration is rebuilt from the stored knobs,
        without ``reuse``)."""
        if not self._space.advanced.search.reuse_metric or trial.user_attrs.get(BASELINE_ATTR):
            return config
        tta = config.objective == "time_to_accuracy"
        for source in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            attrs = source.user_attrs
            if (
                source.number == trial.number
                or attrs.get(MATH_KEY_ATTR) != key
                or "failure" in attrs
                or METRIC_FROM_TRIAL_ATTR in attrs
                or not isinstance(attrs.get("val_metric"), (int, float))
                or not isinstance(attrs.get("steps"), int)
                or (tta and attrs.get("target_reached") is not True)
            ):
                continue
            return config.model_copy(update={"reuse": _reused_metric(source.number, attrs, tta)})
        return config

    def _remeasure_while_busy(
        self, trial: optuna.Trial, config: TrialConfig, measurement: Measurement
    ) -> Measurement:
        """The trial's measurement, timed again while it was taken on a busy machine.

        A run whose timed windows saw other processes above ``advanced.measure.max_other_cpu_share``
        of the CPUs is followed by another, up to ``advanced.trial.busy_retimes`` re-runs, until
        the kept run is not busy. A re-run reuses the trial's own validation metric
        (``reuse``: the math is the same, so it runs only its warm-up and timed windows; in a
        time-to-accuracy study only a run that reached the target is re-timed). The run kept
        is the least busy one (the lowest share of other processes; a re-run stopped as too
        slow, its floor passed by the full run, is never kept): its timing figures count,
        while the training's own figures (``steps``, ``train_s``, ``train_loss``,
        ``compile_s``, ``val_samples``, ``extra``'s compile-cache counts) stay the full
        run's, so a later trial can reuse this one, and so does its memory (peak, kind and
        ``extra``'s memory figures: other processes do not change it, and a run without
        evaluation could read lower than every fully trained trial). User attributes, when a
        re-run was made: ``busy_remeasures`` (re-runs), ``busy_run_shares`` (the other
        processes' share of every run, the full run first), ``busy_remeasure_s`` (the
        re-runs' seconds); ``busy_remeasure_failure`` when a re-run failed (the runs before
        it stand).
        """
        threshold = config.measure.max_other_cpu_share
        tta = config.objective == "time_to_accuracy"
        first = kept = measurement
        shares = [] if first.other_cpu_share is None else [first.other_cpu_share]
        reruns, spent_s = 0, 0.0
        rerun_config: TrialConfig | None = None  # made at the first re-run
        full_run_extra = {
            k: v for k, v in first.extra.items() if k.startswith("compile_cache") or "memory" in k
        }

        def with_full_run(run: Measurement) -> Measurement:
            """``run``'s timing figures with the full run's training figures and memory."""
            return replace(
                run,
                steps=first.steps,
                train_s=first.train_s,
                train_loss=first.train_loss,
                compile_s=first.compile_s,
                peak_memory_bytes=first.peak_memory_bytes,
                memory_kind=first.memory_kind,
                val_samples=first.val_samples,
                extra={**run.extra, **full_run_extra},
            )

        while (
            reruns < self._config.advanced.trial.busy_retimes
            and kept.other_cpu_share is not None
            and kept.busy(threshold)
            and not kept.too_slow
            and (not tta or kept.target_reached is True)
        ):
            if rerun_config is None:  # the metric the trial reused, or its own
                reuse = config.reuse or _reused_metric(trial.number, first.as_user_attrs(), tta)
                rerun_config = config.model_copy(update={"reuse": reuse})
            try:
                again = self._run_trial(rerun_config, self._config.trial.timeout_s)
            except TrialError as e:
                trial.set_user_attr("busy_remeasure_failure", f"{e.failure}: {e.detail[-500:]}")
                break
            reruns += 1
            spent_s += again.train_s
            if again.other_cpu_share is None:  # not measured: nothing to compare it by
                break
            shares.append(again.other_cpu_share)
            if not again.too_slow and again.other_cpu_share < kept.other_cpu_share:
                kept = with_full_run(again)
        if reruns:
            trial.set_user_attr("busy_remeasures", reruns)
            trial.set_user_attr("busy_run_shares", shares)
            trial.set_user_attr("busy_remeasure_s", spent_s)
        return kept

    def _mock_fault(self, number: int) -> MockFault:
        mock = self._config.advanced.mock
        if self._caps.kind != "mock" or (mock.fault_trials and number not in mock.fault_trials):
            return "none"
        return mock.fault

    def _is_surplus(self, trial: optuna.Trial) -> bool:
        """True when ``n_trials`` trials numbered below this one are finished or under way.

        Trial numbers are handed out atomically by the storage, so this rule lets exactly
        ``n_trials`` trials run however many workers share the study.
        """
        if self._n_trials is None:
            return False
        claimed = trial.study.get_trials(deepcopy=False, states=_CLAIMING_STATES)
        return sum(t.number < trial.number for t in claimed) >= self._n_trials

    def _run_with_retry(self, trial: optuna.Trial, config: TrialConfig) -> Measurement:
        """Run the trial; an error or crash (not oom or timeout) gets one more try."""
        try:
            return self._run_trial(config, self._config.trial.timeout_s)
        except TrialError as first:
            if first.failure not in _RETRIED_FAILURES:
                raise
            trial.set_user_attr("retried_after", f"{first.failure}: {first.detail[-500:]}")
            return self._run_trial(config, self._config.trial.timeout_s)

    def _set_constraints(self, trial: optuna.Trial, measurement: Measurement | None) -> None:
        """Record feasibility as Optuna constraints (> 0 means violated).

        Every trial of a study gets the same constraint keys (GPSampler requires it):
        ``failed`` always, ``target_not_reached`` in a time-to-accuracy study, plus one per
        limit the space sets. A failed trial (no measurement) is infeasible through
        ``failed`` alone; its other constraints read 0.
        """
        limits = self._space.constraints
        trial.set_constraint("failed", 0.0 if measurement is not None else 1.0)
        if self._config.objective == "time_to_accuracy":
            missed = measurement is not None and not measurement.target_reached
            trial.set_constraint("target_not_reached", 1.0 if missed else 0.0)
        if limits.max_memory_bytes is not None:
            excess = (
                0.0
                if measurement is None
                else measurement.peak_memory_bytes - int(limits.max_memory_bytes)
            )
            trial.set_constraint("max_memory_bytes", float(excess))
        if limits.min_accuracy is not None:
            shortfall = 0.0 if measurement is None else limits.min_accuracy - measurement.val_metric
            trial.set_constraint("min_accuracy", shortfall)

    def _record_sampler_time(self, trial: optuna.Trial) -> None:
        """Store the seconds the sampler spent proposing this trial's parameters as the user
        attribute ``sampler_s`` (relative and independent sampling; measured by
        :class:`autotune.study.OneThreadSampler`, absent with another sampler)."""
        sampler = trial.study.sampler
        if isinstance(sampler, OneThreadSampler):
            trial.set_user_attr("sampler_s", sampler.fit_s - self._sampler_s_seen)
            self._sampler_s_seen = sampler.fit_s

    def _worst_measured(self, trial: optuna.Trial, index: int) -> float | None:
        """The largest value of objective ``index`` among the study's measured trials (in a
        time-to-accuracy study, those that reached the target)."""
        measured = [
            t.values[index]
            for t in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.values is not None
            and "failure" not in t.user_attrs
            and t.user_attrs.get("target_reached") is not False
        ]
        return max(measured, default=None)

    def _record_failure(self, trial: optuna.Trial, failure: str, detail: str) -> tuple[float, ...]:
        """A trial without a measurement (never launched, or failed): why, as constraints,
        and the worst objective values, so the sampler learns from it."""
        trial.set_user_attr("failure", failure)
        trial.set_user_attr("failure_detail", detail[-2000:])
        self._set_constraints(trial, None)
        mode = objective_mode(self._objectives)
        if mode == "time_to_accuracy":
            worst_s = self._worst_measured(trial, 0)
            return failed_values(self._caps.memory_bytes, mode=mode, worst_time_s=worst_s)
        metric = metric_objective(self._objectives)
        assert metric is not None  # the throughput mode has its metric among the objectives
        worst = self._worst_measured(trial, 1) if metric.direction == "minimize" else None
        return failed_values(self._caps.memory_bytes, metric.direction, worst)

    def _record_too_slow(self, trial: optuna.Trial, measurement: Measurement) -> tuple[float, ...]:
        """A trial stopped after its first window (:meth:`_with_throughput_floor`): failed
        as ``too_slow`` (infeasible), with its measured throughput and memory as objective
        values, so the sampler learns how slow it was; its metric, never evaluated, is the
        worst (as for any failure)."""
        floor_sps = float(trial.user_attrs.get("min_throughput_sps") or 0.0)
        values = self._record_failure(
            trial,
            "too_slow",
            f"stopped after the first timed window: {measurement.throughput_sps:,.0f} samples/s "
            f"is below the floor of {floor_sps:,.0f} (advanced.trial.min_throughput_vs_baseline="
            f"{self._config.advanced.trial.min_throughput_vs_baseline:g} x the baseline's)",
        )
        return (measurement.throughput_sps, values[1], float(measurement.peak_memory_bytes))

    def __call__(self, trial: optuna.Trial) -> tuple[float, ...]:
        if self._is_surplus(trial):
            trial.set_user_attr("failure", "surplus")
            trial.study.stop()
            raise SurplusTrial(f"trial {trial.number}: the study already has its trials")
        config = self._with_baseline_settings(trial, self.trial_config(trial))
        trial.set_user_attr("simulated", self._caps.simulated)
        self._record_sampler_time(trial)
        reason = trial_infeasibility_reason(config, self._caps)
        if reason is not None:
            return self._record_failure(trial, "infeasible", reason)
        key = math_key(config)
        trial.set_user_attr(MATH_KEY_ATTR, key)
        config = self._with_reuse(trial, config, key)
        try:
            config = self._warm_baseline(trial, config)
            measurement = self._run_with_retry(trial, config)
        except TrialError as e:
            return self._record_failure(trial, e.failure, e.detail)
        measurement = self._remeasure_while_busy(trial, config, measurement)
        for name, value in measurement.as_user_attrs().items():
            trial.set_user_attr(name, value)
        if config.reuse is not None and not measurement.too_slow:
            trial.set_user_attr(METRIC_FROM_TRIAL_ATTR, config.reuse.from_trial)
        if measurement.other_cpu_share is not None:
            # Flagged under the threshold in force when it was measured (every output reads it).
            busy = measurement.busy(config.measure.max_other_cpu_share)
            trial.set_user_attr(BUSY_ATTR, busy)
        if measurement.too_slow:
            return self._record_too_slow(trial, measurement)
        self._set_constraints(trial, measurement)
        mode = objective_mode(self._objectives)
        values = objective_values(measurement, mode)
        if mode == "time_to_accuracy" and not measurement.target_reached:
            # No time to accuracy: at least the seconds it trained, and no better than any
            # trial that reached the target (it is infeasible besides).
            values = (max(values[0], self._worst_measured(trial, 0) or 0.0), values[1])
        return values
