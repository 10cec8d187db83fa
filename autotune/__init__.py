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
    from autotune.api import (
        PreparedRun,
        StudyProgress,
        StudyResult,
        VerificationProgress,
        prepare_run,
        run_study,
        verify_study,
    )
    from autotune.config import (
        RunConfig,
        SearchSpace,
        TrialConfig,
        VerifySettings,
        WorkloadSpec,
        load_run_config,
        load_space,
    )
    from autotune.exceptions import (
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
    from autotune.measure import Measurement
    from autotune.training import HFTrial, LightningTrial, LoopTrial
    from autotune.verification import CandidateVerdict, VerificationSummary
    from autotune.workloads import Workload

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
    "AutotuneError": "autotune.exceptions",
    "CandidateVerdict": "autotune.verification",
    "ConfigError": "autotune.exceptions",
    "DataError": "autotune.exceptions",
    "DeviceUnavailableError": "autotune.exceptions",
    "DoorUsageError": "autotune.exceptions",
    "HFTrial": "autotune.training",
    "LightningTrial": "autotune.training",
    "LoopTrial": "autotune.training",
    "Measurement": "autotune.measure",
    "PreparedRun": "autotune.api",
    "RunConfig": "autotune.config",
    "SearchSpace": "autotune.config",
    "StorageError": "autotune.exceptions",
    "StudyNotFoundError": "autotune.exceptions",
    "StudyProgress": "autotune.api",
    "StudyResult": "autotune.api",
    "TrialConfig": "autotune.config",
    "TrialError": "autotune.exceptions",
    "VerificationError": "autotune.exceptions",
    "VerificationProgress": "autotune.api",
    "VerificationSummary": "autotune.verification",
    "VerifySettings": "autotune.config",
    "Workload": "autotune.workloads",
    "WorkloadError": "autotune.exceptions",
    "WorkloadSpec": "autotune.config",
    "load_run_config": "autotune.config",
    "load_space": "autotune.config",
    "prepare_run": "autotune.api",
    "run_study": "autotune.api",
    "verify_study": "autotune.api",
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
