"""``autotune report``: from a study in a database to the HTML file."""

from __future__ import annotations

import re
from pathlib import Path

from autotune.core.exceptions import ConfigError
from autotune.study.report._data import ReportData, gather_report
from autotune.study.report._html import write_report
from autotune.study.storage import ResultsStore, load_existing_study

__all__ = ["default_report_path", "report_study"]


def default_report_path(study_name: str) -> Path:
    """``STUDY-report.html`` in the working directory, with unsafe characters replaced."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", study_name).strip("._") or "study"
    return Path(f"{safe}-report.html")


def report_study(study_name: str, storage: str, out: Path | None = None) -> tuple[ReportData, Path]:
    """Gather a study's data (its newest finished verification included) and write its
    self-contained HTML report.

    Args:
        study_name: the Optuna study name.
        storage: the storage URL.
        out: the HTML file (default :func:`default_report_path`).

    Returns:
        The gathered data and the path written.

    Raises:
        StudyNotFoundError: no such study (nothing is written).
        StorageError: the database cannot be read.
        ConfigError: ``out`` cannot be written.
    """
    study = load_existing_study(study_name, storage)
    with ResultsStore.open(storage, create=False) as results:
        data = gather_report(study, results)
    path = out if out is not None else default_report_path(study_name)
    if path.is_dir():
        raise ConfigError(f"--out {path}: is a directory; give a file name such as report.html")
    try:
        return data, write_report(data, path)
    except OSError as e:
        raise ConfigError(f"--out {path}: cannot write the report ({e.strerror or e})") from None
