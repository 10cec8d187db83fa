"""What a device can do: :class:`DeviceCapabilities`, read from the machine's fingerprint
(a real machine, or a mock profile's simulated one), with the peak FLOP/s MFU is measured
against (the published table on a known GPU, a matmul benchmark on the CPU).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.core.exceptions import ConfigError, DeviceUnavailableError
from autotune.core.flops import measure_matmul_peak, published_peak
from autotune.core.hardware._fingerprint import (
    MachineFingerprint,
    _simulated_fingerprint,
    detect_fingerprint,
)
from autotune.core.hardware.simulated import get_profile

__all__ = [
    "CUDA_GRAPH_MODES",
    "DeviceCapabilities",
    "capabilities_from_fingerprint",
    "detect_capabilities",
    "precision_reason",
    "resolve_device",
]


#: Compile modes whose Inductor records CUDA graphs on a CUDA device (``triton.cudagraphs``
#: in ``torch._inductor.list_mode_options``, torch 2.4 to 2.13); ``default`` records none.
CUDA_GRAPH_MODES: tuple[str, ...] = ("reduce-overhead", "max-autotune")


@dataclass(frozen=True)
class DeviceCapabilities:
    """The facts about a device that decide what it can run, and its peak FLOP/s.

    Attributes:
        kind: ``cpu``, ``cuda`` or ``mock``.
        name: human-readable device name (GPU model, CPU model, or the mock profile).
        count: GPUs visible (cuda, mock GPU) or logical CPU cores (cpu, mock CPU): the
            largest world size.
        memory_bytes: memory of one device (GPU memory; host RAM on cpu), or None if unknown.
        compute_capability: CUDA ``(major, minor)``; None on cpu and the mock CPU.
        simulated: True for the mock device.
        peak_flops_per_s: peak FLOP/s of one device per precision, for MFU (empty: unknown).
        peak_flops_source: where the peaks come from (datasheet, measurement, profile).
        fingerprint: the machine, for the study record; None when not detected.
        cuda_visible_devices: the ``CUDA_VISIBLE_DEVICES`` this process's trials run under
            when it owns part of the machine's GPUs (a worker of several:
            :func:`autotune.core.hardware.worker_share`); None: the GPUs the process sees.
    """

    kind: str
    name: str
    count: int
    memory_bytes: int | None
    compute_capability: tuple[int, int] | None
    simulated: bool = False
    peak_flops_per_s: Mapping[str, float] = field(default_factory=dict)
    peak_flops_source: str = ""
    fingerprint: MachineFingerprint | None = None
    cuda_visible_devices: str | None = None

    @property
    def is_gpu(self) -> bool:
        """True for CUDA and for a mock profile that simulates GPUs (not the mock CPU)."""
        return self.kind == "cuda" or (self.kind == "mock" and self.compute_capability is not None)


def resolve_device(name: str) -> str:
    """Turn ``auto`` into ``cuda`` when a GPU is visible, else ``cpu``.

    Raises:
        DeviceUnavailableError: ``device=cuda`` on a machine where torch sees no GPU.
        ConfigError: an unknown device name.
    """
    if name == "mock" or name == "cpu":
        return name
    if name not in ("auto", "cuda"):
        raise ConfigError(f"device={name}: unknown device (known: auto, cpu, cuda, mock)")
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if name == "cuda":
        raise DeviceUnavailableError(
            "device=cuda: torch sees no CUDA GPU on this machine (use device=cpu or device=mock)"
        )
    return "cpu"


#: Precisions whose peak a CPU is measured in (tf32 does not exist there).
_CPU_PRECISIONS = ("fp32", "fp16", "bf16")


def capabilities_from_fingerprint(fp: MachineFingerprint) -> DeviceCapabilities:
    """The capabilities of a real ``cuda`` or ``cpu`` machine, from its fingerprint.

    CUDA: the first GPU's name, the smallest memory and capability of the visible GPUs, and
    the published peaks for that GPU (:data:`autotune.core.flops.PUBLISHED_PEAKS`; an unknown GPU
    gets no peak here and the trial measures one). CPU: logical cores, RAM, and a matmul
    peak measured once in this process (:func:`autotune.core.flops.measure_matmul_peak`).

    Raises:
        DeviceUnavailableError: ``cuda`` with no GPU in the fingerprint.
    """
    if fp.device_kind == "cuda":
        if not fp.gpus:
            raise DeviceUnavailableError("device=cuda: NVML lists no visible NVIDIA GPU")
        names = sorted({g.name for g in fp.gpus})
        peak = published_peak(fp.gpus[0].name) if len(names) == 1 else None
        return DeviceCapabilities(
            kind="cuda",
            name=fp.gpus[0].name if len(names) == 1 else " + ".join(names),
            count=len(fp.gpus),
            memory_bytes=min(g.memory_bytes for g in fp.gpus),
            compute_capability=min(g.compute_capability for g in fp.gpus),
            peak_flops_per_s=dict(peak.flops_per_s) if peak else {},
            peak_flops_source=(
                f"published dense peak of {peak.label}: {peak.source}"
                if peak
                else "measured per trial (GPU not in the published table)"
            ),
            fingerprint=fp,
        )
    import torch

    peaks = {p: measure_matmul_peak(p) for p in _CPU_PRECISIONS}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    busy = (
        f"; the machine was busy (load average {load:.1f} on {fp.logical_cores} cores), so "
        "this peak reads low and MFU high"
        if load > fp.logical_cores
        else ""
    )
    return DeviceCapabilities(
        kind="cpu",
        name=fp.cpu_model,
        count=fp.logical_cores,
        memory_bytes=fp.ram_bytes,
        compute_capability=None,
        peak_flops_per_s=peaks,
        peak_flops_source=(
            f"measured square-matmul peak on this CPU ({torch.get_num_threads()} threads, "
            f"best of repeated products, once per process{busy})"
        ),
        fingerprint=fp,
    )


def detect_capabilities(
    kind: str, *, mock_profile: str = "default", nvml: Any | None = None
) -> DeviceCapabilities:
    """Capabilities of a resolved device kind (``cpu``, ``cuda`` or ``mock``).

    Args:
        kind: the resolved device (:func:`resolve_device`).
        mock_profile: the mock profile (``mock.profile``); only ``default`` is allowed for a
            real device.
        nvml: the ``pynvml`` module or a fake; None imports ``pynvml``.

    Raises:
        ConfigError: an unknown mock profile, or a mock profile given for a real device.
        DeviceUnavailableError: ``cuda`` where NVML starts but cannot read a GPU
            (:func:`detect_fingerprint`).
    """
    if kind == "mock":
        return _simulated_capabilities(mock_profile)
    if mock_profile != "default":
        raise ConfigError(
            f"mock.profile={mock_profile}: only for device=mock (the device is {kind})"
        )
    fp = detect_fingerprint(kind, nvml=nvml)
    if kind == "cuda" and not fp.gpus:
        # NVML is missing (e.g. a container without the library): ask torch instead.
        import torch

        props = torch.cuda.get_device_properties(0)
        # The published peak by torch's name of the GPU, as with NVML's: without it the
        # study had no peak, and the trials measure one only for a GPU the table lacks.
        peak = published_peak(props.name)
        return DeviceCapabilities(
            kind="cuda",
            name=props.name,
            count=torch.cuda.device_count(),
            memory_bytes=int(props.total_memory),
            compute_capability=(props.major, props.minor),
            peak_flops_per_s=dict(peak.flops_per_s) if peak else {},
            peak_flops_source=(
                f"published dense peak of {peak.label}: {peak.source}"
                if peak
                else "measured per trial (GPU not in the published table)"
            ),
            fingerprint=fp,
        )
    return capabilities_from_fingerprint(fp)


def _simulated_capabilities(mock_profile: str) -> DeviceCapabilities:
    """A mock profile as the feasibility rules see it: its GPUs read through its simulated
    NVML, its rates from the profile (SIMULATED).

    Raises:
        ConfigError: an unknown mock profile.
    """
    profile = get_profile(mock_profile)
    fp = _simulated_fingerprint(mock_profile)
    return DeviceCapabilities(
        kind="mock",
        name=profile.name,
        count=len(fp.gpus) if fp.gpus else profile.count,
        memory_bytes=fp.gpus[0].memory_bytes if fp.gpus else profile.memory_bytes,
        compute_capability=fp.gpus[0].compute_capability if fp.gpus else None,
        simulated=True,
        peak_flops_per_s=dict(profile.peak_flops),
        peak_flops_source=f"SIMULATED profile rates: {profile.peak_source}",
        fingerprint=fp,
    )


def precision_reason(precision: str, caps: DeviceCapabilities) -> str | None:
    """Why the device cannot run ``precision`` at all, or None: TF32 is a CUDA tensor-core
    mode, and TF32 and bf16 need compute capability 8.0 (Ampere) or later."""
    if precision == "tf32" and not caps.is_gpu:
        return "tf32 is a CUDA tensor-core mode; the CPU has no TF32"
    cc = caps.compute_capability
    if caps.is_gpu and precision in ("tf32", "bf16") and cc is not None and cc < (8, 0):
        return (
            f"{precision} needs CUDA compute capability >= 8.0, but {caps.name} has {cc[0]}.{cc[1]}"
        )
    return None
