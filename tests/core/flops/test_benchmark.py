"""The measured matmul peak (autotune/core/flops/_benchmark.py)."""

from __future__ import annotations

import time

from autotune.core.flops import measure_matmul_peak


def test_measured_cpu_peak_is_cheap_and_cached() -> None:
    started = time.perf_counter()
    peaks = {p: measure_matmul_peak(p, budget_s=0.1) for p in ("fp32", "bf16", "fp16")}
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    again = {p: measure_matmul_peak(p, budget_s=0.1) for p in ("fp32", "bf16", "fp16")}
    cached_s = time.perf_counter() - started

    assert all(v > 1e8 for v in peaks.values())  # more than 0.1 GFLOP/s on any CPU
    assert again == peaks
    assert first_s < 2.0  # about 0.4 s on an idle machine; allow for a busy one
    assert cached_s < 0.01
