"""Timed windows and their statistics.

Follows ``torch.utils.benchmark`` and airbench: warm-up steps are thrown away, and the training
steps are timed in windows of consecutive steps. The device is synchronized only at the edges
of a window, never inside one, so the host keeps queueing kernels while the device works, as in
an untimed training loop (a sync per step would stall a launch-bound eager model on a GPU).
A window's step time is its seconds over its steps; the throughput is the median of the
windows' with its interquartile range (IQR) kept as the spread, and a spread of 10 % of the
median or more is warned of, as ``torch.utils.benchmark`` warns (:func:`spread_warning`).
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotune.core.hardware import CUDA_GRAPH_MODES

if TYPE_CHECKING:
    from autotune.core.config import TrialConfig

__all__ = [
    "IQR_GROSS_WARN_RATIO",
    "IQR_WARN_RATIO",
    "ThroughputStats",
    "WindowClock",
    "WindowPlan",
    "graph_recording_steps",
    "plan_reused_windows",
    "plan_windows",
    "reused_timing_steps",
    "spread_warning",
    "summarize_windows",
]

#: IQR over median at or above which a measurement's windows "could indicate system
#: fluctuation": torch.utils.benchmark's ``_IQR_WARN_THRESHOLD`` (0.1), which its
#: ``Measurement._lazy_init`` applies through ``meets_confidence`` (``iqr / median < threshold``),
#: torch/utils/benchmark/utils/common.py (torch 2.13).
IQR_WARN_RATIO = 0.1
#: IQR over median at or above which they "suggest significant environmental influence":
#: torch.utils.benchmark's ``_IQR_GROSS_WARN_THRESHOLD`` (0.25), the same file.
IQR_GROSS_WARN_RATIO = 0.25


@dataclass(frozen=True)
class ThroughputStats:
    """Throughput over timed windows of consecutive steps.

    Attributes:
        throughput_sps: median over windows of samples/s (global: all ranks' samples).
        throughput_iqr_sps: interquartile range of the window throughputs (samples/s).
        window_throughputs_sps: each window's samples/s, in order.
        step_time_s: median over windows of the window's seconds per optimizer step.
        step_time_p90_s: 90th percentile over windows of the window's seconds per step.
        timed_steps: steps inside the windows.
    """

    throughput_sps: float
    throughput_iqr_sps: float
    window_throughputs_sps: tuple[float, ...]
    step_time_s: float
    step_time_p90_s: float
    timed_steps: int


def spread_warning(iqr_sps: float | None, median_sps: float | None) -> str | None:
    """torch.utils.benchmark's warning on a noisy measurement, for a run's timed windows.

    torch's ``Measurement`` warns "Interquartile range is X% of the median measurement" when
    its times' IQR over their median is not below :data:`IQR_WARN_RATIO` ("This could
    indicate system fluctuation"), or :data:`IQR_GROSS_WARN_RATIO` ("This suggests
    significant environmental influence"); torch/utils/benchmark/utils/common.py,
    ``Measurement._lazy_init``. Here the figures are the windows' throughputs (samples/s), the
    inverse of their times per sample: for a spread of this size the ratio is within a few
    percent of its own value of the times' ratio (``t50 (t75 - t25) / (t25 t75)`` against
    ``(t75 - t25) / t50``).

    Args:
        iqr_sps: interquartile range of the window throughputs (samples/s); None: not measured.
        median_sps: their median (the run's throughput, samples/s); None: not measured.

    Returns:
        ``the timed windows' interquartile range is 14.2 % of their median: this could
        indicate system fluctuation``, or None when the ratio is below :data:`IQR_WARN_RATIO`
        or a figure is missing (a median of 0 or less, or not finite, included).
    """
    if iqr_sps is None or median_sps is None or not 0 < median_sps < math.inf:
        return None
    ratio = iqr_sps / median_sps
    if not ratio >= IQR_WARN_RATIO:  # NaN too: no warning for a spread not measured
        return None
    why = (
        "this suggests significant environmental influence"
        if ratio >= IQR_GROSS_WARN_RATIO
        else "this could indicate system fluctuation"
    )
    return f"the timed windows' interquartile range is {100 * ratio:.1f} % of their median: {why}"


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class WindowPlan:
    """Where a training loop of ``total_steps`` steps reads the clock, planned before it runs.

    Steps ``1 .. warmup_steps`` are warm-up (untimed), then ``windows`` windows of
    ``window_steps`` consecutive steps each are timed, and any steps after the last window
    train untimed. Step counts below mean "after that many steps" (0: before the first).

    Attributes:
        total_steps: optimizer steps the loop takes.
        warmup_steps: untimed steps before the first window.
        window_steps: steps in each window.
        windows: the number of windows (>= 1).
        compiled: the first step holds torch.compile's compilation; the clock is also read
            after it, so that its time can be told apart (see :attr:`edges`).
        compile_steps: the steps whose time holds compilation when ``compiled``: 1, or 2
            where CUDA graphs are recorded on the second step (``reduce-overhead``, and
            ``max-autotune`` on CUDA: the first call warms up, the second records); the
            clock is read after each.
    """

    total_steps: int
    warmup_steps: int
    window_steps: int
    windows: int
    compiled: bool = False
    compile_steps: int = 1

    @property
    def timed_steps(self) -> int:
        """Steps inside the windows."""
        return self.window_steps * self.windows

    @property
    def window_edges(self) -> tuple[int, ...]:
        """Step counts at which the windows start and end (``windows + 1`` of them; a window
        ends where the next starts)."""
        return tuple(self.warmup_steps + i * self.window_steps for i in range(self.windows + 1))

    @property
    def edges(self) -> tuple[int, ...]:
        """Every step count at which the loop synchronizes the device and reads the clock, in
        order: the start (0), after each of the :attr:`compile_steps` first steps when
        compiling, the window edges, and the end (``total_steps``, for the loop's wall time).
        At most ``windows + 5`` reads."""
        first = set(range(1, self.compile_steps + 1)) if self.compiled else set()
        return tuple(sorted({0, *first, *self.window_edges, self.total_steps}))

    def window_times_s(self, marks_s: Mapping[int, float]) -> tuple[float, ...]:
        """Each window's seconds, from the clock readings taken at :attr:`edges`.

        Args:
            marks_s: clock seconds by step count, read at (at least) :attr:`window_edges`.
        """
        pairs = itertools.pairwise(self.window_edges)
        return tuple(marks_s[end] - marks_s[start] for start, end in pairs)

    def summarize(self, marks_s: Mapping[int, float], samples_per_step: int) -> ThroughputStats:
        """The windows' statistics (:func:`summarize_windows`) from the clock readings."""
        return summarize_windows(self.window_times_s(marks_s), self.window_steps, samples_per_step)


def plan_windows(
    total_steps: int,
    *,
    warmup_steps: int,
    windows: int,
    min_window_steps: int = 1,
    compiled: bool = False,
    compile_steps: int = 1,
) -> WindowPlan:
    """Plan the warm-up and the timed windows of a loop of ``total_steps`` steps.

    At least one step is always timed, so warm-up is capped at ``total_steps - 1``; when
    compiling, at least the ``compile_steps`` first steps are warm-up (they hold the
    compilation, and the CUDA graphs' recording). The steps after
    warm-up are cut into ``windows`` equal windows, or fewer when there are not
    ``windows * min_window_steps`` of them; steps that do not fill the last window train
    untimed after it.

    Args:
        total_steps: optimizer steps of the loop (>= 1).
        warmup_steps: untimed steps wanted before the first window
            (``advanced.train.warmup_steps``).
        windows: the number of windows wanted (``advanced.measure.windows``, >= 1).
        min_window_steps: the fewest steps a window may hold
            (``advanced.measure.min_window_steps``).
        compiled: whether the model is compiled (``compile_mode != "none"``).
        compile_steps: steps whose time holds compilation (:attr:`WindowPlan.compile_steps`).

    Raises:
        ValueError: ``total_steps < 1``, ``windows < 1`` or ``min_window_steps < 1``.
    """
    if total_steps < 1:
        raise ValueError(
            f"no timed steps: the loop takes {total_steps} steps; raise the budget (train.epochs)"
        )
    if windows < 1 or min_window_steps < 1:
        raise ValueError(
            f"`windows >= 1` and `min_window_steps >= 1` must hold, but got windows={windows}, "
            f"min_window_steps={min_window_steps}"
        )
    warmup = min(max(warmup_steps, compile_steps if compiled else 0), total_steps - 1)
    timed = total_steps - warmup
    n_windows = max(1, min(windows, timed // min_window_steps))
    return WindowPlan(
        total_steps=total_steps,
        warmup_steps=warmup,
        window_steps=timed // n_windows,
        windows=n_windows,
        compiled=compiled,
        compile_steps=max(1, min(compile_steps, warmup)) if compiled else 1,
    )


def graph_recording_steps(config: TrialConfig, device_kind: str) -> int:
    """Steps whose time holds a compiled trial's compilation: 2 where CUDA graphs record on
    the second call (``reduce-overhead`` and ``max-autotune`` on CUDA: Inductor's cudagraph
    trees warm up on the first call and record on the second), else 1. ``device_kind``:
    ``cpu`` or ``cuda`` (the mock passes the kind it simulates)."""
    if device_kind == "cuda" and config.compile_mode in CUDA_GRAPH_MODES:
        return 2
    return 1


def reused_timing_steps(config: TrialConfig) -> int:
    """The timed steps of a run that inherits its accuracy (:func:`plan_reused_windows`'s
    ``timing_steps``): ``advanced.measure.timing_steps``, and at least the paired check's
    steps (``advanced.measure.check_steps``) beyond the warm-up."""
    measure = config.measure
    return max(measure.timing_steps, measure.check_steps - config.train.warmup_steps)


def plan_reused_windows(
    total_steps: int,
    *,
    steps_per_epoch: int,
    warmup_steps: int,
    windows: int,
    min_window_steps: int = 1,
    compiled: bool = False,
    compile_steps: int = 1,
    timing_steps: int | None = None,
) -> WindowPlan:
    """Plan the loop of a trial that reuses another trial's metric
    (``advanced.search.reuse_metric``): the same warm-up, then the windows over one epoch's
    steps (at least ``windows x min_window_steps``, at most the budget's), so the throughput
    is timed over a full pass of the data loader's order at the budget's batch, and the steps
    after it, which would only have trained towards a metric already known, are not run.
    With ``timing_steps``, the windows cover that many steps instead of the epoch, when fewer
    (``advanced.measure.timing_steps``: seconds, not the budget).

    Args:
        total_steps: optimizer steps of the full budget (>= 1).
        steps_per_epoch: optimizer steps of one pass over the training split (>= 1).
        warmup_steps: untimed steps wanted before the first window
            (``advanced.train.warmup_steps``).
        windows: the number of windows wanted (``advanced.measure.windows``).
        min_window_steps: the fewest steps a window may hold
            (``advanced.measure.min_window_steps``).
        compiled: whether the model is compiled.
        compile_steps: steps whose time holds compilation (:attr:`WindowPlan.compile_steps`).

    Raises:
        ValueError: as :func:`plan_windows`.
    """
    full = plan_windows(
        total_steps,
        warmup_steps=warmup_steps,
        windows=windows,
        min_window_steps=min_window_steps,
        compiled=compiled,
        compile_steps=compile_steps,
    )
    epoch = steps_per_epoch if timing_steps is None else min(steps_per_epoch, timing_steps)
    timed = max(epoch, windows * min_window_steps)
    return plan_windows(
        min(total_steps, full.warmup_steps + timed),
        warmup_steps=warmup_steps,
        windows=windows,
        min_window_steps=min_window_steps,
        compiled=compiled,
        compile_steps=compile_steps,
    )


def summarize_windows(
    window_times_s: Sequence[float], window_steps: int | Sequence[int], samples_per_step: int
) -> ThroughputStats:
    """Summarize timed windows of consecutive steps.

    Each window's throughput is ``its steps * samples_per_step / its seconds`` and its step
    time ``its seconds / its steps``; the figures are the median over windows (and the IQR and
    90th percentile) of these.

    Args:
        window_times_s: seconds of each window, input pipeline included, in order.
        window_steps: optimizer steps in each window (>= 1): one count for all, or one per
            window (the stretches between evaluations of a time-to-accuracy trial).
        samples_per_step: global samples per step (per-rank batch size times world size).

    Raises:
        ValueError: when ``window_times_s`` is empty or holds a non-positive time, a window
            has fewer than 1 step, or the step counts do not match the windows.
    """
    if not window_times_s:
        raise ValueError("no timed steps: raise the budget (train.epochs) or lower warmup_steps")
    if min(window_times_s) <= 0:
        raise ValueError(f"window times must be > 0 s, but got min {min(window_times_s)}")
    steps = (
        [window_steps] * len(window_times_s)
        if isinstance(window_steps, int)
        else list(window_steps)
    )
    if len(steps) != len(window_times_s):
        raise ValueError(f"{len(steps)} step counts for {len(window_times_s)} windows")
    if min(steps) < 1:
        raise ValueError(f"`window_steps >= 1` must hold, but got {min(steps)}")
    window_sps = tuple(n * samples_per_step / t for n, t in zip(steps, window_times_s, strict=True))
    step_times_s = [t / n for n, t in zip(steps, window_times_s, strict=True)]
    return ThroughputStats(
        throughput_sps=statistics.median(window_sps),
        throughput_iqr_sps=_quantile(window_sps, 0.75) - _quantile(window_sps, 0.25),
        window_throughputs_sps=window_sps,
        step_time_s=statistics.median(step_times_s),
        step_time_p90_s=_quantile(step_times_s, 0.9),
        timed_steps=sum(steps),
    )


class WindowClock:
    """A clock read only at window edges: each :meth:`mark` synchronizes the device, then reads.

    Nothing is synchronized between marks, so the steps inside a window run as they would
    untimed; the window's seconds are the difference of its two marks.

    Args:
        sync: waits for queued device work (``torch.cuda.synchronize`` on CUDA; a no-op on CPU).
        clock: returns seconds; ``time.perf_counter`` unless a test injects a fake.
    """

    def __init__(self, sync: Callable[[], None], clock: Callable[[], float] = time.perf_counter):
        self._sync = sync
        self._clock = clock
        self._stopped_s = 0.0  # seconds the clock was stopped, left out of every later mark
        self._paused_at: float | None = None

    def mark(self) -> float:
        """Wait for the device, then read the clock (seconds, less the time it was paused)."""
        self._sync()
        return self._clock() - self._stopped_s

    def pause(self) -> None:
        """Stop the clock (after the device's queue drains) until :meth:`resume`: what runs
        between is left out of every later mark. A second pause is a no-op."""
        if self._paused_at is None:
            self._sync()
            self._paused_at = self._clock()

    def resume(self) -> None:
        """Start the clock again (after the device's queue drains); a no-op unless paused."""
        if self._paused_at is not None:
            self._sync()
            self._stopped_s += self._clock() - self._paused_at
            self._paused_at = None
