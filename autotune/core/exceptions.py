"""The errors autotune raises.

::

    AutotuneError                 base of everything below
    ├── ConfigError               bad space file, override or option (CLI exit code 2)
    │   ├── DeviceUnavailableError  asked for a device this machine does not have
    │   └── WorkloadError         a workload that cannot be imported, or whose model cannot be
    │                             built with the space's knobs
    ├── DataError                 a data set that is missing or corrupt (CLI exit code 2)
    ├── StorageError              the study database cannot be reached or used (CLI exit code 2)
    │   └── StudyNotFoundError    no study of that name in the database
    ├── VerificationError         a study cannot be verified (no measured baseline, no stored
    │                             configuration) (CLI exit code 2)
    ├── TrialError                a trial could not produce a measurement (recorded, not raised
    │                             out of a study)
    └── DoorUsageError            a door's hooks misused in the user's code (trial.prepare()
                                  twice, trial.steps() never iterated, no trial.report()):
                                  the trial fails with the message, which names the call

    SurplusTrial                  not an error: a trial the study no longer needs stops
                                  without running (inside the study; not exported)

Every message is one line that names the file or key and the rule that was broken.
"""

from __future__ import annotations

__all__ = [
    "AutotuneError",
    "ConfigError",
    "DataError",
    "DeviceUnavailableError",
    "DoorUsageError",
    "StorageError",
    "StudyNotFoundError",
    "TrialError",
    "VerificationError",
    "WorkloadError",
]


class AutotuneError(Exception):
    """Base class of every error autotune raises on purpose."""


class ConfigError(AutotuneError, ValueError):
    """A search space, override or option breaks a rule; the message names which."""


class DeviceUnavailableError(ConfigError):
    """The requested device (e.g. ``device=cuda``) is not present on this machine."""


class WorkloadError(ConfigError):
    """A workload reference that does not resolve, an object that is not a workload, or a
    model its ``build_model`` cannot build with the space's knobs; the message names the
    space file, the key and the rule."""


class DataError(AutotuneError, ValueError):
    """A data set is missing, unreadable or corrupt (e.g. a bad IDX header)."""


class StorageError(AutotuneError):
    """The study storage URL is malformed or the database cannot be reached."""


class StudyNotFoundError(StorageError):
    """No study of that name exists in the storage (CLI exit code 2)."""


class VerificationError(AutotuneError):
    """A study cannot be verified: no measured baseline, or a finalist without its stored
    configuration; the message says which trial and why."""


class TrialError(AutotuneError):
    """A trial failed to produce a measurement.

    Attributes:
        failure: the failure kind: ``oom``, ``error``, ``crash``, ``timeout`` or ``infeasible``.
        detail: the last lines of the trial's error output.
    """

    def __init__(self, failure: str, detail: str) -> None:
        super().__init__(f"{failure}: {detail.strip().splitlines()[-1] if detail.strip() else ''}")
        self.failure = failure
        self.detail = detail


class SurplusTrial(Exception):
    """A trial asked for after the study's target was claimed by other workers; not run."""


class DoorUsageError(AutotuneError):
    """The user's code used a door's hooks out of their rules (``trial.prepare()`` called
    twice, ``trial.steps()`` never iterated or left early, no ``trial.report()``, a
    ``transformers.Trainer`` built without the arguments autotune mapped); the one-line
    message names the call and what to do instead. Inside a trial it fails that trial
    (``failure=error``)."""
