"""Storage URLs: checked before anything is opened, created or printed."""

from __future__ import annotations

import sqlalchemy
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from autotune.exceptions import StorageError

__all__ = ["validate_storage_url"]

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


def _missing_driver_message(url: str, backend: str, driver: str, error: ImportError) -> str:
    """One line saying which driver package to install (or why the driver fails to import)."""
    database = _DATABASE_NAMES.get(backend, backend)
    package = _DRIVER_PACKAGES.get(driver)
    if not isinstance(error, ModuleNotFoundError) or package is None:
        return f"storage={url}: the {database} driver {driver} cannot be imported ({error})"
    # mysqlclient builds against the MySQL client library; PyMySQL is pure Python.
    alternative = (
        f", or use {backend}+pymysql:// with pip install pymysql"
        if driver == "mysqldb" and backend in ("mysql", "mariadb")
        else ""
    )
    return (
        f"storage={url}: the {database} driver is not installed "
        f"(pip install {package}{alternative})"
    )


def validate_storage_url(url: str) -> None:
    """Check that ``url`` parses as a SQLAlchemy URL with a known dialect whose driver is
    installed; writes nothing and connects to nothing.

    SQLAlchemy imports a driver only when an engine is created, so a missing one (``mysql://``
    needs ``mysqlclient``) would otherwise surface as a ``ModuleNotFoundError`` traceback.

    Raises:
        StorageError: a malformed URL, an unknown database dialect, or a driver that is not
            installed (the message names the package to install).
    """
    try:
        parsed = make_url(url)
        dialect = parsed.get_dialect()
    # NoSuchModuleError subclasses ArgumentError, so it is caught first.
    except (ImportError, sqlalchemy.exc.NoSuchModuleError) as e:
        raise StorageError(f"storage={url}: unknown database dialect or driver ({e})") from None
    except (ArgumentError, ValueError) as e:
        raise StorageError(f"storage={url}: not a SQLAlchemy database URL ({e})") from None
    try:
        dialect.import_dbapi()
    except ImportError as e:
        message = _missing_driver_message(
            url, parsed.get_backend_name(), parsed.get_driver_name(), e
        )
        raise StorageError(message) from None
