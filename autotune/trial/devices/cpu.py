"""The CPU backend: real training with gloo for DDP; memory is the peak RSS growth."""

from __future__ import annotations

import os
from typing import Any

import torch

from autotune.core.hardware import study_workers
from autotune.core.nvml import GpuWindowMeter
from autotune.trial.measure import current_rss_bytes, peak_rss_bytes, reset_peak_rss

__all__ = ["CpuBackend"]


class CpuBackend:
    """Trains on the host CPU. See :class:`autotune.trial.devices.base.Backend`.

    Each of ``world_size`` ranks gets ``cores // world_size`` intra-op threads, so ranks do not
    oversubscribe the machine; divided again by the study's worker processes on this host
    (:func:`autotune.core.hardware.study_workers`), whose trials run beside this one. Peak memory is the process's peak RSS above its RSS when
    :meth:`reset_peak_memory` was called (DataLoader worker processes are not included).
    """

    kind = "cpu"
    ddp_backend = "gloo"
    pin_memory = False
    memory_kind = "cpu_peak_rss_growth"

    def __init__(self) -> None:
        self._baseline_bytes = 0

    def torch_device(self) -> torch.device:
        return torch.device("cpu")

    def setup(self, rank: int, world_size: int, precision: str, num_workers: int = 0) -> None:
        ranks = world_size * study_workers(os.environ)  # every worker's trial on this host
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // ranks))

    def synchronize(self) -> None:
        return None

    def reset_peak_memory(self) -> None:
        reset_peak_rss()
        self._baseline_bytes = current_rss_bytes()

    def restart_peak_memory(self) -> int | None:
        """None: the CPU keeps one window, the peak RSS growth since the trial began (RSS has
        no reset that keeps what is held; a CPU has no autotuning workspaces to leave out)."""
        return None

    def peak_memory_bytes(self) -> int:
        return max(0, peak_rss_bytes() - self._baseline_bytes)

    def memory_figures(self) -> dict[str, Any]:
        return {}

    def gpu_meter(self, world_size: int) -> GpuWindowMeter | None:
        return None
