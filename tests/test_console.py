"""The run header (autotune/console.py): the precision screen's lines."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from autotune.api import prepare_run
from autotune.console import print_header
from autotune.testing import make_capabilities

from .api.runs import mock_run_config

#: The default mock profile with an fp16 peak of 1/100 of fp32's (FLOP/s).
_SLOW_FP16 = {"fp32": 19.5e12, "tf32": 156e12, "fp16": 0.195e12, "bf16": 312e12}


def _header(tmp_path: Path, *args: str) -> str:
    prepared = prepare_run(
        mock_run_config(f"sqlite:///{tmp_path / 'a.db'}", *args),
        capabilities=make_capabilities("mock", peak_flops_per_s=_SLOW_FP16),
    )
    console = Console(width=250, record=True, file=io.StringIO())
    print_header(console, prepared, 10)
    return console.export_text()


def test_the_header_says_which_precision_the_screen_skipped(tmp_path: Path) -> None:
    lines = _header(tmp_path).splitlines()

    assert (
        "skipped precision=fp16: dense peak 195 GFLOP/s is 1/100 of fp32's 19.5 TFLOP/s "
        "(below hardware.min_peak_ratio=0.1)"
    ) in lines


def test_the_header_says_when_a_slow_precision_is_kept_as_the_only_one(tmp_path: Path) -> None:
    text = _header(tmp_path, "precision=fp16")

    assert "skipped precision=fp16" not in text
    assert (
        "kept precision=fp16: dense peak 195 GFLOP/s is 1/100 of fp32's 19.5 TFLOP/s, below "
        "hardware.min_peak_ratio=0.1, but the space has no faster precision the device can run "
        "(hardware.min_peak_ratio=0 silences this)"
    ) in text.splitlines()
