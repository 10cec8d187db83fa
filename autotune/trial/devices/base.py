"""The small interface a real device implements for the training loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from autotune.core.nvml import GpuWindowMeter

__all__ = ["Backend"]


class Backend(Protocol):
    """What differs between real devices inside one trial process.

    Attributes:
        kind: ``cpu`` or ``cuda``.
        ddp_backend: torch.distributed backend (``gloo`` on CPU, ``nccl`` on CUDA).
        pin_memory: whether DataLoaders with workers pin host memory for this device; a
            DataLoader without workers never pins (PyTorch's default, the baseline's).
        memory_kind: what :meth:`peak_memory_bytes` reports (on CUDA, what its last reading
            was: with or without the memory outside the allocator).
    """

    kind: str
    ddp_backend: str
    pin_memory: bool
    memory_kind: str

    def torch_device(self) -> torch.device:
        """The ``torch.device`` this rank trains on."""
        ...

    def setup(self, rank: int, world_size: int, precision: str, num_workers: int = 0) -> None:
        """Bind the rank to its device, set its threads (``world_size`` ranks, each with
        ``num_workers`` DataLoader workers) and the precision's flags (TF32 for ``tf32``)."""
        ...

    def synchronize(self) -> None:
        """Wait for all queued work on the device (before any clock read)."""
        ...

    def reset_peak_memory(self) -> None:
        """Start the peak-memory window (after data is loaded, before the model is built)."""
        ...

    def restart_peak_memory(self) -> int | None:
        """End the warm-up's peak-memory window and start the timed steps' (memory still
        held stays counted): the warm-up's peak in bytes, or None where one window covers
        the whole trial."""
        ...

    def peak_memory_bytes(self) -> int:
        """Peak memory since :meth:`restart_peak_memory` (or :meth:`reset_peak_memory`
        where the device keeps one window), in bytes; on CUDA with the memory the process
        holds outside the allocator (NVML), then ``memory_kind`` says so."""
        ...

    def memory_figures(self) -> dict[str, Any]:
        """This rank's figures of the last :meth:`peak_memory_bytes` beside the peak (CUDA:
        NVML's ``process_memory_bytes`` and ``gpu_context_bytes``, or
        ``process_memory_error``); empty where there are none (the CPU)."""
        ...

    def gpu_meter(self, world_size: int) -> GpuWindowMeter | None:
        """NVML's meter of power and utilization over every rank's device, read by rank 0
        (:class:`autotune.core.nvml.GpuWindowMeter`); None where the device has no such telemetry
        (the CPU) or NVML is absent."""
        ...
