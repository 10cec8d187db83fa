"""The benchmark's smoke run (``python benchmarks/run.py --quick``) works end to end.

Benchmarks print figures; they are not timed tests. This only checks that the quick run
finishes and writes the five tables with numbers and a verdict on every target row.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADINGS = (
    "## 1. Tuned vs defaults vs expert",
    "## 2. Search efficiency",
    "## 3. Cost of tuning",
    "## 4. Measurement noise",
    "## 5. Time to accuracy",
    "## 6. Verification power",
)


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_benchmark_writes_the_six_tables(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=570,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = out.read_text(encoding="utf-8")

    assert "QUICK SMOKE RUN" in text
    assert "- Command: `python benchmarks/run.py --quick --out " in text
    for label in ("Machine:", "Software: Python", "torch", "optuna"):
        assert label in text
    for heading in HEADINGS:
        assert heading in text, heading

    tuned = _section(text, HEADINGS[0])
    assert re.search(r"\| digits \| tuned \| [\d,]+ \| \d+\.\dx \|", tuned), tuned
    search = _section(text, HEADINGS[1])
    for sampler in ("nsga2", "tpe", "gp", "random"):
        assert re.search(rf"\| {sampler}[^|]* \| [01]\.\d{{3}} \| [01]\.\d{{3}} \|", search), (
            sampler
        )
    cost = _section(text, HEADINGS[2])
    assert re.search(
        r"per-trial overhead of `run_trial`.* \| \d+\.\d\d s \| (PASS|\*\*MISS\*\*) \|", cost
    )
    noise = _section(text, HEADINGS[3])
    assert re.search(r"same config \(seed 0\), back to back \| 3 \| [\d,]+ \| \d+\.\d %", noise)

    tta = _section(text, HEADINGS[4])
    assert re.search(r"\| defaults \|.* \| \d+\.\d\d \| [\d.]+-[\d.]+ \| 1/1 \| 1\.00x \|", tta), (
        tta
    )
    assert "| expert |" in tta and "| tuned" in tta

    # The real verification driven by the scripted device: a 1.3x finalist against the null,
    # and against a 1.3x finalist that is 1 pt less accurate.
    power = _section(text, HEADINGS[5])
    assert re.search(r"\| power \| 8 \(default\) \| 2 \| \d \| 5 \| [\d.]+ % \|", power), power
    assert re.search(r"\| null \| 8 \(default\) \| 2 \| \d \| 5 \| - \| - \| [\d.]+ % \|", power)
    assert re.search(r"\| inferior \| 8 \(default\) \| 2 \| \d \| 5 \| [\d.]+ % \|", power)

    # Every target row of the summary carries a verdict.
    summary = _section(text, "## Targets at a glance")
    rows = [line for line in summary.splitlines() if re.match(r"\| \d \|", line)]
    assert rows
    assert all(re.search(r"\| (PASS|\*\*MISS\*\*|n/a) \|$", row) for row in rows), rows
