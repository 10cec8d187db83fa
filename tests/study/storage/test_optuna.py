"""Optuna's RDB storage: opening it creates the SQLite directory, or says why it cannot;
worker processes on one SQLite file never pop the same queued trial; reading a study's
attribute creates nothing."""

from __future__ import annotations

import multiprocessing
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


def _ask_and_tell(url: str, asks: int, numbers: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name="q", storage=open_storage(url))
    asked = []
    for _ in range(asks):
        trial = study.ask()
        asked.append(trial.number)
        study.tell(trial, 1.0)
    numbers.put(asked)


def test_worker_processes_on_one_sqlite_file_never_pop_the_same_queued_trial(
    tmp_path: Path,
) -> None:
    # Without BEGIN IMMEDIATE, pysqlite reads the WAITING trial outside any transaction:
    # two processes both set it RUNNING, and the second `tell` raised "Cannot tell a
    # COMPLETE trial" (optuna/optuna#4621); 4 x 60 asks crashed 2 runs of 2 before the fix.
    url = f"sqlite:///{tmp_path}/queue.db"
    study = optuna.create_study(study_name="q", storage=open_storage(url))
    for x in range(200):
        study.enqueue_trial({"x": x}, skip_if_exists=False)
    context = multiprocessing.get_context("fork")
    numbers = context.Queue()
    workers = [context.Process(target=_ask_and_tell, args=(url, 40, numbers)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)

    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    asked = [number for _ in workers for number in numbers.get(timeout=10)]
    assert len(asked) == 160
    assert len(set(asked)) == 160
    assert all(t.state.name == "COMPLETE" for t in study.trials if t.number in set(asked))


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
