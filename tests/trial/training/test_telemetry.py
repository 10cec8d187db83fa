"""GPU telemetry inside the fixed-budget loop (autotune/trial/training/_throughput.py): NVML that fails
past ``nvmlInit`` leaves the GPU figures missing, says why, and the trial goes on. The loop
runs in this process on a CPU backend whose meter reads a fake NVML."""

from __future__ import annotations

import pynvml
import pytest
import torch

from autotune.core.nvml import GpuWindowMeter
from autotune.testing import make_trial_config
from autotune.testing.machines import simulated_machine
from autotune.trial.measure import Measurement
from autotune.trial.training import _throughput
from autotune.trial.training._setup import prepare_training
from autotune.trial.training._throughput import train_for_throughput
from autotune.trial.workloads import load_workload
from tests.trial.training.loops import CountingCpuBackend, check


class _MeteredCpuBackend(CountingCpuBackend):
    """The CPU backend with a GPU meter over a fake NVML (as the CUDA backend has over NVML)."""

    def __init__(self, failing: dict[str, int]) -> None:
        super().__init__()
        self._nvml = simulated_machine("a100x4", failing=failing)

    def gpu_meter(self, world_size: int) -> GpuWindowMeter | None:
        return GpuWindowMeter.for_cuda_ranks(world_size, self._nvml)


def _train(backend: CountingCpuBackend) -> Measurement:
    config = make_trial_config(family="mlp", width=16)
    training = prepare_training(config, backend, load_workload(config.workload), 0, 1)
    m = train_for_throughput(training, 0, 1)
    check(m, config, fresh_process=False)
    return m


def test_a_failing_nvml_handle_leaves_gpu_figures_missing_with_the_reason() -> None:
    backend = _MeteredCpuBackend({"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_NO_PERMISSION})

    m = _train(backend)

    assert m.extra["gpu_telemetry_error"] == (
        "NVML started but nvmlDeviceGetHandleByIndex failed for GPU 0: NVMLError_NoPermission: "
        "Insufficient Permissions (nvidia-smi shows what the driver reports)"
    )
    assert "gpu_power_w" not in m.extra
    assert "energy_j_per_sample" not in m.extra


def test_failing_power_and_energy_calls_leave_gpu_figures_missing() -> None:
    denied = pynvml.NVML_ERROR_NO_PERMISSION
    backend = _MeteredCpuBackend(
        {"nvmlDeviceGetPowerUsage": denied, "nvmlDeviceGetTotalEnergyConsumption": denied}
    )

    m = _train(backend)

    error = m.extra["gpu_telemetry_error"]
    assert error.startswith("no GPU power or energy reading in the timed window: ")
    assert "gpu_power_w" not in m.extra


class _LoggingBackend(_MeteredCpuBackend):
    """Logs device syncs, the GPU meter's start and the peak-memory restart, in order."""

    def __init__(self) -> None:
        super().__init__({})
        self.events: list[str] = []

    def synchronize(self) -> None:
        self.events.append("sync")
        super().synchronize()

    def restart_peak_memory(self) -> int | None:
        self.events.append("restart_peak")
        return 12_345

    def gpu_meter(self, world_size: int) -> GpuWindowMeter | None:
        meter = super().gpu_meter(world_size)
        assert meter is not None
        start = meter.start

        def logged_start() -> bool:
            self.events.append("meter.start")
            return start()

        meter.start = logged_start  # type: ignore[method-assign]
        return meter


def test_the_meters_start_between_a_sync_and_the_first_windows_clock_read() -> None:
    # Digits at batch 64 (one epoch: 22 steps, 5 warm-up): the edge order is sync, meter,
    # clock, so the meter's set-up never falls inside window 1.
    backend = _LoggingBackend()
    config = make_trial_config(family="mlp", width=16)
    training = prepare_training(config, backend, load_workload(config.workload), 0, 1)
    train_step = training.train_step

    def logged_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        backend.events.append("step")
        return train_step(x, y)

    training.train_step = logged_step  # type: ignore[method-assign]

    m = train_for_throughput(training, 0, 1)

    at = backend.events.index("meter.start")
    assert backend.events[at - 1 : at + 3] == ["sync", "meter.start", "sync", "step"]
    assert backend.events[:at].count("step") == 5  # after the warm-up
    # The peak window restarts at the same edge, before the meters; the warm-up's is kept.
    assert backend.events[at - 2] == "restart_peak"
    assert m.extra["warmup_peak_memory_bytes"] == 12_345


class _TwoWindowBackend(_MeteredCpuBackend):
    """Records each window the GPU meter reads (its start count and its readings)."""

    def __init__(self) -> None:
        super().__init__({})
        self.starts = 0
        self.readings: list[object] = []

    def gpu_meter(self, world_size: int) -> GpuWindowMeter | None:
        meter = super().gpu_meter(world_size)
        assert meter is not None
        start, stop = meter.start, meter.stop

        def counted_start() -> bool:
            self.starts += 1
            return start()

        def kept_stop() -> object:
            reading = stop()
            self.readings.append(reading)
            return reading

        meter.start = counted_start  # type: ignore[method-assign]
        meter.stop = kept_stop  # type: ignore[method-assign]
        return meter


def test_the_gpu_figures_come_from_the_windows_that_give_the_throughput(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A budget too short for measure.min_timed_s is timed again over longer windows, which
    # then give the throughput: the GPU's power, utilization and energy per sample are metered
    # over those windows too, not over the budget's. Whether the budget was too short depends
    # on the machine's load, so the decision is fixed here: 3 more steps a window.
    monkeypatch.setattr(_throughput, "extension_window_steps", lambda *args: 3)
    backend = _TwoWindowBackend()
    config = make_trial_config(family="mlp", width=16, train={"max_steps": 16})
    training = prepare_training(config, backend, load_workload(config.workload), 0, 1)

    m = train_for_throughput(training, 0, 1)

    assert m.extra["timing_extension_steps"] > 0
    assert backend.starts == 2 and len(backend.readings) == 2
    extension = backend.readings[-1]
    assert extension is not None
    assert m.extra["gpu_energy_window_s"] == extension.duration_s  # type: ignore[attr-defined]
    assert m.extra["gpu_power_w"] == extension.mean_power_w  # type: ignore[attr-defined]
