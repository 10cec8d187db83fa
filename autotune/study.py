"""The Optuna side: storage, sampler, study record, and the objective that runs trials.

The objective turns the sampler's parameters into a frozen :class:`TrialConfig`, checks it
against the device's feasibility rules, runs it in a child process, and stores every figure
as a trial user attribute (units in the names). A trial that fails (out of memory, error,
crash, timeout) is still a data point: it completes with the worst objective values, its
``failure`` attribute says why, and it is marked infeasible through Optuna's constraints so
samplers learn the boundary and it never reaches the Pareto front. A configuration the
device cannot run at all is never launched: it is pruned with ``failure=infeasible``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
from optuna.storages import RDBStorage, RetryFailedTrialCallback
from optuna.trial import TrialState
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from autotune.config import RunConfig, SearchSpace, TrialConfig
from autotune.exceptions import ConfigError, StorageError, TrialError
from autotune.hardware import DeviceCapabilities, infeasibility_reason
from autotune.measure import Measurement
from autotune.objectives import OBJECTIVES, failed_values, objective_values

__all__ = [
    "FINISHED_STATES",
    "TrialObjective",
    "count_finished",
    "make_sampler",
    "open_storage",
    "open_study",
    "validate_storage_url",
]

#: Trial states that count towards ``--trials``: a measured (or failed-as-data) trial, or an
#: infeasible one that was never launched. FAIL is reserved for interrupted trials, which are
#: run again.
FINISHED_STATES = (TrialState.COMPLETE, TrialState.PRUNED)
#: NSGA-II population: small enough that a 50-trial study runs several generations.
NSGA2_POPULATION = 10

RunTrialFn = Callable[[TrialConfig, float], Measurement]


def validate_storage_url(url: str) -> None:
    """Check that ``url`` parses as a SQLAlchemy URL with a known dialect; writes nothing.

    Raises:
        StorageError: a malformed URL or an unknown database dialect/driver.
    """
    try:
        parsed = make_url(url)
        parsed.get_dialect()
    except (ArgumentError, ValueError) as e:
        raise StorageError(f"storage={url}: not a SQLAlchemy database URL ({e})") from None
    except (ImportError, sqlalchemy.exc.NoSuchModuleError) as e:
        raise StorageError(f"storage={url}: unknown database dialect or driver ({e})") from None


def open_storage(url: str) -> RDBStorage:
    """Open (and create if needed) Optuna's RDB storage at ``url``.

    A SQLite file's directory is created if missing. Heartbeats mark a trial whose process was
    killed as failed, and its configuration is retried once (Optuna's retry callback).

    Raises:
        StorageError: malformed URL or a database that cannot be reached.
    """
    validate_storage_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    try:
        return RDBStorage(
            url,
            heartbeat_interval=30,
            grace_period=120,
            failed_trial_callback=RetryFailedTrialCallback(max_retry=1),
        )
    except SQLAlchemyError as e:
        reason = str(e.orig if getattr(e, "orig", None) else e).splitlines()[0]
        raise StorageError(f"storage={url}: cannot open the database: {reason}") from None


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    """The sampler for ``sampler=NAME``, seeded.

    Raises:
        ConfigError: for an unknown sampler name.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "nsga2":
            return optuna.samplers.NSGAIISampler(population_size=NSGA2_POPULATION, seed=seed)
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=10)
        if name == "gp":
            return optuna.samplers.GPSampler(seed=seed, n_startup_trials=10)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
    raise ConfigError(f"sampler={name}: unknown sampler (known: nsga2, tpe, gp, random)")


def _study_record(
    config: RunConfig, space: SearchSpace, caps: DeviceCapabilities
) -> dict[str, Any]:
    return {
        "space": space.model_dump(mode="json"),
        "space_source": config.space_source,
        "device_kind": caps.kind,
        "device_name": caps.name,
        "simulated": caps.simulated,
        "objectives": [o.name for o in OBJECTIVES],
    }


def count_finished(study: optuna.Study) -> int:
    """Trials that count towards ``--trials`` (:data:`FINISHED_STATES`)."""
    return len(study.get_trials(deepcopy=False, states=FINISHED_STATES))


def open_study(
    config: RunConfig, space: SearchSpace, caps: DeviceCapabilities, storage: RDBStorage
) -> optuna.Study:
    """Create the study, or load it to resume; refuse to mix spaces or device kinds.

    The sampler's seed is ``seed + number of trials already in the study``, so a resumed
    study does not replay the first proposals while staying reproducible.

    Raises:
        ConfigError: the existing study was made with another space or another device kind.
        StorageError: the database failed.
    """
    record = _study_record(config, space, caps)
    try:
        study = optuna.create_study(
            storage=storage,
            study_name=config.study,
            directions=[o.direction for o in OBJECTIVES],
            load_if_exists=True,
        )
        existing = study.user_attrs.get("autotune")
        if existing is None:
            with warnings.catch_warnings():  # set_metric_names is "experimental" since 3.2
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names([o.name for o in OBJECTIVES])
            study.set_user_attr("autotune", record)
        else:
            for key, what in (("space", "search space"), ("device_kind", "device")):
                if json.dumps(existing.get(key), sort_keys=True) != json.dumps(
                    record[key], sort_keys=True
                ):
                    raise ConfigError(
                        f"study={config.study}: it was created with another {what} "
                        f"({existing.get('space_source') if key == 'space' else existing.get(key)}); "
                        "choose a new study name (study=NAME) or the original settings"
                    )
        study.sampler = make_sampler(config.sampler, config.seed + len(study.trials))
        return study
    except SQLAlchemyError as e:
        raise StorageError(
            f"storage={config.storage}: database error: {str(e).splitlines()[0]}"
        ) from None


class TrialObjective:
    """The function Optuna calls per trial: sample, check, run in isolation, record.

    Args:
        config: the run (seed, timeout, device).
        space: the space restricted to what the device can run.
        caps: the device's capabilities.
        run_trial: runs a :class:`TrialConfig` with a timeout and returns its measurement
            (``autotune.runner.run_trial``; tests inject fakes).

    Returns (when called):
        ``(throughput_sps, val_accuracy, peak_memory_bytes)``.

    Raises (when called):
        optuna.TrialPruned: the configuration is infeasible on this device (never launched).
    """

    def __init__(
        self, config: RunConfig, space: SearchSpace, caps: DeviceCapabilities, run_trial: RunTrialFn
    ) -> None:
        self._config = config
        self._space = space
        self._caps = caps
        self._run_trial = run_trial

    def trial_config(self, trial: optuna.Trial) -> TrialConfig:
        """Ask the sampler for every knob and freeze the complete configuration."""
        knobs = {name: param.suggest(trial, name) for name, param in self._space.knobs().items()}
        return TrialConfig(
            device=self._caps.kind,  # type: ignore[arg-type]
            family=self._space.model.family,
            seed=self._config.seed + trial.number,
            train=self._space.train,
            data=self._space.data,
            measure=self._space.measure,
            **knobs,
        )

    def __call__(self, trial: optuna.Trial) -> tuple[float, float, float]:
        config = self.trial_config(trial)
        trial.set_user_attr("simulated", self._caps.simulated)
        reason = infeasibility_reason(config.knobs(), self._caps)
        if reason is not None:
            trial.set_user_attr("failure", "infeasible")
            trial.set_user_attr("failure_detail", reason)
            raise optuna.TrialPruned(reason)
        try:
            measurement = self._run_trial(config, self._config.trial.timeout_s)
        except TrialError as e:
            trial.set_user_attr("failure", e.failure)
            trial.set_user_attr("failure_detail", e.detail[-2000:])
            trial.set_constraint("failed", 1.0)
            return failed_values(self._caps.memory_bytes)
        for key, value in measurement.as_user_attrs().items():
            trial.set_user_attr(key, value)
        trial.set_constraint("failed", 0.0)
        return objective_values(measurement)
