"""Optuna's RDB storage: opening it creates the SQLite directory, or says why it cannot;
reading a study's attribute creates nothing."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autotune.core.exceptions import StorageError
from autotune.study.storage import open_storage, stored_study_attr, study_exists


def test_open_storage_creates_the_sqlite_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a/b/study.db"

    open_storage(url)

    assert (tmp_path / "a" / "b" / "study.db").is_file()


def test_sqlite_directory_that_cannot_be_made_is_a_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")

    with pytest.raises(StorageError, match=f"^storage=sqlite:///{blocker}/study.db: "):
        open_storage(f"sqlite:///{blocker}/study.db")


def test_stored_study_attr_reads_without_creating_anything(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a/study.db"
    assert stored_study_attr(url, "s", "autotune") is None  # no database
    assert not (tmp_path / "a").exists()
    study = optuna.create_study(study_name="s", storage=open_storage(url))
    study.set_user_attr("autotune", {"precision_screen": {"screened": ["fp16"]}})

    assert stored_study_attr(url, "s", "autotune") == {"precision_screen": {"screened": ["fp16"]}}
    assert stored_study_attr(url, "s", "other") is None
    assert stored_study_attr(url, "t", "autotune") is None
    assert study_exists(url, "s") and not study_exists(url, "t")
