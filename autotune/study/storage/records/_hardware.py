"""The hardware fingerprint: what makes two measurements comparable."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from autotune.core.units import MIB

__all__ = ["HardwareFingerprint"]


@dataclass(frozen=True)
class HardwareFingerprint:
    """What makes two measurements comparable: the device, its software stack and the host.

    Attributes:
        device_kind: ``cpu``, ``cuda`` or ``mock``.
        device_name: GPU model, CPU model, or the mock profile's label (says "simulated").
        device_count: GPUs visible (cuda, mock) or logical CPU cores (cpu).
        device_memory_bytes: memory of one device (host RAM on cpu), None when unknown.
        compute_capability: CUDA ``"major.minor"``, None on cpu.
        driver_version: NVIDIA driver from NVML, None off CUDA or without NVML.
        cuda_version: CUDA runtime torch was built with, None off CUDA.
        cudnn_version: cuDNN version as torch reports it, None off CUDA.
        torch_version: ``torch.__version__``.
        cpu_model: host CPU model name.
        cpu_cores: host logical CPU cores.
        simulated: True for the mock device: no figure measured on it is real.
    """

    device_kind: str
    device_name: str
    device_count: int
    device_memory_bytes: int | None
    compute_capability: str | None
    driver_version: str | None
    cuda_version: str | None
    cudnn_version: str | None
    torch_version: str
    cpu_model: str
    cpu_cores: int
    simulated: bool

    @property
    def fingerprint_sha256(self) -> str:
        """SHA-256 of the fields as sorted JSON: equal hardware and stack, equal hash."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def rows(self) -> list[tuple[str, str]]:
        """``(label, value)`` pairs for display; unknown values read "n/a"."""
        mib = self.device_memory_bytes / MIB if self.device_memory_bytes else None
        pairs: list[tuple[str, Any]] = [
            ("device", f"{self.device_kind}: {self.device_name}"),
            ("device count", self.device_count),
            ("device memory", f"{mib:,.0f} MiB" if mib is not None else None),
            ("compute capability", self.compute_capability),
            ("NVIDIA driver", self.driver_version),
            ("CUDA", self.cuda_version),
            ("cuDNN", self.cudnn_version),
            ("torch", self.torch_version),
            ("CPU", f"{self.cpu_model} ({self.cpu_cores} logical cores)"),
            ("simulated", "yes: SIMULATED, no figure is a measurement" if self.simulated else "no"),
            ("fingerprint", self.fingerprint_sha256[:16]),
        ]
        return [(label, "n/a" if value is None else str(value)) for label, value in pairs]
