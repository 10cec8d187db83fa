"""The results-table value of the machine a study runs on, derived from its fingerprint.

The machine is probed in one place, :func:`autotune.core.hardware.detect_fingerprint`; this module
only reshapes that fingerprint (and the device's capabilities) into the row the results
tables store, :class:`~autotune.study.storage.records.HardwareFingerprint`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.core.hardware import DeviceCapabilities, MachineFingerprint
from autotune.study.storage.records import HardwareFingerprint

__all__ = ["hardware_fingerprint"]


def hardware_fingerprint(
    caps: DeviceCapabilities, machine: MachineFingerprint | Mapping[str, Any]
) -> HardwareFingerprint:
    """The results-table fingerprint of a device and the machine it is on (a pure function).

    Args:
        caps: the resolved device's capabilities (``autotune.core.hardware.detect_capabilities``):
            its kind, name, count, memory, compute capability and whether it is simulated.
        machine: the machine's fingerprint: a :class:`~autotune.core.hardware.MachineFingerprint`
            or its ``to_dict()`` form (the study's ``hardware`` user attribute). Its torch
            version, CPU model and logical cores are used; its driver, CUDA and cuDNN versions
            only for ``cuda`` (the mock device simulates a GPU; they mean nothing for it or
            for cpu).

    Raises:
        KeyError: ``machine`` is a mapping without one of the fields used.
    """
    m = machine.to_dict() if isinstance(machine, MachineFingerprint) else machine
    cuda = caps.kind == "cuda"
    cc = caps.compute_capability

    def version(key: str) -> str | None:
        value = m[key] if cuda else None
        return None if value is None else str(value)

    return HardwareFingerprint(
        device_kind=caps.kind,
        device_name=caps.name,
        device_count=caps.count,
        device_memory_bytes=caps.memory_bytes,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc is not None else None,
        driver_version=version("driver_version"),
        cuda_version=version("cuda_version"),
        cudnn_version=version("cudnn_version"),
        torch_version=str(m["torch_version"]),
        cpu_model=str(m["cpu_model"]),
        cpu_cores=int(m["logical_cores"]),
        simulated=caps.simulated,
    )
