"""Real-device backends (autotune/devices/{cpu,cuda}.py, autotune/devices/__init__.py)."""

from __future__ import annotations

import pytest
import torch

from autotune.devices import make_backend
from autotune.devices.cpu import CpuBackend


def test_make_backend_cpu() -> None:
    backend = make_backend("cpu")

    assert isinstance(backend, CpuBackend)
    assert backend.ddp_backend == "gloo"
    assert backend.pin_memory is False
    assert backend.torch_device() == torch.device("cpu")


@pytest.mark.parametrize("kind", ["mock", "tpu"])
def test_make_backend_refuses_non_training_kinds(kind: str) -> None:
    with pytest.raises(ValueError, match=f"no training backend for device kind '{kind}'"):
        make_backend(kind)


def test_cpu_backend_splits_cores_between_ranks() -> None:
    import os

    threads = torch.get_num_threads()
    try:
        CpuBackend().setup(rank=0, world_size=2, precision="fp32")
        assert torch.get_num_threads() == max(1, (os.cpu_count() or 1) // 2)
    finally:
        torch.set_num_threads(threads)


def test_cpu_backend_peak_memory_grows_with_allocations() -> None:
    backend = CpuBackend()
    backend.reset_peak_memory()
    # 64 MiB, every page written. Above glibc's largest mmap threshold (32 MiB), so the block
    # gets fresh pages from the kernel: a smaller one may reuse pages an earlier test freed
    # but the allocator kept resident, and the peak would not grow (seen in a full run).
    block = torch.ones(64 << 20, dtype=torch.uint8)

    assert backend.peak_memory_bytes() >= 32 << 20
    del block


@pytest.mark.gpu
def test_cuda_backend_tf32_flags() -> None:
    backend = make_backend("cuda")
    backend.setup(rank=0, world_size=1, precision="tf32")
    assert torch.backends.cuda.matmul.allow_tf32 is True
    backend.setup(rank=0, world_size=1, precision="fp32")
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cudnn.allow_tf32 is False
