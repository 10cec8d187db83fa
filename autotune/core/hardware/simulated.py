"""The mock device's simulated machines, and the simulated NVML they are read through.

A :class:`SimulatedMachine` (``mock.profile=NAME``) describes a machine that is not there: its
GPUs (or none: a CPU), their memory and compute capability, and the rates the mock cost model
(:func:`autotune.trial.devices.mock.simulate`) uses. The study side sees a profile exactly as it sees
a real machine: through NVML. :meth:`SimulatedMachine.nvml` is a :class:`SimulatedNvml`, which
answers the calls autotune makes with the same names, arguments, units and errors as
``pynvml`` (the module of nvidia-ml-py): memory in bytes, power in milliwatts, energy in
millijoules since the driver loaded, utilization in percent. Its load is set by the caller
(:meth:`SimulatedNvml.set_load`), and so are its GPUs' compute processes
(:meth:`SimulatedNvml.set_process`); its energy counter integrates power over an injectable
clock.
:func:`autotune.core.hardware.detect_capabilities` reads a profile's machine through it.

The rest of :mod:`autotune.core.hardware` fingerprints the simulated machines and
:mod:`autotune.trial.devices.mock` simulates trials on them. Tests stand the same simulated machines
in for real ones (:mod:`autotune.testing.machines`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

from autotune.core.exceptions import ConfigError
from autotune.core.flops import published_peak
from autotune.core.units import MIB

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "PROFILE_NAMES",
    "SimulatedGpu",
    "SimulatedMachine",
    "SimulatedNvml",
    "get_profile",
]

_GIB = 1 << 30

# --------------------------------------------------------------------------------------------
# Simulated NVML


@dataclass(frozen=True)
class SimulatedGpu:
    """One simulated GPU as NVML describes it.

    Attributes:
        name: what ``nvmlDeviceGetName`` returns (e.g. ``"NVIDIA H100 80GB HBM3"``).
        memory_bytes: total device memory (``nvmlDeviceGetMemoryInfo().total``), bytes.
        compute_capability: CUDA ``(major, minor)``.
        power_limit_w: the power-management limit (board TDP), watts.
        idle_power_w: power drawn at 0 % utilization, watts.
    """

    name: str
    memory_bytes: int
    compute_capability: tuple[int, int]
    power_limit_w: float
    idle_power_w: float = 60.0


class SimulatedNvml:
    """Stands in for the ``pynvml`` module: same function names, arguments, units and errors.

    Args:
        gpus: the machine's GPUs, NVML index order; empty means no driver (``nvmlInit`` fails).
        driver_version: what ``nvmlSystemGetDriverVersion`` returns.
        cuda_driver_version: ``nvmlSystemGetCudaDriverVersion`` (e.g. 12040 for CUDA 12.4).
        clock: seconds, for the energy counter; ``time.monotonic`` unless a test injects one.
        unsupported: names of NVML functions that raise ``NVMLError_NotSupported`` (e.g.
            ``{"nvmlDeviceGetTotalEnergyConsumption"}`` for a pre-Volta GPU).
        failing: NVML functions that raise another NVML error, by name: the ``NVML_ERROR_*``
            code each raises (e.g. ``{"nvmlDeviceGetHandleByIndex":
            pynvml.NVML_ERROR_NO_PERMISSION}``, as in a container that hides a GPU's device node).
    """

    NVMLError = pynvml.NVMLError

    def __init__(
        self,
        gpus: Sequence[SimulatedGpu],
        *,
        driver_version: str = "550.54.15",
        cuda_driver_version: int = 12040,
        clock: Callable[[], float] = time.monotonic,
        unsupported: Sequence[str] = (),
        failing: Mapping[str, int] | None = None,
    ) -> None:
        self.gpus = tuple(gpus)
        self._failing = dict(failing or {})
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self._clock = clock
        self._unsupported = frozenset(unsupported)
        self._initialized = 0
        self.init_calls = 0
        # Per GPU: utilization %, power W, energy mJ accumulated up to `_since`.
        self._util = [0.0] * len(self.gpus)
        self._power_w = [g.idle_power_w for g in self.gpus]
        self._energy_mj = [0.0] * len(self.gpus)
        self._since = [clock()] * len(self.gpus)
        # Per GPU: the compute processes, pid -> used bytes (None: not reported, as on WDDM).
        self._processes: list[dict[int, int | None]] = [{} for _ in self.gpus]

    # -- load controls (tests; the mock machines stay idle) ---------------------------------

    def set_load(self, index: int, utilization_pct: float, power_w: float | None = None) -> None:
        """Set GPU ``index`` busy at ``utilization_pct``; its power follows linearly from idle
        to the power limit unless ``power_w`` is given. Energy so far is kept."""
        gpu = self.gpus[index]
        self._settle(index)
        self._util[index] = utilization_pct
        self._power_w[index] = (
            power_w
            if power_w is not None
            else gpu.idle_power_w + (gpu.power_limit_w - gpu.idle_power_w) * utilization_pct / 100
        )

    def set_process(self, index: int, pid: int, used_bytes: int | None) -> None:
        """List process ``pid`` among GPU ``index``'s compute processes, holding
        ``used_bytes`` of its memory (None: NVML does not report it); replaces an earlier
        entry of the same process."""
        self._processes[index][pid] = used_bytes

    def _settle(self, index: int) -> None:
        now = self._clock()
        self._energy_mj[index] += self._power_w[index] * 1e3 * (now - self._since[index])
        self._since[index] = now

    # -- pynvml API -------------------------------------------------------------------------

    def _check(self, fn: str) -> None:
        if fn in self._unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if fn in self._failing:
            raise pynvml.NVMLError(self._failing[fn])
        if fn != "nvmlInit" and self._initialized <= 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: Any) -> int:
        if not isinstance(handle, int) or not 0 <= handle < len(self.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return handle

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if not self.gpus:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
        self._check("nvmlInit")
        self._initialized += 1

    def nvmlShutdown(self) -> None:
        self._check("nvmlShutdown")
        self._initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check("nvmlSystemGetDriverVersion")
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check("nvmlSystemGetCudaDriverVersion")
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._check("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._check("nvmlDeviceGetHandleByIndex")
        return self._gpu(index)

    def nvmlDeviceGetHandleByUUID(self, uuid_str: str) -> int:
        self._check("nvmlDeviceGetHandleByUUID")
        for i in range(len(self.gpus)):
            if self.nvmlDeviceGetUUID(i) == uuid_str:
                return i
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetName(self, handle: int) -> str:
        self._check("nvmlDeviceGetName")
        return self.gpus[self._gpu(handle)].name

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        self._check("nvmlDeviceGetUUID")
        index = self._gpu(handle)
        # The "fake-nvml" namespace predates the name SimulatedNvml; kept so UUIDs stay stable.
        digest = uuid.uuid5(uuid.NAMESPACE_URL, f"fake-nvml/{self.gpus[index].name}/{index}")
        return f"GPU-{digest}"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        self._check("nvmlDeviceGetMemoryInfo")
        index = self._gpu(handle)
        total = self.gpus[index].memory_bytes
        # Used: what the listed processes hold (whatever ids NVML lists them under).
        used = sum(b for b in self._processes[index].values() if b is not None)
        return SimpleNamespace(total=total, free=max(0, total - used), used=used)

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        self._check("nvmlDeviceGetCudaComputeCapability")
        return self.gpus[self._gpu(handle)].compute_capability

    def nvmlDeviceGetPowerManagementLimit(self, handle: int) -> int:
        self._check("nvmlDeviceGetPowerManagementLimit")
        return round(self.gpus[self._gpu(handle)].power_limit_w * 1e3)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        self._check("nvmlDeviceGetPowerUsage")
        return round(self._power_w[self._gpu(handle)] * 1e3)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        self._check("nvmlDeviceGetTotalEnergyConsumption")
        index = self._gpu(handle)
        self._settle(index)
        return int(self._energy_mj[index])

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:
        """The GPU's compute processes as ``pynvml`` returns them (its ``_v3`` struct:
        ``pid``, ``usedGpuMemory`` in bytes or None, the MIG instance ids)."""
        self._check("nvmlDeviceGetComputeRunningProcesses")
        return [
            SimpleNamespace(
                pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF
            )
            for pid, used in self._processes[self._gpu(handle)].items()
        ]

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        self._check("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=round(self._util[self._gpu(handle)]), memory=0)


# --------------------------------------------------------------------------------------------
# Simulated machines (the mock device's profiles)


@dataclass(frozen=True)
class SimulatedMachine:
    """A simulated machine: its GPUs (or none: a CPU) and the rates the cost model uses.

    The feasibility rules and the study's hardware fingerprint see it through its simulated
    NVML (:meth:`nvml`), exactly as they see a real machine through NVML
    (:func:`autotune.core.hardware.detect_capabilities` with ``kind="mock"``). Its per-process memory
    beyond tensors is :data:`autotune.core.hardware.MOCK_RUNTIME_BYTES` on a GPU and
    :data:`autotune.core.hardware.CPU_RUNTIME_BYTES` on the CPU, as in the feasibility estimate.

    Attributes:
        name: label shown everywhere the device is named (always says "simulated").
        memory_bytes: capacity of one GPU (host RAM for a CPU profile); a trial whose
            modelled peak exceeds it runs out of memory.
        count: GPUs in the simulated machine (CPU cores for a CPU profile): the largest
            world size.
        compute_capability: CUDA capability the feasibility rules see; None for a CPU profile.
        peak_flops: dense FLOP/s of one device per precision; a precision the device lacks
            is absent.
        launch_overhead_s: host cost of one kernel launch in eager mode.
        host_sample_s: input-pipeline seconds per 28x28 sample on one worker.
        allreduce_bytes_per_s: DDP gradient all-reduce bandwidth (one direction).
        peak_source: where ``peak_flops`` come from.
        gpu_name: the GPU's name as NVML reports it.
        power_limit_w: a GPU's power limit (board TDP), watts.
        idle_power_w: a GPU's idle power, watts.
        cpu_model: the simulated host CPU.
        cpu_cores: its cores.
        host_memory_bytes: its RAM.
    """

    name: str
    memory_bytes: int
    count: int
    compute_capability: tuple[int, int] | None
    peak_flops: dict[str, float] = field(default_factory=dict)
    launch_overhead_s: float = 8e-6
    host_sample_s: float = 4e-6
    allreduce_bytes_per_s: float = 50e9
    peak_source: str = ""
    gpu_name: str = "mock GPU (simulated)"
    power_limit_w: float = 400.0
    idle_power_w: float = 55.0
    cpu_model: str = "simulated host CPU"
    cpu_cores: int = 32
    host_memory_bytes: int = 256 * _GIB

    @property
    def is_gpu(self) -> bool:
        """True when the profile simulates GPUs (False: a CPU-only machine)."""
        return self.compute_capability is not None

    def nvml(self) -> SimulatedNvml:
        """The simulated machine's NVML (no GPU: ``nvmlInit`` fails, as without a driver)."""
        if self.compute_capability is None:
            return SimulatedNvml(())
        gpu = SimulatedGpu(
            self.gpu_name,
            self.memory_bytes,
            self.compute_capability,
            self.power_limit_w,
            self.idle_power_w,
        )
        return SimulatedNvml((gpu,) * self.count)


def _gpu_profile(
    gpu_name: str,
    memory_mib: int,
    compute_capability: tuple[int, int],
    power_limit_w: float,
    idle_power_w: float,
    count: int,
    allreduce_bytes_per_s: float,
) -> SimulatedMachine:
    """A profile of ``count`` real GPUs of one model, with NVIDIA's published dense peaks."""
    peak = published_peak(gpu_name)
    assert peak is not None, gpu_name
    return SimulatedMachine(
        name=f"{count} x {gpu_name} (simulated)",
        memory_bytes=memory_mib * MIB,
        count=count,
        compute_capability=compute_capability,
        peak_flops=dict(peak.flops_per_s),
        allreduce_bytes_per_s=allreduce_bytes_per_s,
        peak_source=peak.source,
        gpu_name=gpu_name,
        power_limit_w=power_limit_w,
        idle_power_w=idle_power_w,
    )


#: A deliberately small simulated GPU (A100 rates, 64 MiB), so that memory limits show up in
#: the small demo spaces. Rates: NVIDIA A100 datasheet dense peaks (fp32 19.5, tf32 156,
#: fp16/bf16 312 TFLOP/s).
DEFAULT_PROFILE = SimulatedMachine(
    name="mock GPU (simulated; A100 rates, 64 MiB)",
    memory_bytes=64 * MIB,
    count=4,
    compute_capability=(8, 0),
    peak_flops={"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12},
    peak_source="NVIDIA A100 Tensor Core GPU datasheet (dense)",
    gpu_name="mock GPU (simulated; A100 rates, 64 MiB)",
)

#: A simulated CPU-only machine: 16 cores at 2.0 GHz with two AVX-512 FMA units, i.e.
#: 16 x 2.0e9 x 64 fp32 FLOP/cycle = 2.05 TFLOP/s (per-core FMA throughput from the Intel 64
#: and IA-32 Architectures Optimization Reference Manual); bf16 at twice that (AVX512_BF16
#: dot products); fp16 at the fp32 rate (converted; no native fp16 FMA). 64 GiB RAM.
_CPU_PROFILE = SimulatedMachine(
    name="16-core AVX-512 CPU, 64 GiB (simulated)",
    memory_bytes=64 * _GIB,
    count=16,
    compute_capability=None,
    peak_flops={"fp32": 2.048e12, "fp16": 2.048e12, "bf16": 4.096e12},
    launch_overhead_s=5e-6,
    allreduce_bytes_per_s=10e9,
    peak_source="16 cores x 2.0 GHz x 64 FP32 FLOP/cycle (2 AVX-512 FMA units; Intel "
    "Optimization Reference Manual), bf16 2x via AVX512_BF16; gloo all-reduce 10 GB/s assumed",
    cpu_model="simulated 16-core AVX-512 CPU",
    cpu_cores=16,
    host_memory_bytes=64 * _GIB,
)

#: The ``mock.profile`` choices: ``default`` (:data:`DEFAULT_PROFILE`), four real GPU
#: machines, and ``cpu`` (no GPU). GPU names and memory are what NVML reports; memory, power
#: limit (board TDP) and NVLink figures are from NVIDIA's datasheets: H100 SXM5 80 GB, 700 W,
#: NVLink 4 900 GB/s; A100 SXM4 80 GB, 400 W, NVLink 3 600 GB/s; V100 SXM2 32 GB, 300 W;
#: T4 16 GB, 70 W, PCIe 3.0 x16. All-reduce bandwidth is half the bidirectional link figure;
#: idle powers are typical ``nvidia-smi`` readings (assumed). Compute capabilities: NVIDIA's
#: CUDA GPUs table. Peaks: :data:`autotune.core.flops.PUBLISHED_PEAKS`. The simulated machines of
#: the tests (:data:`autotune.testing.machines.SIMULATED_MACHINES`) are these GPUs.
PROFILES: dict[str, SimulatedMachine] = {
    "default": DEFAULT_PROFILE,
    "h100": _gpu_profile("NVIDIA H100 80GB HBM3", 81559, (9, 0), 700.0, 70.0, 8, 450e9),
    "a100": _gpu_profile("NVIDIA A100-SXM4-80GB", 81920, (8, 0), 400.0, 55.0, 4, 300e9),
    "v100": _gpu_profile("Tesla V100-SXM2-32GB", 32768, (7, 0), 300.0, 40.0, 1, 150e9),
    "t4": _gpu_profile("Tesla T4", 15360, (7, 5), 70.0, 10.0, 1, 16e9),
    "cpu": _CPU_PROFILE,
}
#: What ``mock.profile`` accepts: the names of :data:`PROFILES`, in order.
PROFILE_NAMES = tuple(PROFILES)


def get_profile(name: str) -> SimulatedMachine:
    """The mock profile called ``name`` (``mock.profile=NAME``).

    Raises:
        ConfigError: an unknown name.
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"mock.profile={name}: unknown profile (known: {', '.join(PROFILE_NAMES)})"
        ) from None
