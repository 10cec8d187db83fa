"""The CUDA backend: real training on NVIDIA GPUs with nccl for DDP."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from autotune.core.hardware import study_workers
from autotune.core.nvml import (
    GpuWindowMeter,
    ProcessMemory,
    read_device_used_memory,
    read_process_memory,
)

__all__ = [
    "ALLOCATOR_PEAK",
    "BASELINE_TORCH_FLAGS",
    "FROM_DEVICE_USED",
    "FROM_PROCESS_LIST",
    "PEAK_PLUS_CONTEXT",
    "CudaBackend",
    "combine_rank_memory",
    "enable_tf32",
    "graph_pool_bytes",
    "rank_threads",
    "reset_tf32",
]

#: ``memory_kind`` of a CUDA trial whose peak counts the memory outside the allocator.
PEAK_PLUS_CONTEXT = "cuda_peak_plus_context"
#: ``memory_kind`` of a CUDA trial without NVML's figure: the allocator's peak alone.
ALLOCATOR_PEAK = "cuda_allocator_peak"

#: ``process_memory_method`` of a rank whose process NVML lists: its own entry.
FROM_PROCESS_LIST = "nvml_process_list"
#: ``process_memory_method`` of a rank NVML does not list (a container with its own PID
#: namespace): the GPU's used memory less its reading before the rank's first CUDA call.
FROM_DEVICE_USED = "nvml_device_used_less_before"

#: The torch settings a CUDA trial leaves at PyTorch's defaults (the baseline is "your
#: defaults", so none of them is changed for it; only ``precision=tf32`` changes the first
#: two). Flag -> PyTorch's default and what it means (PyTorch docs, "CUDA semantics",
#: "TensorFloat-32 (TF32) on Ampere (and later) devices"; "Reproducibility").
BASELINE_TORCH_FLAGS: dict[str, str] = {
    "torch.backends.cuda.matmul.allow_tf32": "False: fp32 matmuls in IEEE fp32",
    "torch.backends.cudnn.allow_tf32": "True: cuDNN may run fp32 convolutions in TF32",
    "torch.backends.cudnn.benchmark": "False: no per-shape algorithm search in the first steps",
    "torch.backends.cudnn.deterministic": "False",
    "torch.get_num_threads()": "the physical cores (one rank, no DataLoader workers)",
    "DataLoader(pin_memory=)": (
        "False (True with DataLoader workers, see CudaBackend; the doors keep the user's own)"
    ),
}


def enable_tf32() -> None:
    """Let fp32 matmuls and cuDNN convolutions run in TF32 (``precision=tf32``).

    Set through the legacy setters, ``torch.set_float32_matmul_precision("high")`` and
    ``torch.backends.cudnn.allow_tf32``, which on torch 2.9 and later write the new
    per-backend ``fp32_precision`` state too: both APIs then read ``tf32`` (PyTorch docs, "CUDA
    semantics", TF32). Setting the new ``fp32_precision`` alone leaves the legacy readers
    raising "mix of the legacy and new APIs", and Inductor still reads them (pytorch/pytorch
    issue 166387; torch 2.13's autotuning cache key reads
    ``torch.get_float32_matmul_precision()``), so a compiled tf32 trial would fail. ``"high"``
    also lets oneDNN's fp32 matmuls on the CPU use TF32 where the CPU has it; a CUDA trial
    runs none there.
    """
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default already; stated, not assumed


def reset_tf32(precision: str) -> None:
    """TF32 as the trial's ``precision`` says, over whatever code since the backend's set-up
    turned it on or off: :func:`enable_tf32` for ``tf32``, PyTorch's defaults for the others
    (fp32 matmuls in IEEE fp32, cuDNN's convolutions allowed TF32,
    :data:`BASELINE_TORCH_FLAGS`), both through the legacy setters, after the new API's
    global ``torch.backends.fp32_precision`` is put back to ``"none"``.

    transformers' ``TrainingArguments`` sets TF32 as it is built: ``tf32=True`` or
    ``False``, and ``torch_compile=True`` with ``tf32`` unset (or with ``bf16``) turn it on
    (transformers 5, ``training_args.py``, ``__post_init__``), through
    ``torch.backends.fp32_precision`` on torch >= 2.9 (``utils/import_utils.py``,
    ``enable_tf32``). An HF-door fp32 trial then trained in TF32 wherever the user's
    arguments said ``tf32=True``, and the global flag leaves the legacy readers Inductor
    still calls raising "mix of the legacy and new APIs" (pytorch/pytorch issue 166387).
    Reading every flag afterwards through either API gives one answer.
    """
    if hasattr(torch.backends, "fp32_precision"):  # torch >= 2.9
        torch.backends.fp32_precision = "none"
    if precision == "tf32":
        enable_tf32()
        return
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = True


def rank_threads(
    default_threads: int, world_size: int, num_workers: int, study_workers: int = 1
) -> int | None:
    """Intra-op CPU threads for one CUDA rank, or None to keep PyTorch's default.

    One rank without DataLoader workers, in a study with one worker process, keeps
    PyTorch's default (the baseline's). Otherwise the ranks of every worker process of the
    study share the host's default threads and each rank's DataLoader workers take one each
    (a DataLoader worker runs one torch thread): ``default // (world_size x study_workers) -
    num_workers``, at least 1. torchrun likewise sets ``OMP_NUM_THREADS=1`` per process when
    it starts several, "to avoid your system being overloaded". Compile workers (Inductor's
    ``compile_threads``) are not counted: they run before the timed steps, not beside them.

    Args:
        default_threads: PyTorch's default intra-op threads in this process.
        world_size: DDP ranks of this trial.
        num_workers: DataLoader workers per rank.
        study_workers: the study's worker processes on this host, each with trials of its own
            on its own GPUs (``workers``; :func:`autotune.core.hardware.study_workers`).
    """
    if world_size == 1 and num_workers == 0 and study_workers == 1:
        return None
    return max(1, default_threads // (world_size * study_workers) - num_workers)


def graph_pool_bytes(segments: Iterable[Mapping[str, Any]], device_index: int) -> int:
    """Bytes reserved on GPU ``device_index`` in private memory pools: those of CUDA graphs.

    torch.compile's CUDA graph trees (``reduce-overhead``; ``max-autotune`` on CUDA) record
    into a private pool, and their replays allocate nothing: the memory their outputs and
    intermediates occupy never shows in ``torch.cuda.max_memory_allocated`` after the
    recording (pytorch/pytorch issue 121932): without these bytes a graph mode would look
    lean to the memory objective.

    Args:
        segments: ``torch.cuda.memory_snapshot()``: the allocator's segments, each with its
            ``device``, ``total_size`` (bytes) and ``segment_pool_id`` (``(0, 0)``: the
            default pool; PyTorch docs, ``torch.cuda.memory._snapshot``).
        device_index: the GPU.
    """
    return sum(
        int(segment["total_size"])
        for segment in segments
        if tuple(segment.get("segment_pool_id", (0, 0))) != (0, 0)
        and segment.get("device", device_index) == device_index
    )


class CudaBackend:
    """Trains on CUDA GPU ``rank``. See :class:`autotune.trial.devices.base.Backend`.

    Torch flags: PyTorch's defaults (:data:`BASELINE_TORCH_FLAGS`) for every precision but
    ``tf32``, which turns TF32 on for matmuls and convolutions (:func:`enable_tf32`). So
    ``fp32`` is what a PyTorch user gets without setting anything: IEEE fp32 matmuls, and
    convolutions that cuDNN may run in TF32 on Ampere and later GPUs. ``cudnn.benchmark``
    stays False in every trial (a stated setting, not a knob). DataLoaders pin host memory
    when they have workers (the Performance Tuning Guide's pairing of the two); without
    workers they do not, as by default.

    Peak memory (:meth:`peak_memory_bytes`) is ``torch.cuda.max_memory_allocated`` since the
    warm-up plus what the process holds outside PyTorch's caching allocator: NVML's memory of
    this process on its GPU (:func:`autotune.core.nvml.read_process_memory`) less
    ``torch.cuda.memory_reserved``, read together after a sync. That difference is the CUDA
    context, NCCL's buffers and other libraries' memory: hundreds of MiB per rank that the
    allocator never sees, so that without it ``gpu_count=2`` looked nearly free. The
    allocator's reserved but free blocks (among them the warm-up's autotuning workspaces)
    are not counted: the caching allocator reuses them. CUDA graphs' private pools are
    counted whole (:func:`graph_pool_bytes`): their replays use them without allocating. A
    graph recorded inside the timed windows (recording happens in the warm-up) would be
    counted twice, as allocations and as its pool. Where NVML gives no figure the peak
    is the allocator's alone (``memory_kind`` says which) and :meth:`memory_figures` says why.
    Where NVML does not list this process (its id is the host's, and a container with its own
    PID namespace hides it), the process's memory is the GPU's used memory less a reading
    taken in :meth:`setup`, before the rank's first CUDA call (``process_memory_method``
    says which: :data:`FROM_PROCESS_LIST` or :data:`FROM_DEVICE_USED`); another process that
    allocates on the same GPU meanwhile would be counted too.

    Args:
        nvml: the ``pynvml`` module or a fake; None imports ``pynvml``.
    """

    kind = "cuda"
    ddp_backend = "nccl"
    pin_memory = True  # with DataLoader workers (autotune.trial.training._setup)

    def __init__(self, nvml: Any | None = None) -> None:
        self._device = torch.device("cuda", 0)
        self._nvml = nvml
        #: What the last :meth:`peak_memory_bytes` was: ``cuda_peak_plus_context``, or
        #: ``cuda_allocator_peak`` when NVML gave no figure (and before the first reading).
        self.memory_kind = ALLOCATOR_PEAK
        self._figures: dict[str, Any] = {}
        #: NVML's used memory of the rank's GPU before its first CUDA call (bytes; None
        #: before :meth:`setup` or without NVML).
        self.device_used_before_bytes: int | None = None

    def torch_device(self) -> torch.device:
        return self._device

    def setup(self, rank: int, world_size: int, precision: str, num_workers: int = 0) -> None:
        # Before anything creates this process's CUDA context (set_device may).
        self.device_used_before_bytes = read_device_used_memory(rank, self._nvml)
        self._device = torch.device("cuda", rank)
        torch.cuda.set_device(self._device)
        if precision == "tf32":
            enable_tf32()
        threads = rank_threads(
            torch.get_num_threads(), world_size, num_workers, study_workers(os.environ)
        )
        if threads is not None:
            torch.set_num_threads(threads)

    def synchronize(self) -> None:
        torch.cuda.synchronize(self._device)

    def reset_peak_memory(self) -> None:
        torch.cuda.synchronize(self._device)
        torch.cuda.reset_peak_memory_stats(self._device)

    def restart_peak_memory(self) -> int | None:
        """The warm-up's allocator peak, then a fresh peak window for the timed steps: the
        first steps hold what the steady state does not (cuDNN's and max-autotune's trial
        workspaces, compilation), so the peak the study compares is the steady one; the
        warm-up's is kept apart (``warmup_peak_memory_bytes``). Tensors still allocated
        stay counted after the reset (PyTorch docs, ``torch.cuda.reset_peak_memory_stats``)."""
        torch.cuda.synchronize(self._device)
        warmup_peak = int(torch.cuda.max_memory_allocated(self._device))
        torch.cuda.reset_peak_memory_stats(self._device)
        return warmup_peak

    def peak_memory_bytes(self) -> int:
        """The allocator's peak since the warm-up, plus the CUDA graphs' pools, plus NVML's
        memory of this process beyond the allocator's reserved bytes (the CUDA context,
        NCCL's buffers), bytes; without the last where NVML gives no figure."""
        torch.cuda.synchronize(self._device)
        index = self._device.index or 0
        pool = graph_pool_bytes(torch.cuda.memory_snapshot(), index)
        peak = int(torch.cuda.max_memory_allocated(self._device)) + pool
        reserved = int(torch.cuda.memory_reserved(self._device))  # the graphs' pools among them
        reading = read_process_memory(index, os.getpid(), self._nvml)
        method = FROM_PROCESS_LIST
        if reading.used_bytes is None and self.device_used_before_bytes is not None:
            used_now = read_device_used_memory(index, self._nvml)
            if used_now is not None:  # not listed (a PID namespace): the GPU's growth
                grown = max(0, used_now - self.device_used_before_bytes)
                reading, method = ProcessMemory(grown, None, reading.nvml_index), FROM_DEVICE_USED
        self._figures = _rank_figures(reading, reserved)
        if reading.used_bytes is not None:
            self._figures["process_memory_method"] = method
        if pool:
            self._figures["cuda_graph_pool_bytes"] = pool
        if reading.used_bytes is None:
            self.memory_kind = ALLOCATOR_PEAK
            return peak
        self.memory_kind = PEAK_PLUS_CONTEXT
        return peak + self._figures["gpu_context_bytes"]

    def memory_figures(self) -> dict[str, Any]:
        """This rank's NVML figures of the last :meth:`peak_memory_bytes`:
        ``process_memory_bytes``, ``gpu_context_bytes`` and ``process_memory_method``, or
        ``process_memory_error``; and ``cuda_graph_pool_bytes`` where CUDA graphs hold a
        pool."""
        return dict(self._figures)

    def gpu_meter(self, world_size: int) -> GpuWindowMeter | None:
        return GpuWindowMeter.for_cuda_ranks(world_size)


def _rank_figures(reading: ProcessMemory, reserved_bytes: int) -> dict[str, Any]:
    """One rank's memory figures from NVML's reading and the allocator's reserved bytes
    read with it."""
    if reading.used_bytes is None:
        return {"process_memory_error": reading.error or "no reason given"}
    return {
        "process_memory_bytes": reading.used_bytes,
        "gpu_context_bytes": max(0, reading.used_bytes - reserved_bytes),
    }


def combine_rank_memory(per_rank: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trial's NVML memory figures from every rank's :meth:`CudaBackend.memory_figures`.

    Returns:
        ``process_memory_bytes`` (summed over ranks: what the trial holds on all its GPUs),
        ``process_memory_max_bytes`` (the rank holding most) and ``gpu_context_bytes`` (the
        most any rank held outside the allocator); or, when some rank has no figure,
        ``process_memory_error`` naming the rank and why (all three missing then: a sum
        over some ranks would read as the trial's); ``process_memory_method``, how the
        ranks' figures were read (``mixed`` where they differ); ``cuda_graph_pool_bytes``, the
        largest rank's CUDA-graph pools, where any. Empty where no rank has figures (the
        CPU).
    """
    if not any(per_rank):
        return {}
    pools = [int(f.get("cuda_graph_pool_bytes", 0)) for f in per_rank]
    more: dict[str, Any] = {"cuda_graph_pool_bytes": max(pools)} if any(pools) else {}
    errors = [
        (f"rank {rank}: " if len(per_rank) > 1 else "") + str(f["process_memory_error"])
        for rank, f in enumerate(per_rank)
        if "process_memory_bytes" not in f
    ]
    if errors:
        return {"process_memory_error": "; ".join(errors), **more}
    used = [int(f["process_memory_bytes"]) for f in per_rank]
    methods = {f["process_memory_method"] for f in per_rank if "process_memory_method" in f}
    if methods:
        more["process_memory_method"] = methods.pop() if len(methods) == 1 else "mixed"
    return {
        "process_memory_bytes": sum(used),
        "process_memory_max_bytes": max(used),
        "gpu_context_bytes": max(int(f["gpu_context_bytes"]) for f in per_rank),
        **more,
    }
