"""A measured peak: :func:`measure_matmul_peak` for a device missing from the published table
(the CPU included), cheaply and once per process."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator

__all__ = ["measure_matmul_peak"]


_MATMUL_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@contextlib.contextmanager
def _matmul_tf32(enabled: bool) -> Iterator[None]:
    """fp32 matmuls in TF32 (``enabled``) or IEEE fp32 inside the block, as before after it:
    through ``fp32_precision`` where torch has it (2.9+; the ``allow_tf32`` flags are the
    legacy API there, and Inductor refuses a mix of the two), else ``allow_tf32``."""
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        before = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if enabled else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = before
    else:  # torch < 2.9
        legacy = matmul.allow_tf32
        matmul.allow_tf32 = enabled
        try:
            yield
        finally:
            matmul.allow_tf32 = legacy


@functools.cache
def _measure_matmul_peak(precision: str, device: str, threads: int, budget_s: float) -> float:
    import torch

    dtype = getattr(torch, _MATMUL_DTYPES[precision])
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    max_n = 8192 if dev.type == "cuda" else 2048
    min_repeats = 3
    with _matmul_tf32(precision == "tf32"), torch.no_grad():
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
