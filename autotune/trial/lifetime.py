"""Processes that die with the study: a trial's ranks and their DataLoader workers.

A trial's processes form a chain, each tied to the one before it (Linux; elsewhere these
functions do nothing):

- the study process starts a forkserver (:mod:`autotune.study.search._launcher`), which exits when every
  holder of the write end of its "alive" pipe has exited. multiprocessing hands that pipe to
  every process the forkserver starts, so each rank closes its copy
  (:func:`release_forkserver`): the forkserver then exits as soon as the study does, even
  after ``kill -9``;
- a rank is SIGKILLed when that forkserver exits (:func:`die_with_parent`, the parent-death
  signal ``PR_SET_PDEATHSIG``);
- a rank's DataLoader workers come from a second forkserver that the rank starts (a
  forkserver's child inherits its start method), and each worker does the same in its
  ``worker_init_fn`` (:func:`die_with_rank`): that forkserver exits with the rank, and the
  workers with it. Under the ``fork`` start method a worker's parent is the rank itself;
- torch.compile's worker processes need nothing of ours: inductor's compile sidecar exits
  when the pipe from its rank closes (that is, when the rank dies) and stops its pool
  (torch 2.13, ``_inductor/compile_worker/subproc_pool.py``); on the CPU it compiles in the
  rank, whose ``g++`` children finish the file they compile;
- the resource tracker exits once none of these is left to hold its pipe.

The parent-death signal fires when the *thread* that forked the process exits, not the
process: the forkservers fork from their one thread, and a rank creates its DataLoader
iterator (which forks under ``fork``) on its main thread.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any

__all__ = ["die_with_parent", "die_with_rank", "release_forkserver"]

#: ``PR_SET_PDEATHSIG`` from ``<linux/prctl.h>``.
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> bool:
    """Have the kernel SIGKILL this process when its parent exits (Linux ``prctl``
    ``PR_SET_PDEATHSIG``; more exactly, when the parent's thread that forked it exits).

    A parent that died before this call does not count: the caller checks, after this call,
    that its parent is still the one it expects (or, like a forkserver's child, holds
    something that keeps the parent alive until then).

    Returns:
        Whether the signal is armed (False off Linux, or where ``prctl`` cannot be called).
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) == 0)
    except (OSError, AttributeError):
        return False


def release_forkserver() -> bool:
    """Close this process's copy of the write end of its forkserver's "alive" pipe.

    A forkserver exits only at EOF of that pipe, once every copy is closed, and
    multiprocessing gives one to every process the forkserver starts: a child that keeps it
    keeps the forkserver alive after the process that started the forkserver has died, and
    with it the child's own parent-death signal. Call it after :func:`die_with_parent`: until
    then the copy keeps the forkserver (this process's parent) alive, so the signal is armed
    against a live parent.

    Returns:
        Whether it held a copy: a forkserver's child does, and so does a process forked
        (``fork``) from one that started a forkserver, so this does not tell them apart.
    """
    from multiprocessing import forkserver

    server: Any = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is None:
        return False
    with contextlib.suppress(OSError):
        os.close(fd)
    server._forkserver_alive_fd = None
    return True


def die_with_rank(rank_pid: int, start_method: str, worker_id: int) -> None:
    """A DataLoader ``worker_init_fn`` (bind ``rank_pid`` and ``start_method`` with
    :func:`functools.partial`): this worker is SIGKILLed when the rank that made it dies.

    A forkserver's child (the default in a rank) arms the signal against that forkserver,
    then releases it (:func:`release_forkserver`): the forkserver exits when the rank does.
    A worker started by ``fork`` or ``spawn`` has the rank as its parent: it exits at once if
    the rank died before the signal was armed.

    Args:
        rank_pid: the process ID of the rank that made the DataLoader.
        start_method: how the DataLoader starts its workers (``multiprocessing``'s start
            method in the rank: ``forkserver``, ``fork`` or ``spawn``).
        worker_id: the worker's index (DataLoader passes it; unused).
    """
    del worker_id
    armed = die_with_parent()
    if start_method == "forkserver":
        release_forkserver()
        return
    if armed and os.getppid() != rank_pid:  # the rank died before the signal was armed
        os._exit(1)
