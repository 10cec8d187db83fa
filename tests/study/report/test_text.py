"""The words and figures every output shares (autotune/study/report/_text.py)."""

from __future__ import annotations

from autotune.study.report import busy_text, cpu_share_text


def test_a_busy_run_s_flag_and_the_other_processes_share_cell() -> None:
    assert busy_text(0.48) == ("measured on a busy machine (other processes used 48 % of the CPUs)")
    assert cpu_share_text(None, simulated=True) == "not measured (mock)"
    assert cpu_share_text(None) == "n/a" and cpu_share_text(0.031) == "3 %"
