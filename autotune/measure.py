"""Timing discipline and the measurement a trial returns.

Follows ``torch.utils.benchmark``: warm-up steps are thrown away, the device is synchronized
before every clock read, raw step times are kept, and the throughput is the median of several
timed windows with its interquartile range (IQR) kept as the spread.
"""

from __future__ import annotations

import math
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "Measurement",
    "StepClock",
    "ThroughputStats",
    "current_rss_bytes",
    "peak_rss_bytes",
    "reset_peak_rss",
    "summarize_steps",
]


@dataclass(frozen=True)
class ThroughputStats:
    """Throughput over timed windows of consecutive steps.

    Attributes:
        throughput_sps: median over windows of samples/s (global: all ranks' samples).
        throughput_iqr_sps: interquartile range of the window throughputs (samples/s).
        window_throughputs_sps: each window's samples/s, in order.
        step_time_s: median seconds per optimizer step over the timed steps.
        step_time_p90_s: 90th percentile of the step time (seconds).
        timed_steps: steps inside the windows.
    """

    throughput_sps: float
    throughput_iqr_sps: float
    window_throughputs_sps: tuple[float, ...]
    step_time_s: float
    step_time_p90_s: float
    timed_steps: int

    @property
    def throughput_cv(self) -> float:
        """IQR over median: the relative spread (torch.utils.benchmark warns above 0.1)."""
        return self.throughput_iqr_sps / self.throughput_sps if self.throughput_sps else math.inf


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize_steps(
    step_times_s: Sequence[float], samples_per_step: int, windows: int, min_window_steps: int = 1
) -> ThroughputStats:
    """Cut timed step times into consecutive windows and summarize them.

    Each window's throughput is ``steps_in_window * samples_per_step / window_seconds``; fewer
    windows are used when there are not ``windows * min_window_steps`` steps; steps that do not
    fill the last window are left out of the windows (but kept in the step-time statistics).

    Args:
        step_times_s: seconds of each timed optimizer step, input pipeline included.
        samples_per_step: global samples per step (per-rank batch size times world size).
        windows: the number of windows wanted (>= 1).
        min_window_steps: the fewest steps a window may hold.

    Raises:
        ValueError: when ``step_times_s`` is empty or holds a non-positive time.
    """
    if not step_times_s:
        raise ValueError("no timed steps: raise the budget (train.epochs) or lower warmup_steps")
    if min(step_times_s) <= 0:
        raise ValueError(f"step times must be > 0 s, but got min {min(step_times_s)}")
    n_windows = max(1, min(windows, len(step_times_s) // max(1, min_window_steps)))
    per_window = len(step_times_s) // n_windows
    window_sps = tuple(
        per_window * samples_per_step / sum(step_times_s[i * per_window : (i + 1) * per_window])
        for i in range(n_windows)
    )
    return ThroughputStats(
        throughput_sps=statistics.median(window_sps),
        throughput_iqr_sps=_quantile(window_sps, 0.75) - _quantile(window_sps, 0.25),
        window_throughputs_sps=window_sps,
        step_time_s=statistics.median(step_times_s),
        step_time_p90_s=_quantile(step_times_s, 0.9),
        timed_steps=per_window * n_windows,
    )


class StepClock:
    """A lap clock that synchronizes the device before each read.

    Args:
        sync: waits for queued device work (``torch.cuda.synchronize`` on CUDA; a no-op on CPU).
        clock: returns seconds; ``time.perf_counter`` unless a test injects a fake.
    """

    def __init__(self, sync: Callable[[], None], clock: Callable[[], float] = time.perf_counter):
        self._sync = sync
        self._clock = clock
        self._last = self._read()

    def _read(self) -> float:
        self._sync()
        return self._clock()

    def lap(self) -> float:
        """Seconds since the previous lap (or since construction)."""
        now = self._read()
        elapsed, self._last = now - self._last, now
        return elapsed


def current_rss_bytes() -> int:
    """Resident set size of this process now (bytes); Linux reads /proc, others use the peak."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize()
    except OSError:  # pragma: no cover (non-Linux)
        return peak_rss_bytes()


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0, ``/proc/self/clear_refs`` value 5).

    Returns:
        True when the reset worked; otherwise the peak is the process lifetime's.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (bytes) since start or :func:`reset_peak_rss`."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover (non-Linux)
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


@dataclass(frozen=True)
class Measurement:
    """Everything one trial measured. Units are in the names; ``simulated`` marks the mock.

    Attributes:
        throughput_sps: global training samples/s, median of timed windows, input pipeline in.
        throughput_iqr_sps: IQR of the window throughputs.
        step_time_s: median seconds per optimizer step.
        step_time_p90_s: 90th percentile seconds per step.
        compile_s: seconds torch.compile added before the first timed step (0 without compile).
        peak_memory_bytes: CUDA: allocator peak of the busiest GPU; CPU: peak RSS growth of the
            training processes, summed over ranks; mock: the cost model's estimate.
        val_accuracy: top-1 accuracy on the held-out validation split, in [0, 1].
        train_loss: mean training loss over the last epoch.
        train_s: wall seconds of the whole training loop, compile and warm-up included.
        steps: optimizer steps taken.
        timed_steps: steps inside the timed windows.
        samples_per_step: global batch (per-rank batch times world size).
        parameters: trainable parameters of the model.
        memory_kind: what ``peak_memory_bytes`` is (``cuda_allocator_peak``,
            ``cpu_peak_rss_growth``, ``simulated``).
        simulated: True when the mock device produced this (no real training happened).
        window_throughputs_sps: each timed window's samples/s.
        extra: more per-trial figures (e.g. NVML readings), stored as user attributes too.
    """

    throughput_sps: float
    throughput_iqr_sps: float
    step_time_s: float
    step_time_p90_s: float
    compile_s: float
    peak_memory_bytes: int
    val_accuracy: float
    train_loss: float
    train_s: float
    steps: int
    timed_steps: int
    samples_per_step: int
    parameters: int
    memory_kind: str
    simulated: bool
    window_throughputs_sps: tuple[float, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_stats(cls, stats: ThroughputStats, **figures: Any) -> Measurement:
        """A measurement whose timing figures come from ``stats``; ``figures`` gives the rest."""
        return cls(
            throughput_sps=stats.throughput_sps,
            throughput_iqr_sps=stats.throughput_iqr_sps,
            step_time_s=stats.step_time_s,
            step_time_p90_s=stats.step_time_p90_s,
            timed_steps=stats.timed_steps,
            window_throughputs_sps=stats.window_throughputs_sps,
            **figures,
        )

    def as_user_attrs(self) -> dict[str, Any]:
        """Flat JSON-ready figures for Optuna trial user attributes."""
        attrs = asdict(self)
        attrs["window_throughputs_sps"] = list(self.window_throughputs_sps)
        attrs.update(attrs.pop("extra"))
        return attrs
