"""The CUDA backend: real training on NVIDIA GPUs with nccl for DDP."""

from __future__ import annotations

import torch

from autotune.nvml import GpuWindowMeter

__all__ = ["CudaBackend"]


class CudaBackend:
    """Trains on CUDA GPU ``rank``. See :class:`autotune.devices.base.Backend`.

    Precision flags: ``tf32`` turns TF32 on for matmul and cuDNN; every other precision turns
    it off, so ``fp32`` really is IEEE fp32 (cuDNN allows TF32 by default). Peak memory is
    ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``.
    """

    kind = "cuda"
    ddp_backend = "nccl"
    pin_memory = True
    memory_kind = "cuda_allocator_peak"

    def __init__(self) -> None:
        self._device = torch.device("cuda", 0)

    def torch_device(self) -> torch.device:
        return self._device

    def setup(self, rank: int, world_size: int, precision: str) -> None:
        self._device = torch.device("cuda", rank)
        torch.cuda.set_device(self._device)
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True

    def synchronize(self) -> None:
        torch.cuda.synchronize(self._device)

    def reset_peak_memory(self) -> None:
        torch.cuda.synchronize(self._device)
        torch.cuda.reset_peak_memory_stats(self._device)

    def peak_memory_bytes(self) -> int:
        return int(torch.cuda.max_memory_allocated(self._device))

    def gpu_meter(self, world_size: int) -> GpuWindowMeter | None:
        return GpuWindowMeter.for_cuda_ranks(world_size)
