"""autotune: a measured, multi-objective search for the fastest way to train a model.

The public API, in one place::

    import autotune

    config = autotune.load_run_config(["device=mock", "study=demo"])
    result = autotune.run_study(config, 20)  # a StudyResult; verified when it ends
    if result.verification is not None and result.verification.recommended is not None:
        print(result.verification.recommended.params)

Every name below is imported on first use (PEP 562), not by ``import autotune``: the CLI
(``autotune --help``) and every trial process import this package, and neither should pay for
torch or Optuna before it needs them.
"""

# No ``from __future__ import annotations`` here: it would add a public-looking ``annotations``
# attribute to the package; nothing below needs it.
from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from autotune.core.config import (
        RunConfig,
        SearchSpace,
        TrialConfig,
        VerifySettings,
        WorkloadSpec,
        load_run_config,
        load_space,
    )
    from autotune.core.exceptions import (
        AutotuneError,
        ConfigError,
        DataError,
        DeviceUnavailableError,
        DoorUsageError,
        StorageError,
        StudyNotFoundError,
        TrialError,
        VerificationError,
        WorkloadError,
    )
    from autotune.study.api import (
        PreparedRun,
        StudyProgress,
        StudyResult,
        VerificationProgress,
        prepare_run,
        run_study,
        verify_study,
    )
    from autotune.study.verification import CandidateVerdict, VerificationSummary
    from autotune.trial.measure import Measurement
    from autotune.trial.training import HFTrial, LightningTrial, LoopTrial
    from autotune.trial.workloads import Workload

    __version__: str

__all__ = [
    "AutotuneError",
    "CandidateVerdict",
    "ConfigError",
    "DataError",
    "DeviceUnavailableError",
    "DoorUsageError",
    "HFTrial",
    "LightningTrial",
    "LoopTrial",
    "Measurement",
    "PreparedRun",
    "RunConfig",
    "SearchSpace",
    "StorageError",
    "StudyNotFoundError",
    "StudyProgress",
    "StudyResult",
    "TrialConfig",
    "TrialError",
    "VerificationError",
    "VerificationProgress",
    "VerificationSummary",
    "VerifySettings",
    "Workload",
    "WorkloadError",
    "WorkloadSpec",
    "__version__",
    "load_run_config",
    "load_space",
    "prepare_run",
    "run_study",
    "verify_study",
]

#: Where each public name lives (the module is imported when the name is first read).
_SOURCES = {
    "AutotuneError": "autotune.core.exceptions",
    "CandidateVerdict": "autotune.study.verification",
    "ConfigError": "autotune.core.exceptions",
    "DataError": "autotune.core.exceptions",
    "DeviceUnavailableError": "autotune.core.exceptions",
    "DoorUsageError": "autotune.core.exceptions",
    "HFTrial": "autotune.trial.training",
    "LightningTrial": "autotune.trial.training",
    "LoopTrial": "autotune.trial.training",
    "Measurement": "autotune.trial.measure",
    "PreparedRun": "autotune.study.api",
    "RunConfig": "autotune.core.config",
    "SearchSpace": "autotune.core.config",
    "StorageError": "autotune.core.exceptions",
    "StudyNotFoundError": "autotune.core.exceptions",
    "StudyProgress": "autotune.study.api",
    "StudyResult": "autotune.study.api",
    "TrialConfig": "autotune.core.config",
    "TrialError": "autotune.core.exceptions",
    "VerificationError": "autotune.core.exceptions",
    "VerificationProgress": "autotune.study.api",
    "VerificationSummary": "autotune.study.verification",
    "VerifySettings": "autotune.core.config",
    "Workload": "autotune.trial.workloads",
    "WorkloadError": "autotune.core.exceptions",
    "WorkloadSpec": "autotune.core.config",
    "load_run_config": "autotune.core.config",
    "load_space": "autotune.core.config",
    "prepare_run": "autotune.study.api",
    "run_study": "autotune.study.api",
    "verify_study": "autotune.study.api",
}

#: The version when the package metadata cannot be read (a source tree that was never
#: installed); PEP 440 orders it before every release.
_UNKNOWN_VERSION = "0+unknown"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("autotune")
    except PackageNotFoundError:
        return _UNKNOWN_VERSION


def __getattr__(name: str) -> object:
    """Import a public name on first use and keep it (PEP 562).

    Raises:
        AttributeError: ``name`` is not part of the public API (the import system then looks
            for a submodule of that name).
    """
    if name == "__version__":
        value: object = _version()
    elif name in _SOURCES:
        value = getattr(_import_module(_SOURCES[name]), name)
    else:
        raise AttributeError(f"module 'autotune' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
