"""Optuna's RDB storage: checking that a database answers, whether it holds a study (and one
of its user attributes), and opening it with heartbeats; nothing here writes until
:func:`open_storage`."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import optuna
import sqlalchemy
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from autotune.core.config import display_url
from autotune.core.exceptions import StorageError
from autotune.study.storage._session import SQLITE_BUSY_TIMEOUT_S
from autotune.study.storage._url import error_reason, validate_storage_url

_T = TypeVar("_T")

__all__ = ["check_storage_reachable", "open_storage", "stored_study_attr", "study_exists"]


def _check_sqlite_directory(url: str, database: str | None) -> None:
    """The SQLite file's directory exists or can be created (checked without creating it)."""
    if database in (None, "", ":memory:"):
        return
    ancestor = Path(database).expanduser().absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise StorageError(
            f"storage={display_url(url)}: {ancestor} is a file, so the database directory cannot be made"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise StorageError(f"storage={display_url(url)}: no permission to write in {ancestor}")


def check_storage_reachable(url: str, timeout_s: int = 10) -> None:
    """Connect once to a database server (not SQLite: its file is created on open); writes nothing.

    Raises:
        StorageError: the server does not answer or refuses the connection.
    """
    validate_storage_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        _check_sqlite_directory(url, parsed.database)
        return
    connect_args = (
        {"connect_timeout": timeout_s}
        if parsed.get_backend_name() in ("postgresql", "mysql")
        else {}
    )
    engine = sqlalchemy.create_engine(url, connect_args=connect_args)
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as e:
        reason = error_reason(e, url)
        raise StorageError(
            f"storage={display_url(url)}: cannot reach the database: {reason}"
        ) from None
    finally:
        engine.dispose()


#: Optuna's table of studies and its name column (``optuna/storages/_rdb/models.py``, the
#: same since Optuna 1.0), read directly so that checking a name creates nothing.
_OPTUNA_STUDIES_TABLE = "studies"


#: Optuna's table of study user attributes (``study_id``, ``key``, ``value_json``; the same
#: since Optuna 1.0).
_OPTUNA_STUDY_ATTRS_TABLE = "study_user_attributes"


def _read_only(url: str, read: Callable[[sqlalchemy.Connection], _T], missing: _T) -> _T:
    """``read(connection)`` on the database at ``url``, or ``missing`` where there is no
    database or no Optuna studies table; creates nothing.

    Raises:
        StorageError: the database cannot be read.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            return missing  # a new, empty database on every connection
        if not Path(parsed.database).expanduser().is_file():
            return missing
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as connection:
            if not sqlalchemy.inspect(connection).has_table(_OPTUNA_STUDIES_TABLE):
                return missing
            return read(connection)
    except SQLAlchemyError as e:
        reason = error_reason(e, url)
        raise StorageError(
            f"storage={display_url(url)}: cannot read the database: {reason}"
        ) from None
    finally:
        engine.dispose()


def study_exists(url: str, study_name: str) -> bool:
    """Whether Optuna's storage at ``url`` holds ``study_name``, read without writing anything:
    a SQLite file that is not there is not created, nor are Optuna's tables where they are
    missing (opening ``RDBStorage`` would do both).

    Raises:
        StorageError: the database cannot be read.
    """

    def read(connection: sqlalchemy.Connection) -> bool:
        query = sqlalchemy.text(f"SELECT 1 FROM {_OPTUNA_STUDIES_TABLE} WHERE study_name = :name")
        return connection.execute(query, {"name": study_name}).first() is not None

    return _read_only(url, read, False)


def stored_study_attr(url: str, study_name: str, key: str) -> Any | None:
    """The study user attribute ``key`` of ``study_name`` (decoded JSON), or None where the
    study or the attribute is not there; read without writing anything (as
    :func:`study_exists`).

    Raises:
        StorageError: the database cannot be read.
    """

    def read(connection: sqlalchemy.Connection) -> Any | None:
        query = sqlalchemy.text(
            f"SELECT a.value_json FROM {_OPTUNA_STUDY_ATTRS_TABLE} a "
            f"JOIN {_OPTUNA_STUDIES_TABLE} s ON a.study_id = s.study_id "
            "WHERE s.study_name = :name AND a.key = :key"
        )
        row = connection.execute(query, {"name": study_name, "key": key}).first()
        return None if row is None else json.loads(row[0])

    return _read_only(url, read, None)


def _serialize_sqlite_transactions(engine: sqlalchemy.Engine) -> None:
    """Make every transaction on a SQLite ``engine`` take the write lock when it begins.

    pysqlite opens a transaction only at the first write, so Optuna's read-then-write of a
    queued trial (``Study.ask`` pops a WAITING trial: ``SELECT ... FOR UPDATE``, which SQLite
    ignores, then ``UPDATE`` to RUNNING) reads outside any transaction: two worker processes
    both saw the trial waiting and both ran it (optuna/optuna#4621). ``BEGIN IMMEDIATE`` at
    the start of each transaction serializes them; a waiting writer waits up to the busy
    timeout. This is SQLAlchemy's documented recipe for pysqlite's transactions
    ("Serializable isolation / Savepoints / Transactional DDL"), with IMMEDIATE so that a
    read that goes on to write never deadlocks on the lock upgrade. Connections pooled before
    the listeners existed are closed.
    """

    @event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection: sqlalchemy.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()


def open_storage(url: str, heartbeat_s: int = 10) -> RDBStorage:
    """Open (and create if needed) Optuna's RDB storage at ``url``.

    A SQLite file's directory is created if missing. A running trial beats every
    ``heartbeat_s`` seconds; one silent for three beats (its process was killed) is marked
    failed and its configuration is queued again once (``RetryHeartbeatStaleTrialCallback``).
    On a SQLite file every transaction takes the write lock when it begins, so worker processes
    never both run one queued trial (:func:`_serialize_sqlite_transactions`); the returned
    storage keeps that only in this process (a pickled copy rebuilds its engine without it).

    Raises:
        StorageError: malformed URL or a database that cannot be reached.
    """
    validate_storage_url(url)
    parsed = make_url(url)
    # SQLite: wait as long as the results tables do for another writer's lock
    # (pysqlite's default is 5 s; a study's heartbeat thread, its results callback and its
    # workers all write to the one file).
    sqlite = parsed.get_backend_name() == "sqlite"
    engine_kwargs = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}} if sqlite else None
    sqlite_file = sqlite and parsed.database not in (None, "", ":memory:")
    try:
        if sqlite_file:
            Path(str(parsed.database)).expanduser().parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():  # heartbeats are "experimental" since Optuna 2.9
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=heartbeat_s,
                grace_period=3 * heartbeat_s,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1),
            )
        if sqlite_file:  # (an in-memory database lives in one process, and dies with its pool)
            _serialize_sqlite_transactions(storage.engine)
        return storage
    except (SQLAlchemyError, OSError) as e:
        reason = error_reason(e, url)
        raise StorageError(
            f"storage={display_url(url)}: cannot open the database: {reason}"
        ) from None
