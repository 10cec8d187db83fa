"""The process's resident set size (autotune/trial/measure/_memory.py)."""

from __future__ import annotations

import pytest

from autotune.trial.measure import current_rss_bytes, peak_rss_bytes, reset_peak_rss


def test_rss_readings_are_positive_and_ordered() -> None:
    now = current_rss_bytes()
    peak = peak_rss_bytes()

    assert now > 0
    assert peak >= now


def test_reset_peak_rss_starts_a_new_window() -> None:
    if not reset_peak_rss():
        pytest.skip("this kernel refuses /proc/self/clear_refs; the peak is the lifetime's")
    baseline = current_rss_bytes()
    # 64 MiB written byte by byte (memset of 1s): every page is touched. A zero-filled
    # bytearray may come from calloc's fresh mmap, whose pages stay untouched (no RSS).
    block = b"\x01" * (64 << 20)
    grown = peak_rss_bytes() - baseline
    del block

    assert grown >= 48 << 20
