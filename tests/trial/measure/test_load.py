"""The other processes' share of the CPUs: the load meter (autotune/trial/measure/_load.py)."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from autotune.trial.measure import (
    CpuShareMeter,
    other_cpu_share,
)
from autotune.trial.measure._load import (
    CpuReading,
    cpu_busy_s,
    tree_cpu_s,
)


def test_the_other_processes_share_is_the_busy_time_the_trial_tree_did_not_use() -> None:
    # 2 CPUs over 2 s: 4 CPU-seconds. The CPUs were busy 3.5 s; the trial's rank (pid 10)
    # used 1.5 s of them, its DataLoader worker (11) 0.5 s: others used 1.5 of 4 s.
    start = CpuReading(wall_s=100.0, cpu_busy_s=50.0, tree_cpu_s={10: 7.0, 11: 1.0})
    end = CpuReading(wall_s=102.0, cpu_busy_s=53.5, tree_cpu_s={10: 8.5, 11: 1.5})

    assert other_cpu_share(start, end, cpus=2) == pytest.approx(0.375)


def test_processes_born_or_reaped_inside_the_windows_count_as_the_trial_s() -> None:
    # Worker 12 is born inside the windows (all of its 0.4 s count); worker 11 exits and is
    # reaped by rank 10, whose children time gains 11's lifetime (1.0 s before, 0.2 s inside).
    start = CpuReading(wall_s=0.0, cpu_busy_s=0.0, tree_cpu_s={10: 5.0, 11: 1.0})
    end = CpuReading(wall_s=1.0, cpu_busy_s=2.0, tree_cpu_s={10: 5.0 + 0.4 + 1.2, 12: 0.4})

    # The tree: 0.4 (rank) + 0.2 (worker 11 inside) + 0.4 (worker 12) = 1.0 of 2.0 busy.
    assert other_cpu_share(start, end, cpus=2) == pytest.approx(0.5)


def test_the_share_is_clamped_to_0_1_and_none_without_time() -> None:
    start = CpuReading(0.0, 0.0, {1: 0.0})
    # Tick rounding can make the tree's seconds exceed the CPUs' busy seconds.
    assert other_cpu_share(start, CpuReading(1.0, 0.98, {1: 1.0}), cpus=1) == 0.0
    assert other_cpu_share(start, CpuReading(1.0, 5.0, {1: 0.0}), cpus=2) == 1.0
    assert other_cpu_share(start, CpuReading(0.0, 1.0, {1: 0.0}), cpus=2) is None


def test_the_meter_reads_its_injected_counters_over_the_cpus_of_the_trial() -> None:
    asked: list[frozenset[int]] = []
    busy = iter([10.0, 11.6])  # busy seconds of CPUs {0, 1} at start, then at stop
    tree = iter([{7: 2.0}, {7: 2.6}])
    clock = iter([0.0, 1.0])

    def read_busy_s(cpus: Collection[int]) -> float:
        asked.append(frozenset(cpus))
        return next(busy)

    meter = CpuShareMeter(
        (7,),
        cpus={0, 1},
        read_busy_s=read_busy_s,
        read_tree_s=lambda roots: next(tree),
        clock=lambda: next(clock),
        load_avg=lambda: 1.25,
    )
    meter.start()
    load = meter.stop()

    assert asked == [frozenset({0, 1})] * 2
    assert load is not None and meter.load == load
    assert load.other_cpu_share == pytest.approx(0.5)  # (1.6 - 0.6) / (1 s x 2 CPUs)
    assert load.load_avg_1m == 1.25 and load.cpus == 2
    # The other ranks' meter (no roots) measures nothing.
    idle = CpuShareMeter((), read_busy_s=lambda cpus: 1 / 0)
    idle.start()
    assert idle.stop() is None and idle.load is None


def test_the_real_counters_read_this_machine() -> None:
    import os

    cpus = os.sched_getaffinity(0)
    assert cpu_busy_s(set()) == 0.0
    assert cpu_busy_s(cpus) >= max(cpu_busy_s({cpu}) for cpu in cpus) > 0.0
    assert os.getpid() in tree_cpu_s([os.getpid()])
    assert tree_cpu_s([2**22 + 12345]) == {}  # no such process
