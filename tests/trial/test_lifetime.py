"""Processes that die with the study (autotune/trial/lifetime.py). The whole chain, after ``kill
-9`` of a real run, is tested in tests/study/api/test_robustness.py."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.trial.lifetime import die_with_parent, die_with_rank

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
#: ``PR_GET_PDEATHSIG`` from ``<linux/prctl.h>``.
_PR_GET_PDEATHSIG = 2


def _armed_signal() -> int:
    """The parent-death signal armed in this process (0: none)."""
    value = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_GET_PDEATHSIG, ctypes.byref(value))
    return value.value


def _as_a_worker(rank_pid: int) -> None:
    """A forked DataLoader worker's ``worker_init_fn``; exits 0 if it armed SIGKILL."""
    die_with_rank(rank_pid, "fork", 0)
    os._exit(0 if _armed_signal() == signal.SIGKILL else 2)


def _exit_code_of_forked_worker(rank_pid: int) -> int | None:
    proc = multiprocessing.get_context("fork").Process(target=_as_a_worker, args=(rank_pid,))
    proc.start()
    proc.join(timeout=30)
    return proc.exitcode


@LINUX
def test_die_with_parent_arms_sigkill_in_a_child() -> None:
    proc = multiprocessing.get_context("fork").Process(
        target=lambda: os._exit(0 if die_with_parent() and _armed_signal() == signal.SIGKILL else 2)
    )
    proc.start()
    proc.join(timeout=30)
    assert proc.exitcode == 0


@LINUX
def test_a_forked_worker_of_a_live_rank_is_armed() -> None:
    assert _exit_code_of_forked_worker(os.getpid()) == 0


@LINUX
def test_a_forked_worker_whose_rank_died_before_it_was_armed_exits() -> None:
    # Its parent is not the rank it was made for: that rank is gone, the worker goes too.
    assert _exit_code_of_forked_worker(os.getppid()) == 1


#: Run in a fresh interpreter (this process's own forkserver is left alone): a forkserver's
#: child holds the forkserver's "alive" pipe until it releases it, after arming the signal.
_FORKSERVER_CHILD = """
import multiprocessing, os, sys
from multiprocessing import forkserver

from autotune.trial.lifetime import die_with_rank


def child(conn):
    fd = forkserver._forkserver._forkserver_alive_fd
    die_with_rank(-1, "forkserver", 0)  # its parent is the forkserver, never the rank
    try:
        os.fstat(fd)
        closed = False
    except OSError:
        closed = True
    conn.send((fd is not None, closed, forkserver._forkserver._forkserver_alive_fd))


if __name__ == "__main__":
    ctx = multiprocessing.get_context("forkserver")
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=child, args=(writer,))
    proc.start()
    print(reader.recv())
    proc.join()
    sys.exit(proc.exitcode)
"""


@LINUX
def test_a_forkserver_child_releases_the_forkserver(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(_FORKSERVER_CHILD)
    path = [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))},
    )

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(True, True, None)"
