"""Per-trial figures and model FLOP utilization (MFU).

MFU = achieved FLOP/s / peak FLOP/s for the trial's precision, where achieved FLOP/s = FLOPs
per training sample x throughput (samples/s) (Chowdhery et al., "PaLM", 2022, appendix B).
:func:`trial_extras` gathers a real trial's figures in its process; :func:`mfu_figures`
computes MFU (``autotune.study.api`` adds it to every measurement of a study).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autotune.core.flops._benchmark import measure_matmul_peak
from autotune.core.flops._counting import TrainingFlops, count_training_flops_by_kind
from autotune.core.flops._peaks import published_peak

if TYPE_CHECKING:
    import torch

    from autotune.core.nvml import GpuWindowReading

__all__ = ["flops_text", "mfu_figures", "step_extras", "trial_extras"]


#: Shortest metered window with an energy figure, seconds: NVML's power reading is averaged by
#: the driver over up to 1 s, and the energy counter's updates are as coarse, so a shorter
#: window's joules are mostly noise (NVML API reference, nvmlDeviceGetPowerUsage,
#: nvmlDeviceGetTotalEnergyConsumption).
MIN_ENERGY_WINDOW_S = 1.0


def trial_extras(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    precision: str,
    autocast_dtype: torch.dtype | None,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    gpu_reading: GpuWindowReading | None,
    metered_samples: int,
) -> dict[str, Any]:
    """The hardware figures a real trial stores in ``Measurement.extra``.

    Runs in the trial process after the timed steps (and after peak memory is read).

    Args:
        model: the trained eager model (rank 0's).
        x, y: one training batch at the trial's batch size, on the device.
        loss_fn: the workload's loss (default: cross-entropy).
        precision: the trial's precision (for a measured peak on an unknown GPU).
        autocast_dtype: the trial's autocast dtype, or None.
        gpu_reading: NVML readings over the timed windows (CUDA), or None.
        metered_samples: global samples trained inside the windows ``gpu_reading`` covers
            (energy per sample is per the same windows' samples, whatever windows the
            throughput comes from).

    Returns:
        ``flops_per_sample`` (and ``conv_flops_per_sample``, the convolutions' share, where
        there are any); on CUDA with NVML also ``gpu_utilization_pct``, ``gpu_power_w``,
        ``gpu_energy_window_s`` and, over windows of at least :data:`MIN_ENERGY_WINDOW_S`,
        ``energy_j_per_sample`` and ``energy_source`` (shorter: ``energy_note`` says why
        there is none); on a CUDA GPU missing from :data:`autotune.core.flops.PUBLISHED_PEAKS`,
        ``measured_peak_flops_per_s`` for one GPU.
    """
    flops = count_training_flops_by_kind(
        model, x, y, autocast_dtype=autocast_dtype, loss_fn=loss_fn
    )
    return step_extras(
        flops,
        len(x),
        precision=precision,
        device=x.device,
        gpu_reading=gpu_reading,
        metered_samples=metered_samples,
    )


def step_extras(
    flops: TrainingFlops | None,
    samples: int,
    *,
    precision: str,
    device: torch.device,
    gpu_reading: GpuWindowReading | None,
    metered_samples: int,
) -> dict[str, Any]:
    """The hardware figures of a real trial from FLOPs already counted (the doors whose step
    is the user's count them in a warm-up step: ``autotune.trial.training``'s ``StepMeter``).

    Args:
        flops: the counted FLOPs of ``samples`` training samples (forward and backward), or
            None where no step could be counted (then no ``flops_per_sample``, and no MFU).
        samples: the samples those FLOPs trained (>= 1).
        precision: the trial's precision (for a measured peak on an unknown GPU).
        device: the trial's device (rank 0's).
        gpu_reading: NVML readings over the timed windows (CUDA), or None.
        metered_samples: global samples trained inside the windows ``gpu_reading`` covers.

    Returns:
        As :func:`trial_extras`.
    """
    extra: dict[str, Any] = {}
    if flops is not None and samples > 0:
        extra["flops_per_sample"] = flops.total / samples
        if flops.convolution:
            extra["conv_flops_per_sample"] = flops.convolution / samples
    if gpu_reading is not None and gpu_reading.duration_s > 0:
        extra.update(
            gpu_utilization_pct=gpu_reading.mean_utilization_pct,
            gpu_power_w=gpu_reading.mean_power_w,
            gpu_energy_window_s=gpu_reading.duration_s,
        )
        if gpu_reading.duration_s >= MIN_ENERGY_WINDOW_S and metered_samples > 0:
            # The windows' joules over the samples trained in the same windows.
            extra["energy_j_per_sample"] = gpu_reading.energy_j / metered_samples
            extra["energy_source"] = gpu_reading.energy_source
        else:
            extra["energy_note"] = (
                f"no energy figure: the metered windows lasted {gpu_reading.duration_s:.2f} s, "
                f"under {MIN_ENERGY_WINDOW_S:g} s (NVML's power reading averages over up to 1 s)"
            )
    if device.type == "cuda":
        import torch

        if published_peak(torch.cuda.get_device_name(device)) is None:
            extra["measured_peak_flops_per_s"] = measure_matmul_peak(precision, str(device))
    return extra


def blended_peak_flops_per_s(
    flops_per_sample: float,
    conv_flops_per_sample: float,
    matmul_peak_flops_per_s: float,
    conv_peak_flops_per_s: float,
) -> float:
    """The peak FLOP/s of a step whose matmuls and convolutions run at different peaks: the
    FLOPs over the least time each part could take at its own peak,
    ``F / ((F - C) / P_matmul + C / P_conv)`` (a harmonic blend).

    PyTorch runs fp32 matmuls in IEEE fp32 by default but lets cuDNN run fp32 convolutions
    in TF32 (``torch.backends.cudnn.allow_tf32 = True``, PyTorch docs, "CUDA semantics",
    TF32 on Ampere and later), so an fp32 CNN's MFU against the fp32 peak alone can pass
    100 %.

    Args:
        flops_per_sample: every counted FLOP per sample.
        conv_flops_per_sample: the convolutions' FLOPs among them.
        matmul_peak_flops_per_s: the peak the rest runs at (fp32).
        conv_peak_flops_per_s: the peak convolutions run at (tf32).

    Raises:
        ValueError: a peak not above 0, or convolution FLOPs outside ``[0, flops_per_sample]``.
    """
    if matmul_peak_flops_per_s <= 0 or conv_peak_flops_per_s <= 0:
        raise ValueError(
            f"peaks must be > 0, but got {matmul_peak_flops_per_s} and {conv_peak_flops_per_s}"
        )
    if not 0 <= conv_flops_per_sample <= flops_per_sample:
        raise ValueError(
            f"0 <= conv_flops_per_sample <= flops_per_sample must hold, but got "
            f"{conv_flops_per_sample} and {flops_per_sample}"
        )
    if flops_per_sample == 0:
        return matmul_peak_flops_per_s
    seconds = (
        flops_per_sample - conv_flops_per_sample
    ) / matmul_peak_flops_per_s + conv_flops_per_sample / conv_peak_flops_per_s
    return flops_per_sample / seconds


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


def flops_text(flops_per_s: float) -> str:
    """A FLOP/s figure for display, to 3 significant digits: ``304 GFLOP/s``, ``67 TFLOP/s``."""
    if flops_per_s >= 1e12:
        return f"{flops_per_s / 1e12:,.3g} TFLOP/s"
    return f"{flops_per_s / 1e9:,.3g} GFLOP/s"
