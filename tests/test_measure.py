"""Timing discipline and measurements (autotune/measure.py)."""

from __future__ import annotations

import math

import pytest

from autotune.measure import (
    StepClock,
    current_rss_bytes,
    peak_rss_bytes,
    reset_peak_rss,
    summarize_steps,
)
from autotune.testing import FakeClock, make_measurement

# --------------------------------------------------------------------------------------------
# summarize_steps


def test_constant_steps() -> None:
    stats = summarize_steps([0.1] * 10, samples_per_step=32, windows=5)

    assert stats.window_throughputs_sps == pytest.approx((320.0,) * 5)
    assert stats.throughput_sps == pytest.approx(320.0)
    assert stats.throughput_iqr_sps == pytest.approx(0.0)
    assert stats.step_time_s == pytest.approx(0.1)
    assert stats.timed_steps == 10
    assert stats.throughput_cv == pytest.approx(0.0)


def test_windows_median_and_iqr() -> None:
    # Three windows of two steps: 20 samples in 2 s, 4 s and 8 s.
    stats = summarize_steps([1.0, 1.0, 2.0, 2.0, 4.0, 4.0], samples_per_step=10, windows=3)

    assert stats.window_throughputs_sps == pytest.approx((10.0, 5.0, 2.5))
    assert stats.throughput_sps == pytest.approx(5.0)
    # Linear-interpolated quartiles of [2.5, 5, 10]: 3.75 and 7.5.
    assert stats.throughput_iqr_sps == pytest.approx(3.75)
    assert stats.throughput_cv == pytest.approx(0.75)
    assert stats.step_time_s == pytest.approx(2.0)
    assert stats.step_time_p90_s == pytest.approx(4.0)
    assert stats.timed_steps == 6


def test_median_is_robust_to_one_slow_window() -> None:
    stats = summarize_steps([0.1, 0.1, 0.1, 0.1, 5.0], samples_per_step=1, windows=5)

    assert stats.throughput_sps == pytest.approx(10.0)
    assert stats.window_throughputs_sps[-1] == pytest.approx(0.2)


def test_leftover_steps_stay_out_of_the_windows_but_in_step_times() -> None:
    # 7 steps into 3 windows: 2 steps each, the 7th is left out of the windows.
    stats = summarize_steps([1.0] * 6 + [100.0], samples_per_step=1, windows=3)

    assert stats.timed_steps == 6
    assert stats.window_throughputs_sps == pytest.approx((1.0, 1.0, 1.0))
    # 90th percentile: position 0.9 * 6 = 5.4, between 1.0 and 100.0.
    assert stats.step_time_p90_s == pytest.approx(1.0 + 0.4 * 99.0)


def test_fewer_windows_when_steps_run_short() -> None:
    stats = summarize_steps([0.5] * 5, samples_per_step=4, windows=5, min_window_steps=2)

    assert len(stats.window_throughputs_sps) == 2
    assert stats.timed_steps == 4
    assert stats.throughput_sps == pytest.approx(8.0)


def test_one_step_makes_one_window() -> None:
    stats = summarize_steps([0.25], samples_per_step=8, windows=5, min_window_steps=2)

    assert stats.window_throughputs_sps == pytest.approx((32.0,))
    assert stats.throughput_iqr_sps == 0.0
    assert stats.timed_steps == 1


def test_no_steps_is_refused() -> None:
    with pytest.raises(ValueError, match="no timed steps"):
        summarize_steps([], samples_per_step=8, windows=5)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_non_positive_step_time_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="step times must be > 0 s"):
        summarize_steps([0.1, bad, 0.1], samples_per_step=8, windows=1)


def test_cv_of_zero_throughput_is_infinite() -> None:
    stats = summarize_steps([1.0], samples_per_step=0, windows=1)
    assert math.isinf(stats.throughput_cv)


# --------------------------------------------------------------------------------------------
# StepClock


def test_step_clock_laps_are_the_elapsed_times() -> None:
    fake = FakeClock([0.5, 0.25, 2.0])

    clock = StepClock(fake.sync, fake.clock)
    laps = [clock.lap(), clock.lap(), clock.lap()]

    assert laps == [0.5, 0.25, 2.0]


def test_step_clock_syncs_before_every_read() -> None:
    fake = FakeClock([0.1] * 4)

    clock = StepClock(fake.sync, fake.clock)
    for _ in range(4):
        clock.lap()

    assert fake.reads == 5  # construction, then one per lap
    assert fake.syncs == fake.reads
    assert fake.events == ["sync", "read"] * 5


def test_step_clock_defaults_to_a_real_clock() -> None:
    clock = StepClock(lambda: None)
    assert 0.0 <= clock.lap() < 1.0


# --------------------------------------------------------------------------------------------
# Memory and Measurement


def test_rss_readings_are_positive_and_ordered() -> None:
    now = current_rss_bytes()
    peak = peak_rss_bytes()

    assert now > 0
    assert peak >= now


def test_reset_peak_rss_starts_a_new_window() -> None:
    if not reset_peak_rss():
        pytest.skip("this kernel refuses /proc/self/clear_refs; the peak is the lifetime's")
    baseline = current_rss_bytes()
    block = bytearray(64 << 20)  # 64 MiB, zero-filled: every page is touched
    grown = peak_rss_bytes() - baseline
    del block

    assert grown >= 48 << 20


def test_measurement_user_attrs_are_flat() -> None:
    m = make_measurement(window_throughputs_sps=(1.0, 2.0), extra={"gpu_util": 0.5})

    attrs = m.as_user_attrs()

    assert attrs["window_throughputs_sps"] == [1.0, 2.0]
    assert attrs["gpu_util"] == 0.5
    assert "extra" not in attrs
    assert attrs["throughput_sps"] == m.throughput_sps
    assert attrs["simulated"] is True
