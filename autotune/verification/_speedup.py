"""The statistics of a verification: the paired speedup and its 95 % confidence interval."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from scipy import stats

__all__ = ["speedup_ci95"]


def speedup_ci95(ratios: Sequence[float]) -> tuple[float, tuple[float, float] | None]:
    """Speedup and its 95 % confidence interval from paired per-round throughput ratios.

    Each ratio is a candidate's throughput over the baseline's *in the same round* (a paired
    design: both ran minutes apart on the same machine state). Ratios are multiplicative, so
    the interval is Student's t interval of the mean log ratio, exponentiated: a confidence
    interval for the geometric-mean speedup. The t distribution (not the normal) because a
    verification has few rounds (3 by default: t(0.975, 2) = 4.30, against 1.96); a bootstrap
    needs far more than 3 samples to say anything. This is the log-scale interval for a ratio
    of means recommended for benchmark comparisons by Kalibera & Jones, "Rigorous Benchmarking
    in Reasonable Time" (ISMM 2013), in its simplest, single-level form.

    Args:
        ratios: candidate / baseline throughput per round (> 0), one per round.

    Returns:
        ``(geometric-mean speedup, (low, high))``; the interval is None for fewer than two
        ratios, and collapses to the point when all ratios are equal.

    Raises:
        ValueError: an empty sequence or a ratio <= 0.
    """
    if not ratios:
        raise ValueError("speedup_ci95 needs at least one ratio")
    if min(ratios) <= 0:
        raise ValueError(f"throughput ratios must be > 0, but got {min(ratios)}")
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    point = math.exp(mean)
    if len(logs) < 2:
        return point, None
    half = float(stats.t.ppf(0.975, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return point, (math.exp(mean - half), math.exp(mean + half))
