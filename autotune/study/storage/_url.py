"""Storage URLs: checked before anything is opened, created or printed; shown only through
:func:`autotune.core.config.display_url` (the password masked)."""

from __future__ import annotations

import sqlalchemy
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from autotune.core.config import display_url
from autotune.core.exceptions import StorageError

__all__ = ["error_reason", "validate_storage_url"]

#: Database names for messages, by SQLAlchemy backend name.
_DATABASE_NAMES = {
    "mariadb": "MariaDB",
    "mssql": "SQL Server",
    "mysql": "MySQL",
    "oracle": "Oracle",
    "postgresql": "PostgreSQL",
    "sqlite": "SQLite",
}
#: The pip package of each SQLAlchemy driver (the ``+driver`` of a URL, or the dialect's
#: default): what to install when its module is missing.
_DRIVER_PACKAGES = {
    "aiomysql": "aiomysql",
    "asyncmy": "asyncmy",
    "asyncpg": "asyncpg",
    "cx_oracle": "cx_Oracle",
    "mariadbconnector": "mariadb",
    "mysqlconnector": "mysql-connector-python",
    "mysqldb": "mysqlclient",
    "oracledb": "oracledb",
    "pg8000": "pg8000",
    "psycopg": "psycopg[binary]",
    "psycopg2": "psycopg2-binary",
    "pymssql": "pymssql",
    "pymysql": "pymysql",
    "pyodbc": "pyodbc",
}


def error_reason(error: BaseException, url: str) -> str:
    """The first line of a database error (the driver's own, where SQLAlchemy wraps one), with
    ``url`` and its password masked should the driver have echoed them."""
    orig = getattr(error, "orig", None)
    lines = str(orig if orig is not None else error).strip().splitlines()
    reason = lines[0] if lines else type(error).__name__
    try:
        password = make_url(url).password
    except (ArgumentError, ValueError):
        password = None
    reason = reason.replace(url, display_url(url))
    return reason.replace(password, "***") if password else reason


def _missing_driver_message(url: str, backend: str, driver: str, error: ImportError) -> str:
    """One line saying which driver package to install (or why the driver fails to import)."""
    database = _DATABASE_NAMES.get(backend, backend)
    package = _DRIVER_PACKAGES.get(driver)
    shown = display_url(url)
    if not isinstance(error, ModuleNotFoundError) or package is None:
        reason = error_reason(error, url)
        return f"storage={shown}: the {database} driver {driver} cannot be imported ({reason})"
    # mysqlclient builds against the MySQL client library; PyMySQL is pure Python.
    alternative = (
        f", or use {backend}+pymysql:// with pip install pymysql"
        if driver == "mysqldb" and backend in ("mysql", "mariadb")
        else ""
    )
    return (
        f"storage={shown}: the {database} driver is not installed "
        f"(pip install {package}{alternative})"
    )


def validate_storage_url(url: str) -> None:
    """Check that ``url`` parses as a SQLAlchemy URL with a known dialect whose driver is
    installed; writes nothing and connects to nothing.

    SQLAlchemy imports a driver only when an engine is created, so a missing one (``mysql://``
    needs ``mysqlclient``) would otherwise surface as a ``ModuleNotFoundError`` traceback.

    Raises:
        StorageError: a malformed URL (an unescaped ``@`` in the password included), an
            unknown database dialect, or a driver that is not installed (the message names the
            package to install). The URL is shown with its password masked.
    """
    shown = display_url(url)
    try:
        parsed = make_url(url)
        dialect = parsed.get_dialect()
    # NoSuchModuleError subclasses ArgumentError, so it is caught first.
    except (ImportError, sqlalchemy.exc.NoSuchModuleError) as e:
        reason = error_reason(e, url)
        raise StorageError(
            f"storage={shown}: unknown database dialect or driver ({reason})"
        ) from None
    except ArgumentError:  # older SQLAlchemy versions quote the whole URL in its message
        raise StorageError(
            f"storage={shown}: not a SQLAlchemy database URL "
            "(expected dialect[+driver]://[user[:password]@]host[:port]/database)"
        ) from None
    except ValueError as e:  # a port that is not a number
        raise StorageError(
            f"storage={shown}: not a SQLAlchemy database URL ({error_reason(e, url)})"
        ) from None
    if "@" in (parsed.host or ""):  # SQLAlchemy splits at the first "@": the rest is the host
        raise StorageError(
            f"storage={shown}: an @ in the user name or password must be written %40"
        )
    try:
        dialect.import_dbapi()
    except ImportError as e:
        message = _missing_driver_message(
            url, parsed.get_backend_name(), parsed.get_driver_name(), e
        )
        raise StorageError(message) from None
