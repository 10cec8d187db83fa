"""Opening an existing study database for reading (report, dashboard, best, ls, export)."""

from __future__ import annotations

import optuna
from optuna.storages import RDBStorage
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from autotune.core.config import display_url
from autotune.core.exceptions import StorageError, StudyNotFoundError
from autotune.study.storage._session import sqlite_path
from autotune.study.storage._url import error_reason, validate_storage_url

__all__ = ["load_existing_study", "open_existing_storage", "storage_location", "study_names"]


def storage_location(url: str) -> str:
    """Where a storage URL points, as messages name it: the URL with its password masked
    (:func:`~autotune.core.config.display_url`), and for a SQLite file given by a relative (or
    ``~``) path also the absolute file it resolves to from this working directory:
    ``sqlite:///storage/autotune.db (/home/u/proj/storage/autotune.db)``.

    Args:
        url: the storage URL (any text; one that does not parse is only masked).
    """
    shown = display_url(url)
    try:
        path = sqlite_path(url)
        written = make_url(url).database
    except (ArgumentError, ValueError):  # not a URL: validate_storage_url says so elsewhere
        return shown
    if path is None or written == str(path.absolute()):
        return shown
    return f"{shown} ({path.absolute()})"


def open_existing_storage(url: str) -> RDBStorage:
    """Open Optuna's storage at ``url`` without creating a database that is not there.

    Raises:
        StorageError: a malformed URL, a SQLite file that does not exist, or a database that
            cannot be read.
    """
    validate_storage_url(url)
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise StorageError(
            f"storage={display_url(url)}: no database file at {path.absolute()} "
            "(run a study there first with `autotune run`, or pass storage=URL)"
        )
    try:
        return RDBStorage(url)
    except SQLAlchemyError as e:
        reason = error_reason(e, url)
        raise StorageError(
            f"storage={display_url(url)}: cannot open the database: {reason}"
        ) from None


def study_names(storage: RDBStorage) -> list[str]:
    """Names of every study in the storage, oldest first."""
    return optuna.get_all_study_names(storage)


def load_existing_study(
    study_name: str, url: str, storage: RDBStorage | None = None
) -> optuna.Study:
    """Load the study ``study_name`` for reading.

    Args:
        study_name: the Optuna study name.
        url: the storage URL.
        storage: an already open storage for ``url`` (opened here when None).

    Raises:
        StudyNotFoundError: there is no such study; the message lists the ones there are.
        StorageError: the database cannot be opened.
    """
    storage = storage or open_existing_storage(url)
    names = study_names(storage)
    if study_name not in names:
        known = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "") if names else "none"
        raise StudyNotFoundError(
            f"study={study_name}: no such study in {storage_location(url)}; studies there: {known}"
        )
    return optuna.load_study(study_name=study_name, storage=storage)
