"""Optuna's RDB storage: opening it creates the SQLite directory, or says why it cannot."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.exceptions import StorageError
from autotune.storage import open_storage


def test_open_storage_creates_the_sqlite_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a/b/study.db"

    open_storage(url)

    assert (tmp_path / "a" / "b" / "study.db").is_file()


def test_sqlite_directory_that_cannot_be_made_is_a_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")

    with pytest.raises(StorageError, match=f"^storage=sqlite:///{blocker}/study.db: "):
        open_storage(f"sqlite:///{blocker}/study.db")
