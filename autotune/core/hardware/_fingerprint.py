"""The machine a study runs on: host probing and :class:`MachineFingerprint`.

The fingerprint is what makes two measurements comparable (GPUs through NVML, driver,
CUDA/cuDNN/torch versions, CPU model and cores, RAM); this module is the one place the machine
is probed. Each study keeps the fingerprint of its machine in its user attribute ``hardware``
(:func:`autotune.study.search.check_study_hardware` refuses to mix machines in one study unless told
to); :func:`fingerprint_mismatch` says what differs.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autotune.core.exceptions import DeviceUnavailableError
from autotune.core.hardware.simulated import get_profile
from autotune.core.nvml import GpuInfo, read_nvml, visible_nvml_indices

__all__ = [
    "MachineFingerprint",
    "cpu_model_name",
    "detect_fingerprint",
    "fingerprint_mismatch",
    "physical_cpu_cores",
]


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


def physical_cpu_cores(sys_cpu: Path = Path("/sys/devices/system/cpu")) -> int:
    """Physical cores: distinct (package, core) pairs in Linux's CPU topology; the logical
    count where the topology is not readable."""
    cores = set()
    for topology in sys_cpu.glob("cpu[0-9]*/topology"):
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            continue
        cores.add((package, core))
    return len(cores) or os.cpu_count() or 1


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return None


@dataclass(frozen=True)
class MachineFingerprint:
    """What makes two measurements comparable, and what ``autotune hardware`` prints.

    Attributes:
        device_kind: the device a study runs on: ``cpu``, ``cuda`` or ``mock``.
        simulated: True for the mock device (its GPUs come from a simulated NVML).
        mock_profile: the mock profile's name, None on real devices.
        gpus: the GPUs CUDA uses (NVML's view, ``CUDA_VISIBLE_DEVICES`` applied), in CUDA order.
        driver_version: NVIDIA driver, None without NVML.
        cuda_driver_version: newest CUDA the driver supports, None without NVML.
        cuda_version: CUDA runtime torch was built with (``torch.version.cuda``), None on a
            CPU build.
        cudnn_version: cuDNN as torch reports it (e.g. ``90100``), None without cuDNN.
        torch_version: ``torch.__version__``.
        cpu_model: host CPU model.
        physical_cores: host physical CPU cores.
        logical_cores: host logical CPU cores (hardware threads).
        ram_bytes: host RAM, bytes.
    """

    device_kind: str
    simulated: bool
    mock_profile: str | None
    gpus: tuple[GpuInfo, ...]
    driver_version: str | None
    cuda_driver_version: str | None
    cuda_version: str | None
    cudnn_version: str | None
    torch_version: str
    cpu_model: str
    physical_cores: int
    logical_cores: int
    ram_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (stored as the study's ``hardware`` user attribute)."""
        d = asdict(self)
        d["gpus"] = [g.to_dict() for g in self.gpus]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MachineFingerprint:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**d, "gpus": tuple(GpuInfo.from_dict(g) for g in d["gpus"])})

    def comparable(self) -> dict[str, Any]:
        """The fields that must match for throughputs to be comparable.

        Always: the device kind. Real devices: torch version and the host CPU (model, cores),
        which feeds the input pipeline. CUDA adds each GPU's name, memory and compute
        capability, the driver, CUDA and cuDNN. The mock device: its profile and simulated
        GPUs only (the simulation does not depend on the host). UUIDs, power limits and RAM
        are left out: the same model of GPU in another slot or machine is comparable.
        """
        view: dict[str, Any] = {"device_kind": self.device_kind}
        gpus = [
            {"name": g.name, "memory_bytes": g.memory_bytes, "cc": list(g.compute_capability)}
            for g in self.gpus
        ]
        if self.device_kind == "mock":
            view.update(mock_profile=self.mock_profile, gpus=gpus)
            return view
        view.update(
            torch_version=self.torch_version,
            cpu_model=self.cpu_model,
            physical_cores=self.physical_cores,
            logical_cores=self.logical_cores,
        )
        if self.device_kind == "cuda":
            view.update(
                gpus=gpus,
                driver_version=self.driver_version,
                cuda_version=self.cuda_version,
                cudnn_version=self.cudnn_version,
            )
        return view

    def rows(self) -> list[tuple[str, str]]:
        """``(label, value)`` pairs for display."""

        def gib(n: int | None) -> str:
            return f"{n / (1 << 30):,.1f} GiB" if n else "n/a"

        rows = [("device", self.device_kind + (" (SIMULATED)" if self.simulated else ""))]
        if self.mock_profile is not None:
            rows.append(("mock profile", self.mock_profile))
        for i, g in enumerate(self.gpus):
            limit = f"{g.power_limit_w:,.0f} W" if g.power_limit_w is not None else "n/a"
            rows.append(
                (
                    f"GPU {i}",
                    f"{g.name} · {g.uuid} · {gib(g.memory_bytes)} · compute capability "
                    f"{g.compute_capability[0]}.{g.compute_capability[1]} · power limit {limit}",
                )
            )
        if not self.gpus:
            rows.append(("GPUs", "none (NVML found no NVIDIA GPU)"))
        rows += [
            ("NVIDIA driver", self.driver_version or "n/a"),
            ("CUDA (driver supports)", self.cuda_driver_version or "n/a"),
            ("CUDA (torch built with)", self.cuda_version or "n/a"),
            ("cuDNN", self.cudnn_version or "n/a"),
            ("torch", self.torch_version),
            ("CPU", self.cpu_model),
            ("CPU cores", f"{self.physical_cores} physical, {self.logical_cores} logical"),
            ("RAM", gib(self.ram_bytes)),
        ]
        return rows


def detect_fingerprint(
    kind: str, *, mock_profile: str = "default", nvml: Any | None = None
) -> MachineFingerprint:
    """Fingerprint this machine (or the mock profile's simulated one). Never initializes CUDA.

    Args:
        kind: ``cpu``, ``cuda`` or ``mock``; ``auto`` is ``cuda`` when NVML lists a GPU CUDA
            can see, else ``cpu``.
        mock_profile: the mock profile (``kind="mock"`` only).
        nvml: the ``pynvml`` module or a stand-in
            (:class:`autotune.core.hardware.simulated.SimulatedNvml`); None imports ``pynvml``.
            Without NVML (no driver) there are no GPUs.

    Raises:
        ConfigError: an unknown mock profile.
        DeviceUnavailableError: ``auto`` or ``cuda`` where NVML starts but cannot read a GPU
            (:func:`autotune.core.nvml.read_nvml`); for ``cpu`` such a machine reads as one
            without GPUs (a study on the CPU does not need them).
    """
    if kind == "mock":
        return _simulated_fingerprint(mock_profile)
    import torch

    try:
        info = read_nvml(nvml)
    except DeviceUnavailableError:
        if kind != "cpu":
            raise
        info = None
    gpus: tuple[GpuInfo, ...] = ()
    if info is not None:
        order = visible_nvml_indices(
            os.environ.get("CUDA_VISIBLE_DEVICES"), [g.uuid for g in info.gpus]
        )
        gpus = tuple(info.gpus[i] for i in order)
    if kind == "auto":
        kind = "cuda" if gpus else "cpu"
    cudnn = None
    if torch.version.cuda is not None and torch.backends.cudnn.is_available():
        cudnn = str(torch.backends.cudnn.version())
    return MachineFingerprint(
        device_kind=kind,
        simulated=False,
        mock_profile=None,
        gpus=gpus,
        driver_version=info.driver_version if info else None,
        cuda_driver_version=info.cuda_driver_version if info else None,
        cuda_version=torch.version.cuda,
        cudnn_version=cudnn,
        torch_version=str(torch.__version__),
        cpu_model=cpu_model_name(),
        physical_cores=physical_cpu_cores(),
        logical_cores=os.cpu_count() or 1,
        ram_bytes=_host_memory_bytes(),
    )


def _simulated_fingerprint(mock_profile: str) -> MachineFingerprint:
    """The mock profile's simulated machine, read through its simulated NVML as
    :func:`detect_fingerprint` reads a real one.

    Raises:
        ConfigError: an unknown mock profile.
    """
    import torch

    profile = get_profile(mock_profile)
    info = read_nvml(profile.nvml())
    return MachineFingerprint(
        device_kind="mock",
        simulated=True,
        mock_profile=mock_profile,
        gpus=info.gpus if info else (),
        driver_version=info.driver_version if info else None,
        cuda_driver_version=info.cuda_driver_version if info else None,
        cuda_version=None,
        cudnn_version=None,
        torch_version=str(torch.__version__),
        cpu_model=profile.cpu_model,
        physical_cores=profile.cpu_cores,
        logical_cores=profile.cpu_cores,
        ram_bytes=profile.host_memory_bytes,
    )


def fingerprint_mismatch(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """What differs between two fingerprints (``MachineFingerprint.to_dict()`` form) in the
    fields that decide comparability (:meth:`MachineFingerprint.comparable`), or None.

    Returns:
        ``"key: old -> new; ..."`` for every differing field, or None when they match.
    """
    a = MachineFingerprint.from_dict(old).comparable()
    b = MachineFingerprint.from_dict(new).comparable()
    diffs = []
    for key in sorted(set(a) | set(b)):
        if json.dumps(a.get(key), sort_keys=True) != json.dumps(b.get(key), sort_keys=True):
            diffs.append(f"{key}: {_short(a.get(key))} -> {_short(b.get(key))}")
    return "; ".join(diffs) or None


def _short(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict) and "name" in value[0]:
        names = [v["name"] for v in value]
        return f"{len(names)} x {names[0]}" if len(set(names)) == 1 else " + ".join(names)
    if isinstance(value, list) and not value:
        return "no GPU"
    return str(value)
