"""The entry points the CLI and Python users share: :func:`prepare_run` validates a run
before anything is written, :func:`run_study` runs (or resumes) a study and then verifies
it, :func:`verify_study` verifies a stored study.

One private module per job: ``_prepare`` (validation), ``_verify`` (verification rounds),
``_mfu`` (MFU added to each measurement) and ``_run`` (the study loop, which uses the others).
"""

from autotune.study.api._prepare import PreparedRun, prepare_run
from autotune.study.api._run import StudyProgress, StudyResult, run_study
from autotune.study.api._verify import VerificationProgress, verify_study

__all__ = [
    "PreparedRun",
    "StudyProgress",
    "StudyResult",
    "VerificationProgress",
    "prepare_run",
    "run_study",
    "verify_study",
]
