"""GPU telemetry inside the fixed-budget loop (autotune/trial/_throughput.py): NVML that fails
past ``nvmlInit`` leaves the GPU figures missing, says why, and the trial goes on. The loop
runs in this process on a CPU backend whose meter reads a fake NVML."""

from __future__ import annotations

import pynvml

from autotune.measure import Measurement
from autotune.nvml import GpuWindowMeter
from autotune.testing import make_trial_config
from autotune.testing.fake_nvml import fake_machine
from autotune.trial._setup import prepare_training
from autotune.trial._throughput import train_for_throughput
from autotune.workloads import load_workload
from tests.trial.loops import CountingCpuBackend, check


class _MeteredCpuBackend(CountingCpuBackend):
    """The CPU backend with a GPU meter over a fake NVML (as the CUDA backend has over NVML)."""

    def __init__(self, failing: dict[str, int]) -> None:
        super().__init__()
        self._nvml = fake_machine("a100x4", failing=failing)

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
        "reading the GPUs through NVML failed: NVMLError_NoPermission: Insufficient Permissions"
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
