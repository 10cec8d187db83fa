"""Build, train and evaluate one :class:`~autotune.config.TrialConfig` in this process.

This package runs inside a trial's child process (see :mod:`autotune.runner`), one
:func:`run_rank` call per DDP rank. It never sees the study: it takes a frozen config and
returns a :class:`~autotune.measure.Measurement`.

The model, its data, loss and metric come from the trial's workload, imported here by
reference (:func:`autotune.workloads.load_workload`): the model knobs ->
``workload.build_model(**knobs)``; ``workload.datasets()`` -> the training and validation
data. Parts:

- ``_setup``: what both loops share (loader, model, optimizer, schedule, autocast, the
  optimizer step, the evaluation) and how the tuner's knobs map onto PyTorch.
- ``_throughput``: ``objective=throughput``, the fixed budget with its timed windows.
- ``_to_target``: ``objective=time_to_accuracy``, training until the validation metric
  meets the target.
"""

from __future__ import annotations

import gc
import os
import signal
import time
from dataclasses import replace
from typing import Any

import torch.distributed as dist

from autotune.config import TrialConfig
from autotune.devices import Backend, make_backend
from autotune.measure import Measurement
from autotune.trial._setup import prepare_training
from autotune.trial._throughput import train_for_throughput
from autotune.trial._to_target import train_to_target
from autotune.workloads import load_workload

__all__ = ["run_rank"]


def run_rank(
    config: TrialConfig, rank: int = 0, world_size: int = 1, init_file: str | None = None
) -> Measurement | None:
    """Train and evaluate as DDP rank ``rank`` of ``world_size``.

    Args:
        config: the trial (``device`` is ``cpu``, ``cuda`` or ``mock``).
        rank: this process's rank.
        world_size: number of ranks (``config.gpu_count``).
        init_file: a path for torch.distributed's file rendezvous (needed when world_size > 1).

    Returns:
        The trial's measurement on rank 0 (figures combined over ranks), None on other ranks.

    Raises:
        torch.OutOfMemoryError, MemoryError: the device ran out of memory.
        ValueError: the batch is larger than the training split.
        Exception: whatever the workload raises (the runner records it as ``failure=error``).
    """
    if config.device == "mock":
        from autotune.devices.mock import simulate

        _inject_fault(config.mock_fault)
        return simulate(config)
    backend = make_backend(config.device)
    backend.setup(rank, world_size, config.precision, config.num_workers)
    if world_size > 1:
        if init_file is None:
            raise ValueError("world_size > 1 needs init_file for the rendezvous")
        dist.init_process_group(
            backend.ddp_backend, init_method=f"file://{init_file}", rank=rank, world_size=world_size
        )
    try:
        # Rank 0 measures the other processes' CPU share against every rank's tree: the ranks
        # are siblings (children of the forkserver), so their ids are gathered here.
        pids: list[Any] = [os.getpid()]
        if world_size > 1:
            pids = [None] * world_size
            dist.all_gather_object(pids, os.getpid())
        local = _train(config, backend, rank, world_size, tuple(pids))
        if world_size == 1:
            return local
        # The DDP reducer must be gone before the process group: freed after it, gloo's
        # destructor joins a worker thread that waits for the GIL the freeing thread holds
        # (a deadlock seen in about one run of three).
        gc.collect()
        gathered: list[Any] = [None] * world_size
        dist.all_gather_object(gathered, local.peak_memory_bytes)
        if rank != 0:
            return None
        # CPU ranks share one host, so their memory adds up; each GPU holds its own rank.
        combine = sum if backend.kind == "cpu" else max
        return replace(local, peak_memory_bytes=int(combine(gathered)))
    finally:
        if world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()


def _train(
    config: TrialConfig, backend: Backend, rank: int, world_size: int, rank_pids: tuple[int, ...]
) -> Measurement:
    """The objective's loop on a fresh :class:`~autotune.trial._setup.Training`, which is
    freed on return (with its model, DDP wrapper and optimizer)."""
    workload = load_workload(config.workload)
    training = prepare_training(config, backend, workload, rank, world_size)
    training.rank_pids = rank_pids
    if config.objective == "time_to_accuracy":
        maximize = workload.metric_direction == "maximize"
        return train_to_target(training, rank, world_size, maximize)
    return train_for_throughput(training, rank, world_size)


def _inject_fault(fault: str) -> None:
    """Fail on purpose, as the mock device's ``mock.fault`` asks (tests of failure handling)."""
    if fault == "oom":
        raise MemoryError("simulated out of memory (mock.fault=oom)")
    if fault == "error":
        raise RuntimeError("simulated error (mock.fault=error)")
    if fault == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "hang":
        while True:
            time.sleep(3600)
