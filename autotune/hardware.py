"""What the device can do, and the feasibility rules a configuration must pass before launch.

A configuration the device can never run is not launched: its choices are removed from the
space up front where possible (:func:`restrict_space`), and :func:`infeasibility_reason` names
the rule any remaining configuration breaks.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Any

from autotune.config import COMPILE_MODES, PRECISIONS, SearchSpace
from autotune.exceptions import ConfigError, DeviceUnavailableError

__all__ = [
    "DeviceCapabilities",
    "cpu_model_name",
    "detect_capabilities",
    "infeasibility_reason",
    "resolve_device",
    "restrict_space",
]


@dataclass(frozen=True)
class DeviceCapabilities:
    """The facts about a device that decide what it can run.

    Attributes:
        kind: ``cpu``, ``cuda`` or ``mock``.
        name: human-readable device name (GPU model, CPU model, or the mock profile).
        count: GPUs visible (cuda, mock) or logical CPU cores (cpu): the largest world size.
        memory_bytes: memory of one device (GPU memory; host RAM on cpu), or None if unknown.
        compute_capability: CUDA ``(major, minor)``; None on cpu.
        simulated: True for the mock device.
    """

    kind: str
    name: str
    count: int
    memory_bytes: int | None
    compute_capability: tuple[int, int] | None
    simulated: bool = False

    @property
    def is_gpu(self) -> bool:
        """True for CUDA and for the mock device (which simulates a GPU)."""
        return self.kind in ("cuda", "mock")


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


def cpu_model_name() -> str:
    """The CPU model from /proc/cpuinfo, or ``platform.processor()`` elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover (non-Linux)
        pass
    return platform.processor() or "unknown CPU"


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return None


def detect_capabilities(kind: str) -> DeviceCapabilities:
    """Capabilities of a resolved device kind (``cpu``, ``cuda`` or ``mock``)."""
    if kind == "mock":
        from autotune.devices.mock import DEFAULT_PROFILE

        return DEFAULT_PROFILE.capabilities()
    if kind == "cpu":
        return DeviceCapabilities(
            kind="cpu",
            name=cpu_model_name(),
            count=os.cpu_count() or 1,
            memory_bytes=_host_memory_bytes(),
            compute_capability=None,
        )
    import torch

    props = torch.cuda.get_device_properties(0)
    return DeviceCapabilities(
        kind="cuda",
        name=props.name,
        count=torch.cuda.device_count(),
        memory_bytes=int(props.total_memory),
        compute_capability=(props.major, props.minor),
    )


def _precision_reason(precision: str, caps: DeviceCapabilities) -> str | None:
    if precision == "tf32" and not caps.is_gpu:
        return "tf32 is a CUDA tensor-core mode; the CPU has no TF32"
    cc = caps.compute_capability
    if caps.is_gpu and precision in ("tf32", "bf16") and cc is not None and cc < (8, 0):
        return (
            f"{precision} needs CUDA compute capability >= 8.0, but {caps.name} has {cc[0]}.{cc[1]}"
        )
    return None


def _compile_reason(mode: str, caps: DeviceCapabilities) -> str | None:
    if mode == "reduce-overhead" and not caps.is_gpu:
        return "compile mode reduce-overhead uses CUDA graphs and needs a CUDA device"
    return None


def _world_size_reason(gpu_count: int, caps: DeviceCapabilities) -> str | None:
    if gpu_count > caps.count:
        unit = "CPU cores" if caps.kind == "cpu" else "GPUs"
        return f"gpu_count={gpu_count} exceeds the {caps.count} {unit} of {caps.name}"
    return None


def infeasibility_reason(knobs: dict[str, Any], caps: DeviceCapabilities) -> str | None:
    """The first feasibility rule a configuration breaks on this device, or None.

    Args:
        knobs: the trial's knob values (``TrialConfig.knobs()``).
        caps: the device's capabilities.
    """
    return (
        _precision_reason(knobs["precision"], caps)
        or _compile_reason(knobs["compile_mode"], caps)
        or _world_size_reason(knobs["gpu_count"], caps)
    )


def restrict_space(space: SearchSpace, caps: DeviceCapabilities) -> tuple[SearchSpace, list[str]]:
    """Remove the choices the device can never run.

    Returns:
        The restricted space and one line per removed choice with the rule's reason.

    Raises:
        ConfigError: when a knob would be left with no choice at all.
    """
    removed: list[str] = []

    def keep(knob: str, values: list[Any], reason_of: Any) -> list[Any]:
        kept = []
        for value in values:
            reason = reason_of(value, caps)
            if reason is None:
                kept.append(value)
            else:
                removed.append(f"{knob}={value}: {reason}")
        if not kept:
            raise ConfigError(
                f"space {space.name}: {knob}: no choice can run on {caps.name} ({removed[-1]})"
            )
        return kept

    precision = keep(
        "precision", [p for p in PRECISIONS if p in space.precision.values()], _precision_reason
    )
    compile_mode = keep(
        "compile_mode",
        [m for m in COMPILE_MODES if m in space.compile_mode.values()],
        _compile_reason,
    )
    gpu_count = keep("gpu_count", space.gpu_count.values(), _world_size_reason)
    restricted = space.model_copy(
        update={
            "precision": space.precision.restricted(precision),
            "compile_mode": space.compile_mode.restricted(compile_mode),
            "gpu_count": space.gpu_count.restricted(gpu_count)
            if len(gpu_count) < len(space.gpu_count.values())
            else space.gpu_count,
        }
    )
    return restricted, removed
