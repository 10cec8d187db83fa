"""Timing discipline and the measurement a trial returns.

Follows ``torch.utils.benchmark`` and airbench: warm-up steps are thrown away, and the training
steps are timed in windows of consecutive steps. The device is synchronized only at the edges
of a window, never inside one, so the host keeps queueing kernels while the device works, as in
an untimed training loop (a sync per step would stall a launch-bound eager model on a GPU).
A window's step time is its seconds over its steps; the throughput is the median of the
windows' with its interquartile range (IQR) kept as the spread.

Over the timed windows the share of the CPUs that other processes used is measured as well
(:class:`CpuShareMeter`, :func:`other_cpu_share`): a figure taken while something else ran is
flagged "measured on a busy machine" (:func:`busy_text`), as pyperf warns that a result "may be
unreliable" and Google Benchmark that "CPU scaling is enabled, the benchmark real time
measurements may be noisy".
"""

from __future__ import annotations

import itertools
import math
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import psutil

__all__ = [
    "BUSY_ATTR",
    "CpuReading",
    "CpuShareMeter",
    "MachineLoad",
    "Measurement",
    "ThroughputStats",
    "WindowClock",
    "WindowPlan",
    "busy_text",
    "cpu_busy_s",
    "cpu_share_text",
    "current_rss_bytes",
    "is_busy",
    "other_cpu_share",
    "peak_rss_bytes",
    "plan_reused_windows",
    "plan_windows",
    "reset_peak_rss",
    "summarize_windows",
    "tree_cpu_s",
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
        warmup_steps: untimed steps wanted before the first window (``advanced.train.warmup_steps``).
        windows: the number of windows wanted (``advanced.measure.windows``, >= 1).
        min_window_steps: the fewest steps a window may hold (``advanced.measure.min_window_steps``).
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


def plan_reused_windows(
    total_steps: int,
    *,
    steps_per_epoch: int,
    warmup_steps: int,
    windows: int,
    min_window_steps: int = 1,
    compiled: bool = False,
    compile_steps: int = 1,
) -> WindowPlan:
    """Plan the loop of a trial that reuses another trial's metric (``advanced.search.reuse_metric``):
    the same warm-up, then the windows over one epoch's steps (at least ``windows x
    min_window_steps``, at most the budget's), so the throughput is timed over a full pass of
    the data loader's order at the budget's batch, and the steps after it, which would only
    have trained towards a metric already known, are not run.

    Args:
        total_steps: optimizer steps of the full budget (>= 1).
        steps_per_epoch: optimizer steps of one pass over the training split (>= 1).
        warmup_steps: untimed steps wanted before the first window (``advanced.train.warmup_steps``).
        windows: the number of windows wanted (``advanced.measure.windows``).
        min_window_steps: the fewest steps a window may hold (``advanced.measure.min_window_steps``).
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
    timed = max(steps_per_epoch, windows * min_window_steps)
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


def cpu_busy_s(cpus: Collection[int]) -> float:
    """Busy seconds since boot of the CPUs numbered ``cpus``, summed (a cumulative counter).

    Busy is every state but idle and I/O wait: user, nice, system, irq, softirq and steal
    (a hypervisor's other guests); guest time is already inside user and nice (proc(5),
    ``/proc/stat``), as psutil's ``cpu_percent`` counts it. Read from ``/proc/stat`` by CPU
    number: psutil's ``cpu_times(percpu=True)`` is a list by position, which skips offline CPUs,
    and in a container ``/proc/stat`` may list the host's CPUs, of which only ``cpus`` (this
    process's affinity) are ours. Elsewhere (no ``/proc``), psutil's per-CPU list by position.
    Resolution: one clock tick (``SC_CLK_TCK``, 10 ms on Linux) per CPU.
    """
    try:
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        with open("/proc/stat") as f:
            for line in f:
                name, _, rest = line.partition(" ")
                if name[3:].isdigit() and name.startswith("cpu") and int(name[3:]) in cpus:
                    ticks = [int(v) for v in rest.split()[:8]] + [0] * 8
                    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
                    total += user + nice + system + irq + softirq + steal
        return total / tick
    except (OSError, ValueError):  # pragma: no cover (non-Linux)
        per_cpu = psutil.cpu_times(percpu=True)
        return sum(
            sum(t)
            - t.idle
            - getattr(t, "iowait", 0.0)
            - getattr(t, "guest", 0.0)
            - getattr(t, "guest_nice", 0.0)
            for i, t in enumerate(per_cpu)
            if i in cpus
        )


def tree_cpu_s(roots: Sequence[int]) -> dict[int, float]:
    """CPU seconds so far of each process of the trees rooted at ``roots`` (psutil).

    A process's seconds are its user and system time plus its reaped children's
    (``children_user``, ``children_system``): a child that exits and is waited for by its
    parent moves its whole lifetime's time there. Processes that vanish between the listing
    and the reading are left out.

    Args:
        roots: process ids (a trial's ranks); each with all its descendants (DataLoader
            workers, torch.compile's workers).

    Returns:
        ``{pid: seconds}`` of every process found.
    """
    seconds: dict[int, float] = {}
    for root in roots:
        try:
            proc = psutil.Process(root)
            procs = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            continue
        for p in procs:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            seconds[p.pid] = (
                t.user
                + t.system
                + getattr(t, "children_user", 0.0)
                + getattr(t, "children_system", 0.0)
            )
    return seconds


@dataclass(frozen=True)
class CpuReading:
    """The CPU counters at one instant (:class:`CpuShareMeter`).

    Attributes:
        wall_s: a monotonic clock's seconds.
        cpu_busy_s: busy seconds since boot of the CPUs the trial may run on, summed
            (:func:`cpu_busy_s`).
        tree_cpu_s: CPU seconds so far of each process of the trial's tree, by pid
            (:func:`tree_cpu_s`).
    """

    wall_s: float
    cpu_busy_s: float
    tree_cpu_s: Mapping[int, float]


def other_cpu_share(start: CpuReading, end: CpuReading, cpus: int) -> float | None:
    """The share of ``cpus`` CPUs' time between two readings that processes outside the
    trial's tree used, in [0, 1].

    ``(busy CPU seconds - the tree's CPU seconds) / (wall seconds x cpus)``, clamped to
    [0, 1]. The tree's seconds are, for each process at ``end``, its seconds since ``start``
    (all of them for a process born in between), less, for each process of ``start`` gone at
    ``end``, its seconds at ``start``: a child reaped by its parent in between brought its
    whole lifetime into the parent's ``children_*`` time. A process that exited without
    being reaped by the tree is not seen (its time counts as others'); DataLoader workers
    live through the windows (``persistent_workers``).

    Clock ticks (10 ms) bound the resolution: about (processes + CPUs) x 10 ms over ``wall
    x cpus``, 2 % for 3 processes on 2 CPUs over a 1 s window. Kernel time spent for the
    trial outside its processes (interrupts of its I/O) counts as others'.

    Args:
        start: the reading before the first timed window.
        end: the reading after the last.
        cpus: the number of CPUs the trial may run on (``os.sched_getaffinity(0)``).

    Returns:
        The share, or None when no time passed or there is no CPU.
    """
    wall_s = end.wall_s - start.wall_s
    if wall_s <= 0 or cpus < 1:
        return None
    busy_s = end.cpu_busy_s - start.cpu_busy_s
    ours_s = sum(s - start.tree_cpu_s.get(pid, 0.0) for pid, s in end.tree_cpu_s.items())
    ours_s -= sum(s for pid, s in start.tree_cpu_s.items() if pid not in end.tree_cpu_s)
    return min(1.0, max(0.0, (busy_s - ours_s) / (wall_s * cpus)))


@dataclass(frozen=True)
class MachineLoad:
    """How busy the machine was around a trial's timed windows.

    Attributes:
        other_cpu_share: the share of the trial's CPUs other processes used over the timed
            windows, in [0, 1] (:func:`other_cpu_share`); None when not measured.
        load_avg_1m: the 1-minute load average at the end of the windows (``os.getloadavg``;
            the whole machine's runnable tasks, the trial's included, not only its CPUs).
        cpus: the CPUs the trial may run on.
    """

    other_cpu_share: float | None
    load_avg_1m: float | None
    cpus: int


class CpuShareMeter:
    """Measures :class:`MachineLoad` between :meth:`start` and :meth:`stop` (rank 0 of a trial,
    around its timed windows).

    Read :meth:`start` before the first window's clock read and :meth:`stop` after the
    last's, so that listing the processes never falls inside a window. With no ``roots``
    (the ranks other than 0) it measures nothing.

    Args:
        roots: the trial's ranks (process ids); their descendants are found at each reading.
        cpus: the CPU numbers the trial may run on (default ``os.sched_getaffinity(0)``).
        read_busy_s, read_tree_s, clock, load_avg: the readers (:func:`cpu_busy_s`,
            :func:`tree_cpu_s`, ``time.monotonic``, the first of ``os.getloadavg()``); tests
            inject fakes.
    """

    def __init__(
        self,
        roots: Sequence[int],
        *,
        cpus: Collection[int] | None = None,
        read_busy_s: Callable[[Collection[int]], float] = cpu_busy_s,
        read_tree_s: Callable[[Sequence[int]], Mapping[int, float]] = tree_cpu_s,
        clock: Callable[[], float] = time.monotonic,
        load_avg: Callable[[], float] = lambda: os.getloadavg()[0],
    ) -> None:
        self._roots = tuple(roots)
        if cpus is None:
            cpus = (
                os.sched_getaffinity(0)
                if hasattr(os, "sched_getaffinity")
                else range(os.cpu_count() or 1)
            )
        self._cpus = frozenset(cpus)
        self._read_busy_s = read_busy_s
        self._read_tree_s = read_tree_s
        self._clock = clock
        self._load_avg = load_avg
        self._start: CpuReading | None = None
        #: The last :meth:`stop`'s figures (None before one).
        self.load: MachineLoad | None = None

    def _read(self) -> CpuReading:
        tree = dict(self._read_tree_s(self._roots))
        return CpuReading(self._clock(), self._read_busy_s(self._cpus), tree)

    def start(self) -> None:
        """Read the counters at the start of the timed windows."""
        self._start = self._read() if self._roots else None

    def stop(self) -> MachineLoad | None:
        """Read them at the end; the figures since :meth:`start` (also kept as :attr:`load`),
        or None without roots or a start."""
        if self._start is None:
            return None
        end = self._read()
        try:
            load_avg: float | None = self._load_avg()
        except OSError:  # pragma: no cover (no load average on this platform)
            load_avg = None
        self.load = MachineLoad(
            other_cpu_share(self._start, end, len(self._cpus)), load_avg, len(self._cpus)
        )
        self._start = None
        return self.load


#: The trial user attribute (and results column) that says a run was measured on a busy
#: machine: :func:`is_busy` under the ``advanced.measure.max_other_cpu_share`` in force when it ran.
BUSY_ATTR = "busy_machine"


def is_busy(other_cpu_share: float | None, max_other_cpu_share: float) -> bool:
    """A run is measured on a busy machine when other processes used more than
    ``max_other_cpu_share`` (``advanced.measure.max_other_cpu_share``) of its CPUs over its timed
    windows; never when the share was not measured (the mock device)."""
    return other_cpu_share is not None and other_cpu_share > max_other_cpu_share


def busy_text(other_cpu_share: float) -> str:
    """The flag every output gives a busy run: ``measured on a busy machine (other processes
    used 48 % of the CPUs)``."""
    return (
        f"measured on a busy machine (other processes used {100 * other_cpu_share:.0f} % of "
        "the CPUs)"
    )


def cpu_share_text(other_cpu_share: float | None, *, simulated: bool = False) -> str:
    """A table cell for the other processes' share: ``3 %``; ``not measured (mock)`` on the
    mock device; ``n/a`` when not recorded (runs from before it was measured)."""
    if other_cpu_share is None:
        return "not measured (mock)" if simulated else "n/a"
    return f"{100 * other_cpu_share:.0f} %"


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
        peak_memory_bytes: CUDA: allocator peak over the steps after the warm-up plus the
            CUDA graphs' private pools (``extra``'s ``cuda_graph_pool_bytes``; their replays
            allocate nothing) plus the memory the rank's process holds outside the allocator (its CUDA context, NCCL's
            buffers: NVML's figure less the allocator's reserved bytes, ``extra``'s
            ``gpu_context_bytes``), of the busiest GPU (``memory_kind``
            ``cuda_peak_plus_context``; ``cuda_allocator_peak`` where NVML gave no figure,
            ``extra``'s ``process_memory_error`` says why); the warm-up's allocator peak,
            with its trial workspaces, is ``extra``'s ``warmup_peak_memory_bytes``. CPU: peak
            RSS growth of the training processes since the trial began, summed over ranks;
            mock: the cost model's estimate.
        val_metric: top-1 accuracy on the held-out validation split, in [0, 1].
        train_loss: mean training loss over the last epoch.
        train_s: wall seconds of the whole training loop, compile and warm-up included.
        steps: optimizer steps taken.
        timed_steps: steps inside the timed windows.
        samples_per_step: global batch (per-rank batch times world size).
        parameters: trainable parameters of the model.
        memory_kind: what ``peak_memory_bytes`` is (``cuda_peak_plus_context``,
            ``cuda_allocator_peak``, ``cpu_peak_rss_growth``, ``simulated``).
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
        other_cpu_share: the share of the trial's CPUs (its affinity) that other processes
            used over the timed windows, in [0, 1] (:class:`CpuShareMeter`; a throughput
            trial's windows that count, a time-to-accuracy trial's whole run); None when not
            measured (the mock device, a simulation, measures no machine).
        load_avg_1m: the machine's 1-minute load average at the end of the timed windows
            (``os.getloadavg``); None when not measured.
        extra: more per-trial figures (e.g. NVML readings, ``lr_peak``: the learning rate
            after warm-up; CUDA: ``process_memory_bytes``, NVML's memory of the trial's
            processes summed over ranks, ``process_memory_max_bytes``, the most one rank
            held, ``process_memory_method``, how NVML gave it: the process's own entry, or
            the GPU's used memory less its reading before the rank's first CUDA call; compiled trials: ``compile_cache``, ``cold`` / ``warm`` / ``partly warm``,
            with ``compile_cache_hits`` and ``compile_cache_misses``), stored as user
            attributes too.
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
    other_cpu_share: float | None = None
    load_avg_1m: float | None = None
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

    def with_load(self, load: MachineLoad | None) -> Measurement:
        """This measurement with ``load``'s figures (unchanged for None: not measured)."""
        if load is None:
            return self
        return replace(self, other_cpu_share=load.other_cpu_share, load_avg_1m=load.load_avg_1m)

    def busy(self, max_other_cpu_share: float) -> bool:
        """Measured on a busy machine (:func:`is_busy`)."""
        return is_busy(self.other_cpu_share, max_other_cpu_share)

    def as_user_attrs(self) -> dict[str, Any]:
        """Flat JSON-ready figures for Optuna trial user attributes: the machine's load only
        when measured; a measurement that stopped :attr:`too_slow` leaves out the figures it
        has not measured (``val_metric``, ``train_loss``, ``val_samples``) and the flag itself
        (the study records ``failure=too_slow``)."""
        attrs = asdict(self)
        for key in ("other_cpu_share", "load_avg_1m"):
            if attrs[key] is None:
                del attrs[key]
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
