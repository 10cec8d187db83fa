"""Engines and the one unit-of-work helper every results-table access goes through."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from autotune.core.config import display_url
from autotune.core.exceptions import StorageError
from autotune.study.storage._url import error_reason

__all__ = ["SQLITE_BUSY_TIMEOUT_S", "create_results_engine", "session_scope", "sqlite_path"]

#: Seconds a SQLite connection waits for another writer's lock (Optuna's storage and the
#: results tables alike; pysqlite's default is 5 s).
SQLITE_BUSY_TIMEOUT_S = 30.0


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL, or None for other databases and in-memory SQLite."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser()


def create_results_engine(url: str) -> Engine:
    """An engine for the results tables at ``url`` (the study storage URL).

    Raises:
        StorageError: the URL cannot be used by SQLAlchemy.
    """
    try:
        if make_url(url).get_backend_name() == "sqlite":
            return create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        return create_engine(url, pool_pre_ping=True)
    except (SQLAlchemyError, ImportError, ValueError) as e:
        reason = error_reason(e, url)
        raise StorageError(
            f"storage={display_url(url)}: cannot open the database: {reason}"
        ) from None


def _reason(error: SQLAlchemyError) -> str:
    orig = getattr(error, "orig", None)
    return str(orig if orig is not None else error).strip().splitlines()[0]


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error.

    Yields:
        A session whose objects stay readable after the commit.

    Raises:
        StorageError: a database error (the SQLAlchemy error is chained as its cause).
    """
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except SQLAlchemyError as e:
        session.rollback()
        raise StorageError(f"results tables: database error: {_reason(e)}") from e
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
