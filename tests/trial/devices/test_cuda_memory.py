"""The CUDA backend's peak memory with NVML's per-process memory (autotune/trial/devices/cuda.py):
the memory outside PyTorch's caching allocator (CUDA context, NCCL buffers) is counted where
NVML gives it, and missing with the reason where it does not. No GPU: torch.cuda's readings
are faked, NVML is the simulated one."""

from __future__ import annotations

import os
from typing import Any

import pynvml
import pytest
import torch

from autotune.core.hardware.simulated import SimulatedNvml
from autotune.core.units import MIB
from autotune.testing.machines import simulated_machine
from autotune.trial.devices.cuda import (
    ALLOCATOR_PEAK,
    FROM_DEVICE_USED,
    FROM_PROCESS_LIST,
    PEAK_PLUS_CONTEXT,
    CudaBackend,
    combine_rank_memory,
)


@pytest.fixture
def fake_allocator(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """torch.cuda's synchronize and memory readings without a GPU: the allocator's peak,
    reserved bytes and segments (``memory_snapshot``) are the fixture's values."""
    readings: dict[str, Any] = {"peak": 200 * MIB, "reserved": 256 * MIB, "segments": []}
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: readings["segments"])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: readings["peak"])
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: readings["reserved"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return readings


def _nvml_with_this_process(used_bytes: int, **kwargs: object) -> SimulatedNvml:
    nvml = simulated_machine("a100x4", **kwargs)  # type: ignore[arg-type]
    nvml.set_process(0, os.getpid(), used_bytes)
    nvml.set_process(0, os.getpid() + 1, 40_000 * MIB)  # another process: not ours
    return nvml


def test_peak_memory_counts_the_memory_outside_the_allocator(
    fake_allocator: dict[str, Any],
) -> None:
    # NVML: 256 MiB reserved by the allocator + 500 MiB of context and NCCL buffers.
    backend = CudaBackend(nvml=_nvml_with_this_process(756 * MIB))

    peak = backend.peak_memory_bytes()

    assert peak == (200 + 500) * MIB  # the allocator's peak + what it never sees
    assert backend.memory_kind == PEAK_PLUS_CONTEXT
    assert backend.memory_figures() == {
        "process_memory_bytes": 756 * MIB,
        "gpu_context_bytes": 500 * MIB,
        "process_memory_method": FROM_PROCESS_LIST,
    }


def test_peak_memory_is_the_allocators_when_nvml_fails(fake_allocator: dict[str, Any]) -> None:
    nvml = _nvml_with_this_process(
        756 * MIB,
        failing={"nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NO_PERMISSION},
    )
    backend = CudaBackend(nvml=nvml)

    peak = backend.peak_memory_bytes()  # does not raise: the trial goes on

    assert peak == 200 * MIB
    assert backend.memory_kind == ALLOCATOR_PEAK
    assert backend.memory_figures() == {
        "process_memory_error": "listing the GPU's processes through NVML failed: "
        "NVMLError_NoPermission: Insufficient Permissions"
    }


def test_peak_memory_when_this_process_is_not_listed(fake_allocator: dict[str, Any]) -> None:
    nvml = simulated_machine("a100x4")
    nvml.set_process(0, os.getpid() + 1, 900 * MIB)
    backend = CudaBackend(nvml=nvml)

    assert backend.peak_memory_bytes() == 200 * MIB
    assert backend.memory_kind == ALLOCATOR_PEAK
    assert f"process {os.getpid()} is not among" in backend.memory_figures()["process_memory_error"]


def test_a_process_nvml_does_not_list_is_read_from_the_gpus_growth(
    fake_allocator: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container with its own PID namespace: NVML lists the rank under its host id, never
    # under os.getpid() (issue 38, item 5). Another process already holds 1,000 MiB.
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    nvml = simulated_machine("a100x4")
    nvml.set_process(0, os.getpid() + 7, 1000 * MIB)
    backend = CudaBackend(nvml=nvml)
    backend.setup(rank=0, world_size=1, precision="fp32")  # before the first CUDA call
    nvml.set_process(0, 4_000_000, 756 * MIB)  # the rank, by its host id

    peak = backend.peak_memory_bytes()

    assert peak == (200 + 500) * MIB  # 756 MiB grown, less the allocator's 256 reserved
    assert backend.memory_kind == PEAK_PLUS_CONTEXT
    assert backend.memory_figures() == {
        "process_memory_bytes": 756 * MIB,
        "gpu_context_bytes": 500 * MIB,
        "process_memory_method": FROM_DEVICE_USED,
    }
    assert combine_rank_memory([backend.memory_figures()])["process_memory_method"] == (
        "nvml_device_used_less_before"
    )


def test_nvml_below_the_reserved_bytes_adds_nothing(fake_allocator: dict[str, Any]) -> None:
    fake_allocator["reserved"] = 800 * MIB  # readings a moment apart: never a negative context
    backend = CudaBackend(nvml=_nvml_with_this_process(756 * MIB))

    assert backend.peak_memory_bytes() == 200 * MIB
    assert backend.memory_figures()["gpu_context_bytes"] == 0


def test_peak_memory_counts_the_cuda_graphs_pools(fake_allocator: dict[str, Any]) -> None:
    # A graph mode: replays allocate nothing, so the allocator's peak leaves out the 96 MiB
    # pool they run in (issue 38, item 3); the pool is among the reserved bytes.
    fake_allocator["reserved"] = (256 + 96) * MIB
    fake_allocator["segments"] = [
        {"device": 0, "segment_pool_id": (0, 0), "total_size": 256 * MIB},
        {"device": 0, "segment_pool_id": (1, 0), "total_size": 64 * MIB},
        {"device": 0, "segment_pool_id": (1, 0), "total_size": 32 * MIB},
        {"device": 1, "segment_pool_id": (1, 0), "total_size": 900 * MIB},  # another GPU's
    ]
    backend = CudaBackend(nvml=_nvml_with_this_process((256 + 96 + 500) * MIB))

    peak = backend.peak_memory_bytes()

    assert peak == (200 + 96 + 500) * MIB  # allocator peak + graph pools + context
    assert backend.memory_figures() == {
        "process_memory_bytes": (256 + 96 + 500) * MIB,
        "gpu_context_bytes": 500 * MIB,
        "process_memory_method": FROM_PROCESS_LIST,
        "cuda_graph_pool_bytes": 96 * MIB,
    }
    assert combine_rank_memory([backend.memory_figures()])["cuda_graph_pool_bytes"] == 96 * MIB


def test_ranks_process_memory_is_summed_and_its_most_kept() -> None:
    ranks = [
        {"process_memory_bytes": 700 * MIB, "gpu_context_bytes": 500 * MIB},
        {"process_memory_bytes": 900 * MIB, "gpu_context_bytes": 520 * MIB},
    ]

    assert combine_rank_memory(ranks) == {
        "process_memory_bytes": 1600 * MIB,
        "process_memory_max_bytes": 900 * MIB,
        "gpu_context_bytes": 520 * MIB,
    }


def test_ranks_read_two_ways_say_so() -> None:
    ranks = [
        {"process_memory_bytes": 7, "gpu_context_bytes": 5, "process_memory_method": "a"},
        {"process_memory_bytes": 9, "gpu_context_bytes": 5, "process_memory_method": "b"},
    ]

    assert combine_rank_memory(ranks)["process_memory_method"] == "mixed"


def test_a_rank_without_nvml_figure_leaves_the_trials_missing_with_the_reason() -> None:
    ranks = [
        {"process_memory_bytes": 700 * MIB, "gpu_context_bytes": 500 * MIB},
        {"process_memory_error": "NVML is unavailable (no NVIDIA driver or library)"},
    ]

    assert combine_rank_memory(ranks) == {
        "process_memory_error": "rank 1: NVML is unavailable (no NVIDIA driver or library)"
    }
    assert combine_rank_memory([ranks[1]]) == {  # one rank: no rank named
        "process_memory_error": "NVML is unavailable (no NVIDIA driver or library)"
    }


def test_the_cpu_has_no_process_memory_figures() -> None:
    assert combine_rank_memory([{}, {}]) == {}


@pytest.mark.gpu
def test_a_real_gpus_peak_counts_its_cuda_context() -> None:
    backend = CudaBackend()
    backend.setup(rank=0, world_size=1, precision="fp32")
    backend.reset_peak_memory()
    block = torch.ones(4 * MIB, dtype=torch.uint8, device="cuda")

    peak = backend.peak_memory_bytes()

    figures = backend.memory_figures()
    if "process_memory_error" in figures:  # a container hiding host pids, MIG, no permission
        pytest.skip(f"NVML gives no memory of this process: {figures['process_memory_error']}")
    assert backend.memory_kind == PEAK_PLUS_CONTEXT
    # The CUDA context alone is hundreds of MiB (more than 50 on any GPU torch supports).
    assert figures["gpu_context_bytes"] > 50 * MIB
    assert peak == torch.cuda.max_memory_allocated() + figures["gpu_context_bytes"]
    assert figures["process_memory_bytes"] >= torch.cuda.memory_reserved()
    del block
