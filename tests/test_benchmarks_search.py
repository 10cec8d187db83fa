"""Table 2's confidence interval of a median over seeds (``benchmarks/_search_efficiency``)."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

# Loaded from its file, so the benchmarks' folder does not join every later test's sys.path.
_SPEC = importlib.util.spec_from_file_location(
    "_search_efficiency",
    Path(__file__).resolve().parents[1] / "benchmarks" / "_search_efficiency.py",
)
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = _MODULE  # its dataclasses look their module up while it executes
_SPEC.loader.exec_module(_MODULE)
median_interval = _MODULE.median_interval

# The default sampler's hypervolume fractions at 25 trials, seeds 0-9 (issue 24, ninth session).
AT_25 = [0.825, 0.870, 0.751, 0.869, 0.893, 0.911, 0.838, 0.874, 0.869, 0.768]


def test_the_interval_holds_the_median_and_lies_within_the_values() -> None:
    low, high = median_interval(AT_25)
    assert min(AT_25) <= low <= statistics.median(AT_25) <= high <= max(AT_25)
    # Wide enough to hold a target 0.001 above the median: these seeds cannot tell.
    assert low < 0.86 and high > 0.87


def test_the_interval_is_reproducible_and_narrows_with_agreeing_seeds() -> None:
    assert median_interval(AT_25) == median_interval(AT_25)
    spread = [0.5 + 0.1 * (i % 2) for i in range(10)]  # half 0.5, half 0.6
    close = [0.5 + 0.001 * (i % 2) for i in range(10)]
    assert median_interval(close)[1] - median_interval(close)[0] < (
        median_interval(spread)[1] - median_interval(spread)[0]
    )


def test_one_value_or_equal_values_give_that_value() -> None:
    assert median_interval([0.9]) == (0.9, 0.9)
    assert median_interval([0.7, 0.7, 0.7]) == (0.7, 0.7)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        median_interval([])
    with pytest.raises(ValueError, match="confidence must lie in"):
        median_interval([0.1, 0.2], confidence=1.0)
