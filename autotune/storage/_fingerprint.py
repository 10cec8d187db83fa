"""The hardware fingerprint of the machine a study runs on (in the study's own process)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from autotune.hardware import DeviceCapabilities, cpu_model_name
from autotune.storage.records import HardwareFingerprint

__all__ = ["hardware_fingerprint"]


def _nvml_driver_version() -> str | None:
    """The NVIDIA driver version from NVML, or None where NVML is missing or fails."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        try:
            version: Any = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML absent, no driver, no permission: the field is simply unknown
        return None
    return version.decode() if isinstance(version, bytes) else str(version)


def hardware_fingerprint(
    caps: DeviceCapabilities, machine: Mapping[str, Any] | None = None
) -> HardwareFingerprint:
    """Fingerprint the device a study runs on, its software stack and the host CPU.

    Args:
        caps: the resolved device's capabilities (``autotune.hardware.detect_capabilities``).
        machine: the machine fingerprint the study recorded (its ``hardware`` user attribute,
            ``MachineFingerprint.to_dict()``), when there is one: its driver, CUDA, cuDNN,
            torch, CPU model and core count are used as recorded. Otherwise they are read
            here; CUDA, cuDNN and driver versions only for ``cuda`` (the mock device
            simulates a GPU; they mean nothing for it or for cpu).
    """
    import torch

    m = machine or {}
    cuda = caps.kind == "cuda"
    cc = caps.compute_capability
    if m:
        driver, cuda_version, cudnn = (
            m.get("driver_version"),
            m.get("cuda_version"),
            m.get("cudnn_version"),
        )
    else:
        driver = _nvml_driver_version() if cuda else None
        cuda_version = torch.version.cuda if cuda else None
        cudnn = torch.backends.cudnn.version() if cuda else None
    return HardwareFingerprint(
        device_kind=caps.kind,
        device_name=caps.name,
        device_count=caps.count,
        device_memory_bytes=caps.memory_bytes,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc is not None else None,
        driver_version=None if driver is None else str(driver),
        cuda_version=None if cuda_version is None else str(cuda_version),
        cudnn_version=None if cudnn is None else str(cudnn),
        torch_version=str(m.get("torch_version") or torch.__version__),
        cpu_model=str(m.get("cpu_model") or cpu_model_name()),
        cpu_cores=int(m.get("logical_cores") or os.cpu_count() or 1),
        simulated=caps.simulated,
    )
