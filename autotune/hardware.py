"""The machine: its fingerprint, what its device can do, and the rules a trial must pass.

- :class:`MachineFingerprint` is what makes two measurements comparable (GPUs through NVML,
  driver, CUDA/cuDNN/torch versions, CPU model and cores, RAM). Each study keeps the
  fingerprint of its machine in its user attribute ``hardware``; :func:`check_study_hardware`
  refuses to mix machines in one study unless told to (``--allow-hardware-change``).
- :class:`DeviceCapabilities` are the facts the feasibility rules read, plus the peak FLOP/s
  MFU is measured against. The mock device's simulated machines (:mod:`autotune.simulated`)
  are read the same way, through their simulated NVML.
- Feasibility: each rule is a small pure function returning the reason a configuration cannot
  run, or None. :func:`restrict_space` removes the choices the device can never run before a
  study starts; :func:`trial_infeasibility_reason` names the rule any remaining configuration
  breaks, so it is never launched (it is recorded as PRUNED with ``failure=infeasible``).
- :func:`estimate_memory` predicts a trial's peak memory from its model, batch, optimizer,
  workers and world size; :data:`MEMORY_ESTIMATE_TOLERANCE` is its accuracy.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.config import COMPILE_MODES, PRECISIONS, IntParam, SearchSpace, TrialConfig
from autotune.exceptions import ConfigError, DeviceUnavailableError
from autotune.flops import ModelProfile, measure_matmul_peak, profile_model, published_peak
from autotune.nvml import GpuInfo, read_nvml, visible_nvml_indices
from autotune.simulated import get_profile

if TYPE_CHECKING:
    import optuna

__all__ = [
    "CPU_RUNTIME_BYTES",
    "CUDA_RUNTIME_BYTES",
    "MEMORY_ESTIMATE_TOLERANCE",
    "MOCK_RUNTIME_BYTES",
    "DeviceCapabilities",
    "MachineFingerprint",
    "MemoryEstimate",
    "capabilities_from_fingerprint",
    "check_study_hardware",
    "cpu_model_name",
    "detect_capabilities",
    "detect_fingerprint",
    "estimate_memory",
    "estimate_trial_memory",
    "fingerprint_mismatch",
    "infeasibility_reason",
    "physical_cpu_cores",
    "resolve_device",
    "restrict_space",
    "trial_infeasibility_reason",
]

_MIB = 1 << 20


# --------------------------------------------------------------------------------------------
# Fingerprint


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
        simulated: True for the mock device (its GPUs come from a fake NVML).
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
        nvml: the ``pynvml`` module or a stand-in (:class:`autotune.simulated.SimulatedNvml`);
            None imports ``pynvml``. Without NVML (no driver) there are no GPUs.

    Raises:
        ConfigError: an unknown mock profile.
    """
    if kind == "mock":
        return _simulated_fingerprint(mock_profile)
    import torch

    info = read_nvml(nvml)
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


def check_study_hardware(
    study: optuna.Study, fingerprint: MachineFingerprint | None, *, allow_change: bool
) -> None:
    """Record the machine in the study's ``hardware`` user attribute, or refuse another one.

    A new study (or one made before fingerprints existed) records ``fingerprint``. An
    existing study compares it with the machine it last ran on; on a difference it raises,
    unless ``allow_change``: then the change is appended to the ``hardware_changes`` user
    attribute as ``{"from_trial": <first trial number on the new machine>, "hardware": ...}``.

    Raises:
        ConfigError: the study was measured on other hardware and ``allow_change`` is False.
    """
    if fingerprint is None:
        return
    current = fingerprint.to_dict()
    recorded = study.user_attrs.get("hardware")
    if recorded is None:
        study.set_user_attr("hardware", current)
        return
    changes = list(study.user_attrs.get("hardware_changes", []))
    last = changes[-1]["hardware"] if changes else recorded
    diff = fingerprint_mismatch(last, current)
    if diff is None:
        return
    if not allow_change:
        raise ConfigError(
            f"study={study.study_name}: it was measured on other hardware ({diff}); throughputs "
            "from two machines are not comparable. Start a new study (study=NAME, optionally "
            f"warm_start={study.study_name}) or pass --allow-hardware-change"
        )
    changes.append({"from_trial": len(study.trials), "hardware": current})
    study.set_user_attr("hardware_changes", changes)


# --------------------------------------------------------------------------------------------
# Capabilities


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
    the published peaks for that GPU (:data:`autotune.flops.PUBLISHED_PEAKS`; an unknown GPU
    gets no peak here and the trial measures one). CPU: logical cores, RAM, and a matmul
    peak measured once in this process (:func:`autotune.flops.measure_matmul_peak`).

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
        return DeviceCapabilities(
            kind="cuda",
            name=props.name,
            count=torch.cuda.device_count(),
            memory_bytes=int(props.total_memory),
            compute_capability=(props.major, props.minor),
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


# --------------------------------------------------------------------------------------------
# Memory estimate

#: The estimate's accuracy: within +-30 % of the measured CPU peak RSS growth over the 19
#: cnn_small configurations of the README's table ("Hardware"; the global-pooling CNN), and
#: +31 % seen once since for the flatten-head CNN (depth 3, width 64, batch 256, bf16 on
#: digits: 58.9 MB estimated, 44.9 MB measured; other runs of it were within 30 %). A
#: configuration is refused only when its estimate exceeds the memory by more than that:
#: estimate / 1.35 > memory.
MEMORY_ESTIMATE_TOLERANCE = 0.35
#: Per-process memory of a CPU trial beyond its tensors: oneDNN/OpenMP buffers and threads,
#: autograd engine, allocator slack. Measured here (torch 2.13 CPU, x86-64): 21.7-29.3 MiB
#: over 11 cnn_small configurations after tensors are taken out; 24 MiB is their middle.
CPU_RUNTIME_BYTES = 24 * _MIB
#: CUDA allocator bytes beyond the model's tensors (cuBLAS/cuDNN workspaces). An assumption:
#: not validated on a GPU yet. The CUDA context itself is outside the allocator's count.
CUDA_RUNTIME_BYTES = 16 * _MIB
#: The mock device's simulated workspace.
MOCK_RUNTIME_BYTES = 4 * _MIB
#: At the peak of backward the saved activations and their gradients coexist: 2x the saved
#: bytes (measured on CPU: 2.0x over batch 16 -> 256 for depth 3, width 64).
ACTIVATION_PEAK_FACTOR = 2.0
#: Bytes per parameter of optimizer state plus its step's temporaries: AdamW keeps two fp32
#: moments (8 B) and its foreach step holds about two parameter-sized temporaries (8 B);
#: SGD with momentum keeps one buffer (4 B) and one temporary (4 B).
OPTIMIZER_BYTES_PER_PARAMETER = {"adamw": 16, "sgd": 8}
#: Batches each DataLoader worker prepares ahead (torch's default ``prefetch_factor``).
PREFETCH_FACTOR = 2


@dataclass(frozen=True)
class MemoryEstimate:
    """Predicted peak memory of one trial on its device, by component (bytes).

    Attributes:
        parameters_bytes: fp32 weights (one replica per rank).
        gradients_bytes: fp32 gradients, plus DDP's gradient buckets when world size > 1.
        optimizer_bytes: optimizer state and its step's temporaries.
        activations_bytes: what backward needs at its peak: saved activations of the batch
            times :data:`ACTIVATION_PEAK_FACTOR`, plus autocast's weight copies.
        batch_bytes: the input batch and labels on the device.
        prefetch_bytes: batches the DataLoader workers hold ahead (host memory: counted on
            the CPU only; on a GPU they sit in pinned host memory).
        runtime_bytes: the process's memory beyond tensors (:data:`CPU_RUNTIME_BYTES`, ...).
        ranks: processes adding up on this memory (CPU: the world size, one host; GPU: 1,
            each rank has its own GPU).
    """

    parameters_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    batch_bytes: int
    prefetch_bytes: int
    runtime_bytes: int
    ranks: int = 1

    @property
    def per_rank_bytes(self) -> int:
        """One rank's predicted peak (bytes)."""
        return (
            self.parameters_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.batch_bytes
            + self.prefetch_bytes
            + self.runtime_bytes
        )

    @property
    def total_bytes(self) -> int:
        """Predicted peak on one device: every rank that shares it (bytes)."""
        return self.ranks * self.per_rank_bytes

    def describe(self) -> str:
        """A short breakdown in MiB."""
        parts = (
            (
                "params+grads+optimizer",
                self.parameters_bytes + self.gradients_bytes + self.optimizer_bytes,
            ),
            ("activations", self.activations_bytes),
            ("batch+prefetch", self.batch_bytes + self.prefetch_bytes),
            ("runtime", self.runtime_bytes),
        )
        text = ", ".join(f"{name} {value / _MIB:,.1f}" for name, value in parts)
        return f"{text} MiB" + (f", x {self.ranks} ranks" if self.ranks > 1 else "")


def estimate_memory(
    profile: ModelProfile,
    *,
    batch_size: int,
    num_workers: int,
    world_size: int,
    optimizer: str,
    on_gpu: bool,
    runtime_bytes: int | None = None,
) -> MemoryEstimate:
    """Predict a trial's peak memory on its device (a pure function of its inputs).

    Parameters, gradients and optimizer state are fp32 whatever the autocast precision;
    activations scale with the per-rank batch; DDP adds one gradient-sized bucket copy.
    Compiler memory (torch.compile's own Python and generated code) is not included: the
    estimate is of the training tensors and the runtime of an eager trial.

    Args:
        profile: the model's sizes (:func:`autotune.flops.profile_model`).
        batch_size: samples per rank.
        num_workers: DataLoader workers.
        world_size: DDP ranks (``gpu_count``).
        optimizer: ``adamw`` or ``sgd``.
        on_gpu: the device is a GPU (each rank has its own memory; prefetch stays on the
            host) rather than the CPU (ranks share RAM; prefetch counts).
        runtime_bytes: per-process memory beyond tensors; default :data:`CUDA_RUNTIME_BYTES`
            on a GPU, :data:`CPU_RUNTIME_BYTES` on the CPU.
    """
    params_bytes = 4 * profile.parameters
    batch_bytes = batch_size * profile.input_bytes_per_sample
    return MemoryEstimate(
        parameters_bytes=params_bytes,
        gradients_bytes=params_bytes * (2 if world_size > 1 else 1),
        optimizer_bytes=OPTIMIZER_BYTES_PER_PARAMETER[optimizer] * profile.parameters,
        activations_bytes=int(
            ACTIVATION_PEAK_FACTOR * profile.activation_bytes_per_sample * batch_size
            + profile.activation_fixed_bytes
        ),
        batch_bytes=batch_bytes,
        prefetch_bytes=0 if on_gpu else num_workers * PREFETCH_FACTOR * batch_bytes,
        runtime_bytes=(
            runtime_bytes
            if runtime_bytes is not None
            else (CUDA_RUNTIME_BYTES if on_gpu else CPU_RUNTIME_BYTES)
        ),
        ranks=1 if on_gpu else world_size,
    )


def _runtime_bytes(caps: DeviceCapabilities) -> int:
    if caps.kind == "mock":
        return MOCK_RUNTIME_BYTES if caps.is_gpu else CPU_RUNTIME_BYTES
    return CUDA_RUNTIME_BYTES if caps.kind == "cuda" else CPU_RUNTIME_BYTES


def estimate_trial_memory(config: TrialConfig, caps: DeviceCapabilities) -> MemoryEstimate:
    """:func:`estimate_memory` for a trial configuration on a device (traces its model once
    per process with :func:`autotune.flops.profile_model`).

    Raises:
        WorkloadError: the workload cannot be loaded.
        Exception: whatever the workload's model or data raise while it is traced.
    """
    profile = profile_model(config.workload, config.model, config.precision)
    return estimate_memory(
        profile,
        batch_size=config.batch_size,
        num_workers=config.num_workers,
        world_size=config.gpu_count,
        optimizer=config.train.optimizer,
        on_gpu=caps.is_gpu,
        runtime_bytes=_runtime_bytes(caps),
    )


# --------------------------------------------------------------------------------------------
# Feasibility rules: each returns the reason a choice cannot run, or None.


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
        unit = "GPUs" if caps.is_gpu else "CPU cores"
        return f"gpu_count={gpu_count} exceeds the {caps.count} {unit} of {caps.name}"
    return None


def _memory_reason(estimate: MemoryEstimate, caps: DeviceCapabilities) -> str | None:
    """Refuse a trial that cannot fit even if its estimate is :data:`MEMORY_ESTIMATE_TOLERANCE`
    too high: ``estimate / (1 + tolerance) > memory`` (per GPU; the host RAM on the CPU)."""
    if caps.memory_bytes is None:
        return None
    # The estimate is within the tolerance of the true peak: true >= estimate / (1 + tol).
    if estimate.total_bytes / (1 + MEMORY_ESTIMATE_TOLERANCE) <= caps.memory_bytes:
        return None
    where = "per GPU " if caps.is_gpu else ""
    return (
        f"estimated peak memory {estimate.total_bytes / _MIB:,.1f} MiB {where}"
        f"({estimate.describe()}) exceeds the {caps.memory_bytes / _MIB:,.0f} MiB of "
        f"{caps.name} even if it is {MEMORY_ESTIMATE_TOLERANCE:.0%} too high"
    )


def infeasibility_reason(knobs: Mapping[str, Any], caps: DeviceCapabilities) -> str | None:
    """The first knob rule a configuration breaks on this device, or None.

    Checks precision, compile mode and world size (not memory: see
    :func:`trial_infeasibility_reason`).

    Args:
        knobs: the trial's knob values (``TrialConfig.knobs()``).
        caps: the device's capabilities.
    """
    return (
        _precision_reason(knobs["precision"], caps)
        or _compile_reason(knobs["compile_mode"], caps)
        or _world_size_reason(knobs["gpu_count"], caps)
    )


def _estimate_or_none(config: TrialConfig, caps: DeviceCapabilities) -> MemoryEstimate | None:
    """:func:`estimate_trial_memory`, or None when the workload raises while its model is
    built or traced: the memory rule then lets the configuration through, and the trial
    itself fails with the workload's error (recorded as ``failure=error``)."""
    try:
        return estimate_trial_memory(config, caps)
    except Exception:  # the workload's own error; its trial reports it
        return None


def trial_infeasibility_reason(config: TrialConfig, caps: DeviceCapabilities) -> str | None:
    """Every rule: the knob rules of :func:`infeasibility_reason`, then the memory estimate
    (skipped when the workload cannot be traced for it)."""
    knob_reason = infeasibility_reason(config.knobs(), caps)
    if knob_reason is not None:
        return knob_reason
    estimate = _estimate_or_none(config, caps)
    return None if estimate is None else _memory_reason(estimate, caps)


def _smallest_trial(space: SearchSpace, caps: DeviceCapabilities, **fixed: Any) -> TrialConfig:
    """The configuration of ``space`` with the least memory, some knobs held at ``fixed``:
    every model knob at its least value (:meth:`~autotune.config.IntParam.smallest`)."""
    knobs = {
        **{name: knob.smallest() for name, knob in space.model.knobs.items()},
        "batch_size": min(space.batch_size.values()),
        "precision": min(space.precision.values(), key=lambda p: {"fp16": 0, "bf16": 0}.get(p, 1)),
        "memory_format": space.memory_format.values()[0],
        "compile_mode": space.compile_mode.values()[0],
        "num_workers": min(space.num_workers.values()),
        "gpu_count": min(space.gpu_count.values()),
        **fixed,
    }
    return TrialConfig.from_knobs(knobs, space, device=caps.kind)


def _memory_restricted(
    space: SearchSpace, caps: DeviceCapabilities, removed: list[str]
) -> SearchSpace:
    """Remove batch sizes and integer model-knob values that do not fit even with every other
    knob at its least value.

    Assumes the memory grows with each integer model knob (sizes: depth, width, layers,
    channels); a knob where it does not keeps its values, since its smallest configuration
    then fits. Real-valued and categorical model knobs are never removed.
    """
    if caps.memory_bytes is None:
        return space
    sized: dict[str, IntParam] = {
        name: knob for name, knob in space.model.knobs.items() if isinstance(knob, IntParam)
    }
    sized["batch_size"] = space.batch_size
    largest = _smallest_trial(space, caps, **{name: p.largest() for name, p in sized.items()})
    estimate = _estimate_or_none(largest, caps)
    if estimate is not None and _memory_reason(estimate, caps) is None:
        return space  # the largest model at the largest batch fits: nothing to remove
    kept: dict[str, list[int]] = {}
    for name, param in sized.items():
        kept[name] = []
        for value in param.values():
            estimate = _estimate_or_none(_smallest_trial(space, caps, **{name: value}), caps)
            reason = None if estimate is None else _memory_reason(estimate, caps)
            if reason is None:
                kept[name].append(value)
            else:
                removed.append(f"{name}={value}: {reason}")
        if not kept[name]:
            raise ConfigError(
                f"space {space.name}: {name}: no choice fits in the memory of {caps.name} "
                f"({removed[-1]})"
            )
    shrunk = {n: p.restricted(kept[n]) for n, p in sized.items() if len(kept[n]) < len(p.values())}
    if not shrunk:
        return space
    model_knobs = {n: shrunk.get(n, k) for n, k in space.model.knobs.items()}
    model = space.model.model_copy(update={"knobs": model_knobs})
    batch = shrunk.get("batch_size", space.batch_size)
    return space.model_copy(update={"model": model, "batch_size": batch})


def restrict_space(space: SearchSpace, caps: DeviceCapabilities) -> tuple[SearchSpace, list[str]]:
    """Remove the choices the device can never run.

    Precision, compile mode and world size follow their rules; then batch sizes and integer
    model-knob values are removed whose smallest configuration already exceeds the memory.

    Returns:
        The restricted space and one line per removed choice with the rule's reason.

    Raises:
        ConfigError: when a knob would be left with no choice at all.
    """
    removed: list[str] = []

    def keep(knob: str, values: Sequence[Any], reason_of: Any) -> list[Any]:
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
    if not removed:
        restricted = space
    restricted = _memory_restricted(restricted, caps, removed)
    return restricted, removed
