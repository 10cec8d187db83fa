"""``run_study``: the one entry point the CLI and Python users share."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import FrozenTrial, TrialState

from autotune.config import RunConfig, SearchSpace
from autotune.data import load_dataset
from autotune.exceptions import ConfigError
from autotune.hardware import (
    DeviceCapabilities,
    detect_capabilities,
    resolve_device,
    restrict_space,
)
from autotune.objectives import OBJECTIVES
from autotune.runner import run_trial
from autotune.study import (
    FINISHED_STATES,
    RunTrialFn,
    TrialObjective,
    count_finished,
    open_storage,
    open_study,
    validate_storage_url,
)

__all__ = ["PreparedRun", "StudyProgress", "StudyResult", "prepare_run", "run_study"]


@dataclass(frozen=True)
class StudyProgress:
    """A snapshot after each finished trial, for progress displays.

    Attributes:
        finished: trials counting towards the target (complete or infeasible).
        target: the ``--trials`` target.
        elapsed_s: seconds since this run started.
        best: best feasible value so far per objective name (max throughput, max accuracy,
            min memory), absent before the first feasible trial.
        last: the trial that just finished.
    """

    finished: int
    target: int
    elapsed_s: float
    best: dict[str, float]
    last: FrozenTrial


@dataclass(frozen=True)
class StudyResult:
    """What a run leaves behind.

    Attributes:
        study_name: the Optuna study name.
        storage: the storage URL.
        finished: trials counting towards the target after this run.
        ran: trials this run started.
        wall_s: seconds this run took.
        pareto_trials: the Pareto-optimal feasible trials (Optuna's ``best_trials``).
        capabilities: the device the trials ran on.
        removed_choices: choices dropped because the device can never run them, with reasons.
    """

    study_name: str
    storage: str
    finished: int
    ran: int
    wall_s: float
    pareto_trials: list[FrozenTrial]
    capabilities: DeviceCapabilities
    removed_choices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PreparedRun:
    """A validated run, before anything is written: device, restricted space, removed choices."""

    config: RunConfig
    capabilities: DeviceCapabilities
    space: SearchSpace
    removed_choices: list[str]


def prepare_run(config: RunConfig) -> PreparedRun:
    """Validate everything that can be validated without writing anything.

    Resolves the device, removes choices it can never run, checks the storage URL's form and
    loads the data set once (so a missing or corrupt ``data.root`` fails here).

    Raises:
        ConfigError, DeviceUnavailableError, DataError, StorageError: with one-line messages.
    """
    kind = resolve_device(config.device)
    caps = detect_capabilities(kind)
    space, removed = restrict_space(config.space, caps)
    validate_storage_url(config.storage)
    load_dataset(space.data)
    return PreparedRun(config=config, capabilities=caps, space=space, removed_choices=removed)


def _best_so_far(study: optuna.Study) -> dict[str, float]:
    feasible = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if all(v <= 0 for v in t.constraints.values())
    ]
    best: dict[str, float] = {}
    for i, objective in enumerate(OBJECTIVES):
        values = [t.values[i] for t in feasible]
        if values:
            best[objective.name] = max(values) if objective.direction == "maximize" else min(values)
    return best


def run_study(
    config: RunConfig,
    n_trials: int,
    *,
    on_trial: Callable[[StudyProgress], None] | None = None,
    run_trial_fn: RunTrialFn = run_trial,
    prepared: PreparedRun | None = None,
) -> StudyResult:
    """Run (or resume) a study until it holds ``n_trials`` finished trials.

    Running the same call again after an interruption tops the study up to ``n_trials``;
    completed trials are kept, never redone. Interrupted trials are recorded as FAIL and
    do not count.

    Args:
        config: the validated run configuration.
        n_trials: the number of finished trials the study should hold (>= 1).
        on_trial: called after every trial with a :class:`StudyProgress`.
        run_trial_fn: runs one trial (default: in child processes; tests inject fakes).
        prepared: the result of :func:`prepare_run`, if the caller already has it.

    Raises:
        ConfigError: bad input (also ``n_trials < 1``), or a study made with another space.
        StorageError, DataError, DeviceUnavailableError: as their names say.
        KeyboardInterrupt: on Ctrl-C, after the running trial is stopped and marked FAIL.
    """
    if n_trials < 1:
        raise ConfigError(f"--trials: must be >= 1, but got {n_trials}")
    prepared = prepared or prepare_run(config)
    space = prepared.space
    caps = prepared.capabilities
    storage = open_storage(config.storage)
    study = open_study(config, space, caps, storage)
    objective = TrialObjective(config, space, caps, run_trial_fn)

    started = time.monotonic()
    before = len(study.trials)

    def report(study: optuna.Study, trial: FrozenTrial) -> None:
        if on_trial is not None:
            on_trial(
                StudyProgress(
                    count_finished(study),
                    n_trials,
                    time.monotonic() - started,
                    _best_so_far(study),
                    trial,
                )
            )

    if count_finished(study) < n_trials:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study.optimize(
            objective,
            n_trials=None,
            callbacks=[MaxTrialsCallback(n_trials, states=FINISHED_STATES), report],
            gc_after_trial=False,
        )
    return StudyResult(
        study_name=study.study_name,
        storage=config.storage,
        finished=count_finished(study),
        ran=len(study.trials) - before,
        wall_s=time.monotonic() - started,
        pareto_trials=study.best_trials,
        capabilities=caps,
        removed_choices=prepared.removed_choices,
    )
