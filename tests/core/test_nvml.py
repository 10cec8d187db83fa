"""NVML access and the GPU window meter (autotune/core/nvml.py), against the fake NVML."""

from __future__ import annotations

import pynvml
import pytest

from autotune.core.exceptions import DeviceUnavailableError
from autotune.core.hardware.simulated import SimulatedNvml
from autotune.core.nvml import (
    GpuWindowMeter,
    ProcessMemory,
    nvml_session,
    read_nvml,
    read_process_memory,
    visible_nvml_indices,
)
from autotune.core.units import MIB
from autotune.testing.machines import SIMULATED_MACHINES, simulated_machine


class _Clock:
    """A clock the test advances by hand."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


# --------------------------------------------------------------------------------------------
# read_nvml


def test_reads_every_gpu_of_an_h100_machine() -> None:
    info = read_nvml(simulated_machine("h100x8"))

    assert info is not None
    assert len(info.gpus) == 8
    assert [g.index for g in info.gpus] == list(range(8))
    gpu = info.gpus[0]
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_bytes == 81559 * MIB
    assert gpu.compute_capability == (9, 0)
    assert gpu.power_limit_w == 700.0
    assert gpu.uuid.startswith("GPU-")
    assert len({g.uuid for g in info.gpus}) == 8
    assert info.driver_version == "550.54.15"
    assert info.cuda_driver_version == "12.4"


@pytest.mark.parametrize(
    ("machine", "count", "name", "cc"),
    [
        ("a100x4", 4, "NVIDIA A100-SXM4-80GB", (8, 0)),
        ("v100x1", 1, "Tesla V100-SXM2-32GB", (7, 0)),
        ("t4", 1, "Tesla T4", (7, 5)),
    ],
)
def test_reads_the_other_simulated_machines(
    machine: str, count: int, name: str, cc: tuple[int, int]
) -> None:
    info = read_nvml(simulated_machine(machine))

    assert info is not None
    assert [(g.name, g.compute_capability) for g in info.gpus] == [(name, cc)] * count


def test_no_driver_means_no_nvml() -> None:
    assert read_nvml(simulated_machine("none")) is None


@pytest.mark.parametrize(
    ("function", "error", "message"),
    [
        (
            "nvmlDeviceGetMemoryInfo",
            pynvml.NVML_ERROR_GPU_IS_LOST,
            "NVML started but nvmlDeviceGetMemoryInfo failed for GPU 0: "
            "NVMLError_GpuIsLost: GPU is lost (nvidia-smi shows what the driver reports)",
        ),
        (
            "nvmlDeviceGetCount",
            pynvml.NVML_ERROR_NO_PERMISSION,
            "NVML started but nvmlDeviceGetCount failed: NVMLError_NoPermission",
        ),
    ],
)
def test_a_required_reading_that_fails_after_nvml_init_is_one_clear_error(
    function: str, error: int, message: str
) -> None:
    """Before, NVML's own exception reached the user as a traceback from ``autotune run``
    and ``autotune hardware``."""
    nvml = simulated_machine("a100x4", failing={function: error})

    with pytest.raises(DeviceUnavailableError) as raised:
        read_nvml(nvml)

    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)
    with pytest.raises(pynvml.NVMLError_Uninitialized):  # NVML shut down all the same
        nvml.nvmlSystemGetDriverVersion()


def test_an_optional_reading_that_fails_is_none() -> None:
    nvml = simulated_machine(
        "a100x4", failing={"nvmlSystemGetCudaDriverVersion": pynvml.NVML_ERROR_NOT_SUPPORTED}
    )

    info = read_nvml(nvml)

    assert info is not None and info.cuda_driver_version is None and len(info.gpus) == 4


def test_this_machine_without_a_gpu_reads_none_or_real_gpus() -> None:
    info = read_nvml()  # the real pynvml: no driver here, GPUs on a GPU machine

    assert info is None or all(g.memory_bytes > 0 for g in info.gpus)


def test_a_missing_power_limit_is_none() -> None:
    nvml = SimulatedNvml(
        SIMULATED_MACHINES["t4"], unsupported=["nvmlDeviceGetPowerManagementLimit"]
    )

    info = read_nvml(nvml)

    assert info is not None and info.gpus[0].power_limit_w is None


def test_session_shuts_nvml_down() -> None:
    nvml = simulated_machine("t4")

    with nvml_session(nvml) as m:
        assert m is nvml
        assert m.nvmlDeviceGetCount() == 1
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()


def test_gpu_info_round_trips_through_a_dict() -> None:
    info = read_nvml(simulated_machine("v100x1"))
    assert info is not None

    gpu = info.gpus[0]

    assert type(gpu).from_dict(gpu.to_dict()) == gpu


# --------------------------------------------------------------------------------------------
# CUDA_VISIBLE_DEVICES

_UUIDS = ["GPU-aaaa-0", "GPU-bbbb-1", "GPU-cccc-2", "GPU-dddd-3"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, [0, 1, 2, 3]),
        ("", []),
        ("2", [2]),
        ("3,1", [3, 1]),
        (" 1 , 0 ", [1, 0]),
        ("1,7,2", [1]),  # the list ends at the first index that names no GPU
        ("0,-1,2", [0]),  # a negative index ends it too
        ("1,1,2", [1]),  # a GPU named twice ends it
        ("GPU-cccc", [2]),  # a unique UUID prefix
        ("GPU-bbbb-1,0", [1, 0]),
        ("GPU-nope,0", []),
        ("MIG-1234,0", []),  # MIG slices are not NVML GPUs
    ],
)
def test_visible_indices_follow_cuda_rules(value: str | None, expected: list[int]) -> None:
    assert visible_nvml_indices(value, _UUIDS) == expected


def test_ambiguous_uuid_prefix_ends_the_list() -> None:
    assert visible_nvml_indices("GPU-", _UUIDS) == []


# --------------------------------------------------------------------------------------------
# GpuWindowMeter


def test_meter_reads_power_utilization_and_the_energy_counter() -> None:
    clock = _Clock()
    nvml = SimulatedNvml(SIMULATED_MACHINES["a100x4"], clock=clock)
    nvml.set_load(0, 80.0, power_w=300.0)
    nvml.set_load(1, 60.0, power_w=200.0)
    meter = GpuWindowMeter([0, 1], nvml, interval_s=3600.0, clock=clock)

    assert meter.start() is True
    clock.now_s += 2.0
    reading = meter.stop()

    assert reading is not None
    assert reading.duration_s == pytest.approx(2.0)
    assert reading.mean_power_w == pytest.approx(500.0)  # both GPUs together
    assert reading.mean_utilization_pct == pytest.approx(70.0)
    assert reading.energy_source == "energy_counter"
    assert reading.energy_j == pytest.approx(1000.0, abs=0.01)  # 500 W x 2 s
    assert reading.samples == 2  # at start and at stop


def test_meter_without_an_energy_counter_integrates_power() -> None:
    clock = _Clock()
    nvml = SimulatedNvml(
        SIMULATED_MACHINES["t4"], clock=clock, unsupported=["nvmlDeviceGetTotalEnergyConsumption"]
    )
    nvml.set_load(0, 100.0)  # full load: the power limit, 70 W
    meter = GpuWindowMeter([0], nvml, interval_s=3600.0, clock=clock)

    meter.start()
    clock.now_s += 4.0
    reading = meter.stop()

    assert reading is not None
    assert reading.energy_source == "power_samples"
    assert reading.mean_power_w == pytest.approx(70.0)
    assert reading.energy_j == pytest.approx(280.0)


def test_meter_samples_in_the_background() -> None:
    nvml = simulated_machine("t4")
    nvml.set_load(0, 50.0)
    meter = GpuWindowMeter([0], nvml, interval_s=0.005)

    meter.start()
    import time

    time.sleep(0.1)
    reading = meter.stop()

    assert reading is not None
    assert reading.samples > 3
    assert reading.mean_utilization_pct == pytest.approx(50.0)
    assert reading.mean_power_w == pytest.approx(10.0 + 60.0 * 0.5)


def test_meter_leaves_nvml_shut_down() -> None:
    nvml = simulated_machine("t4")
    meter = GpuWindowMeter([0], nvml, interval_s=3600.0)

    meter.start()
    meter.stop()

    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()


def test_meter_without_nvml_reads_nothing() -> None:
    meter = GpuWindowMeter([0], simulated_machine("none"))

    assert meter.start() is False
    assert meter.stop() is None


def test_meter_for_cuda_ranks_maps_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = simulated_machine("h100x8")
    info = read_nvml(nvml)
    assert info is not None
    uuid_of_5 = info.gpus[5].uuid
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{uuid_of_5},3")

    meter = GpuWindowMeter.for_cuda_ranks(2, nvml)

    assert meter is not None
    assert meter._indices == [5, 3]
    unmapped = GpuWindowMeter.for_cuda_ranks(3, nvml)  # only two are visible
    assert unmapped is not None and unmapped.start() is False and unmapped.stop() is None
    assert unmapped.error is not None and "maps 2 of this trial's 3 CUDA devices" in unmapped.error


def test_meter_for_cuda_ranks_without_nvml() -> None:
    assert GpuWindowMeter.for_cuda_ranks(1, simulated_machine("none")) is None


# --------------------------------------------------------------------------------------------
# NVML failing past nvmlInit (containers, MIG, permissions): the reading is missing, with why


def test_meter_for_cuda_ranks_when_a_handle_call_raises() -> None:
    nvml = simulated_machine(
        "a100x4", failing={"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_NO_PERMISSION}
    )

    meter = GpuWindowMeter.for_cuda_ranks(2, nvml)  # raised NVMLError_NoPermission before

    assert meter is not None
    assert meter.start() is False
    assert meter.stop() is None
    assert meter.error == (
        "NVML started but nvmlDeviceGetHandleByIndex failed for GPU 0: NVMLError_NoPermission: "
        "Insufficient Permissions (nvidia-smi shows what the driver reports)"
    )


def test_meter_start_when_a_handle_call_raises() -> None:
    nvml = simulated_machine(
        "a100x4", failing={"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_GPU_IS_LOST}
    )
    meter = GpuWindowMeter([0, 1], nvml, interval_s=3600.0)

    assert meter.start() is False  # raised NVMLError_GpuIsLost before
    assert meter.stop() is None
    assert meter.error is not None
    assert meter.error.startswith(
        "no NVML handle for the trial's GPUs: nvmlDeviceGetHandleByIndex(0)"
    )
    assert "NVMLError_GpuIsLost" in meter.error
    with pytest.raises(pynvml.NVMLError_Uninitialized):  # shut down again
        nvml.nvmlDeviceGetCount()


def test_meter_without_any_power_or_energy_reading_is_missing_not_zero() -> None:
    clock = _Clock()
    nvml = simulated_machine(
        "a100x4",
        clock=clock,
        failing={
            "nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NO_PERMISSION,
            "nvmlDeviceGetTotalEnergyConsumption": pynvml.NVML_ERROR_NO_PERMISSION,
        },
    )
    nvml.set_load(0, 80.0)
    meter = GpuWindowMeter([0], nvml, interval_s=3600.0, clock=clock)

    assert meter.start() is True
    clock.now_s += 2.0
    reading = meter.stop()

    assert reading is None  # was a reading of 0 W and 0 J
    assert meter.error is not None
    assert meter.error.startswith("no GPU power or energy reading in the timed window: ")
    assert "nvmlDeviceGetPowerUsage: NVMLError_NoPermission" in meter.error
    assert "nvmlDeviceGetTotalEnergyConsumption: NVMLError_NoPermission" in meter.error


def test_meter_with_energy_counters_but_no_power_samples() -> None:
    clock = _Clock()
    nvml = simulated_machine(
        "a100x4", clock=clock, failing={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_UNKNOWN}
    )
    nvml.set_load(0, 80.0, power_w=300.0)
    meter = GpuWindowMeter([0], nvml, interval_s=3600.0, clock=clock)

    meter.start()
    clock.now_s += 2.0
    reading = meter.stop()

    assert reading is not None and meter.error is None
    assert reading.energy_source == "energy_counter"
    assert reading.energy_j == pytest.approx(600.0, abs=0.01)
    assert reading.mean_power_w == pytest.approx(300.0, abs=0.01)  # energy over duration


# --------------------------------------------------------------------------------------------
# read_process_memory: NVML's memory of one process, matched by pid, or why it is missing


def test_process_memory_is_the_entry_of_the_process_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml = simulated_machine("a100x4")
    nvml.set_process(1, 4242, 900 * MIB)  # this process, on CUDA device 1
    nvml.set_process(1, 777, 5000 * MIB)  # another process on the same GPU
    nvml.set_process(0, 4242, 123 * MIB)  # this process on another GPU

    reading = read_process_memory(1, 4242, nvml)

    assert reading == ProcessMemory(900 * MIB, None, 1)
    with pytest.raises(pynvml.NVMLError_Uninitialized):  # shut down again
        nvml.nvmlDeviceGetCount()


def test_process_memory_maps_the_cuda_device_through_visible_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml = simulated_machine("h100x8")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,3")
    nvml.set_process(3, 99, 512 * MIB)
    nvml.set_process(1, 99, 1 * MIB)  # CUDA device 1 is NVML's 3, not its 1

    assert read_process_memory(1, 99, nvml) == ProcessMemory(512 * MIB, None, 3)
    unmapped = read_process_memory(2, 99, nvml)
    assert unmapped.used_bytes is None and unmapped.error is not None
    assert unmapped.error.startswith("NVML maps no GPU to CUDA device 2")


def test_process_memory_of_a_process_nvml_does_not_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml = simulated_machine("t4")
    nvml.set_process(0, 1, 300 * MIB)  # a host pid: the container's own is not listed

    reading = read_process_memory(0, 4242, nvml)

    assert reading.used_bytes is None
    assert reading.error is not None
    assert reading.error.startswith(
        "process 4242 is not among the 1 compute processes NVML lists on GPU 0"
    )
    assert "PID namespace" in reading.error


def test_process_memory_missing_when_nvml_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml = simulated_machine(
        "a100x4",
        failing={"nvmlDeviceGetComputeRunningProcesses": pynvml.NVML_ERROR_NO_PERMISSION},
    )
    nvml.set_process(0, 4242, 900 * MIB)

    reading = read_process_memory(0, 4242, nvml)  # never raises

    assert reading == ProcessMemory(
        None,
        "listing the GPU's processes through NVML failed: NVMLError_NoPermission: "
        "Insufficient Permissions",
    )
    with pytest.raises(pynvml.NVMLError_Uninitialized):  # shut down on the failure too
        nvml.nvmlDeviceGetCount()


def test_process_memory_missing_when_nvml_does_not_report_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml = simulated_machine("t4")
    nvml.set_process(0, 4242, None)  # usedGpuMemory not available (Windows WDDM)

    reading = read_process_memory(0, 4242, nvml)

    assert reading == ProcessMemory(
        None, "NVML does not report the memory of process 4242 on GPU 0", 0
    )


def test_process_memory_without_nvml() -> None:
    reading = read_process_memory(0, 4242, simulated_machine("none"))

    assert reading.used_bytes is None
    assert reading.error == "NVML is unavailable (no NVIDIA driver or library)"
