"""NVML (nvidia-ml-py's ``pynvml``): which GPUs the machine has, and what they drew in a window.

Every function takes the NVML module as an argument (``None``: import ``pynvml``), so the
``mock`` device and tests pass a :class:`autotune.core.hardware.simulated.SimulatedNvml` instead.
NVML never creates a CUDA context, so the study process may call it freely; it does not know
about ``CUDA_VISIBLE_DEVICES``, which :func:`visible_nvml_indices` applies.

Units follow NVML's and are converted at the edge: memory in bytes, power in watts (NVML:
milliwatts), energy in joules (NVML: millijoules), utilization in percent.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from autotune.core.exceptions import DeviceUnavailableError

__all__ = [
    "GpuInfo",
    "GpuWindowMeter",
    "GpuWindowReading",
    "NvmlInfo",
    "ProcessMemory",
    "nvml_session",
    "read_device_used_memory",
    "read_nvml",
    "read_process_memory",
    "visible_nvml_indices",
]


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as NVML describes it.

    Attributes:
        index: NVML index (not the CUDA index when ``CUDA_VISIBLE_DEVICES`` is set).
        name: marketing name, e.g. ``"NVIDIA H100 80GB HBM3"``.
        uuid: ``"GPU-..."``.
        memory_bytes: total device memory, bytes.
        compute_capability: CUDA ``(major, minor)``.
        power_limit_w: power-management limit, watts; None where NVML does not report it.
    """

    index: int
    name: str
    uuid: str
    memory_bytes: int
    compute_capability: tuple[int, int]
    power_limit_w: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the capability as a list)."""
        d = asdict(self)
        d["compute_capability"] = list(self.compute_capability)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GpuInfo:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**d, "compute_capability": tuple(d["compute_capability"])})


@dataclass(frozen=True)
class NvmlInfo:
    """What NVML reports about the machine.

    Attributes:
        driver_version: NVIDIA driver, e.g. ``"550.54.15"``.
        cuda_driver_version: newest CUDA the driver supports, e.g. ``"12.4"``; None if unknown.
        gpus: every GPU NVML sees, in NVML index order.
    """

    driver_version: str
    cuda_driver_version: str | None
    gpus: tuple[GpuInfo, ...]


def _load(nvml: Any | None) -> Any | None:
    if nvml is not None:
        return nvml
    try:
        import pynvml
    except ImportError:  # pragma: no cover (nvidia-ml-py is a dependency)
        return None
    return pynvml


@contextlib.contextmanager
def nvml_session(nvml: Any | None = None) -> Iterator[Any | None]:
    """``nvmlInit`` ... ``nvmlShutdown``; yields the module, or None when NVML is unavailable
    (no NVIDIA driver or library: the normal case on a machine without a GPU)."""
    module = _load(nvml)
    if module is None:
        yield None
        return
    try:
        module.nvmlInit()
    except module.NVMLError:
        yield None
        return
    try:
        yield module
    finally:
        with contextlib.suppress(module.NVMLError):
            module.nvmlShutdown()


def _optional(nvml: Any, fn: Callable[..., Any], *args: Any) -> Any | None:
    """``fn(*args)``, a reading some GPUs or drivers do not support (``NVMLError_NotSupported``,
    ...): None then."""
    try:
        return fn(*args)
    except nvml.NVMLError:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _required(nvml: Any, fn: Callable[..., Any], *args: Any, gpu: int | None = None) -> Any:
    """``fn(*args)``, a reading the machine's description cannot do without (of GPU ``gpu``,
    NVML's index, where it is a GPU's).

    Raises:
        DeviceUnavailableError: NVML answered ``nvmlInit`` but failed this reading (a GPU
            lost or in a bad state, no permission inside a container): one line naming the
            function, the GPU and NVML's error.
    """
    try:
        return fn(*args)
    except nvml.NVMLError as e:
        name = getattr(fn, "__name__", repr(fn))
        of_gpu = f" for GPU {gpu}" if gpu is not None else ""
        raise DeviceUnavailableError(
            f"NVML started but {name} failed{of_gpu}: {type(e).__name__}: {e} "
            "(nvidia-smi shows what the driver reports)"
        ) from None


def read_nvml(nvml: Any | None = None) -> NvmlInfo | None:
    """Ask NVML for the driver and every GPU; None when NVML is unavailable.

    Args:
        nvml: the ``pynvml`` module or a fake with the same functions; None imports ``pynvml``.

    Raises:
        DeviceUnavailableError: NVML started but a required reading (the GPU count, a GPU's
            handle, name, UUID, memory or compute capability, the driver version) failed;
            the power limit and the CUDA driver version are optional (None when unread).
    """
    with nvml_session(nvml) as m:
        if m is None:
            return None
        gpus = []
        for index in range(_required(m, m.nvmlDeviceGetCount)):
            h = _required(m, m.nvmlDeviceGetHandleByIndex, index, gpu=index)
            limit_mw = _optional(m, m.nvmlDeviceGetPowerManagementLimit, h)
            gpus.append(
                GpuInfo(
                    index=index,
                    name=_text(_required(m, m.nvmlDeviceGetName, h, gpu=index)),
                    uuid=_text(_required(m, m.nvmlDeviceGetUUID, h, gpu=index)),
                    memory_bytes=int(_required(m, m.nvmlDeviceGetMemoryInfo, h, gpu=index).total),
                    compute_capability=tuple(
                        _required(m, m.nvmlDeviceGetCudaComputeCapability, h, gpu=index)
                    ),
                    power_limit_w=limit_mw / 1e3 if limit_mw is not None else None,
                )
            )
        cuda = _optional(m, m.nvmlSystemGetCudaDriverVersion)
        return NvmlInfo(
            driver_version=_text(_required(m, m.nvmlSystemGetDriverVersion)),
            cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            gpus=tuple(gpus),
        )


def visible_nvml_indices(cuda_visible_devices: str | None, uuids: Sequence[str]) -> list[int]:
    """NVML indices of the GPUs CUDA sees, in CUDA index order.

    CUDA's order is NVML's (PCI bus order) because the launcher starts every trial's ranks with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (:func:`autotune.study.search.trial_environment`); under CUDA's
    default ``FASTEST_FIRST`` an unset variable would not mean ``range(len(uuids))``.

    Follows CUDA's rules for ``CUDA_VISIBLE_DEVICES``: unset means every GPU; entries are
    indices or (prefixes of) ``GPU-`` UUIDs, separated by commas; the list ends at the first
    entry that names no GPU; a GPU named twice ends it too. ``MIG-`` entries name MIG slices,
    which NVML's per-GPU readings do not describe: they end the list as well.

    Args:
        cuda_visible_devices: the variable's value, or None when unset.
        uuids: every GPU's UUID in NVML index order (``GpuInfo.uuid``).
    """
    if cuda_visible_devices is None:
        return list(range(len(uuids)))
    indices: list[int] = []
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if entry.lstrip("-").isdigit():
            index = int(entry)
            if not 0 <= index < len(uuids):
                break
        elif entry.startswith("GPU-"):
            matches = [i for i, u in enumerate(uuids) if u.startswith(entry)]
            if len(matches) != 1:
                break
            index = matches[0]
        else:
            break
        if index in indices:
            break
        indices.append(index)
    return indices


@dataclass(frozen=True)
class ProcessMemory:
    """NVML's device memory of one process on one GPU, or why there is none.

    NVML's figure is all the process holds on the GPU: its CUDA context, the memory of
    libraries outside PyTorch's caching allocator (NCCL's buffers, ...) and the blocks the
    caching allocator has reserved, in use or not.

    Attributes:
        used_bytes: ``usedGpuMemory`` of the process's entry in
            ``nvmlDeviceGetComputeRunningProcesses``, bytes; None when missing.
        error: why ``used_bytes`` is missing (NVML absent or failing, the process not listed,
            the figure not reported); None when it was read.
        nvml_index: the GPU's NVML index, None when no GPU was mapped.
    """

    used_bytes: int | None
    error: str | None = None
    nvml_index: int | None = None


def read_device_used_memory(cuda_index: int, nvml: Any | None = None) -> int | None:
    """NVML's used memory of CUDA device ``cuda_index`` of this process (all its processes
    together: ``nvmlDeviceGetMemoryInfo().used``), bytes; None where NVML gives none.

    Unlike the process list, it needs no process id, so it reads the same in a container
    with its own PID namespace. The device is mapped as :func:`read_process_memory` maps it.
    Never raises.

    Args:
        cuda_index: the CUDA device index.
        nvml: the ``pynvml`` module or a fake; None imports ``pynvml``.
    """
    try:
        with nvml_session(nvml) as m:
            if m is None:
                return None
            uuids = [
                _text(m.nvmlDeviceGetUUID(m.nvmlDeviceGetHandleByIndex(i)))
                for i in range(m.nvmlDeviceGetCount())
            ]
            visible = visible_nvml_indices(os.environ.get("CUDA_VISIBLE_DEVICES"), uuids)
            if not 0 <= cuda_index < len(visible):
                return None
            handle = m.nvmlDeviceGetHandleByIndex(visible[cuda_index])
            return int(m.nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:  # NVMLError past nvmlInit: no figure, as without NVML
        return None


def read_process_memory(cuda_index: int, pid: int, nvml: Any | None = None) -> ProcessMemory:
    """NVML's used memory of process ``pid`` on CUDA device ``cuda_index`` of this process.

    The CUDA device is mapped to NVML through ``CUDA_VISIBLE_DEVICES``
    (:func:`visible_nvml_indices`); the process is found by its id among the GPU's compute
    processes (``nvmlDeviceGetComputeRunningProcesses``, the ``_v3`` struct in current
    ``pynvml``). Never raises: every failure is a :class:`ProcessMemory` without a figure
    and with the reason, as :class:`GpuWindowMeter` records its own. Two common ones: NVML
    lists host process ids, so a process in a container with its own PID namespace is not
    found by its id there; on Windows (WDDM) NVML does not report a process's memory.

    Args:
        cuda_index: the CUDA device index (``torch.device("cuda", i).index``).
        pid: the process id to look for (``os.getpid()``).
        nvml: the ``pynvml`` module or a fake; None imports ``pynvml``.
    """
    try:
        with nvml_session(nvml) as m:
            if m is None:
                return ProcessMemory(None, "NVML is unavailable (no NVIDIA driver or library)")
            uuids = [
                _text(m.nvmlDeviceGetUUID(m.nvmlDeviceGetHandleByIndex(i)))
                for i in range(m.nvmlDeviceGetCount())
            ]
            visible = visible_nvml_indices(os.environ.get("CUDA_VISIBLE_DEVICES"), uuids)
            if not 0 <= cuda_index < len(visible):
                return ProcessMemory(
                    None,
                    f"NVML maps no GPU to CUDA device {cuda_index} (CUDA_VISIBLE_DEVICES="
                    f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}; MIG slices have no per-GPU "
                    "NVML readings)",
                )
            index = visible[cuda_index]
            processes = list(
                m.nvmlDeviceGetComputeRunningProcesses(m.nvmlDeviceGetHandleByIndex(index))
            )
    except Exception as e:  # NVMLError past nvmlInit, or a pynvml without the function
        return ProcessMemory(
            None, f"listing the GPU's processes through NVML failed: {_describe(e)}"
        )
    mine = [p for p in processes if getattr(p, "pid", None) == pid]
    if not mine:
        return ProcessMemory(
            None,
            f"process {pid} is not among the {len(processes)} compute processes NVML lists on "
            f"GPU {index} (NVML lists host process ids: a container with its own PID "
            "namespace hides them)",
            index,
        )
    used: list[int] = []
    for entry in mine:
        value = getattr(entry, "usedGpuMemory", None)
        if value is None:
            return ProcessMemory(
                None, f"NVML does not report the memory of process {pid} on GPU {index}", index
            )
        used.append(int(value))
    return ProcessMemory(sum(used), None, index)


@dataclass(frozen=True)
class GpuWindowReading:
    """What the trial's GPUs did during one window (the timed steps).

    Attributes:
        duration_s: the window's wall-clock length, seconds.
        mean_power_w: mean power of all the trial's GPUs together, watts (NVML's power reading
            is itself averaged by the driver over up to 1 s, so windows much shorter than that
            give coarse figures).
        mean_utilization_pct: mean over GPUs and samples of NVML's GPU utilization (percent of
            time a kernel was running), 0-100.
        energy_j: energy of all the trial's GPUs in the window, joules: the difference of
            NVML's energy counters where every GPU has one (Volta and newer), else mean power
            times duration.
        samples: power/utilization samples taken per GPU.
        energy_source: ``"energy_counter"`` or ``"power_samples"``.
    """

    duration_s: float
    mean_power_w: float
    mean_utilization_pct: float
    energy_j: float
    samples: int
    energy_source: str


class GpuWindowMeter:
    """Samples NVML power and utilization of some GPUs in a background thread.

    Call :meth:`start` at the start of the window and :meth:`stop` at its end (again for a
    later window: each :meth:`stop` reads the window since the last :meth:`start`). The thread only
    reads NVML (a few microseconds per call, GIL released), so it does not disturb the timed
    steps it measures.

    Telemetry never fails a trial. Past ``nvmlInit``, NVML calls can still raise: a container
    that exposes the GPU but not every NVML query (``NVMLError_NoPermission``), a MIG slice or
    a GPU named by a MIG UUID (``NVMLError_NotFound`` / ``InvalidArgument``), a GPU that fell
    off the bus (``NVMLError_GpuIsLost``), an older ``pynvml`` without a function
    (``AttributeError``); the NVML API reference ("Error reporting") lists the codes any call
    may return. A failure is then recorded in :attr:`error` and the window's reading is
    missing (:meth:`stop` returns None) rather than wrong; the trial goes on. A reading only
    some GPUs lack (``NVMLError_NotSupported`` for the energy counter before Volta) falls back
    as documented on :class:`GpuWindowReading`.

    Args:
        nvml_indices: NVML indices of the GPUs to read.
        nvml: the ``pynvml`` module or a fake; None imports ``pynvml``.
        interval_s: seconds between samples.
        clock: seconds; ``time.monotonic`` unless a test injects one.

    Attributes:
        error: why this meter has no reading (``"nvmlDeviceGetHandleByIndex(0):
            NVMLError_NoPermission: Insufficient Permissions"``), None while it has one or
            NVML is simply absent (no driver: no telemetry is expected).
    """

    def __init__(
        self,
        nvml_indices: Sequence[int],
        nvml: Any | None = None,
        interval_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._indices = list(nvml_indices)
        self._nvml = _load(nvml)
        self._interval_s = interval_s
        self._clock = clock
        self._handles: list[Any] = []
        self._power_mw: list[list[int]] = []
        self._util_pct: list[list[int]] = []
        self._energy_start_mj: list[int] | None = None
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_s = 0.0
        self._failures: dict[str, str] = {}  # first failure per NVML function
        self.error: str | None = None

    @classmethod
    def unavailable(cls, reason: str) -> GpuWindowMeter:
        """A meter that reads nothing (:meth:`start` False, :meth:`stop` None), saying why."""
        meter = cls([], nvml=_NO_NVML)
        meter._nvml = None
        meter.error = reason
        return meter

    @classmethod
    def for_cuda_ranks(cls, world_size: int, nvml: Any | None = None) -> GpuWindowMeter | None:
        """A meter for CUDA devices ``0 .. world_size-1`` of this process (one per DDP rank),
        mapped to NVML through ``CUDA_VISIBLE_DEVICES``.

        Returns:
            None when NVML is unavailable (no driver or library); a meter that reads nothing
            (:meth:`unavailable`, with :attr:`error` set) when NVML answers but fails (a
            handle or name query raising) or a device cannot be mapped (MIG slices).
        """
        try:
            info = read_nvml(nvml)
        except DeviceUnavailableError as e:  # a required reading failed past nvmlInit
            return cls.unavailable(str(e))
        except Exception as e:  # a pynvml without the function
            return cls.unavailable(f"reading the GPUs through NVML failed: {_describe(e)}")
        if info is None:
            return None
        visible = visible_nvml_indices(
            os.environ.get("CUDA_VISIBLE_DEVICES"), [g.uuid for g in info.gpus]
        )
        if len(visible) < world_size:
            return cls.unavailable(
                f"NVML maps {len(visible)} of this trial's {world_size} CUDA devices "
                f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}; MIG slices "
                "have no per-GPU NVML readings)"
            )
        return cls(visible[:world_size], nvml)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any | None:
        """``fn(*args)``, or None when it raises; the first failure of each function is kept
        (``NVMLError_NotSupported`` is a missing feature, not a failure: not kept)."""
        try:
            return fn(*args)
        except Exception as e:
            not_supported = getattr(self._nvml, "NVML_ERROR_NOT_SUPPORTED", 3)  # nvml.h: 3
            if getattr(e, "value", None) != not_supported:
                name = getattr(fn, "__name__", repr(fn))
                arg = f"({args[0]!r})" if args and name == "nvmlDeviceGetHandleByIndex" else ""
                self._failures.setdefault(name, f"{name}{arg}: {_describe(e)}")
            return None

    def _sample(self) -> None:
        m = self._nvml
        assert m is not None
        for i, h in enumerate(self._handles):
            power = self._call(m.nvmlDeviceGetPowerUsage, h)
            util = self._call(m.nvmlDeviceGetUtilizationRates, h)
            if power is not None:
                self._power_mw[i].append(int(power))
            if util is not None:
                self._util_pct[i].append(int(util.gpu))

    def _energy_mj(self) -> list[int] | None:
        m = self._nvml
        assert m is not None
        readings = [self._call(m.nvmlDeviceGetTotalEnergyConsumption, h) for h in self._handles]
        if any(r is None for r in readings):
            return None
        return [int(r) for r in readings if r is not None]

    def _run(self) -> None:
        while not self._stop_event.wait(self._interval_s):
            self._sample()

    def _fail(self, what: str) -> None:
        """Record why there is no reading and close NVML."""
        m = self._nvml
        failures = "; ".join(self._failures.values()) or "no reason given"
        self.error = f"{what}: {failures}"
        if m is not None:
            with contextlib.suppress(Exception):
                m.nvmlShutdown()
        self._nvml = None

    def start(self) -> bool:
        """Open NVML, read the energy counters, start sampling. False when NVML is unavailable
        or a GPU's handle cannot be had (then :meth:`stop` returns None; :attr:`error` says
        why in the second case)."""
        m = self._nvml
        if m is None:
            return False
        try:
            m.nvmlInit()
        except m.NVMLError:
            self._nvml = None
            return False
        handles = [self._call(m.nvmlDeviceGetHandleByIndex, i) for i in self._indices]
        if any(h is None for h in handles):
            self._fail("no NVML handle for the trial's GPUs")
            return False
        self._handles = handles
        self._stop_event.clear()  # a meter may meter a second window after a first
        self._power_mw = [[] for _ in self._handles]
        self._util_pct = [[] for _ in self._handles]
        self._energy_start_mj = self._energy_mj()
        self._started_s = self._clock()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="autotune-nvml", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> GpuWindowReading | None:
        """Stop sampling and summarize the window.

        Returns:
            None if :meth:`start` found no NVML, or when the window's energy cannot be known:
            no energy counter on every GPU and no power sample on some GPU (a zero would
            read as a measured 0 J); :attr:`error` says why.
        """
        m = self._nvml
        if m is None or self._thread is None:
            return None
        self._stop_event.set()
        self._thread.join()
        self._thread = None
        self._sample()
        duration_s = max(self._clock() - self._started_s, 0.0)
        energy_end = self._energy_mj()
        counters = self._energy_start_mj is not None and energy_end is not None
        every_power = all(self._power_mw)
        if not counters and not every_power:
            self._fail("no GPU power or energy reading in the timed window")
            return None
        with contextlib.suppress(Exception):
            m.nvmlShutdown()
        utils = [u for per_gpu in self._util_pct for u in per_gpu]
        if counters:
            assert self._energy_start_mj is not None and energy_end is not None
            energy_j = (
                sum(e - s for s, e in zip(self._energy_start_mj, energy_end, strict=True)) / 1e3
            )
            source = "energy_counter"
        if every_power:
            mean_power_w = sum(sum(p) / len(p) for p in self._power_mw) / 1e3
        else:  # counters only: the window's mean power is its energy over its length
            mean_power_w = energy_j / duration_s if duration_s > 0 else 0.0
        if not counters:
            energy_j = mean_power_w * duration_s
            source = "power_samples"
        return GpuWindowReading(
            duration_s=duration_s,
            mean_power_w=mean_power_w,
            mean_utilization_pct=sum(utils) / len(utils) if utils else 0.0,
            energy_j=energy_j,
            samples=min((len(p) for p in self._power_mw), default=0),
            energy_source=source,
        )


def _describe(e: BaseException) -> str:
    """``"NVMLError_NoPermission: Insufficient Permissions"``: the error's type and text."""
    return f"{type(e).__name__}: {e}"


#: Stands for "no NVML" where :func:`_load` would import ``pynvml`` for None.
class _NoNvml:
    pass


_NO_NVML = _NoNvml()
