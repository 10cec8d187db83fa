"""A fake NVML (the ``pynvml`` module of nvidia-ml-py) for tests and the ``mock`` device.

:class:`FakeNvml` answers the calls autotune makes, with the same names, arguments, units and
errors as ``pynvml`` (memory in bytes, power in milliwatts, energy in millijoules since the
driver loaded, utilization in percent). A test passes it where autotune would import
``pynvml``; the ``mock`` device builds its simulated machine from one. Its load is set by the
test (:meth:`FakeNvml.set_load`); its energy counter integrates power over an injectable clock.

Machines (:data:`FAKE_MACHINES`): the GPUs of the ``mock`` device's profiles
(:data:`autotune.devices.mock.PROFILES`, where the datasheet sources are), so tests and the
simulation see the same hardware:

- ``h100x8``: 8 x "NVIDIA H100 80GB HBM3" (SXM5), 81,559 MiB, compute capability 9.0, 700 W.
- ``a100x4``: 4 x "NVIDIA A100-SXM4-80GB", 81,920 MiB, compute capability 8.0, 400 W.
- ``v100x1``: 1 x "Tesla V100-SXM2-32GB", 32,768 MiB, compute capability 7.0, 300 W.
- ``t4``: 1 x "Tesla T4", 15,360 MiB, compute capability 7.5, 70 W.
- ``none``: no NVIDIA driver: ``nvmlInit`` raises ``NVMLError_DriverNotLoaded``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pynvml

__all__ = ["FAKE_MACHINES", "FakeGpu", "FakeNvml", "fake_machine"]


@dataclass(frozen=True)
class FakeGpu:
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


def _gpus_of(profile: str) -> tuple[FakeGpu, ...]:
    from autotune.devices.mock import PROFILES

    p = PROFILES[profile]
    assert p.compute_capability is not None, profile
    gpu = FakeGpu(p.gpu_name, p.memory_bytes, p.compute_capability, p.power_limit_w, p.idle_power_w)
    return (gpu,) * p.count


#: The fake machines tests use, by name: the GPUs of each (an empty tuple: no NVIDIA driver).
FAKE_MACHINES: dict[str, tuple[FakeGpu, ...]] = {
    "h100x8": _gpus_of("h100"),
    "a100x4": _gpus_of("a100"),
    "v100x1": _gpus_of("v100"),
    "t4": _gpus_of("t4"),
    "none": (),
}


def fake_machine(name: str, **kwargs: Any) -> FakeNvml:
    """A :class:`FakeNvml` for one of :data:`FAKE_MACHINES` (``h100x8``, ``a100x4``, ...).

    Raises:
        KeyError: for an unknown machine name.
    """
    return FakeNvml(FAKE_MACHINES[name], **kwargs)


class FakeNvml:
    """Stands in for the ``pynvml`` module: same function names, arguments, units and errors.

    Args:
        gpus: the machine's GPUs, NVML index order; empty means no driver (``nvmlInit`` fails).
        driver_version: what ``nvmlSystemGetDriverVersion`` returns.
        cuda_driver_version: ``nvmlSystemGetCudaDriverVersion`` (e.g. 12040 for CUDA 12.4).
        clock: seconds, for the energy counter; ``time.monotonic`` unless a test injects one.
        unsupported: names of NVML functions that raise ``NVMLError_NotSupported`` (e.g.
            ``{"nvmlDeviceGetTotalEnergyConsumption"}`` for a pre-Volta GPU).
    """

    NVMLError = pynvml.NVMLError

    def __init__(
        self,
        gpus: Sequence[FakeGpu],
        *,
        driver_version: str = "550.54.15",
        cuda_driver_version: int = 12040,
        clock: Callable[[], float] = time.monotonic,
        unsupported: Sequence[str] = (),
    ) -> None:
        self.gpus = tuple(gpus)
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

    # -- test controls ----------------------------------------------------------------------

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

    def _settle(self, index: int) -> None:
        now = self._clock()
        self._energy_mj[index] += self._power_w[index] * 1e3 * (now - self._since[index])
        self._since[index] = now

    # -- pynvml API -------------------------------------------------------------------------

    def _check(self, fn: str) -> None:
        if fn in self._unsupported:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
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
        digest = uuid.uuid5(uuid.NAMESPACE_URL, f"fake-nvml/{self.gpus[index].name}/{index}")
        return f"GPU-{digest}"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        self._check("nvmlDeviceGetMemoryInfo")
        total = self.gpus[self._gpu(handle)].memory_bytes
        return SimpleNamespace(total=total, free=total, used=0)

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

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        self._check("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=round(self._util[self._gpu(handle)]), memory=0)
