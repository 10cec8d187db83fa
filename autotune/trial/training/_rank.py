"""One rank of a trial, in its child process: :func:`run_rank` builds the trial's backend,
runs its door (the workload's loops, the user's loop, Trainer or Lightning module) in a
process group when the trial has more than one rank, and returns the rank's
:class:`~autotune.trial.measure.Measurement`; :func:`compile_cache_figures` adds what
torch.compile's caches did, and :func:`release_process_group` ends the group."""

from __future__ import annotations

import gc
import os
import signal
import time
import typing
from dataclasses import replace

import torch.distributed as dist

from autotune.trial.devices import make_backend
from autotune.trial.devices.cuda import combine_rank_memory
from autotune.trial.training._guide import apply_process_knobs
from autotune.trial.training._hf import run_hf_trainer
from autotune.trial.training._lightning import run_lightning
from autotune.trial.training._loop import run_loop
from autotune.trial.training._setup import prepare_training
from autotune.trial.training._throughput import train_for_throughput
from autotune.trial.training._to_target import train_to_target
from autotune.trial.workloads import load_workload

if typing.TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from autotune.core.config import TrialConfig
    from autotune.trial.devices import Backend
    from autotune.trial.measure import Measurement


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
        Exception: whatever the workload raises (the launcher records it as ``failure=error``).
            A rank that raises leaves its process group up: the caller reports the failure
            first, then calls :func:`release_process_group` (destroying an NCCL group while
            the other ranks wait in a collective can block, and the failure would then read
            as the trial's timeout).
    """
    if config.device == "mock":
        from autotune.trial.devices.mock import simulate

        _inject_fault(config.mock_fault)
        return simulate(config)
    backend = make_backend(config.device)
    backend.setup(rank, world_size, config.precision, config.num_workers)
    apply_process_knobs(config.cpu_threads, config.cudnn_benchmark, backend.kind)
    if world_size > 1:
        if init_file is None:
            raise ValueError("world_size > 1 needs init_file for the rendezvous")
        dist.init_process_group(
            backend.ddp_backend, init_method=f"file://{init_file}", rank=rank, world_size=world_size
        )
    measurement = _run_in_group(config, backend, rank, world_size)
    release_process_group()  # only after success: a failed rank reports first (see Raises)
    return measurement


def release_process_group() -> None:
    """Destroy this process's default process group, if one is up (DDP ranks)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _run_in_group(
    config: TrialConfig, backend: Backend, rank: int, world_size: int
) -> Measurement | None:
    """:func:`run_rank`'s body once the rank is in its process group (when ``world_size`` >
    1): train, then combine the ranks' figures on rank 0."""
    # Rank 0 measures the other processes' CPU share against every rank's tree: the ranks
    # are siblings (children of the forkserver), so their ids are gathered here.
    pids: list[Any] = [os.getpid()]
    if world_size > 1:
        pids = [None] * world_size
        dist.all_gather_object(pids, os.getpid())
    local = _train(config, backend, rank, world_size, tuple(pids))
    if rank == 0 and config.compile_mode != "none":
        local = _with_extra(local, compile_cache_figures())
    if world_size == 1:
        return _with_extra(local, combine_rank_memory([backend.memory_figures()]))
    # The DDP reducer must be gone before the process group: freed after it, gloo's
    # destructor joins a worker thread that waits for the GIL the freeing thread holds
    # (a deadlock seen in about one run of three).
    gc.collect()
    gathered: list[Any] = [None] * world_size
    mine = (local.peak_memory_bytes, local.memory_kind, backend.memory_figures())
    dist.all_gather_object(gathered, mine)
    if rank != 0:
        return None
    # CPU ranks share one host, so their memory adds up; each GPU holds its own rank.
    combine = sum if backend.kind == "cpu" else max
    kinds = {kind for _, kind, _ in gathered}
    combined = replace(
        local,
        peak_memory_bytes=int(combine(peak for peak, _, _ in gathered)),
        # Ranks with and without NVML's figure (rare): the peak mixes both kinds.
        memory_kind=kinds.pop() if len(kinds) == 1 else f"{backend.kind}_mixed",
    )
    return _with_extra(combined, combine_rank_memory([figures for _, _, figures in gathered]))


def _with_extra(measurement: Measurement, figures: Mapping[str, Any]) -> Measurement:
    """``measurement`` with ``figures`` added to its extra figures (the same for none)."""
    if not figures:
        return measurement
    return replace(measurement, extra={**measurement.extra, **figures})


def compile_cache_figures(
    counters: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """Whether this process's torch.compile found its graphs in Inductor's FX graph cache.

    Read from Dynamo's counters (``torch._dynamo.utils.counters["inductor"]``, whose
    ``fxgraph_cache_hit`` and ``fxgraph_cache_miss`` count the compiled graphs found and not
    found in the cache: torch 2.4 to 2.13 keep those names), which start at 0 in each trial
    process. A warm compile loads the generated code (C++ or Triton kernels already built)
    and takes a fraction of a cold one's seconds; Dynamo's tracing is paid either way.

    Args:
        counters: the counters to read; None reads Dynamo's (``{}`` when torch has none).

    Returns:
        ``compile_cache`` (``cold``: every lookup missed; ``warm``: every one hit;
        ``partly warm``), ``compile_cache_hits`` and ``compile_cache_misses``; empty when
        no graph was looked up (the cache off, nothing compiled, or counters torch no
        longer keeps under these names).
    """
    if counters is None:
        try:
            from torch._dynamo.utils import counters as dynamo_counters
        except ImportError:  # pragma: no cover (torch < 2.0)
            return {}
        counters = dynamo_counters
    inductor = counters.get("inductor") or {}
    hits = int(inductor.get("fxgraph_cache_hit", 0))
    misses = int(inductor.get("fxgraph_cache_miss", 0))
    if hits + misses == 0:
        return {}
    state = "cold" if hits == 0 else "warm" if misses == 0 else "partly warm"
    return {"compile_cache": state, "compile_cache_hits": hits, "compile_cache_misses": misses}


def _train(
    config: TrialConfig, backend: Backend, rank: int, world_size: int, rank_pids: tuple[int, ...]
) -> Measurement:
    """The trial through its door: the user's own loop (``loop``), or, for a workload, the
    objective's loop on a fresh :class:`~autotune.trial.training._setup.Training`, which is freed on
    return (with its model, DDP wrapper and optimizer)."""
    door = config.workload.door
    if door != "workload" and config.objective != "throughput":
        raise ValueError(f"objective={config.objective} needs the workload door, not {door}")
    if door == "loop":
        return run_loop(config, backend, rank, world_size, rank_pids)
    if door == "hf_trainer":
        return run_hf_trainer(config, backend, rank, world_size, rank_pids)
    if door == "lightning":
        return run_lightning(config, backend, rank, world_size, rank_pids)
    workload = load_workload(config.workload)
    training = prepare_training(config, backend, workload, rank, world_size)
    training.rank_pids = rank_pids
    if config.objective == "time_to_accuracy":
        maximize = workload.metric_direction == "maximize"
        return train_to_target(training, rank, world_size, maximize)
    return train_for_throughput(training, rank, world_size)


def _inject_fault(fault: str) -> None:
    """Fail on purpose, as the mock device's ``advanced.mock.fault`` asks (tests of failure handling)."""
    if fault == "oom":
        raise MemoryError("simulated out of memory (advanced.mock.fault=oom)")
    if fault == "error":
        raise RuntimeError("simulated error (advanced.mock.fault=error)")
    if fault == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "hang":
        while True:
            time.sleep(3600)
