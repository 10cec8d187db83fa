"""The statistics of a verification: the paired speedup and its 95 % confidence interval, and
the MLPerf-style aggregate of a time to accuracy over rounds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from scipy import stats

__all__ = [
    "MLPERF_DROP_MIN_ROUNDS",
    "is_valid_figure",
    "mean_difference_ci95",
    "mlperf_time_to_accuracy_s",
    "speedup_ci95",
]

#: From this many runs on, the fastest and the slowest are dropped before averaging.
MLPERF_DROP_MIN_ROUNDS = 5


def is_valid_figure(value: float | None) -> bool:
    """A throughput or a time that can enter a ratio: a finite number above 0 (NaN, infinity,
    0 and negative values never qualify and never reach a division)."""
    return value is not None and math.isfinite(value) and value > 0


def mean_difference_ci95(
    differences: Sequence[float],
) -> tuple[float, tuple[float, float] | None]:
    """Mean of paired per-round differences and Student's t 95 % interval of that mean.

    Used for the metric: each difference is a candidate's validation metric minus the
    baseline's *in the same round* (same seed, so the pairing removes the seed's share of
    the spread).

    Args:
        differences: one difference per round.

    Returns:
        ``(mean, (low, high))``; the interval is None for fewer than two differences.

    Raises:
        ValueError: no difference given.
    """
    if not differences:
        raise ValueError("mean_difference_ci95 needs at least one difference")
    mean = statistics.fmean(differences)
    if len(differences) < 2:
        return mean, None
    half = (
        float(stats.t.ppf(0.975, len(differences) - 1))
        * statistics.stdev(differences)
        / math.sqrt(len(differences))
    )
    return mean, (mean - half, mean + half)


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


def mlperf_time_to_accuracy_s(times_s: Sequence[float]) -> float:
    """One time to accuracy from several runs' (seconds), as MLPerf Training scores them.

    MLPerf Training rules ("Benchmark Results", mlcommons/training_policies): of a
    benchmark's runs, the fastest and slowest results are dropped and the rest averaged, so
    that one lucky or unlucky seed moves the score little. That needs at least
    :data:`MLPERF_DROP_MIN_ROUNDS` (5) runs to leave three to average; with fewer (a
    verification has 3 rounds by default) the median is the same idea at its limit: with 3
    runs, dropping the fastest and the slowest leaves the median.

    Args:
        times_s: seconds to the target, one per run that reached it (> 0 values).

    Returns:
        With 5 runs or more, the mean after dropping one fastest and one slowest run; with
        fewer, the median.

    Raises:
        ValueError: no time given.
    """
    if not times_s:
        raise ValueError("mlperf_time_to_accuracy_s needs at least one time")
    ordered = sorted(float(t) for t in times_s)
    if len(ordered) >= MLPERF_DROP_MIN_ROUNDS:
        return statistics.fmean(ordered[1:-1])
    return float(statistics.median(ordered))
