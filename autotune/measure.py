"""Timing discipline and the measurement a trial returns.

Follows ``torch.utils.benchmark`` and airbench: warm-up steps are thrown away, and the training
steps are timed in windows of consecutive steps. The device is synchronized only at the edges
of a window, never inside one, so the host keeps queueing kernels while the device works, as in
an untimed training loop (a sync per step would stall a launch-bound eager model on a GPU).
A window's step time is its seconds over its steps; the throughput is the median of the
windows' with its interquartile range (IQR) kept as the spread.
"""

from __future__ import annotations

import itertools
import math
import resource
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "Measurement",
    "ThroughputStats",
    "WindowClock",
    "WindowPlan",
    "current_rss_bytes",
    "peak_rss_bytes",
    "plan_windows",
    "reset_peak_rss",
    "summarize_steps",
    "summarize_windows",
]


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
    """

    total_steps: int
    warmup_steps: int
    window_steps: int
    windows: int
    compiled: bool = False

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
        order: the start (0), after the first step when compiling, the window edges, and the
        end (``total_steps``, for the loop's wall time). At most ``windows + 4`` reads."""
        first = {1} if self.compiled else set()
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
) -> WindowPlan:
    """Plan the warm-up and the timed windows of a loop of ``total_steps`` steps.

    At least one step is always timed, so warm-up is capped at ``total_steps - 1``; when
    compiling, at least the first step is warm-up (it holds the compilation). The steps after
    warm-up are cut into ``windows`` equal windows, or fewer when there are not
    ``windows * min_window_steps`` of them; steps that do not fill the last window train
    untimed after it.

    Args:
        total_steps: optimizer steps of the loop (>= 1).
        warmup_steps: untimed steps wanted before the first window (``train.warmup_steps``).
        windows: the number of windows wanted (``measure.windows``, >= 1).
        min_window_steps: the fewest steps a window may hold (``measure.min_window_steps``).
        compiled: whether the model is compiled (``compile_mode != "none"``).

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
    warmup = min(max(warmup_steps, 1 if compiled else 0), total_steps - 1)
    timed = total_steps - warmup
    n_windows = max(1, min(windows, timed // min_window_steps))
    return WindowPlan(
        total_steps=total_steps,
        warmup_steps=warmup,
        window_steps=timed // n_windows,
        windows=n_windows,
        compiled=compiled,
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


def summarize_steps(
    step_times_s: Sequence[float], samples_per_step: int, windows: int, min_window_steps: int = 1
) -> ThroughputStats:
    """Cut per-step times into the windows :func:`plan_windows` plans and summarize them.

    For callers that have one time per step (a simulation, a test): the steps are cut as a
    loop of ``len(step_times_s)`` steps without warm-up would be, each window's time is the
    sum of its steps', and steps that do not fill the last window are left out, as a real loop
    leaves them untimed.

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
    plan = plan_windows(
        len(step_times_s), warmup_steps=0, windows=windows, min_window_steps=min_window_steps
    )
    n = plan.window_steps
    window_times_s = [sum(step_times_s[i * n : (i + 1) * n]) for i in range(plan.windows)]
    return summarize_windows(window_times_s, n, samples_per_step)


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

    def mark(self) -> float:
        """Wait for the device, then read the clock (seconds)."""
        self._sync()
        return self._clock()


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
        step_time_s: median over the timed windows of seconds per optimizer step (a window's
            seconds over its steps).
        step_time_p90_s: 90th percentile over the timed windows of seconds per step.
        compile_s: seconds torch.compile added before the first timed step: the first step's
            seconds minus ``step_time_s`` (0 without compile).
        peak_memory_bytes: CUDA: allocator peak of the busiest GPU; CPU: peak RSS growth of the
            training processes, summed over ranks; mock: the cost model's estimate.
        val_metric: top-1 accuracy on the held-out validation split, in [0, 1].
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
        time_to_accuracy_s: time-to-accuracy trials only (``objective=time_to_accuracy``):
            wall seconds from the first training step to the end of the first evaluation
            that met the target, compilation and evaluations included; None when the target
            was not reached or in a throughput trial.
        target_reached: time-to-accuracy trials: whether the validation metric met the
            target; None in a throughput trial.
        eval_s: time-to-accuracy trials: wall seconds spent evaluating (inside
            ``time_to_accuracy_s``); None otherwise.
        metric_curve: time-to-accuracy trials: one ``(wall_s, step, metric)`` per
            evaluation, in order (wall seconds since the first step); empty otherwise.
        val_samples: how many validation samples ``val_metric`` was computed on (the
            validation split's size); None when the split has no length. The verification's
            accuracy screen widens with its standard error (:mod:`autotune.verification`).
        too_slow: throughput trials: the first timed window ran below the trial's
            ``min_throughput_sps`` floor, so the trial stopped there, without evaluating:
            the timing figures are that window's, ``val_metric`` and ``train_loss`` are NaN
            (nothing was judged). The study records it as ``failure=too_slow``.
        extra: more per-trial figures (e.g. NVML readings, ``lr_peak``: the learning rate
            after warm-up), stored as user attributes too.
    """

    throughput_sps: float
    throughput_iqr_sps: float
    step_time_s: float
    step_time_p90_s: float
    compile_s: float
    peak_memory_bytes: int
    val_metric: float
    train_loss: float
    train_s: float
    steps: int
    timed_steps: int
    samples_per_step: int
    parameters: int
    memory_kind: str
    simulated: bool
    window_throughputs_sps: tuple[float, ...] = ()
    time_to_accuracy_s: float | None = None
    target_reached: bool | None = None
    eval_s: float | None = None
    metric_curve: tuple[tuple[float, int, float], ...] = ()
    val_samples: int | None = None
    too_slow: bool = False
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
        """Flat JSON-ready figures for Optuna trial user attributes; a measurement that
        stopped :attr:`too_slow` leaves out the figures it has not measured (``val_metric``,
        ``train_loss``, ``val_samples``) and the flag itself (the study records
        ``failure=too_slow``)."""
        attrs = asdict(self)
        if attrs.pop("too_slow"):
            for key in ("val_metric", "train_loss", "val_samples"):
                attrs.pop(key)
        attrs["window_throughputs_sps"] = list(self.window_throughputs_sps)
        curve = attrs.pop("metric_curve")
        if self.target_reached is None:  # a throughput trial: no time-to-accuracy figures
            for key in ("time_to_accuracy_s", "target_reached", "eval_s"):
                attrs.pop(key)
        else:
            attrs["metric_curve"] = [list(point) for point in curve]
        attrs.update(attrs.pop("extra"))
        return attrs
