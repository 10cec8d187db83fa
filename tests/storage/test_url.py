"""Storage URLs, checked before anything is opened (autotune/storage/_url.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.exceptions import StorageError
from autotune.storage import validate_storage_url


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
