"""Storage URLs, checked before anything is opened (autotune/study/storage/_url.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from autotune.core.exceptions import StorageError
from autotune.study.storage import error_reason, validate_storage_url


@pytest.mark.parametrize("url", ["not a url", "nosuchdb://host/db"])
def test_bad_storage_url(url: str) -> None:
    with pytest.raises(StorageError) as err:
        validate_storage_url(url)

    message = str(err.value)
    assert message.startswith(f"storage={url}: ")
    assert "\n" not in message


def test_unknown_dialect_is_named_as_such() -> None:
    with pytest.raises(StorageError, match=r"^storage=nosuchdb://h/d: unknown database dialect"):
        validate_storage_url("nosuchdb://h/d")


def test_validating_a_url_writes_nothing(tmp_path: Path) -> None:
    validate_storage_url(f"sqlite:///{tmp_path}/sub/study.db")
    assert list(tmp_path.iterdir()) == []


SECRET = "S3cret"


@pytest.mark.parametrize(
    ("url", "shown", "rule"),
    [
        pytest.param(
            f"postgresql://alice:{SECRET}@db:notaport/x",
            "postgresql://***@db:notaport/x",
            "not a SQLAlchemy database URL",
            id="bad-port",
        ),
        pytest.param(
            f"nosuchdb://alice:{SECRET}@db/x",
            "nosuchdb://alice:***@db/x",
            "unknown database dialect",
            id="unknown-dialect",
        ),
        pytest.param(
            f"postgresql+psycopg://alice:S3/c@{SECRET}@db/x",
            "postgresql+psycopg://***@db/x",
            "an @ in the user name or password must be written %40",
            id="unescaped-at",
        ),
    ],
)
def test_a_refused_url_is_shown_without_its_password(url: str, shown: str, rule: str) -> None:
    with pytest.raises(StorageError) as err:
        validate_storage_url(url)

    assert str(err.value).startswith(f"storage={shown}: {rule}")
    assert SECRET not in str(err.value)


def test_a_database_error_is_shown_without_the_url_or_its_password() -> None:
    url = f"postgresql+psycopg://alice:{SECRET}@db/x"
    echoed = OperationalError("connect", {}, RuntimeError(f"bad login {SECRET} for {url}\nmore"))

    assert error_reason(echoed, url) == "bad login *** for postgresql+psycopg://alice:***@db/x"
