"""The load meter: the share of the CPUs that other processes used over a trial's timed windows.

A figure taken while something else ran is flagged "measured on a busy machine", as pyperf
warns that a result "may be unreliable" and Google Benchmark that "CPU scaling is enabled, the
benchmark real time measurements may be noisy".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import psutil

__all__ = [
    "BUSY_ATTR",
    "CpuReading",
    "CpuShareMeter",
    "MachineLoad",
    "cpu_busy_s",
    "is_busy",
    "other_cpu_share",
    "tree_cpu_s",
]


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
