"""MFU on every measurement of a study: the trial runner :func:`run_study` hands the objective,
wrapped so that each measurement also carries its model FLOP utilization."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from autotune.core.config import TrialConfig
from autotune.core.flops import blended_peak_flops_per_s, mfu_figures
from autotune.core.hardware import DeviceCapabilities
from autotune.trial.measure import Measurement

__all__ = ["with_mfu"]


def with_mfu(
    run_trial: Callable[[TrialConfig], Measurement], caps: DeviceCapabilities
) -> Callable[[TrialConfig], Measurement]:
    """Wrap a trial runner so each measurement also carries its MFU (in ``extra``).

    The peak is the device's (``caps.peak_flops_per_s``: the published table, the measured
    CPU peak, or the mock profile's), or a peak the trial measured on an unknown GPU. An fp32
    trial on a GPU with a TF32 peak rates its convolution FLOPs against the TF32 peak and the
    rest against the fp32 peak (:func:`autotune.core.flops.blended_peak_flops_per_s`): cuDNN
    convolves fp32 in TF32 by PyTorch's default, so the fp32 peak alone let MFU pass 100 %.
    ``peak_flops_source`` says which peaks were used. A measurement without
    ``flops_per_sample`` (a fake runner) passes through unchanged.
    """

    def run(config: TrialConfig) -> Measurement:
        m = run_trial(config)
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
        conv = float(m.extra.get("conv_flops_per_sample") or 0.0)
        tf32 = caps.peak_flops_per_s.get("tf32")
        if caps.is_gpu and config.precision == "fp32" and conv > 0 and tf32:
            peak = blended_peak_flops_per_s(float(flops), min(conv, float(flops)), peak, tf32)
            source = (
                f"{source}; fp32 for matmuls, tf32 for the {conv / float(flops):.0%} of FLOPs "
                "in convolutions (cuDNN convolves fp32 in TF32 by PyTorch's default)"
            )
        devices = config.gpu_count if caps.is_gpu else 1
        extra = {
            **m.extra,
            **mfu_figures(flops, m.throughput_sps, peak, devices),
            "peak_flops_source": source,
        }
        return replace(m, extra=extra)

    return run
