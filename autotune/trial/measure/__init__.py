"""Timing discipline and the measurement a trial returns (the trial side).

- ``_windows``: the timed windows of a training loop (warm-up, windows of consecutive steps,
  a clock read only at their edges) and their statistics (median, IQR, 90th percentile), with
  torch.utils.benchmark's warning when the IQR is 10 % of the median or more.
- ``_floor``: the throughput floor's rule, when a trial's steps are evidence that it runs too
  slow to finish (read by every door's measuring core, replayed by the mock device).
- ``_memory``: this process's resident set size, now and at its peak.
- ``_load``: the load meter, the share of the CPUs other processes used over the timed
  windows (:class:`CpuShareMeter`), and when that makes a run measured on a busy machine.
- ``_record``: :class:`Measurement`, everything one trial measured.

How these figures read in the outputs (a busy run's flag, the share's cell) is the outputs'
business: :mod:`autotune.study.report`.
"""

from __future__ import annotations

from autotune.trial.measure._floor import FLOOR_JUDGED_WINDOWS, FlagAgreement, ThroughputFloor
from autotune.trial.measure._load import (
    BUSY_ATTR,
    CpuShareMeter,
    MachineLoad,
    is_busy,
    other_cpu_share,
)
from autotune.trial.measure._memory import current_rss_bytes, peak_rss_bytes, reset_peak_rss
from autotune.trial.measure._record import Measurement
from autotune.trial.measure._windows import (
    ThroughputStats,
    WindowClock,
    WindowPlan,
    graph_recording_steps,
    plan_reused_windows,
    plan_windows,
    reused_timing_steps,
    spread_warning,
    summarize_windows,
)

__all__ = [
    "BUSY_ATTR",
    "FLOOR_JUDGED_WINDOWS",
    "CpuShareMeter",
    "FlagAgreement",
    "MachineLoad",
    "Measurement",
    "ThroughputFloor",
    "ThroughputStats",
    "WindowClock",
    "WindowPlan",
    "current_rss_bytes",
    "graph_recording_steps",
    "is_busy",
    "other_cpu_share",
    "peak_rss_bytes",
    "plan_reused_windows",
    "plan_windows",
    "reset_peak_rss",
    "reused_timing_steps",
    "spread_warning",
    "summarize_windows",
]
