"""The Optuna callback that writes one results row per finished trial.

It runs in the study's own process, after Optuna has stored the trial: the trial process
never touches the database.
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial

from autotune.core.config import RunConfig
from autotune.core.hardware import DeviceCapabilities
from autotune.study.objectives import (
    objective_mode,
    objectives_of_study,
    study_metric,
    study_target,
)
from autotune.study.storage._fingerprint import hardware_fingerprint
from autotune.study.storage._store import ResultsStore
from autotune.study.storage.records import (
    FINISHED_STATES,
    HardwareFingerprint,
    StudyRecord,
    TrialRecord,
    trial_record,
)
from autotune.study.trial_result import StudyAttributes

__all__ = ["ResultsCallback", "open_results_for_run"]


class ResultsCallback:
    """Optuna callback: writes the results row of each trial that finishes, with the
    configuration the trial stored as it ran (:data:`~autotune.study.trial_result.TRIAL_CONFIG_ATTR`;
    a trial without one keeps its knobs only).

    Args:
        store: the results store (open with ``create=True``).
        study_name: the Optuna study name (already recorded with ``record_study``).
        hardware: the machine the trials run on.
    """

    def __init__(
        self,
        store: ResultsStore,
        study_name: str,
        hardware: HardwareFingerprint | None,
    ) -> None:
        self.store = store
        self.study_name = study_name
        self.hardware = hardware

    def record(self, trial: FrozenTrial) -> TrialRecord:
        """The results row of ``trial`` (pure)."""
        return trial_record(self.study_name, trial)  # with the configuration it stored

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if trial.state in FINISHED_STATES:
            self.store.record_trials([self.record(trial)], self.hardware)

    def sync(self, study: optuna.Study) -> int:
        """Write the rows of finished trials that have none yet (a run killed between Optuna's
        write and ours, or a study from before the results tables).

        Returns:
            The number of rows written.
        """
        have = self.store.recorded_trial_numbers(self.study_name)
        missing = [
            t
            for t in study.get_trials(deepcopy=False, states=FINISHED_STATES)
            if t.number not in have
        ]
        if not missing:
            return 0
        # Which machine ran them is not known here: their hardware stays empty.
        return self.store.record_trials([self.record(t) for t in missing], None)


def open_results_for_run(
    config: RunConfig,
    caps: DeviceCapabilities,
    study: optuna.Study,
) -> ResultsCallback:
    """Create or upgrade the results tables, record the study and this machine, write the rows
    of finished trials that lack one, and return the callback for the coming trials.

    Args:
        config: the run.
        caps: the device the trials run on; its ``fingerprint`` is the machine stored with
            the rows when the study recorded none (neither: the rows have no hardware).
        study: the opened Optuna study.

    Raises:
        StorageError: the database failed.
    """
    # The machine fingerprint the study recorded (``autotune.core.hardware.check_study_hardware``),
    # the newest one where the study moved machines; else the one detected with ``caps``.
    recorded = StudyAttributes.from_study(study).latest_hardware
    machine = recorded if recorded is not None else caps.fingerprint
    hardware = hardware_fingerprint(caps, machine) if machine is not None else None
    metric = study_metric(study)  # the workload's, as Optuna and the study record keep it
    store = ResultsStore.open(config.storage, create=True)
    store.record_study(
        StudyRecord(
            study_name=study.study_name,
            space_name=config.space.name,
            space_source=config.space_source,
            device_kind=caps.kind,
            simulated=caps.simulated,
            sampler=config.sampler,
            seed=config.seed,
            created_at=None,
            hardware=hardware,
            metric_name=metric.name,
            metric_direction=metric.direction,
            objective=objective_mode(objectives_of_study(study)),
            target=study_target(study),
        )
    )

    callback = ResultsCallback(store, study.study_name, hardware)
    callback.sync(study)
    return callback
