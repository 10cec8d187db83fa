"""A trial on the fake CUDA path (autotune/trial/training/_rank.py with the CUDA backend's memory
readings faked, the model trained on the CPU): the peak-memory objective counts the memory
NVML sees outside the allocator, and the trial records NVML's figures or why they are
missing."""

from __future__ import annotations

import os

import pynvml
import pytest
import torch

import autotune.trial.training
import autotune.trial.training._rank
from autotune.core.hardware.simulated import SimulatedNvml
from autotune.core.units import MIB
from autotune.study.objectives import objective_values
from autotune.testing import make_trial_config
from autotune.testing.machines import simulated_machine
from autotune.trial.devices.cuda import ALLOCATOR_PEAK, PEAK_PLUS_CONTEXT, CudaBackend
from autotune.trial.measure import Measurement

_PEAK_BYTES = 40 * MIB  # the fake allocator's peak
_RESERVED_BYTES = 64 * MIB  # and reserved bytes


class _CpuTrainedCudaBackend(CudaBackend):
    """The CUDA backend whose model trains on the CPU: only its memory readings are CUDA's
    (torch.cuda faked by the test, NVML simulated)."""

    kind = "cpu"  # autocast, GradScaler and the FLOP count as on the CPU it trains on

    def torch_device(self) -> torch.device:
        return torch.device("cpu")

    def setup(self, rank: int, world_size: int, precision: str, num_workers: int = 0) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def reset_peak_memory(self) -> None:
        pass

    def restart_peak_memory(self) -> int | None:
        return None

    def gpu_meter(self, world_size: int) -> None:
        return None


def _run(monkeypatch: pytest.MonkeyPatch, nvml: SimulatedNvml) -> Measurement:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: [])  # no CUDA graphs
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: _PEAK_BYTES)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: _RESERVED_BYTES)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    backend = _CpuTrainedCudaBackend(nvml=nvml)
    monkeypatch.setattr(autotune.trial.training._rank, "make_backend", lambda kind: backend)
    m = autotune.trial.training.run_rank(make_trial_config(family="mlp", width=16))
    assert m is not None
    return m


def test_the_memory_objective_counts_the_cuda_context(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = simulated_machine("a100x4")
    nvml.set_process(0, os.getpid(), _RESERVED_BYTES + 480 * MIB)  # + context, NCCL buffers

    m = _run(monkeypatch, nvml)

    assert m.peak_memory_bytes == _PEAK_BYTES + 480 * MIB  # was the allocator's 40 MiB
    assert objective_values(m)[2] == _PEAK_BYTES + 480 * MIB
    assert m.memory_kind == PEAK_PLUS_CONTEXT
    assert m.extra["process_memory_bytes"] == _RESERVED_BYTES + 480 * MIB
    assert m.extra["process_memory_max_bytes"] == _RESERVED_BYTES + 480 * MIB
    assert m.extra["gpu_context_bytes"] == 480 * MIB
    assert "process_memory_error" not in m.extra
    attrs = m.as_user_attrs()
    assert attrs["process_memory_bytes"] == _RESERVED_BYTES + 480 * MIB


def test_an_nvml_error_leaves_the_allocator_peak_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml = simulated_machine(
        "a100x4", failing={"nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_GPU_IS_LOST}
    )
    nvml.set_process(0, os.getpid(), _RESERVED_BYTES + 480 * MIB)

    m = _run(monkeypatch, nvml)  # the trial goes on

    assert m.peak_memory_bytes == _PEAK_BYTES
    assert m.memory_kind == ALLOCATOR_PEAK
    assert m.extra["process_memory_error"].startswith(
        "listing the GPU's processes through NVML failed: NVMLError_GpuIsLost"
    )
    assert "process_memory_bytes" not in m.extra
    assert m.val_metric > 0  # trained and evaluated
