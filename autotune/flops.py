"""FLOPs, peaks and model FLOP utilization (MFU); the model profile the memory estimate uses.

- :func:`count_training_flops` counts the FLOPs of one forward and backward pass of a real
  batch with ``torch.utils.flop_counter.FlopCounterMode`` (matmuls and convolutions, as
  PaLM's and nanoGPT's MFU count them; elementwise ops, normalization and the optimizer step
  are not counted). The trial process calls it once, after its timed steps.
- :data:`PUBLISHED_PEAKS` holds NVIDIA's published dense peak FLOP/s per precision;
  :func:`measure_matmul_peak` measures a peak where the device is not in the table (the CPU
  included), cheaply and once per process.
- MFU = achieved FLOP/s / peak FLOP/s for the trial's precision, where achieved FLOP/s =
  FLOPs per training sample x throughput (samples/s) (Chowdhery et al., "PaLM", 2022,
  appendix B). :func:`with_mfu` adds it to every measurement of a study.
- :func:`profile_model` traces the tensors a model saves for backward, per sample, for
  :func:`autotune.hardware.estimate_memory`.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from autotune.config import TrialConfig, WorkloadSpec
    from autotune.hardware import DeviceCapabilities
    from autotune.measure import Measurement
    from autotune.nvml import GpuWindowReading

__all__ = [
    "PUBLISHED_PEAKS",
    "ModelProfile",
    "PublishedPeak",
    "count_training_flops",
    "describe_peaks",
    "measure_matmul_peak",
    "mfu_figures",
    "profile_model",
    "published_peak",
    "trial_extras",
    "with_mfu",
]

_T = 1e12


@dataclass(frozen=True)
class PublishedPeak:
    """A GPU's published dense peak throughput per precision (no structured sparsity).

    Attributes:
        label: the GPU variant the figures are for.
        pattern: a regular expression matched (case-insensitive) against NVML's GPU name.
        flops_per_s: peak FLOP/s per precision (``fp32`` on CUDA cores, ``tf32``, ``fp16``,
            ``bf16`` on tensor cores); a precision the GPU lacks is absent.
        source: the datasheet the figures come from.
    """

    label: str
    pattern: str
    flops_per_s: dict[str, float]
    source: str


#: NVIDIA's published dense peaks. Datasheets print tensor-core figures "with sparsity"; the
#: dense figure, used here, is half of it. Order matters: the first matching pattern wins.
PUBLISHED_PEAKS: tuple[PublishedPeak, ...] = (
    PublishedPeak(
        "H100 PCIe",
        r"H100.*PCIE",
        {"fp32": 51 * _T, "tf32": 378 * _T, "fp16": 756 * _T, "bf16": 756 * _T},
        "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe: FP32 51, TF32 756*, BF16/FP16 1,513* "
        "TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "H100 SXM5",
        r"H100.*(SXM|HBM3)",
        {"fp32": 67 * _T, "tf32": 494.5 * _T, "fp16": 989.5 * _T, "bf16": 989.5 * _T},
        "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: FP32 67, TF32 989*, BF16/FP16 1,979* "
        "TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "H200 SXM",
        r"H200(?!.*NVL)",
        {"fp32": 67 * _T, "tf32": 494.5 * _T, "fp16": 989.5 * _T, "bf16": 989.5 * _T},
        "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM: FP32 67, TF32 989*, BF16/FP16 1,979* "
        "TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "A100 (SXM4 or PCIe)",
        r"A100",
        {"fp32": 19.5 * _T, "tf32": 156 * _T, "fp16": 312 * _T, "bf16": 312 * _T},
        "NVIDIA A100 Tensor Core GPU datasheet (FP32 19.5, TF32 156, BF16/FP16 312 TFLOPS dense)",
    ),
    PublishedPeak(
        "L40S",
        r"\bL40S\b",
        {"fp32": 91.6 * _T, "tf32": 183 * _T, "fp16": 362 * _T, "bf16": 362 * _T},
        "NVIDIA L40S datasheet (FP32 91.6, TF32 366*, BF16/FP16 733* TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "L4",
        r"\bL4\b",
        {"fp32": 30.3 * _T, "tf32": 60 * _T, "fp16": 121 * _T, "bf16": 121 * _T},
        "NVIDIA L4 datasheet (FP32 30.3, TF32 120*, BF16/FP16 242* TFLOPS; * with sparsity)",
    ),
    PublishedPeak(
        "A10",
        r"\bA10\b",
        {"fp32": 31.2 * _T, "tf32": 62.5 * _T, "fp16": 125 * _T, "bf16": 125 * _T},
        "NVIDIA A10 datasheet (FP32 31.2, TF32 62.5, BF16/FP16 125 TFLOPS dense)",
    ),
    PublishedPeak(
        "V100S PCIe",
        r"V100S",
        {"fp32": 16.4 * _T, "fp16": 130 * _T},
        "NVIDIA V100S datasheet (FP32 16.4, tensor FP16 130 TFLOPS; no TF32 or BF16)",
    ),
    PublishedPeak(
        "V100 PCIe",
        r"V100.*PCIE",
        {"fp32": 14 * _T, "fp16": 112 * _T},
        "NVIDIA V100 Tensor Core GPU datasheet (PCIe: FP32 14, tensor FP16 112 TFLOPS)",
    ),
    PublishedPeak(
        "V100 SXM2",
        r"V100.*SXM2",
        {"fp32": 15.7 * _T, "fp16": 125 * _T},
        "NVIDIA V100 Tensor Core GPU datasheet (SXM2: FP32 15.7, tensor FP16 125 TFLOPS)",
    ),
    PublishedPeak(
        "T4",
        r"\bT4\b",
        {"fp32": 8.1 * _T, "fp16": 65 * _T},
        "NVIDIA T4 datasheet (FP32 8.1, mixed-precision FP16 65 TFLOPS)",
    ),
)


def published_peak(gpu_name: str) -> PublishedPeak | None:
    """The table entry for a GPU named as NVML names it, or None for an unknown GPU."""
    for entry in PUBLISHED_PEAKS:
        if re.search(entry.pattern, gpu_name, flags=re.IGNORECASE):
            return entry
    return None


# --------------------------------------------------------------------------------------------
# Measured peak


_MATMUL_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@functools.cache
def _measure_matmul_peak(precision: str, device: str, threads: int, budget_s: float) -> float:
    import torch

    dtype = getattr(torch, _MATMUL_DTYPES[precision])
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    max_n = 8192 if dev.type == "cuda" else 2048
    min_repeats = 3
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        with torch.no_grad():
            deadline = time.perf_counter() + budget_s
            hard_deadline = deadline + budget_s  # at least 3 products, unless that takes 2x
            n = 256
            while True:
                a = torch.randn(n, n, device=dev).to(dtype)
                b = torch.randn(n, n, device=dev).to(dtype)
                torch.mm(a, b)  # warm-up: kernel selection, first-touch of the output
                sync()
                t0 = time.perf_counter()
                torch.mm(a, b)
                sync()
                once_s = time.perf_counter() - t0
                # Grow the matrix until one product takes a few ms (past cache effects and call
                # overhead), while the budget allows.
                if once_s > 5e-3 or n >= max_n or time.perf_counter() + 16 * once_s > deadline:
                    break
                n *= 2
            best_s, repeats = once_s, 1
            while time.perf_counter() + best_s < deadline or (
                repeats < min_repeats and time.perf_counter() < hard_deadline
            ):
                t0 = time.perf_counter()
                torch.mm(a, b)
                sync()
                best_s = min(best_s, time.perf_counter() - t0)
                repeats += 1
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    return 2 * n**3 / best_s


def measure_matmul_peak(precision: str, device: str = "cpu", budget_s: float = 0.15) -> float:
    """The best square-matmul FLOP/s this process reaches in ``precision`` on ``device``.

    The matrix grows from 256 until one product takes 5 ms (at most 2048 on the CPU, 8192 on
    a GPU); then products are repeated (at least 3) until ``budget_s`` is spent and the
    fastest counts (2 n^3 FLOPs each). Cached per process (and per intra-op thread count), so
    a study pays for it once: about 0.15-0.25 s per precision on an idle machine. A busy
    machine measures low (with more runnable threads than cores, one descheduled OpenMP
    thread stalls the whole product), which makes MFU read high.

    Args:
        precision: ``fp32``, ``tf32`` (CUDA only), ``fp16`` or ``bf16``.
        device: ``cpu`` or a CUDA device such as ``cuda:0``.
        budget_s: seconds to spend, warm-up included (about; one product may overrun it).

    Returns:
        FLOP/s.
    """
    import torch

    return _measure_matmul_peak(precision, device, torch.get_num_threads(), budget_s)


# --------------------------------------------------------------------------------------------
# Counting FLOPs


def _autocast(device_type: str, dtype: torch.dtype | None) -> Any:
    import torch

    return torch.autocast(device_type, dtype=dtype, enabled=dtype is not None)


def count_training_flops(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    autocast_dtype: torch.dtype | None = None,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
) -> int:
    """FLOPs of one training forward and backward pass of ``(x, y)`` with the loss ``loss_fn``
    (default: cross-entropy).

    Counted by ``torch.utils.flop_counter.FlopCounterMode`` on the real model (the eager
    module, not a compiled or DDP wrapper). The model is left as it was: its buffers
    (BatchNorm running statistics) are restored, its gradients cleared and its train/eval
    mode kept. Call it outside timed windows: it runs a real step.

    Args:
        model: the model, on its device.
        x: one input batch ``(B, ...)`` on the model's device, in the trial's memory format.
        y: its targets ``(B, ...)`` (class labels ``(B,)`` for cross-entropy).
        autocast_dtype: the trial's autocast dtype (fp16/bf16), or None.
        loss_fn: ``loss(output, target)``; the workload's loss.

    Returns:
        FLOPs of the whole batch (divide by ``B`` for per sample).
    """
    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    loss_of = loss_fn or F.cross_entropy

    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    was_training = model.training
    counter = FlopCounterMode(display=False)
    model.train()
    try:
        with counter:
            with _autocast(x.device.type, autocast_dtype):
                loss = loss_of(model(x), y)
            loss.backward()
    finally:
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(buffers[name])
        model.train(was_training)
    return int(counter.get_total_flops())


# --------------------------------------------------------------------------------------------
# Model profile for the memory estimate


@dataclass(frozen=True)
class ModelProfile:
    """Sizes of a model that decide its training memory.

    Attributes:
        parameters: trainable parameters.
        activation_bytes_per_sample: bytes autograd saves for backward per sample of the
            batch (outputs of convolutions, normalizations, activations, pooling indices;
            autocast copies), parameters and the input batch excluded.
        activation_fixed_bytes: saved bytes that do not grow with the batch (autocast's casts
            of the weights).
        input_bytes_per_sample: bytes of one input sample and its label (float32 and int64).
    """

    parameters: int
    activation_bytes_per_sample: float
    activation_fixed_bytes: int
    input_bytes_per_sample: int


def _saved_bytes(model: Any, x: Any, y: Any, autocast_dtype: Any, loss_fn: Any) -> int:
    """Bytes of distinct storages autograd saves during one forward pass (params and x out)."""
    import torch

    excluded = {p.untyped_storage().data_ptr() for p in model.parameters()}
    excluded.add(x.untyped_storage().data_ptr())
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in excluded:
            seen[ptr] = max(seen.get(ptr, 0), storage.nbytes())
        return t

    with (
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        _autocast("cpu", autocast_dtype),
    ):
        loss = loss_fn(model(x), y)
    del loss
    return sum(seen.values())


def profile_model(spec: WorkloadSpec, knobs: Mapping[str, Any], precision: str) -> ModelProfile:
    """Trace what a workload's model saves for backward, on the CPU, with batches of 2 and 4
    samples of its training set.

    Half the difference of the two is the per-sample activation memory; the rest of the
    2-sample trace is the fixed part. Precision matters through autocast (fp16/bf16 save half-width
    copies); ``tf32`` saves what ``fp32`` does. Memory format does not change byte counts.
    Cached per process (milliseconds per model of the shipped spaces); the workload is
    imported and its ``datasets()`` called once per process.

    Args:
        spec: the workload.
        knobs: its model knobs (``build_model(**knobs)``).
        precision: the trial's precision.

    Raises:
        WorkloadError: the workload cannot be loaded.
        Exception: whatever the workload's model or data raise.
    """
    return _profile_cached(
        spec.model_dump_json(), json.dumps(dict(knobs), sort_keys=True), precision
    )


@functools.lru_cache(maxsize=512)
def _profile_cached(spec_json: str, knobs_json: str, precision: str) -> ModelProfile:
    import torch
    from torch.utils.data import default_collate

    from autotune.config import WorkloadSpec
    from autotune.models import count_parameters
    from autotune.workloads import load_workload

    workload = load_workload(WorkloadSpec.model_validate_json(spec_json))
    train, _ = workload.datasets()
    # Batches of 2 and 4 (not 1: BatchNorm refuses one sample on a 1x1 map in training).
    items = [train[i % len(train)] for i in range(4)]  # type: ignore[arg-type]
    autocast_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    torch.manual_seed(0)
    model = workload.build_model(json.loads(knobs_json))
    model.train()
    saved = []
    for batch in (2, 4):
        x, y = default_collate(items[:batch])
        saved.append(_saved_bytes(model, x, y, autocast_dtype, workload.loss))
    per_sample = max(0.0, (saved[1] - saved[0]) / 2)
    x, y = default_collate(items[:1])
    return ModelProfile(
        parameters=count_parameters(model),
        activation_bytes_per_sample=per_sample,
        activation_fixed_bytes=max(0, int(saved[0] - 2 * per_sample)),
        input_bytes_per_sample=x.element_size() * x.numel() + y.element_size() * y.numel(),
    )


# --------------------------------------------------------------------------------------------
# Per-trial figures


def trial_extras(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    precision: str,
    autocast_dtype: torch.dtype | None,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    device_kind: str,
    gpu_reading: GpuWindowReading | None,
    samples_per_s: float,
) -> dict[str, Any]:
    """The hardware figures a real trial stores in ``Measurement.extra``.

    Runs in the trial process after the timed steps (and after peak memory is read).

    Args:
        model: the trained eager model (rank 0's).
        x, y: one training batch at the trial's batch size, on the device.
        loss_fn: the workload's loss (default: cross-entropy).
        precision: the trial's precision (for a measured peak on an unknown GPU).
        autocast_dtype: the trial's autocast dtype, or None.
        device_kind: ``cpu`` or ``cuda``.
        gpu_reading: NVML readings over the timed window (CUDA), or None.
        samples_per_s: the trial's throughput (global samples/s), for energy per sample.

    Returns:
        ``flops_per_sample``; on CUDA with NVML also ``gpu_utilization_pct``, ``gpu_power_w``,
        ``gpu_energy_window_s``, ``energy_j_per_sample`` and ``energy_source``; on a CUDA GPU
        missing from :data:`PUBLISHED_PEAKS`, ``measured_peak_flops_per_s`` for one GPU.
    """
    extra: dict[str, Any] = {
        "flops_per_sample": count_training_flops(
            model, x, y, autocast_dtype=autocast_dtype, loss_fn=loss_fn
        )
        / len(x)
    }
    if gpu_reading is not None and gpu_reading.duration_s > 0:
        extra.update(
            gpu_utilization_pct=gpu_reading.mean_utilization_pct,
            gpu_power_w=gpu_reading.mean_power_w,
            gpu_energy_window_s=gpu_reading.duration_s,
            # J per sample = J/s / (samples/s): mean power of the trial's GPUs over throughput.
            energy_j_per_sample=gpu_reading.energy_j / gpu_reading.duration_s / samples_per_s,
            energy_source=gpu_reading.energy_source,
        )
    if device_kind == "cuda":
        import torch

        if published_peak(torch.cuda.get_device_name(x.device)) is None:
            extra["measured_peak_flops_per_s"] = measure_matmul_peak(precision, str(x.device))
    return extra


def mfu_figures(
    flops_per_sample: float,
    throughput_sps: float,
    peak_flops_per_s: float,
    devices: int,
) -> dict[str, float]:
    """Achieved FLOP/s and MFU of a trial.

    Args:
        flops_per_sample: training FLOPs per sample (forward and backward).
        throughput_sps: global training samples/s.
        peak_flops_per_s: peak FLOP/s of one device in the trial's precision.
        devices: devices the trial used (its GPU count on GPUs; 1 on the CPU, whose ranks
            share the cores the peak was measured on).

    Returns:
        ``achieved_flops_per_s``, ``peak_flops_per_s`` (all devices) and ``mfu`` (a fraction).

    Raises:
        ValueError: when the peak or the device count is not positive.
    """
    if peak_flops_per_s <= 0 or devices < 1:
        raise ValueError(
            f"peak_flops_per_s > 0 and devices >= 1 must hold, but got {peak_flops_per_s}, {devices}"
        )
    achieved = flops_per_sample * throughput_sps
    total_peak = peak_flops_per_s * devices
    return {
        "achieved_flops_per_s": achieved,
        "peak_flops_per_s": total_peak,
        "mfu": achieved / total_peak,
    }


def with_mfu(
    run_trial: Callable[[TrialConfig, float], Measurement], caps: DeviceCapabilities
) -> Callable[[TrialConfig, float], Measurement]:
    """Wrap a trial runner so each measurement also carries its MFU (in ``extra``).

    The peak is the device's (``caps.peak_flops_per_s``: the published table, the measured
    CPU peak, or the mock profile's), or a peak the trial measured on an unknown GPU. A
    measurement without ``flops_per_sample`` (a fake runner) passes through unchanged.
    """

    def run(config: TrialConfig, timeout_s: float) -> Measurement:
        m = run_trial(config, timeout_s)
        flops = m.extra.get("flops_per_sample")
        if not flops or m.throughput_sps <= 0:
            return m
        peak = caps.peak_flops_per_s.get(config.precision)
        source = caps.peak_flops_source
        if peak is None and "measured_peak_flops_per_s" in m.extra:
            peak = float(m.extra["measured_peak_flops_per_s"])
            source = "measured matmul peak in the trial process (GPU not in the published table)"
        if peak is None:
            return m
        devices = config.gpu_count if caps.is_gpu else 1
        extra = {
            **m.extra,
            **mfu_figures(flops, m.throughput_sps, peak, devices),
            "peak_flops_source": source,
        }
        return replace(m, extra=extra)

    return run


def _flops_text(flops_per_s: float) -> str:
    if flops_per_s >= 1e12:
        return f"{flops_per_s / 1e12:,.3g} TFLOP/s"
    return f"{flops_per_s / 1e9:,.3g} GFLOP/s"


def describe_peaks(caps: DeviceCapabilities, precisions: Sequence[str]) -> str:
    """One line for the run header: the peak FLOP/s MFU is measured against, and its source."""
    shown = [
        f"{p} {_flops_text(caps.peak_flops_per_s[p])}"
        for p in precisions
        if p in caps.peak_flops_per_s
    ]
    if not shown:
        return f"MFU peak: {caps.peak_flops_source or 'unknown'}"
    per = " per GPU" if caps.is_gpu else ""
    return f"MFU peak{per}: {', '.join(shown)} ({caps.peak_flops_source})"
