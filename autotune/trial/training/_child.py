"""The body of a rank's child process: what runs between the fork and :func:`run_rank`.

The study process starts each rank with :func:`rank_entry` as its target
(:mod:`autotune.study.search._launcher`); the rank unpickles it from here, so a trial process imports only
the trial side (this package, preloaded by the forkserver), never the study's modules.
"""

from __future__ import annotations

import contextlib
import os
import signal
import traceback
from collections.abc import Mapping
from typing import Any

from autotune.core.config import TrialConfig
from autotune.trial.lifetime import die_with_parent, release_forkserver

__all__ = ["apply_environment", "failure_kind", "rank_entry", "run_and_report"]


#: What the CUDA libraries say when they cannot allocate device memory, as torch raises it
#: (``RuntimeError``, not ``torch.OutOfMemoryError``): cuBLAS's and cuDNN's ``ALLOC_FAILED``,
#: and a cuBLAS or cuDNN handle that fails to initialize (``cublasCreate`` and
#: ``cudnnCreate`` allocate their workspaces; under memory pressure they report
#: ``NOT_INITIALIZED``, a failure that a smaller batch or model makes go away).
_CUDA_LIBRARY_OOM = (
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
    "cudnn_status_not_initialized",
    "cublas_status_not_initialized",
)


def failure_kind(exc: BaseException) -> str:
    """``oom`` for out-of-memory errors of torch, CUDA, cuBLAS and cuDNN
    (:data:`_CUDA_LIBRARY_OOM`) or the host allocator, else ``error``."""
    if isinstance(exc, MemoryError):
        return "oom"
    name = type(exc).__name__
    text = str(exc).lower()
    if name == "OutOfMemoryError" or "out of memory" in text or "can't allocate memory" in text:
        return "oom"
    if any(status in text for status in _CUDA_LIBRARY_OOM):
        return "oom"
    return "error"


def apply_environment(env: Mapping[str, str | None]) -> None:
    """Set each variable of ``env`` in this process's environment; None unsets it."""
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def rank_entry(
    config: TrialConfig,
    rank: int,
    world_size: int,
    init_file: str,
    log_path: str,
    conn: Any,
    env: Mapping[str, str | None],
) -> None:
    """Child-process body: set the CUDA environment (before anything initializes CUDA; the
    forkserver never does), route output to a log, run the rank, send the outcome."""
    # Killed when the forkserver exits, which it does with the study: armed first, while this
    # rank's copy of the forkserver's "alive" pipe keeps the forkserver alive, then released
    # (a rank that kept it kept the forkserver, and itself, alive after kill -9 of the study).
    die_with_parent()
    release_forkserver()
    # A process group of its own, which everything this rank starts joins (its DataLoader
    # workers' forkserver, a subprocess of the user's code): the launcher ends the trial by
    # killing the whole group (study._launcher._end_trial_processes).
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    try:
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:  # the study was interrupted while this rank started; nothing to report to
        os._exit(1)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the study process decides on Ctrl-C
    apply_environment(env)
    run_and_report(config, rank, world_size, init_file, conn)


def run_and_report(
    config: TrialConfig, rank: int, world_size: int, init_file: str, conn: Any
) -> None:
    """Run the rank and send its outcome on ``conn``: ``("ok", measurement)``, or the failure's
    kind (:func:`failure_kind`) and traceback. The process group of a failed rank is destroyed
    only after the report is sent: destroying an NCCL group while other ranks wait in a
    collective can block, and the trial's out-of-memory would then read as its timeout."""
    from autotune.trial.training._rank import release_process_group, run_rank

    outcome: tuple[str, Any]
    try:
        outcome = ("ok", run_rank(config, rank, world_size, init_file))
    except BaseException as exc:  # report everything; the parent classifies it
        outcome = (failure_kind(exc), traceback.format_exc())
    try:
        conn.send(outcome)
    finally:
        conn.close()
        release_process_group()
