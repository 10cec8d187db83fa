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
    "projected_half_width",
    "rounds_to_resolve",
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


def projected_half_width(pilot_differences: Sequence[float], rounds: int) -> float | None:
    """The narrowest half-width the 95 % interval of :func:`mean_difference_ci95` can be
    expected to have over ``rounds`` paired rounds, judged from a pilot's differences (the
    race's): ``t(0.975, rounds - 1) * s_low / sqrt(rounds)``, where ``s_low`` is the lower
    one-sided 95 % confidence bound of the pilot's standard deviation,
    ``s * sqrt((k - 1) / chi2(0.95, k - 1))`` over its ``k`` differences (the chi-square
    interval of a normal sample's variance; e.g. NIST/SEMATECH e-Handbook of Statistical
    Methods, section 7.2.3.1). Taking the low end of the spread makes a futility call (the
    confirmation could not resolve the difference) conservative: with two pilot rounds
    ``s_low`` is 0.51 of ``s``.

    Args:
        pilot_differences: the pilot's paired differences, one per round, in the metric's
            units.
        rounds: the rounds of the planned interval.

    Returns:
        The half-width in the metric's units; None for fewer than two pilot differences or
        ``rounds`` below 2 (no interval).
    """
    s_low = _low_sd(pilot_differences)
    if s_low is None or rounds < 2:
        return None
    return _half_width(s_low, rounds)


def _low_sd(pilot_differences: Sequence[float]) -> float | None:
    """The lower one-sided 95 % confidence bound of the pilot's standard deviation (None for
    fewer than two differences)."""
    k = len(pilot_differences)
    if k < 2:
        return None
    return statistics.stdev(pilot_differences) * math.sqrt(
        (k - 1) / float(stats.chi2.ppf(0.95, k - 1))
    )


def _half_width(sd: float, rounds: int) -> float:
    """Student's t 95 % half-width of a mean over ``rounds`` (>= 2) rounds at spread ``sd``."""
    return float(stats.t.ppf(0.975, rounds - 1)) * sd / math.sqrt(rounds)


def rounds_to_resolve(
    pilot_differences: Sequence[float], margin: float, most: int = 10_000
) -> int | None:
    """The fewest paired rounds whose :func:`projected_half_width` is at most ``margin``.

    The half-width falls strictly as the rounds grow (``t(0.975, n - 1) / sqrt(n)`` does), so
    the fewest is found by bisection.

    Args:
        pilot_differences: the pilot's paired differences (at least two).
        margin: the half-width to reach, in the metric's units (> 0).
        most: the search's end.

    Returns:
        The rounds, from 2; None when even ``most`` rounds do not reach it, or the pilot has
        fewer than two differences.
    """
    s_low = _low_sd(pilot_differences)
    if s_low is None or margin <= 0 or _half_width(s_low, most) > margin:
        return None
    low, high = 2, most  # the answer lies in [low, high]
    while low < high:
        middle = (low + high) // 2
        if _half_width(s_low, middle) <= margin:
            high = middle
        else:
            low = middle + 1
    return low


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
