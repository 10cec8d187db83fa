"""The GPU proof command (``benchmarks/gpu.py``) runs end to end; here on the mock device's
h100 profile (SIMULATED), as a rehearsal of the run on a lent GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_gpu_command_writes_every_part_on_the_mock_device(tmp_path: Path) -> None:
    out = tmp_path / "gpu.md"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu.py"),
            "--device=mock",
            "--skip-tests",
            "--study-trials=4",
            "--tta-trials=3",
            f"--storage=sqlite:///{tmp_path / 'gpu.db'}",
            f"--out={out}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=570,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = out.read_text(encoding="utf-8")

    assert "**SIMULATED.**" in text and "(SIMULATED: mock device)" in text
    for label in ("- Device: `mock`", "torch", "- Removed from the space"):
        assert label in text
    for heading in ("## 1. GPU tests", "## 2. Every precision", "## 3. A 4-trial", "## 4. Time"):
        assert heading in text
    assert "FAILED" not in text
    # 4 precisions x 2 memory formats x 4 compile modes, each a row with a throughput.
    matrix = text[text.index("## 2.") : text.index("## 3.")]
    rows = [
        line
        for line in matrix.splitlines()
        if line.startswith("| fp") or line.startswith("| tf") or line.startswith("| bf")
    ]
    assert len(rows) == 32 and all("simulated" in row for row in rows)
    assert text.count("- Verdict: SIMULATED (mock device): ") == 2
    # The h100 profile has 8 GPUs: the two-GPU rows run, eager and reduce-overhead.
    two = text[text.index("## 5. Two GPUs") :]
    assert "| none |" in two and "| reduce-overhead |" in two
