"""Preparing a run: everything that can be validated is, before anything is written."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.core.config import RunConfig, SearchSpace
from autotune.core.exceptions import ConfigError, WorkloadError
from autotune.core.hardware import (
    DeviceCapabilities,
    PrecisionScreen,
    detect_capabilities,
    resolve_device,
    study_precision_screen,
    worker_share,
)
from autotune.study.baseline import check_baseline_runs
from autotune.study.feasibility import restrict_space
from autotune.study.objectives import METRIC_INDEX, Objective, study_objectives
from autotune.study.search import check_warm_start
from autotune.study.storage import check_storage_reachable, stored_study_attr
from autotune.study.trial_result import STUDY_RECORD_ATTR, StudyAttributes
from autotune.trial.workloads import check_workload


@dataclass(frozen=True)
class PreparedRun:
    """A validated run, before anything is written: device, restricted space, removed choices.

    ``screen`` is the precision screen (:class:`autotune.core.hardware.PrecisionScreen`): made now
    for a new study, the stored one for a resumed study, None for a study made before the
    screen existed (nothing screened). Its screened precisions are among ``removed_choices``.
    """

    config: RunConfig
    capabilities: DeviceCapabilities
    space: SearchSpace
    removed_choices: list[str]
    objectives: tuple[Objective, ...]
    metric: Objective  # the workload's validation metric (an objective in throughput mode)
    screen: PrecisionScreen | None = None


def prepare_run(
    config: RunConfig, *, capabilities: DeviceCapabilities | None = None, worker_index: int = 0
) -> PreparedRun:
    """Validate everything that can be validated without writing anything.

    Resolves the device, checks the workload (it imports, takes the space's knobs, builds
    its smallest model on the meta device, and its datasets load: so a missing or corrupt
    ``data.root`` fails here), checks the storage URL (its driver is installed, a database
    server answers), screens the precisions against the device's peaks
    (``advanced.hardware.min_peak_ratio``; a study that exists keeps the screen it stored), removes
    them and the choices the device can never run, and checks that the ``warm_start`` study
    exists (reading the database, never creating it). With ``workers`` > 1 on ``cuda`` the
    capabilities are those of this worker's own GPUs (:func:`autotune.core.hardware.worker_share`),
    so its space loses the ``gpu_count`` choices above its share.

    Args:
        config: the validated run configuration.
        capabilities: the device's capabilities, when the caller has them (tests pass fakes);
            detected for ``config.device`` when None. Their kind is then the device's.
        worker_index: which worker of ``config.workers`` prepares (0: the process the user
            started).

    Raises:
        ConfigError, WorkloadError, DeviceUnavailableError, DataError, StorageError: with
            one-line messages.
    """
    kind = capabilities.kind if capabilities is not None else resolve_device(config.device)
    spec = config.space.workload_spec()
    try:
        workload = check_workload(spec, config.space.model)
    except WorkloadError as e:
        raise WorkloadError(f"{config.space_source}: {e}") from e.__cause__
    metric = study_objectives(workload.metric_name, workload.metric_direction)[METRIC_INDEX]
    objectives = study_objectives(workload.metric_name, workload.metric_direction, config.objective)
    if config.space.constraints.min_accuracy is not None and not metric.is_accuracy:
        raise ConfigError(
            f"{config.space_source}: constraints.min_accuracy: the workload's metric is "
            f"{workload.metric_name}, not accuracy; remove the constraint"
        )
    _check_objective_settings(config, metric)
    if kind == "mock" and not spec.is_builtin:
        raise ConfigError(
            f"device=mock: the mock device simulates the built-in workloads (cnn, mlp) only; "
            f"it has no model of {spec.label}'s accuracy. Run it with device=cpu or device=cuda"
        )
    caps = capabilities or detect_capabilities(kind, mock_profile=config.mock.profile)
    caps = worker_share(caps, config.workers, worker_index)
    check_storage_reachable(config.storage)
    record = stored_study_attr(config.storage, config.study, STUDY_RECORD_ATTR)
    screen = study_precision_screen(
        config.space,
        caps,
        config.advanced.hardware.min_peak_ratio,
        StudyAttributes.from_attrs({STUDY_RECORD_ATTR: record}).precision_screen,
        config.study,
        new_study=record is None,
    )
    space, removed = restrict_space(
        config.space, caps, screen.reasons() if screen is not None else None
    )
    try:
        check_baseline_runs(space, removed)
    except ConfigError as e:
        raise ConfigError(f"{config.space_source}: {e}") from None
    check_warm_start(config)
    return PreparedRun(
        config=config,
        capabilities=caps,
        space=space,
        removed_choices=removed,
        objectives=objectives,
        metric=metric,
        screen=screen,
    )


#: Settings only a time-to-accuracy run reads (``train.*``).
_TARGET_SETTINGS = (
    "target_accuracy",
    "target_metric",
    "eval_every_steps",
    "eval_every_s",
    "max_time_s",
)


def _check_objective_settings(config: RunConfig, metric: Objective) -> None:
    """The settings of ``objective=`` agree with each other and with the workload's metric.

    Raises:
        ConfigError: ``time_to_accuracy`` with a door other than the workload's, or without a
            target, ``target_accuracy`` for a metric other than accuracy,
            ``constraints.min_accuracy`` beside a target, or a time-to-accuracy setting in a
            throughput run (it would be ignored).
    """
    train, source = config.space.train, config.space_source
    door = config.space.door
    if config.objective != "throughput" and door != "workload":
        raise ConfigError(
            f"{source}: objective={config.objective}: needs the workload door (autotune "
            f"evaluates while it trains); the {door} door evaluates once, in your code"
        )
    if config.objective == "throughput":
        for name in _TARGET_SETTINGS:
            if getattr(train, name) is not None:
                raise ConfigError(
                    f"{source}: train.{name}: only read with objective=time_to_accuracy "
                    "(add objective=time_to_accuracy, or remove it)"
                )
        return
    if train.target is None:
        what = "accuracy in (0, 1]" if metric.is_accuracy else f"{metric.name} value"
        key = "target_accuracy" if metric.is_accuracy else "target_metric"
        raise ConfigError(
            f"{source}: objective=time_to_accuracy needs train.{key} (the validation {what} "
            "every trial trains to)"
        )
    if train.target_accuracy is not None and not metric.is_accuracy:
        raise ConfigError(
            f"{source}: train.target_accuracy: the workload's metric is {metric.name}, not "
            "accuracy; use train.target_metric"
        )
    if config.space.constraints.min_accuracy is not None:
        raise ConfigError(
            f"{source}: constraints.min_accuracy: not used with objective=time_to_accuracy "
            "(the target is the quality bar); remove the constraint"
        )
